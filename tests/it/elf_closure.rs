//! The ELF closure on a real image: Debian bookworm from the host's apt sources plus a wheel
//! (served from a PEP 503 index the test writes) whose shared objects the test compiles with
//! the host's C compiler: an extension module `fakeext/_core.so` with DT_RPATH `$ORIGIN/lib`
//! that needs `libfakea.so`, which needs `libfakemissing.so.1` (shipped by nothing), and
//! `libfakeunused.so.1` (versioned, so no Python module), which nothing needs. The build warns
//! about the missing name; `gpuimg inspect --unused` lists the unused library and the missing
//! name; the container's own loader (under podman) agrees: loading `libfakea.so` fails naming
//! the missing library.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;

const APT: &str = "base:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [base-files, base-passwd, libc6, python3]\nselftest: {enabled: false}\n";
const SITE: &str = "/usr/local/lib/python3.11/dist-packages";

/// Compile `src` into a shared object at `out` with extra linker arguments.
fn cc(dir: &Path, src: &str, out: &str, args: &[&str]) -> Vec<u8> {
    require("cc");
    let c = dir.join(format!("{out}.c"));
    std::fs::write(&c, src).unwrap();
    run_ok(
        Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(dir.join(out))
            .arg(&c)
            .args(args)
            .current_dir(dir),
    );
    std::fs::read(dir.join(out)).unwrap()
}

/// The fixture's shared objects, compiled in `sb`: `libfakemissing.so.1`; `libfakea.so`,
/// which needs it; `libfakeunused.so.1`, which nothing needs; and the extension module
/// `_core.so`, which needs `libfakea.so` through its DT_RPATH `$ORIGIN/lib`.
struct Objects {
    missing: Vec<u8>,
    a: Vec<u8>,
    unused: Vec<u8>,
    core: Vec<u8>,
}

fn objects(sb: &Sandbox) -> Objects {
    let build = sb.join("cc");
    std::fs::create_dir_all(&build).unwrap();
    let missing = cc(
        &build,
        "int missing(void) { return 1; }\n",
        "libfakemissing.so.1",
        &["-Wl,-soname,libfakemissing.so.1"],
    );
    let a = cc(
        &build,
        "int missing(void);\nint a(void) { return missing() + 1; }\n",
        "libfakea.so",
        &["-Wl,-soname,libfakea.so", "-L.", "-l:libfakemissing.so.1"],
    );
    let unused = cc(
        &build,
        "int u(void) { return 3; }\n",
        "libfakeunused.so.1",
        &["-Wl,-soname,libfakeunused.so.1"],
    );
    let core = cc(
        &build,
        "int a(void);\nint core(void) { return a(); }\n",
        "_core.so",
        &[
            "-L.",
            "-l:libfakea.so",
            "-Wl,--disable-new-dtags,-rpath,$ORIGIN/lib",
        ],
    );
    Objects {
        missing,
        a,
        unused,
        core,
    }
}

#[test]
fn unused_and_missing_libraries_are_found_as_the_loader_finds_them() {
    let sb = Sandbox::new();
    let Objects {
        a, unused, core, ..
    } = objects(&sb);
    let wheel = WheelSpec::new("fakeext", "1.0")
        .file("fakeext/__init__.py", "")
        .file_mode("fakeext/_core.so", &core, 0o755)
        .file_mode("fakeext/lib/libfakea.so", &a, 0o755)
        .file_mode("fakeext/lib/libfakeunused.so.1", &unused, 0o755);
    let server = serve(&wheel_index(sb.path(), &[wheel]));
    let profile = sb.join("ext.yaml");
    write(
        &profile,
        &format!(
            "name: ext\n{APT}python:\n  index: {}/simple/\n  packages: [fakeext]\n",
            server.url
        ),
    );
    let out = sb.join("out");
    let o = run(sb.gpuimg().args(["build", "-o"]).arg(&out).arg(&profile));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "`libfakemissing.so.1`, needed by `{SITE}/fakeext/lib/libfakea.so`, is provided by nothing in the image"
        )),
        "{err}"
    );
    assert_error(line_with(&err, "is provided by nothing"), &[sb.path()]);
    // Nothing else is missing: glibc's names come from libc6.
    assert_eq!(err.matches("is provided by nothing").count(), 1, "{err}");

    let json = run_ok(
        sb.gpuimg()
            .args(["inspect", "--unused", "--json"])
            .arg(&out),
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let unused_paths: Vec<&str> = v["unused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        unused_paths,
        [format!("{SITE}/fakeext/lib/libfakeunused.so.1").as_str()],
        "{json}"
    );
    assert_eq!(v["unused_bytes"].as_u64(), Some(unused.len() as u64));
    let missing: Vec<(String, String)> = v["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["needed"].as_str().unwrap().to_string(),
                m["by"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        missing,
        [(
            "libfakemissing.so.1".to_string(),
            format!("{SITE}/fakeext/lib/libfakea.so")
        )],
        "{json}"
    );
    // python3 and its libraries are reached from /usr/bin; the wheel's module and libfakea.
    assert!(v["reached"].as_u64().unwrap() >= 4, "{json}");
    let text = run_ok(sb.gpuimg().args(["inspect", "--unused"]).arg(&out));
    assert!(
        text.contains("unused Python package libraries: 1"),
        "{text}"
    );

    // The image's own loader agrees: libfakea does not load, naming the missing library;
    // the unused library loads on its own.
    let image = format!("oci:{}:latest", out.display());
    let ran = podman_run_with(
        sb.path(),
        &["--entrypoint", "python3"],
        &image,
        &[
            "-c",
            &format!(
                "import ctypes\nctypes.CDLL('{SITE}/fakeext/lib/libfakeunused.so.1')\ntry:\n    ctypes.CDLL('{SITE}/fakeext/lib/libfakea.so')\nexcept OSError as e:\n    print('failed:', e)\n"
            ),
        ],
    );
    let said = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(
        said.contains("failed:") && said.contains("libfakemissing.so.1"),
        "{said}"
    );
}

/// `strip: [unused-libraries]`: the library nothing loads leaves the image and its wheel's
/// RECORD, the rest stays (a library on the dlopen keep-list too, though nothing links it), and the extension module still loads in the container (its
/// chain resolved through its inherited DT_RPATH). Without the class the library is there.
#[test]
fn unused_libraries_are_stripped_and_the_module_still_loads() {
    let sb = Sandbox::new();
    let Objects {
        missing: dep,
        a,
        unused,
        core,
    } = objects(&sb);
    let build = sb.join("cc");
    // Nothing links it, but cuDNN loads its engines by name: on the keep-list, it stays.
    let engine = cc(
        &build,
        "int engine(void) { return 4; }\n",
        "libcudnn_engines_fake.so.9",
        &["-Wl,-soname,libcudnn_engines_fake.so.9"],
    );
    let wheel = WheelSpec::new("fakeext", "1.1")
        .file("fakeext/__init__.py", "")
        .file_mode(
            "nvidia/cudnn/lib/libcudnn_engines_fake.so.9",
            &engine,
            0o755,
        )
        .file_mode("fakeext/_core.so", &core, 0o755)
        .file_mode("fakeext/lib/libfakea.so", &a, 0o755)
        .file_mode("fakeext/lib/libfakemissing.so.1", &dep, 0o755)
        .file_mode("fakeext/lib/libfakeunused.so.1", &unused, 0o755);
    let server = serve(&wheel_index(sb.path(), &[wheel]));
    let profile = |strip: &str| {
        format!(
            "name: ext\n{APT}strip: [{strip}]\npython:\n  index: {}/simple/\n  packages: [fakeext]\n",
            server.url
        )
    };
    let listing = |out: &Path| run_ok(sb.gpuimg().args(["inspect", "--files"]).arg(out));
    // Without the class: everything is there, nothing is missing.
    write(&sb.join("plain.yaml"), &profile("docs"));
    let plain = sb.join("plain");
    let o = run(sb
        .gpuimg()
        .args(["build", "-o"])
        .arg(&plain)
        .arg(sb.join("plain.yaml")));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("is provided by nothing"), "{err}");
    assert!(listing(&plain).contains("fakeext/lib/libfakeunused.so.1"));

    write(&sb.join("strip.yaml"), &profile("docs, unused-libraries"));
    let out = sb.join("out");
    run_ok(
        sb.gpuimg()
            .args(["build", "-o"])
            .arg(&out)
            .arg(sb.join("strip.yaml")),
    );
    let files = listing(&out);
    assert!(!files.contains("fakeext/lib/libfakeunused.so.1"), "{files}");
    for kept in [
        "fakeext/_core.so",
        "fakeext/lib/libfakea.so",
        "fakeext/lib/libfakemissing.so.1",
        "nvidia/cudnn/lib/libcudnn_engines_fake.so.9",
    ] {
        assert!(files.contains(kept), "{kept} missing:\n{files}");
    }
    let report: serde_json::Value = serde_json::from_str(&run_ok(
        sb.gpuimg()
            .args(["inspect", "--unused", "--json"])
            .arg(&out),
    ))
    .unwrap();
    assert_eq!(
        report["unused"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
    assert_eq!(
        report["missing"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );

    // In the container: the RECORD lists exactly what is there, and the module works.
    let image = format!("oci:{}:latest", out.display());
    let check = format!(
        "import ctypes, importlib.metadata as m, os\n\
         files = [str(f) for f in m.distribution('fakeext').files]\n\
         assert not any('libfakeunused' in f for f in files), files\n\
         site = '{SITE}'\n\
         for f in files:\n    assert os.path.exists(os.path.join(site, f)), f\n\
         print('core', ctypes.CDLL(site + '/fakeext/_core.so').core())\n"
    );
    let ran = podman_run_with(
        sb.path(),
        &["--entrypoint", "python3"],
        &image,
        &["-c", &check],
    );
    let said = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert_eq!(said.trim(), "core 2");
}

/// Issue 34, item 9: a runtime library a wheel needs and no package brings is named with the
/// Debian package that ships it (from `data/soname-packages.yaml`), in the build's warning and
/// in `inspect --unused`.
#[test]
fn a_missing_runtime_library_names_the_debian_package_that_ships_it() {
    let sb = Sandbox::new();
    let build = sb.join("cc");
    std::fs::create_dir_all(&build).unwrap();
    // `libgomp.so.1` is the compiler's (Debian's `libgomp1`); the base does not install it.
    let omp = cc(
        &build,
        "int omp_get_max_threads(void);\nint threads(void) { return omp_get_max_threads(); }\n",
        "_omp.so",
        &["-L/usr/lib/x86_64-linux-gnu", "-l:libgomp.so.1"],
    );
    let wheel = WheelSpec::new("fakeomp", "1.0")
        .file("fakeomp/__init__.py", "")
        .file_mode("fakeomp/_omp.so", &omp, 0o755);
    let server = serve(&wheel_index(sb.path(), &[wheel]));
    let profile = sb.join("omp.yaml");
    write(
        &profile,
        &format!(
            "name: omp\n{APT}python:\n  index: {}/simple/\n  packages: [fakeomp]\n",
            server.url
        ),
    );
    let out = sb.join("out");
    let o = run(sb.gpuimg().args(["build", "-o"]).arg(&out).arg(&profile));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "`libgomp.so.1`, needed by `{SITE}/fakeomp/_omp.so`, is provided by nothing in the image: loading it fails until a package in `base.apt.packages` (or a wheel) brings it: add `libgomp1` (the Debian package that ships it in bookworm and trixie, by `data/soname-packages.yaml`, from the suites' Contents indexes)"
        )),
        "{err}"
    );
    assert_error(line_with(&err, "is provided by nothing"), &[sb.path()]);
    let text = run_ok(sb.gpuimg().args(["inspect", "--unused"]).arg(&out));
    assert!(
        text.contains(&format!(
            "  libgomp.so.1  (needed by {SITE}/fakeomp/_omp.so; add `libgomp1` (the Debian package that ships it in bookworm and trixie"
        )),
        "{text}"
    );
}

/// What a reached library loads by name counts as used, and what nothing loads is not judged:
/// `libfakeloader.so.1` (needed by the extension module) holds the string
/// `libfakeplugin.so.1`, which nothing links; `libfakeorphan.so.1` needs a library the image
/// lacks but nothing loads it. The build warns about nothing; `inspect --unused` lists the
/// orphan and the unused library, never the plugin; `strip: [unused-libraries]` removes
/// exactly what the preview listed.
#[test]
fn a_library_named_in_a_reached_librarys_strings_is_used_and_the_preview_is_what_strip_removes() {
    let sb = Sandbox::new();
    let Objects { unused, .. } = objects(&sb);
    let build = sb.join("cc");
    let plugin = cc(
        &build,
        "int plugin(void) { return 5; }\n",
        "libfakeplugin.so.1",
        &["-Wl,-soname,libfakeplugin.so.1"],
    );
    let loader = cc(
        &build,
        "const char *plugin_name(void) { return \"libfakeplugin.so.1\"; }\n",
        "libfakeloader.so.1",
        &["-Wl,-soname,libfakeloader.so.1", "-Wl,-rpath,$ORIGIN"],
    );
    cc(
        &build,
        "int gone(void) { return 6; }\n",
        "libfakegone.so.1",
        &["-Wl,-soname,libfakegone.so.1"],
    );
    let orphan = cc(
        &build,
        "int gone(void);\nint orphan(void) { return gone(); }\n",
        "libfakeorphan.so.1",
        &[
            "-Wl,-soname,libfakeorphan.so.1",
            "-L.",
            "-l:libfakegone.so.1",
        ],
    );
    let core = cc(
        &build,
        "const char *plugin_name(void);\nconst char *core(void) { return plugin_name(); }\n",
        "_core2.so",
        &[
            "-L.",
            "-l:libfakeloader.so.1",
            "-Wl,--disable-new-dtags,-rpath,$ORIGIN/lib",
        ],
    );
    let wheel = WheelSpec::new("fakeext", "1.2")
        .file("fakeext/__init__.py", "")
        .file_mode("fakeext/_core.so", &core, 0o755)
        .file_mode("fakeext/lib/libfakeloader.so.1", &loader, 0o755)
        .file_mode("fakeext/lib/libfakeplugin.so.1", &plugin, 0o755)
        .file_mode("fakeext/lib/libfakeorphan.so.1", &orphan, 0o755)
        .file_mode("fakeext/lib/libfakeunused.so.1", &unused, 0o755);
    let server = serve(&wheel_index(sb.path(), &[wheel]));
    let profile = |name: &str, strip: &str| {
        let path = sb.join(format!("{name}.yaml"));
        write(
            &path,
            &format!(
                "name: ext\n{APT}strip: [{strip}]\npython:\n  index: {}/simple/\n  packages: [fakeext]\n",
                server.url
            ),
        );
        path
    };
    let build_image = |name: &str, strip: &str| {
        let out = sb.join(name);
        let o = run(sb
            .gpuimg()
            .args(["build", "-o"])
            .arg(&out)
            .arg(profile(name, strip)));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{err}");
        (out, err)
    };
    // The orphan's missing need is no warning: nothing loads the orphan.
    let (plain, err) = build_image("plain", "docs");
    assert!(!err.contains("is provided by nothing"), "{err}");
    let preview = unused_paths(&sb, &plain);
    let lib = |n: &str| format!("{SITE}/fakeext/lib/{n}");
    assert_eq!(
        preview,
        [lib("libfakeorphan.so.1"), lib("libfakeunused.so.1")],
        "the plugin is loaded by name"
    );

    let (stripped, _) = build_image("stripped", "docs, unused-libraries");
    let files = |out: &Path| -> std::collections::BTreeSet<String> {
        let json = run_ok(sb.gpuimg().args(["inspect", "--files", "--json"]).arg(out));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        (v["files"].as_array().unwrap().iter())
            .map(|f| f["path"].as_str().unwrap().to_string())
            .collect()
    };
    let removed: Vec<String> = files(&plain)
        .difference(&files(&stripped))
        .filter(|p| p.contains(".so"))
        .cloned()
        .collect();
    assert_eq!(
        removed, preview,
        "what strip removes is what the preview lists"
    );
    assert!(unused_paths(&sb, &stripped).is_empty());
}

/// The library paths `inspect --unused` lists for the image `out`, sorted.
fn unused_paths(sb: &Sandbox, out: &Path) -> Vec<String> {
    let json = run_ok(sb.gpuimg().args(["inspect", "--unused", "--json"]).arg(out));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut paths: Vec<String> = v["unused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    paths
}
