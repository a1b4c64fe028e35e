//! Wheels in component layers and the one-provider rule, end to end through the CLI with no
//! network: wheels the test writes (named like NVIDIA's CUDA wheels and a framework), served
//! by a loopback PEP 503 index, installed for the Python a rootfs's dpkg database names.
//! Two profiles with the same CUDA wheels and different other packages share the CUDA layers'
//! digests; bumping the framework rewrites only the `framework` layer (every other layer is a
//! cache hit); `layers: {NAME: {wheel: [...]}}` moves a wheel. Refusals (exit 2, one line):
//! a wheel that brings the driver's libcuda (naming the wheel), and one SONAME from two wheels
//! (naming both) unless `libraries:` picks one. A large deflated file goes into its gzip layer as
//! the wheel's own deflate stream.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;

const BOOKWORM_STATUS: &str = "\
Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u10\n\n\
Package: python3\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-1+b1\n\n\
Package: python3.11\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n\n\
Package: python3.11-minimal\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n\n\
Package: libpython3.11-stdlib\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n";

/// The bytes of a real shared object: the C library this test runs with (SONAME `libc.so.6`).
fn a_shared_object() -> Vec<u8> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let lib = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so"))
        .expect("the test process maps the C library");
    std::fs::read(lib).unwrap()
}

fn wheels() -> Vec<WheelSpec> {
    let so = a_shared_object();
    vec![
        WheelSpec::new("nvidia-cuda-runtime-cu12", "12.4.127").file_mode(
            "nvidia/cuda_runtime/lib/libcudart.so.12",
            b"cudart 12.4\n",
            0o755,
        ),
        WheelSpec::new("nvidia-cublas-cu12", "12.4.5.8")
            .file_mode("nvidia/cublas/lib/libcublas.so.12", b"cublas 12.4\n", 0o755)
            .requires("nvidia-cuda-runtime-cu12"),
        WheelSpec::new("torch", "1.0")
            .file("torch/__init__.py", "VERSION = '1.0'\n")
            .requires("nvidia-cublas-cu12"),
        WheelSpec::new("torch", "2.0")
            .file("torch/__init__.py", "VERSION = '2.0'\n")
            .requires("nvidia-cublas-cu12"),
        WheelSpec::new("app-a", "1.0").file("app_a/__init__.py", "A = 1\n"),
        WheelSpec::new("app-b", "1.0").file("app_b/__init__.py", "B = 1\n"),
        WheelSpec::new("evil-driver", "1.0").file_mode(
            "evil_driver/lib/libcuda.so.1",
            b"not the host's\n",
            0o755,
        ),
        WheelSpec::new("dup-a", "1.0").file_mode("dup_a/lib/libc.so.6", &so, 0o755),
        WheelSpec::new("dup-b", "1.0").file_mode("dup_b/lib/libc.so.6", &so, 0o755),
    ]
}

struct Setup {
    sb: Sandbox,
    url: String,
    _server: Server,
}

fn setup() -> Setup {
    let sb = Sandbox::new();
    let root = sb.join("rootfs");
    write(&root.join("var/lib/dpkg/status"), BOOKWORM_STATUS);
    write(&root.join("etc/hostname"), "py\n");
    let server = serve(&wheel_index(sb.path(), &wheels()));
    let url = format!("{}/simple/", server.url);
    Setup {
        sb,
        url,
        _server: server,
    }
}

impl Setup {
    /// A profile `name` asking for `packages`, with `extra` top-level keys.
    fn profile(&self, name: &str, packages: &[&str], extra: &str) -> PathBuf {
        let p = self.sb.join(format!("{name}.yaml"));
        let list: Vec<String> = packages.iter().map(|p| format!("\"{p}\"")).collect();
        write(
            &p,
            &format!(
                "name: {name}\nbase:\n  rootfs: ./rootfs\nselftest: {{enabled: false}}\n{extra}python:\n  index: {}\n  packages: [{}]\n",
                self.url,
                list.join(", ")
            ),
        );
        p
    }

    fn build(&self, profile: &Path) -> serde_json::Value {
        let out = self.sb.join("out");
        let json = run_ok(
            self.sb
                .gpuimg()
                .args(["build", "--json", "--force", "-o"])
                .arg(&out)
                .arg(profile),
        );
        serde_json::from_str(json.trim()).unwrap()
    }

    fn refuse(&self, profile: &Path) -> String {
        let out = run(self
            .sb
            .gpuimg()
            .args(["build", "-o"])
            .arg(self.sb.join("refused"))
            .arg(profile));
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!self.sb.join("refused").exists(), "nothing is written");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{err}"
        );
        assert_error(&err, &[self.sb.path()]);
        err
    }
}

/// Component → layer digest.
fn digests(v: &serde_json::Value) -> BTreeMap<String, String> {
    v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["component"].as_str().unwrap().to_string(),
                l["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn components(v: &serde_json::Value) -> Vec<String> {
    v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["component"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn cuda_wheels_share_their_layers_and_a_framework_bump_rewrites_only_the_framework() {
    let s = setup();
    let a = s.build(&s.profile("img-a", &["torch==1.0", "app-a"], ""));
    assert_eq!(
        components(&a),
        [
            "base",
            "cuda-runtime",
            "cuda-math",
            "framework",
            "python-packages",
            "sbom"
        ]
    );
    let b = s.build(&s.profile("img-b", &["torch==1.0", "app-b"], ""));
    let (da, db) = (digests(&a), digests(&b));
    for shared in ["base", "cuda-runtime", "cuda-math", "framework"] {
        assert_eq!(da[shared], db[shared], "{shared} is shared");
    }
    assert_ne!(da["python-packages"], db["python-packages"]);
    assert_eq!(b["cached_layers"], 4, "{b}");

    // A framework bump: only `framework` is written again.
    let bumped = s.build(&s.profile("img-a", &["torch==2.0", "app-a"], ""));
    let d2 = digests(&bumped);
    assert_ne!(d2["framework"], da["framework"]);
    for same in ["base", "cuda-runtime", "cuda-math", "python-packages"] {
        assert_eq!(d2[same], da[same], "{same} is unchanged");
    }
    assert_eq!(bumped["cached_layers"], 4, "{bumped}");

    // The profile moves a wheel: `app-a` joins a layer of its own, after the table's.
    let moved = s.build(&s.profile(
        "img-a",
        &["torch==1.0", "app-a"],
        "layers:\n  apps: {wheel: [App_A]}\n",
    ));
    assert_eq!(
        components(&moved),
        [
            "base",
            "cuda-runtime",
            "cuda-math",
            "framework",
            "apps",
            "sbom"
        ]
    );
    // The same packages in other layers: the same SBOM, its layer reused.
    assert_eq!(digests(&moved)["sbom"], da["sbom"]);
    assert_eq!(digests(&moved)["cuda-runtime"], da["cuda-runtime"]);

    // A wheel the build does not install: a warning, no effect.
    let p = s.profile("img-a", &["app-a"], "layers:\n  apps: {wheel: [nope]}\n");
    let o = run(s
        .sb
        .gpuimg()
        .args(["build", "--force", "-o"])
        .arg(s.sb.join("out"))
        .arg(&p));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("`layers.apps` names the wheel `nope`, which this build does not install"),
        "{err}"
    );
    assert_error(line_with(&err, "`layers.apps` names"), &[s.sb.path()]);
}

/// The wheel records of a cache (`wheel-metadata-v1/`: METADATA, SBOM facts and each
/// wheel's libraries), by file name.
fn wheel_records(cache: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(cache.join("wheel-metadata-v1"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// A cold build takes the wheels' libraries (for the one-provider rule and the metadata) as
/// their layers are written, not in a pass of their own before. What it records is what
/// reading each library from its wheel says, and its image is the one a build that knew the
/// libraries before writing any layer makes.
#[test]
fn libraries_taken_as_their_layers_are_written_are_what_reading_them_says() {
    let s = setup();
    let packages = ["torch==1.0", "app-a", "dup-a"];
    let p = s.profile("facts", &packages, "");
    let taken = s.build(&p);
    assert_eq!(taken["cached_layers"], 0, "{taken}");
    let records = wheel_records(&s.sb.cache());
    assert!(
        records.values().any(|r| r.contains("\"libc.so.6\"")),
        "the C library's SONAME is recorded: {records:?}"
    );

    // Every layer written again, the libraries now known before planning: the same image.
    std::fs::remove_dir_all(s.sb.cache().join("layers-v2")).unwrap();
    let again = s.build(&p);
    assert_eq!(again["cached_layers"], 0, "{again}");
    assert_eq!(again["manifest_digest"], taken["manifest_digest"]);
    assert_eq!(digests(&again), digests(&taken));

    // `strip: [unused-libraries]` needs every library before any wheel layer is written: a
    // cold build in a cache of its own reads them from the wheels. It records the same.
    let read_cache = s.sb.join("cache-read");
    let p = s.profile("facts-read", &packages, "strip: [unused-libraries]\n");
    run_ok(
        s.sb.gpuimg_with_cache(&read_cache)
            .args(["build", "--json", "-o"])
            .arg(s.sb.join("out-read"))
            .arg(&p),
    );
    assert_eq!(wheel_records(&read_cache), records);
}

#[test]
fn a_wheel_bringing_the_drivers_libcuda_is_refused_naming_it() {
    let s = setup();
    let err = s.refuse(&s.profile("evil", &["evil-driver"], ""));
    assert!(err.contains("libcuda.so.1"), "{err}");
    assert!(err.contains("wheel `evil-driver`"), "{err}");
    assert!(err.contains("803"), "{err}");
}

#[test]
fn one_soname_from_two_wheels_is_refused_naming_both_unless_the_profile_picks_one() {
    let s = setup();
    let err = s.refuse(&s.profile("dup", &["dup-a", "dup-b"], ""));
    assert!(err.contains("`libc.so.6` is provided twice"), "{err}");
    assert!(
        err.contains("wheel `dup-a`") && err.contains("wheel `dup-b`"),
        "{err}"
    );
    assert!(err.contains("libraries:"), "{err}");
    let picked = s.build(&s.profile(
        "dup",
        &["dup-a", "dup-b"],
        "libraries: {libc.so.6: dup-b}\n",
    ));
    assert_eq!(picked["wheels"], 2);
    let err = s.refuse(&s.profile(
        "dup",
        &["dup-a", "dup-b"],
        "libraries: {libc.so.6: dup-c}\n",
    ));
    assert!(err.contains("picks `dup-c`"), "{err}");
}

/// The gzip layer of a wheel's large deflated file carries the wheel's own deflate stream
/// (copied, not compressed again), and the layer unpacks (umoci) to the file's bytes: the
/// same diff_id as the zstd layer, whose bytes are compressed.
#[test]
fn a_large_deflated_wheel_file_is_copied_into_its_gzip_layer_as_the_wheels_stream() {
    let sb = Sandbox::new();
    let root = sb.join("rootfs");
    write(&root.join("var/lib/dpkg/status"), BOOKWORM_STATUS);
    let mut big = Vec::new();
    let mut x: u32 = 7;
    while big.len() < 3 << 20 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let word = ["kernel ", "sm_90 ", "cublas\n", "gemm "][(x % 4) as usize];
        big.extend_from_slice(word.as_bytes());
        big.push((x >> 24) as u8);
    }
    let spec = WheelSpec::new("bigdata", "1.0").file_mode("bigdata/blob.bin", &big, 0o644);
    let index = wheel_index(sb.path(), std::slice::from_ref(&spec));
    let server = serve(&index);
    let profile = sb.join("big.yaml");
    let out_of = |compression: &str| {
        write(
            &profile,
            &format!(
                "name: big\nbase:\n  rootfs: ./rootfs\nselftest: {{enabled: false}}\n\
                 python:\n  index: {}/simple/\n  packages: [bigdata]\n",
                server.url
            ),
        );
        let out = sb.join(format!("out-{compression}"));
        let json = run_ok(
            sb.gpuimg()
                .args(["build", "--json", "--compression", compression, "-o"])
                .arg(&out)
                .arg(&profile),
        );
        let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        let layer = v["layers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["component"] == "python-packages")
            .unwrap_or_else(|| panic!("no python-packages layer: {v}"))
            .clone();
        (out, layer)
    };
    let (gz_out, gz) = out_of("gzip");

    // The wheel's stream, up to its final block's header, is in the layer blob as it is.
    let wheel = std::fs::read(index.join("files").join(spec.filename())).unwrap();
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(&wheel)).unwrap();
    let i = zip.index_for_name("bigdata/blob.bin").unwrap();
    let m = zip.by_index_raw(i).unwrap();
    assert_eq!(m.compression(), zip::CompressionMethod::Deflated);
    let stream = &wheel[m.data_start() as usize..][..m.compressed_size() as usize];
    let ends = gpuimg_deflate::find_ends(stream).unwrap();
    let head = &stream[..(ends.final_block / 8) as usize];
    assert!(head.len() > 100_000, "the stream has many blocks");
    let digest = gz["digest"].as_str().unwrap().trim_start_matches("sha256:");
    let blob = std::fs::read(gz_out.join("blobs/sha256").join(digest)).unwrap();
    assert!(
        blob.windows(head.len()).any(|w| w == head),
        "the layer does not hold the wheel's deflate stream"
    );
    let rootfs = umoci_unpack(&gz_out, &sb.join("bundle"));
    let installed = rootfs.join("usr/local/lib/python3.11/dist-packages/bigdata/blob.bin");
    assert!(std::fs::read(installed).unwrap() == big, "the file's bytes");

    // zstd compresses the same tar: the same diff_id.
    let (_, zst) = out_of("zstd");
    assert_eq!(zst["diff_id"], gz["diff_id"]);
    assert_ne!(zst["digest"], gz["digest"]);
}

/// A large file is inflated from its wheel as the layer is written (never unpacked first), and
/// checked against the wheel's `RECORD` as it goes: one that lies fails the build naming the
/// file and the wheel, with nothing at the output, in either compression.
#[test]
fn a_large_file_whose_record_lies_fails_the_build_as_its_layer_is_written() {
    let sb = Sandbox::new();
    let root = sb.join("rootfs");
    write(&root.join("var/lib/dpkg/status"), BOOKWORM_STATUS);
    let big: Vec<u8> = (0u32..3 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 27) as u8 + b'a')
        .collect();
    let spec = WheelSpec::new("liar", "1.0")
        .file_mode("liar/libliar.so", &big, 0o755)
        .lie(Lie::Hash("liar/libliar.so".into()));
    let index = wheel_index(sb.path(), std::slice::from_ref(&spec));
    let server = serve(&index);
    let profile = sb.join("liar.yaml");
    write(
        &profile,
        &format!(
            "name: liar\nbase:\n  rootfs: ./rootfs\nselftest: {{enabled: false}}\n\
             python:\n  index: {}/simple/\n  packages: [liar]\n",
            server.url
        ),
    );
    for compression in ["gzip", "zstd"] {
        let out = sb.join(format!("out-{compression}"));
        let o = run(sb
            .gpuimg()
            .args(["build", "--compression", compression, "-o"])
            .arg(&out)
            .arg(&profile));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}", describe_run(&o));
        assert!(
            err.contains("`liar/libliar.so` of `liar-1.0-py3-none-any.whl`")
                && err.contains("the wheel's RECORD lists"),
            "{err}"
        );
        assert_error(&err, &[sb.path()]);
        assert!(!out.exists(), "{} was written", out.display());
    }
}

/// The build is one plan run by one loop of layer jobs: the image does not depend on how many
/// run at once, and a wheel layer in the cache whose wheels' facts are not recorded is taken
/// as it is (its job only reads the facts), with the same image.
#[test]
fn the_image_does_not_depend_on_the_jobs_and_a_cached_layer_is_taken_without_its_facts() {
    let s = setup();
    let p = s.profile("jobs", &["torch==1.0", "app-a", "dup-a"], "");
    let build = |cache: &Path, jobs: &str| -> serde_json::Value {
        let json = run_ok(
            s.sb.gpuimg_with_cache(cache)
                .args(["build", "--json", "--force", "--jobs", jobs, "-o"])
                .arg(s.sb.join(format!("out-{jobs}")))
                .arg(&p),
        );
        serde_json::from_str(json.trim()).unwrap()
    };
    let one = build(&s.sb.join("cache-1"), "1");
    let four = build(&s.sb.join("cache-4"), "4");
    assert_eq!(one["cached_layers"], 0, "{one}");
    assert_eq!(four["cached_layers"], 0, "{four}");
    assert_eq!(one["manifest_digest"], four["manifest_digest"]);
    assert_eq!(digests(&one), digests(&four));

    // The wheels' records gone, their layers kept: every layer is taken from the cache.
    let cache = s.sb.join("cache-4");
    std::fs::remove_dir_all(cache.join("wheel-metadata-v1")).unwrap();
    let again = build(&cache, "4");
    let n = again["layers"].as_array().unwrap().len();
    assert_eq!(again["cached_layers"], n, "{again}");
    assert_eq!(again["manifest_digest"], one["manifest_digest"]);
    assert!(
        !wheel_records(&cache).is_empty(),
        "the facts were read and recorded again"
    );
    // `--jobs 0` is a usage error.
    let out = run(s.sb.gpuimg().args(["build", "--jobs", "0"]).arg(&p));
    assert_eq!(out.status.code(), Some(2));
}
