//! `providers: {cuda: apt}`: the pinned CUDA runtime comes from the base's apt repositories
//! instead of NVIDIA's wheels.
//!
//! - From Debian's own archive (the build host's mirror, `non-free`, which the host's sources
//!   need not enable): `stack.cuda: "11.8"` installs `libcudart11.0` into the `cuda-runtime`
//!   layer; `CUDA_VERSION`, `NVIDIA_REQUIRE_CUDA`'s `cuda>=` and the `io.gpuimg.cuda-library.*`
//!   annotation follow the package (its version read by the test from the unpacked image's
//!   dpkg database); the expectation lists libcudart in the package's directory, and the
//!   self-test's probe loads that file and reaches `cudaRuntimeGetVersion` (which in CUDA 11
//!   needs a driver to answer); under
//!   podman `ldconfig -p` lists it and `gpuimg-selftest` exits with the no-GPU code.
//! - From a signed fixture repository shaped as NVIDIA's (`cuda-cudart-12-4` under
//!   `/usr/local/cuda-12.4/targets/x86_64-linux/lib`): the first alternative wins over Debian's
//!   `libcudart12`; a repository with only a `libcudart12` older than the pin is a "no"
//!   (exit 1) naming the pin's position and the package; `apt` without `base.apt` is exit 2 at
//!   the key's position.

use crate::common;

use std::process::Command;

use common::*;
use gpuimg_expect::{Expectation, LibraryExpectation};

/// What a test checks of one library in the expectation: name, soname, directory, version,
/// provider and CUDA major.
fn row(l: &LibraryExpectation) -> (&str, &str, &str, &str, &str, u32) {
    (
        &l.name,
        &l.soname,
        &l.dir,
        &l.version,
        &l.provider,
        l.cuda_major,
    )
}

/// The image's config and manifest of the OCI layout at `out`.
fn config_and_manifest(out: &std::path::Path) -> (serde_json::Value, serde_json::Value) {
    let blob = |d: &str| {
        let hex = d.strip_prefix("sha256:").unwrap();
        serde_json::from_str::<serde_json::Value>(&read(&out.join("blobs/sha256").join(hex)))
            .unwrap()
    };
    let index = serde_json::from_str::<serde_json::Value>(&read(&out.join("index.json"))).unwrap();
    let manifest = blob(index["manifests"][0]["digest"].as_str().unwrap());
    let config = blob(manifest["config"]["digest"].as_str().unwrap());
    (config, manifest)
}

fn env_of(config: &serde_json::Value, name: &str) -> Option<String> {
    config["config"]["Env"]
        .as_array()?
        .iter()
        .filter_map(|e| e.as_str())
        .find_map(|e| e.strip_prefix(&format!("{name}=")).map(str::to_string))
}

/// The paths in one layer blob (gzip tar).
fn layer_paths(out: &std::path::Path, digest: &str) -> Vec<String> {
    let hex = digest.strip_prefix("sha256:").unwrap();
    let list = run_ok(
        Command::new("tar")
            .arg("-tzf")
            .arg(out.join("blobs/sha256").join(hex)),
    );
    list.lines().map(str::to_string).collect()
}

const DEBIAN: &str = r#"name: cuda-apt
base:
  apt:
    mirror: host
    suite: bookworm
    components: [main, non-free]
    packages: [libc-bin]
stack:
  cuda: "11.8"
providers:
  cuda: apt
"#;

#[test]
fn debians_cuda_runtime_from_non_free_is_the_images_cuda() {
    require("umoci");
    require("ldconfig");
    let sb = Sandbox::new();
    write(&sb.join("p.yaml"), DEBIAN);
    run_ok(sb.gpuimg().arg("lock").arg(sb.join("p.yaml")));
    let lock: serde_json::Value = serde_json::from_str(&read(&sb.join("p.lock.json"))).unwrap();
    let locked = lock.to_string();
    assert!(locked.contains("\"libcudart11.0\""), "{lock}");
    assert!(!locked.contains("nvidia-cuda-runtime"), "no wheel: {lock}");
    let json: serde_json::Value = serde_json::from_str(&run_ok(
        sb.gpuimg()
            .args(["build", "--locked", "--json", "-o"])
            .arg(sb.join("out"))
            .arg(sb.join("p.yaml")),
    ))
    .unwrap();
    let out = sb.join("out");

    // The package is in the cuda-runtime layer, and only there.
    let layers = json["layers"].as_array().unwrap();
    let so = "usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89";
    let holders: Vec<&str> = layers
        .iter()
        .filter(|l| {
            layer_paths(&out, l["digest"].as_str().unwrap())
                .iter()
                .any(|p| p.trim_start_matches("./") == so)
        })
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    assert_eq!(holders, ["cuda-runtime"], "{json}");

    // The package's version, as the image's own dpkg database records it.
    let rootfs = umoci_unpack(&out, &sb.join("bundle"));
    let status = read(&rootfs.join("var/lib/dpkg/status"));
    let stanza = status
        .split("\n\n")
        .find(|s| s.lines().any(|l| l == "Package: libcudart11.0"))
        .unwrap_or_else(|| panic!("libcudart11.0 not in the image's dpkg status"));
    let deb_version = stanza
        .lines()
        .find_map(|l| l.strip_prefix("Version: "))
        .unwrap()
        .to_string();
    // Upstream release: no revision, cut at `~` (11.8.89~11.8.0-5~deb12u1 → 11.8.89).
    let release = deb_version
        .rsplit_once('-')
        .map_or(deb_version.as_str(), |(u, _)| u)
        .split('~')
        .next()
        .unwrap()
        .to_string();
    assert!(release.starts_with("11.8."), "{deb_version}");

    let (config, manifest) = config_and_manifest(&out);
    assert_eq!(
        env_of(&config, "CUDA_VERSION").as_deref(),
        Some(release.as_str())
    );
    let require = env_of(&config, "NVIDIA_REQUIRE_CUDA").unwrap();
    assert!(require.starts_with("cuda>=11.0"), "{require}");
    assert_eq!(
        manifest["annotations"]["io.gpuimg.cuda-library.libcudart11.0"],
        deb_version.as_str(),
        "{manifest}"
    );

    // The expectation names the package's file, and the self-test's probe reads 11.8 from it.
    let text = read(&rootfs.join("etc/gpuimg/expect.json"));
    let mut e = Expectation::from_json(&text, "expect.json").unwrap();
    assert_eq!(e.libraries.len(), 1, "{text}");
    assert_eq!(
        row(&e.libraries[0]),
        (
            "cudart",
            "libcudart.so.11.0",
            "/usr/lib/x86_64-linux-gnu",
            release.as_str(),
            "deb libcudart11.0",
            11
        ),
        "{text}"
    );
    for l in &mut e.libraries {
        l.dir = format!("{}{}", rootfs.display(), l.dir);
    }
    // CUDA 11's runtime asks the driver before it answers (CUDA 12's does not): on this
    // GPU-less machine the call returns 35, cudaErrorInsufficientDriver, which proves the
    // file loaded and its own call was reached; on a GPU host it reports 11080.
    let probes = gpuimg_selftest::probe_libraries(&e.libraries);
    assert_eq!(probes.len(), 1);
    match (&probes[0].reported, &probes[0].error) {
        (Some(fields), None) => assert_eq!(fields.as_slice(), [11, 8]),
        (None, Some(err)) => assert_eq!(err, "`cudaRuntimeGetVersion` returned status 35"),
        other => panic!("{other:?}: {:?}", probes[0]),
    }

    // The loader finds it through the image's cache; in the container, and the self-test run
    // directly says there is no GPU here (exit 4).
    let cache = run_ok(
        Command::new("ldconfig")
            .args(["-p", "-C"])
            .arg(rootfs.join("etc/ld.so.cache")),
    );
    assert!(
        cache
            .lines()
            .any(|l| l.trim_start().starts_with("libcudart.so.11.0")
                && (l.ends_with("=> /usr/lib/x86_64-linux-gnu/libcudart.so.11.0")
                    || l.ends_with("=> /lib/x86_64-linux-gnu/libcudart.so.11.0"))),
        "{cache}"
    );
    let image = format!("oci:{}:latest", out.display());
    let ran = podman_run_with(
        sb.path(),
        &["--entrypoint", "/sbin/ldconfig"],
        &image,
        &["-p"],
    );
    assert_eq!(ran.status.code(), Some(0), "{}", describe_run(&ran));
    assert!(
        String::from_utf8_lossy(&ran.stdout).contains("libcudart.so.11.0"),
        "{}",
        describe_run(&ran)
    );
    let ran = podman_run_with(
        sb.path(),
        &["--entrypoint", "/usr/local/bin/gpuimg-selftest"],
        &image,
        &[],
    );
    assert_eq!(ran.status.code(), Some(4), "{}", describe_run(&ran));
}

/// Build `p` in `sb`, which must fail with exit `code` and write nothing; its stderr.
fn refused(sb: &Sandbox, p: &std::path::Path, code: i32) -> String {
    let o = run(sb.gpuimg().args(["build", "-o"]).arg(sb.join("out")).arg(p));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(!sb.join("out").exists(), "nothing written");
    assert_error(&err, &[sb.path()]);
    err
}

/// Suite `nvidia`: NVIDIA-shaped `cuda-cudart-12-4` and Debian-shaped `libcudart12`, and
/// `libnccl2` as NVIDIA's repository has it, per CUDA line and release (2.21.5 for CUDA 12.4 and
/// 13.0, 2.26.5 for 12.9, 2.28.9 for 13.0); suite `debian`: only `libcudart12`, at 12.2.
fn repo() -> SignedRepo {
    let mut nvidia = pkg("cuda-cudart-12-4", "12.4.127-1");
    nvidia.files = vec![(
        "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127",
        b"cudart 12.4\n",
        0o644,
    )];
    nvidia.symlinks = vec![(
        "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12",
        "libcudart.so.12.4.127",
    )];
    let mut debian = pkg("libcudart12", "12.2.140~12.2.2-1");
    debian.files = vec![(
        "/usr/lib/x86_64-linux-gnu/libcudart.so.12.2.140",
        b"cudart 12.2\n",
        0o644,
    )];
    debian.symlinks = vec![(
        "/usr/lib/x86_64-linux-gnu/libcudart.so.12",
        "libcudart.so.12.2.140",
    )];
    let nccl = |version: &'static str| {
        let mut p = pkg("libnccl2", version);
        p.files = vec![(
            "/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5",
            version.as_bytes(),
            0o644,
        )];
        p.symlinks = vec![(
            "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
            "libnccl.so.2.21.5",
        )];
        p
    };
    let mut libc = pkg("libc-bin", "2.36-9");
    libc.files = vec![("/usr/share/doc/libc-bin/copyright", b"fixture\n", 0o644)];
    let nccl12 = nccl("2.21.5-1+cuda12.4");
    let nccl13 = nccl("2.21.5-1+cuda13.0");
    let nccl12_new = nccl("2.26.5-1+cuda12.9");
    let nccl13_new = nccl("2.28.9-1+cuda13.0");
    signed_repo(&[
        (
            "nvidia",
            vec![
                &libc,
                &nvidia,
                &debian,
                &nccl12,
                &nccl13,
                &nccl12_new,
                &nccl13_new,
            ],
        ),
        ("debian", vec![&libc, &debian]),
    ])
}

fn fixture_profile(sb: &Sandbox, r: &SignedRepo, suite: &str) -> std::path::PathBuf {
    fixture_profile_with(sb, r, suite, "[libc-bin]", "")
}

/// The fixture profile with `packages` and, unless empty, `stack.nccl` taken from apt.
fn fixture_profile_with(
    sb: &Sandbox,
    r: &SignedRepo,
    suite: &str,
    packages: &str,
    nccl: &str,
) -> std::path::PathBuf {
    r.keyring_into(sb.path());
    let p = sb.join("p.yaml");
    let (pin, provider) = match nccl {
        "" => (String::new(), String::new()),
        v => (format!("  nccl: \"{v}\"\n"), "  nccl: apt\n".to_string()),
    };
    write(
        &p,
        &format!(
            "name: nv\nbase:\n  apt:\n    mirror: {}\n    suite: {suite}\n    packages: {packages}\n    keyring: repo.gpg\nstack:\n  cuda: \"12.4\"\n{pin}providers:\n  cuda: apt\n{provider}",
            r.url
        ),
    );
    p
}

#[test]
fn nvidias_package_comes_first_and_a_release_the_pin_does_not_allow_is_a_no() {
    let r = repo();
    let sb = Sandbox::new();
    let p = fixture_profile(&sb, &r, "nvidia");
    run_ok(sb.gpuimg().arg("lock").arg(&p));
    let lock = read(&sb.join("p.lock.json"));
    assert!(lock.contains("\"cuda-cudart-12-4\""), "{lock}");
    assert!(!lock.contains("\"libcudart12\""), "{lock}");
    run_ok(
        sb.gpuimg()
            .args(["build", "--locked", "-q", "-o"])
            .arg(sb.join("out"))
            .arg(&p),
    );
    let (config, _) = config_and_manifest(&sb.join("out"));
    assert_eq!(env_of(&config, "CUDA_VERSION").as_deref(), Some("12.4.127"));
    let rootfs = umoci_unpack(&sb.join("out"), &sb.join("bundle"));
    let text = read(&rootfs.join("etc/gpuimg/expect.json"));
    let e = Expectation::from_json(&text, "expect.json").unwrap();
    let lib = &e.libraries[0];
    assert_eq!(lib.dir, "/usr/local/cuda-12.4/targets/x86_64-linux/lib");
    assert_eq!(lib.soname, "libcudart.so.12");
    assert_eq!(lib.provider, "deb cuda-cudart-12-4");
    assert!(rootfs.join(&lib.dir[1..]).join(&lib.soname).exists());

    // Only Debian's 12.2 there: the pin says 12.4.
    let sb = Sandbox::new();
    let p = fixture_profile(&sb, &r, "debian");
    let err = refused(&sb, &p, 1);
    assert!(
        err.contains("`stack.cuda: \"12.4\"` (")
            && err.contains("p.yaml:9:9)")
            && err.contains("`libcudart12 12.2.140~12.2.2-1`"),
        "{err}"
    );
}

#[test]
fn apt_without_an_apt_base_is_bad_input_at_its_position() {
    let sb = Sandbox::new();
    let p = sb.join("p.yaml");
    write(
        &p,
        "name: x\nstack:\n  cuda: \"12.4\"\nproviders:\n  cuda: apt\n",
    );
    let err = refused(&sb, &p, 2);
    assert!(err.contains("p.yaml:5:9"), "{err}");
    assert!(err.contains("no `base.apt`"), "{err}");
    // A provider for a component the stack does not pin says nothing: refused at its key.
    write(
        &p,
        "name: x\nstack:\n  cuda: \"12.4\"\nproviders:\n  cuda: wheel\n  nccl: wheel\n",
    );
    let err = refused(&sb, &p, 2);
    assert!(err.contains("p.yaml:6:9"), "{err}");
    assert!(err.contains("pins no `stack.nccl`"), "{err}");
}

/// Debian's libcudart (taken from apt) and NVIDIA's `nvidia-cuda-runtime-cu11` wheel (asked
/// for as a Python package, from the real index through the host's configuration) both
/// provide `libcudart.so.11.0`: refused naming both (exit 2), nothing written.
#[test]
fn debians_and_a_wheels_libcudart_together_are_refused_naming_both() {
    let sb = Sandbox::new();
    let p = sb.join("p.yaml");
    write(
        &p,
        &DEBIAN
            .replace("packages: [libc-bin]", "packages: [libc-bin, python3]")
            .replace(
                "providers:",
                "python:\n  packages: [\"nvidia-cuda-runtime-cu11==11.8.89\"]\nproviders:",
            ),
    );
    let mut c = with_host_index(sb.gpuimg());
    let o = run(c.args(["build", "-o"]).arg(sb.join("out")).arg(&p));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`libcudart.so.11.0` is provided twice"),
        "{err}"
    );
    assert!(
        err.contains("package `libcudart11.0`") && err.contains("wheel `nvidia-cuda-runtime-cu11`"),
        "{err}"
    );
}

/// NVIDIA's repository has `libnccl2` per CUDA line and release: with `stack.nccl` from apt,
/// the version built for the image's CUDA line and of the pinned release is taken without a
/// version in the profile (not the newest, `+cuda13.0`, nor 12.9's newer release); a version
/// the profile names itself for another CUDA line is a "no" naming it; a package text the
/// solver cannot take is exit 2 at its position.
#[test]
fn the_stack_takes_the_nccl_package_of_the_images_cuda_line_and_pinned_release() {
    let r = repo();
    // Any release: the newest of the CUDA 12 line, not the newest of all (2.28.9 for 13.0).
    let sb = Sandbox::new();
    let p = fixture_profile_with(&sb, &r, "nvidia", "[libc-bin]", "*");
    run_ok(sb.gpuimg().arg("lock").arg(&p));
    let lock = read(&sb.join("p.lock.json"));
    assert!(lock.contains("\"2.26.5-1+cuda12.9\""), "{lock}");
    assert!(!lock.contains("cuda13.0"), "{lock}");

    // The profile's own version for CUDA 13 in a CUDA 12 image: a "no" naming it.
    let sb = Sandbox::new();
    let p = fixture_profile_with(
        &sb,
        &r,
        "nvidia",
        "[libc-bin, \"libnccl2=2.21.5-1+cuda13.0\"]",
        "2.21",
    );
    let err = refused(&sb, &p, 1);
    assert!(
        err.contains("`libnccl2 2.21.5-1+cuda13.0`") && err.contains("built for CUDA 13"),
        "{err}"
    );

    // Release 2.21 pinned: 2.21.5 for CUDA 12, built into the image.
    let sb = Sandbox::new();
    let p = fixture_profile_with(&sb, &r, "nvidia", "[libc-bin]", "2.21");

    run_ok(sb.gpuimg().arg("lock").arg(&p));
    let lock = read(&sb.join("p.lock.json"));
    assert!(lock.contains("\"2.21.5-1+cuda12.4\""), "{lock}");
    assert!(
        !lock.contains("cuda13.0") && !lock.contains("2.26.5"),
        "{lock}"
    );
    run_ok(
        sb.gpuimg()
            .args(["build", "--locked", "-q", "-o"])
            .arg(sb.join("out"))
            .arg(&p),
    );
    // `strip: [device-code]` does not prune an apt package's library, and says so.
    let pruned = sb.join("pruned.yaml");
    write(
        &pruned,
        &format!(
            "{}host:\n  gpus: [H100]\nstrip: [device-code]\n",
            read(&p).replace("name: nv\n", "name: nv-pruned\n")
        ),
    );
    let out = run(sb
        .gpuimg()
        .args(["build", "-o"])
        .arg(sb.join("out-pruned"))
        .arg(&pruned));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("NCCL comes from apt here (`providers.nccl: apt`)"),
        "{err}"
    );
    let (_, manifest) = config_and_manifest(&sb.join("out"));
    // The self-test's expectation lists NCCL from the package, for CUDA 12 (its version says).
    let rootfs = umoci_unpack(&sb.join("out"), &sb.join("bundle"));
    let text = read(&rootfs.join("etc/gpuimg/expect.json"));
    let e = Expectation::from_json(&text, "expect.json").unwrap();
    let nccl = e.libraries.iter().find(|l| l.name == "nccl").unwrap();
    assert_eq!(
        row(nccl),
        (
            "nccl",
            "libnccl.so.2",
            "/usr/lib/x86_64-linux-gnu",
            "2.21.5",
            "deb libnccl2",
            12
        ),
        "{text}"
    );
    assert!(rootfs
        .join("usr/lib/x86_64-linux-gnu/libnccl.so.2")
        .exists());
    assert_eq!(
        manifest["annotations"]["io.gpuimg.cuda-library.libnccl2"], "2.21.5-1+cuda12.4",
        "{manifest}"
    );

    let sb = Sandbox::new();
    let p = fixture_profile_with(&sb, &r, "nvidia", "[libc-bin, \"libnccl2 (>> \"]", "");
    let err = refused(&sb, &p, 2);
    assert!(
        err.contains("p.yaml:6:") && err.contains("`libnccl2 (>> `"),
        "{err}"
    );
}
