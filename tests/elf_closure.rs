//! The ELF closure on a real image: Debian bookworm from the host's apt sources plus a wheel
//! (served from a PEP 503 index the test writes) whose shared objects the test compiles with
//! the host's C compiler: an extension module `fakeext/_core.so` with DT_RPATH `$ORIGIN/lib`
//! that needs `libfakea.so`, which needs `libfakemissing.so.1` (shipped by nothing), and
//! `libfakeunused.so`, which nothing needs. The build warns about the missing name;
//! `gpuimg inspect --unused` lists the unused library and the missing name; the container's
//! own loader (under podman) agrees: loading `libfakea.so` fails naming the missing library.

mod common;

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

#[test]
fn unused_and_missing_libraries_are_found_as_the_loader_finds_them() {
    let sb = Sandbox::new();
    let build = sb.join("cc");
    std::fs::create_dir_all(&build).unwrap();
    let missing = cc(
        &build,
        "int missing(void) { return 1; }\n",
        "libfakemissing.so.1",
        &["-Wl,-soname,libfakemissing.so.1"],
    );
    assert!(!missing.is_empty());
    let a = cc(
        &build,
        "int missing(void);\nint a(void) { return missing() + 1; }\n",
        "libfakea.so",
        &["-Wl,-soname,libfakea.so", "-L.", "-l:libfakemissing.so.1"],
    );
    let unused = cc(
        &build,
        "int u(void) { return 3; }\n",
        "libfakeunused.so",
        &["-Wl,-soname,libfakeunused.so"],
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
    let wheel = WheelSpec::new("fakeext", "1.0")
        .file("fakeext/__init__.py", "")
        .file_mode("fakeext/_core.so", &core, 0o755)
        .file_mode("fakeext/lib/libfakea.so", &a, 0o755)
        .file_mode("fakeext/lib/libfakeunused.so", &unused, 0o755);
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
        [format!("{SITE}/fakeext/lib/libfakeunused.so").as_str()],
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
                "import ctypes\nctypes.CDLL('{SITE}/fakeext/lib/libfakeunused.so')\ntry:\n    ctypes.CDLL('{SITE}/fakeext/lib/libfakea.so')\nexcept OSError as e:\n    print('failed:', e)\n"
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
