//! Every strip class on a real image: Debian bookworm from the build host's mirror
//! (`mirror: host`: python3, libc6-dev for headers, static libraries and pkg-config files,
//! libc-l10n for locales) and wheels the test writes, served by a loopback index (one with a
//! compiled library it loads and a console script, a Triton-shaped one with its bundled NVIDIA
//! tools and AMD backend, one of stubs and tests only), with `.pyc` compiled. The same lock is
//! built without and with every class; the test checks what went (each removed path belongs
//! to a class that names it, and the paths the catalog keeps are there), that the workload
//! still runs under podman, and that the records describe what remains: each wheel's RECORD
//! lists exactly the files of its distribution (hashes checked in the container), dpkg's lists
//! and md5sums name only files that exist (`dpkg-query -L` and `dpkg --verify` on the
//! unpacked root), `ldconfig -p` only libraries that exist, and every package stays recorded.
//! `unused-libraries` on the real PyTorch stack from the host's index: `inspect --unused`
//! previews exactly what the class removes, and counts what is loaded by name as used.
//! On rootfs bases (no network): each class alone removes its own samples and no other's; a
//! rootfs's RECORD and dpkg lists are kept true too; `device-code` without `host.gpus` is
//! refused with one line, exit 2.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const SITE: &str = "usr/local/lib/python3.11/dist-packages";

const CLASSES: &str = "[docs, man, locales, headers, static-libs, debug-symbols, build-files, python-caches, tests, type-stubs, other-gpu-backends]";

/// A real shared library the demo wheel loads with ctypes.
fn compiled_library(dir: &Path) -> Vec<u8> {
    require("gcc");
    let src = dir.join("demo.c");
    write(&src, "int demo_answer(void) { return 42; }\n");
    let lib = dir.join("libdemo.so");
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&lib)
            .arg(&src),
    );
    std::fs::read(&lib).unwrap()
}

fn wheels(lib: &[u8]) -> Vec<WheelSpec> {
    vec![
        WheelSpec::new("demo-app", "1.0")
            .file(
                "demo_app/__init__.py",
                "import ctypes, os\n\
                 _lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libdemo.so'))\n\
                 def answer():\n    return _lib.demo_answer()\n",
            )
            .file(
                "demo_app/cli.py",
                "def main():\n    import demo_app\n    print('demo', demo_app.answer())\n",
            )
            .file_mode("demo_app/libdemo.so", lib, 0o755)
            .file("demo_app/libdemo.so.debug", "debug info\n")
            .file("demo_app/__init__.pyi", "def answer() -> int: ...\n")
            .file("demo_app/py.typed", "")
            .file("demo_app/include/demo.h", "int demo_answer(void);\n")
            .file("demo_app/lib/libdemo_static.a", "!<arch>\n")
            .file("demo_app/lib/pkgconfig/demo.pc", "Name: demo\n")
            .file(
                "demo_app/share/cmake/Demo/DemoConfig.cmake",
                "set(DEMO 1)\n",
            )
            .file("demo_app/tests/__init__.py", "")
            .file("demo_app/tests/test_demo.py", "def test(): pass\n")
            .file("demo_app/tests/LICENSE", "the tests' licence\n")
            .file(
                "demo_app/__pycache__/cli.cpython-312.pyc",
                "not this interpreter's\n",
            )
            .entry_points("[console_scripts]\ndemo = demo_app.cli:main\n"),
        WheelSpec::new("triton", "3.9.0")
            .file("triton/__init__.py", "__version__ = '3.9.0'\n")
            .file("triton/backends/__init__.py", "")
            .file("triton/backends/amd/__init__.py", "")
            .file("triton/backends/amd/driver.py", "AMD = 1\n")
            .file("triton/backends/amd/lib/ocml.bc", "ROCm bitcode\n")
            .file("triton/backends/nvidia/__init__.py", "")
            .file("triton/backends/nvidia/driver.py", "NVIDIA = 1\n")
            .file_mode("triton/backends/nvidia/bin/ptxas", b"#!/bin/sh\n", 0o755)
            .file_mode(
                "triton/backends/nvidia/bin/cuobjdump",
                b"#!/bin/sh\n",
                0o755,
            )
            .file_mode("triton/backends/nvidia/bin/nvdisasm", b"#!/bin/sh\n", 0o755)
            .file("triton/backends/nvidia/include/cuda.h", "/* cuda.h */\n")
            .file("triton/_C/include/triton/x.h", "/* x.h */\n"),
        WheelSpec::new("stubs-only", "1.0")
            .file("stubs_only/__init__.pyi", "X: int\n")
            .file("stubs_only/tests/test_x.py", "def test(): pass\n"),
    ]
}

fn profile(url: &str, strip: &str) -> String {
    profile_with(url, strip, "")
}

fn profile_with(url: &str, strip: &str, more: &str) -> String {
    format!(
        r#"name: stripped
base:
  apt:
    mirror: host
    suite: bookworm
    packages: [base-files, base-passwd, libc6, libc-bin, python3, libc6-dev, libc-l10n{more}]
python:
  index: {url}
  packages: ["demo-app", "triton", "stubs-only"]
  compile: true
selftest: {{enabled: false}}
strip: {strip}
config:
  entrypoint: ["python3", "-c"]
"#
    )
}

/// What the test asks of the image's python3, printed as one JSON object: the workload, and
/// each gpuimg-installed distribution's RECORD against the files that are there.
const CHECKS: &str = r#"
import base64, hashlib, importlib.metadata as m, json, os, subprocess, sys
import demo_app
def run(*argv):
    p = subprocess.run(list(argv), capture_output=True, text=True)
    return [p.returncode, p.stdout + p.stderr]
dists = {}
for d in m.distributions():
    if (d.read_text("INSTALLER") or "").strip() != "gpuimg":
        continue
    site = os.path.normpath(str(d.locate_file("")))
    listed, problems, tops = set(), [], set()
    for f in d.files or []:
        p = os.path.normpath(str(d.locate_file(f)))
        listed.add(p)
        if not os.path.isfile(p):
            problems.append("listed but missing: " + p)
            continue
        if f.hash:
            with open(p, "rb") as fh:
                h = hashlib.new(f.hash.mode, fh.read()).digest()
            if base64.urlsafe_b64encode(h).rstrip(b"=").decode() != f.hash.value:
                problems.append("hash differs: " + p)
        if p.startswith(site + "/"):
            tops.add(p[len(site) + 1:].split("/")[0])
    for t in sorted(tops):
        for root, _, files in os.walk(os.path.join(site, t)):
            for n in files:
                p = os.path.join(root, n)
                if p not in listed:
                    problems.append("present but not listed: " + p)
    dists[d.metadata["Name"]] = {"files": sorted(listed), "problems": problems}
ld = run("/sbin/ldconfig", "-p")
cached = [l.split(" => ")[1] for l in ld[1].splitlines() if " => " in l]
print(json.dumps({
    "answer": demo_app.answer(),
    "demo": run("/usr/local/bin/demo"),
    "dists": dists,
    "ldconfig": ld[0],
    "ld_cached": len(cached),
    "ld_missing": [p for p in cached if not os.path.exists(p)],
}))
"#;

struct Built {
    rootfs: PathBuf,
    files: BTreeSet<String>,
    /// What the build said on stderr.
    log: String,
    manifest: String,
}

fn build(sb: &Sandbox, out: &str) -> Built {
    build_with(sb, out, "cache")
}

fn build_with(sb: &Sandbox, out: &str, cache: &str) -> Built {
    let mut cmd = sb.gpuimg_with_cache(&sb.join(cache));
    cmd.env("SOURCE_DATE_EPOCH", "1700000000")
        .args(["build", "--locked", "-o"])
        .arg(sb.join(out))
        .arg(sb.join(format!("{out}.yaml")));
    let ran = run(&mut cmd);
    let log = String::from_utf8_lossy(&ran.stderr).into_owned();
    assert!(ran.status.success(), "{}", describe(&cmd, &ran));
    let bundle = sb.join(format!("{out}-bundle"));
    run_ok(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", sb.join(out).display()))
            .arg(&bundle),
    );
    let rootfs = bundle.join("rootfs");
    let files = tree(&rootfs)
        .into_iter()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    let index: serde_json::Value =
        serde_json::from_str(&read(&sb.join(out).join("index.json"))).unwrap();
    let manifest = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    Built {
        rootfs,
        files,
        log,
        manifest,
    }
}

/// Whether some class of the profile names `path` (the test's own statement of the classes,
/// independent of gpuimg's matchers).
fn some_class_names(path: &str) -> bool {
    let in_site = path.starts_with(&format!("{SITE}/")) || path.contains("/dist-packages/");
    let name = path.rsplit('/').next().unwrap();
    let under = |d: &str| path == d || path.starts_with(&format!("{d}/"));
    under("usr/share/doc")
        || under("usr/share/info")
        || under("usr/share/man")
        || under("usr/share/locale")
        || under("usr/share/i18n/locales")
        || under("usr/include")
        || (path.contains("/lib") && name.ends_with(".a"))
        || path.contains("/pkgconfig")
        || path.contains("/cmake")
        || name.ends_with(".pc")
        || name.ends_with(".la")
        || (in_site
            && (path.contains("/include")
                || path.contains("/tests")
                || path.contains("/__pycache__")
                || name.ends_with(".pyi")
                || name.ends_with(".debug")
                || path.contains("triton/backends/amd/lib")
                || name == "cuobjdump"
                || name == "nvdisasm"))
}

#[test]
fn every_class_on_a_real_image_keeps_the_workload_and_the_records_true() {
    require("umoci");
    require("dpkg-query");
    let sb = Sandbox::new();
    let lib = compiled_library(sb.path());
    let server = serve(&wheel_index(sb.path(), &wheels(&lib)));
    let url = format!("{}/simple/", server.url);
    write(&sb.join("plain.yaml"), &profile(&url, "[]"));
    write(&sb.join("stripped.yaml"), &profile(&url, CLASSES));
    run_ok(
        sb.gpuimg_with_cache(&sb.join("cache"))
            .arg("lock")
            .arg(sb.join("plain.yaml")),
    );
    std::fs::copy(sb.join("plain.lock.json"), sb.join("stripped.lock.json")).unwrap();

    let plain = build(&sb, "plain");
    let stripped = build(&sb, "stripped");

    // The apt packages were stripped while they streamed into their layers exactly as the
    // whole tree was: no layer had to be written again after the unpack.
    let streamed = |b: &Built| b.log.matches("written while unpacking").count();
    assert!(streamed(&stripped) > 0, "{}", stripped.log);
    assert_eq!(streamed(&stripped), streamed(&plain), "{}", stripped.log);
    assert!(
        !stripped.log.contains("written after the unpack"),
        "{}",
        stripped.log
    );
    assert!(
        stripped.log.contains("RECORDs rewritten") && stripped.log.contains("dpkg lists"),
        "{}",
        stripped.log
    );

    // What went: only what a class names, and something of every class.
    assert!(stripped.files.is_subset(&plain.files));
    let removed: Vec<&String> = plain.files.difference(&stripped.files).collect();
    let unnamed: Vec<&&String> = removed.iter().filter(|p| !some_class_names(p)).collect();
    assert!(unnamed.is_empty(), "removed by no class: {unnamed:?}");
    let gone = |p: &str| plain.files.contains(p) && !stripped.files.contains(p);
    let kept = |p: &str| stripped.files.contains(p);
    let site = |rel: &str| format!("{SITE}/{rel}");
    for p in [
        "usr/share/man/man1/python3.11.1.gz".to_string(),
        "usr/share/doc/python3.11/changelog.Debian.gz".to_string(),
        "usr/include/stdio.h".to_string(),
        "usr/lib/x86_64-linux-gnu/libc.a".to_string(),
        "usr/lib/x86_64-linux-gnu/pkgconfig/libcrypt.pc".to_string(),
        site("demo_app/include/demo.h"),
        site("demo_app/lib/libdemo_static.a"),
        site("demo_app/lib/pkgconfig/demo.pc"),
        site("demo_app/share/cmake/Demo/DemoConfig.cmake"),
        site("demo_app/libdemo.so.debug"),
        site("demo_app/tests/test_demo.py"),
        site("demo_app/__init__.pyi"),
        site("demo_app/__pycache__/cli.cpython-312.pyc"),
        site("triton/backends/amd/lib/ocml.bc"),
        site("triton/backends/nvidia/bin/cuobjdump"),
        site("triton/backends/nvidia/bin/nvdisasm"),
        site("triton/_C/include/triton/x.h"),
        site("stubs_only/__init__.pyi"),
        site("stubs_only/tests/test_x.py"),
    ] {
        assert!(gone(&p), "{p} should be stripped");
    }
    assert!(
        removed.iter().any(|p| p.starts_with("usr/share/locale/")),
        "locales"
    );
    for p in [
        "usr/share/doc/python3.11/copyright".to_string(),
        "usr/share/doc/libc-l10n/copyright".to_string(),
        site("demo_app/libdemo.so"),
        site("demo_app/py.typed"),
        site("demo_app/tests/LICENSE"),
        site("demo_app/__pycache__/cli.cpython-311.pyc"),
        site("triton/backends/nvidia/bin/ptxas"),
        site("triton/backends/nvidia/include/cuda.h"),
        site("triton/backends/nvidia/driver.py"),
        site("stubs_only-1.0.dist-info/RECORD"),
        site("stubs_only-1.0.dist-info/METADATA"),
    ] {
        assert!(kept(&p), "{p} should stay");
    }

    // dpkg's own tools on the unpacked root: every listed path is there; every package is
    // still installed, libc-l10n too (all its files but the copyright were stripped).
    let admindir = stripped.rootfs.join("var/lib/dpkg");
    let status = run_ok(
        Command::new("dpkg-query")
            .arg(format!("--admindir={}", admindir.display()))
            .args(["-W", "-f", "${Package} ${db:Status-Status}\n"]),
    );
    let plain_status = run_ok(
        Command::new("dpkg-query")
            .arg(format!(
                "--admindir={}",
                plain.rootfs.join("var/lib/dpkg").display()
            ))
            .args(["-W", "-f", "${Package} ${db:Status-Status}\n"]),
    );
    assert_eq!(status, plain_status);
    assert!(status.contains("libc-l10n installed"), "{status}");
    for pkg in status.lines().map(|l| l.split(' ').next().unwrap()) {
        let listed = run_ok(
            Command::new("dpkg-query")
                .arg(format!("--admindir={}", admindir.display()))
                .args(["-L", pkg]),
        );
        for p in listed.lines().filter(|l| l.starts_with('/') && *l != "/.") {
            let rel = p.trim_start_matches('/');
            let resolved = resolve_in(&stripped.rootfs, rel);
            assert!(
                std::fs::symlink_metadata(&resolved).is_ok(),
                "dpkg -L {pkg} lists {p}, which is not in the image"
            );
        }
    }
    let verify = run(Command::new("dpkg")
        .arg(format!("--root={}", stripped.rootfs.display()))
        .arg("--verify"));
    let text = String::from_utf8_lossy(&verify.stdout).into_owned()
        + &String::from_utf8_lossy(&verify.stderr);
    assert!(!text.contains("missing"), "dpkg --verify: {text}");

    // One more package: the cached components' packages are replayed from their sketches
    // without writing their files, yet `metadata`'s lists are what a build with an empty
    // cache writes (the same image), and true.
    write(
        &sb.join("grown.yaml"),
        &profile_with(&url, CLASSES, ", netbase"),
    );
    run_ok(
        sb.gpuimg_with_cache(&sb.join("cache"))
            .arg("lock")
            .arg(sb.join("grown.yaml")),
    );
    let grown = build(&sb, "grown");
    assert!(grown.log.contains("unchanged"), "{}", grown.log);
    std::fs::copy(sb.join("grown.yaml"), sb.join("fresh.yaml")).unwrap();
    std::fs::copy(sb.join("grown.lock.json"), sb.join("fresh.lock.json")).unwrap();
    let fresh = build_with(&sb, "fresh", "cache-fresh");
    assert_eq!(grown.manifest, fresh.manifest, "{}", grown.log);
    let verify = run(Command::new("dpkg")
        .arg(format!("--root={}", grown.rootfs.display()))
        .arg("--verify"));
    let text = String::from_utf8_lossy(&verify.stdout).into_owned()
        + &String::from_utf8_lossy(&verify.stderr);
    assert!(!text.contains("missing"), "dpkg --verify: {text}");

    // The workload runs; the records describe the files that are there.
    let ran = podman_run_with(
        sb.path(),
        &[],
        &format!("oci:{}:latest", sb.join("stripped").display()),
        &[CHECKS],
    );
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let out = String::from_utf8_lossy(&ran.stdout);
    let r: serde_json::Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(r["answer"], 42, "{r}");
    assert_eq!(r["demo"][0], 0, "{r}");
    assert_eq!(r["demo"][1], "demo 42\n", "{r}");
    let dists = r["dists"].as_object().unwrap();
    let names: BTreeSet<&str> = dists.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from(["demo-app", "stubs-only", "triton"]),
        "every distribution stays recorded"
    );
    for (name, d) in dists {
        assert_eq!(d["problems"], serde_json::json!([]), "{name}: {d}");
    }
    let stubs: Vec<&str> = dists["stubs-only"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        stubs
            .iter()
            .all(|f| f.contains("stubs_only-1.0.dist-info/")),
        "{stubs:?}"
    );
    assert_eq!(r["ldconfig"], 0, "{r}");
    assert!(r["ld_cached"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["ld_missing"], serde_json::json!([]), "{r}");
}

/// `rel` inside `root`, its first component followed when it is a symlink (merged /usr).
fn resolve_in(root: &Path, rel: &str) -> PathBuf {
    let (first, rest) = rel.split_once('/').unwrap_or((rel, ""));
    let first_path = root.join(first);
    match std::fs::read_link(&first_path) {
        Ok(t) if !rest.is_empty() => root
            .join(t.to_string_lossy().trim_start_matches('/'))
            .join(rest),
        _ => root.join(rel),
    }
}

/// A rootfs base is stripped by the same classes, its pip-installed RECORD and dpkg lists
/// kept true; `device-code` without `host.gpus` is refused with one line, exit 2.
#[test]
fn a_rootfs_is_stripped_with_its_records_and_device_code_needs_gpus() {
    require("umoci");
    let sb = Sandbox::new();
    let root = sb.join("rootfs");
    let site = "usr/lib/python3/dist-packages";
    let record = "foo/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n\
                  foo/tests/test_foo.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n\
                  ../../../bin/foo,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n\
                  foo-1.0.dist-info/RECORD,,\n";
    write(&root.join(site).join("foo/__init__.py"), "");
    write(&root.join(site).join("foo/tests/test_foo.py"), "");
    write(&root.join(site).join("foo-1.0.dist-info/RECORD"), record);
    write(&root.join("usr/bin/foo"), "");
    write(&root.join("usr/share/man/man1/foo.1.gz"), "man");
    write(
        &root.join("var/lib/dpkg/info/foo.list"),
        "/.\n/usr\n/usr/bin/foo\n/usr/share/man/man1/foo.1.gz\n",
    );
    write(
        &root.join("var/lib/dpkg/info/foo.md5sums"),
        "0123  usr/bin/foo\n4567  usr/share/man/man1/foo.1.gz\n",
    );
    write(
        &sb.join("p.yaml"),
        "name: r\nbase:\n  rootfs: ./rootfs\nstrip: [man, tests]\n",
    );
    run_ok(
        sb.gpuimg()
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .args(["build", "-o"])
            .arg(sb.join("out"))
            .arg(sb.join("p.yaml")),
    );
    let bundle = sb.join("bundle");
    run_ok(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", sb.join("out").display()))
            .arg(&bundle),
    );
    let got = bundle.join("rootfs");
    assert!(!got.join(site).join("foo/tests").exists());
    assert!(!got.join("usr/share/man/man1/foo.1.gz").exists());
    assert_eq!(
        read(&got.join(site).join("foo-1.0.dist-info/RECORD")),
        "foo/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n\
         ../../../bin/foo,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n\
         foo-1.0.dist-info/RECORD,,\n"
    );
    assert_eq!(
        read(&got.join("var/lib/dpkg/info/foo.list")),
        "/.\n/usr\n/usr/bin/foo\n"
    );
    assert_eq!(
        read(&got.join("var/lib/dpkg/info/foo.md5sums")),
        "0123  usr/bin/foo\n"
    );

    // device-code prunes to the profile's GPUs: a profile that names none is refused.
    write(
        &sb.join("q.yaml"),
        "name: r\nbase:\n  rootfs: ./rootfs\nstrip: [docs, device-code]\n",
    );
    let out = run(sb
        .gpuimg()
        .args(["build", "-o"])
        .arg(sb.join("out-q"))
        .arg(sb.join("q.yaml")));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: `strip: [device-code]` prunes device code to the profile's GPUs, and it names none: list them in `host.gpus`"),
        "{err}"
    );
    assert!(!sb.join("out-q").exists());
}

/// Each class alone on a rootfs holding a sample of every class: it removes its own samples
/// and nothing else (files compared; directories go with their files).
#[test]
fn each_class_alone_removes_its_own_files_and_no_other() {
    require("umoci");
    let sb = Sandbox::new();
    let root = sb.join("rootfs");
    let site = |rel: &str| format!("usr/lib/python3/dist-packages/{rel}");
    let samples: Vec<(&str, Vec<String>)> = vec![
        ("docs", vec!["usr/share/doc/p/README".into()]),
        ("man", vec!["usr/share/man/man1/p.1.gz".into()]),
        (
            "locales",
            vec!["usr/share/locale/de/LC_MESSAGES/p.mo".into()],
        ),
        (
            "headers",
            vec!["usr/include/p.h".into(), site("pkg/include/p.h")],
        ),
        (
            "static-libs",
            vec!["usr/lib/x86_64-linux-gnu/libp.a".into(), site("pkg/libp.a")],
        ),
        (
            "debug-symbols",
            vec!["usr/lib/debug/.build-id/ab/cdef.debug".into()],
        ),
        (
            "build-files",
            vec![
                "usr/lib/x86_64-linux-gnu/pkgconfig/p.pc".into(),
                site("pkg/share/cmake/P/PConfig.cmake"),
                site("triton/backends/nvidia/bin/cuobjdump"),
            ],
        ),
        (
            "python-caches",
            vec![site("pkg/__pycache__/m.cpython-311.pyc")],
        ),
        ("tests", vec![site("pkg/tests/test_m.py")]),
        ("type-stubs", vec![site("pkg/m.pyi")]),
        (
            "other-gpu-backends",
            vec![site("triton/backends/amd/lib/ocml.bc")],
        ),
    ];
    let keepers = [
        "usr/share/doc/p/copyright".to_string(),
        site("pkg/m.py"),
        site("pkg/py.typed"),
        site("triton/backends/nvidia/bin/ptxas"),
        site("triton/backends/nvidia/include/cuda.h"),
        site("torch/testing/__init__.py"),
    ];
    for p in samples.iter().flat_map(|(_, ps)| ps).chain(&keepers) {
        write(&root.join(p), "x\n");
    }
    let files = |out: &str, strip: &str| -> BTreeSet<String> {
        write(
            &sb.join(format!("{out}.yaml")),
            &format!("name: r\nbase:\n  rootfs: ./rootfs\nstrip: [{strip}]\n"),
        );
        run_ok(
            sb.gpuimg()
                .env("SOURCE_DATE_EPOCH", "1700000000")
                .args(["build", "-o"])
                .arg(sb.join(out))
                .arg(sb.join(format!("{out}.yaml"))),
        );
        let bundle = sb.join(format!("{out}-bundle"));
        run_ok(
            Command::new("umoci")
                .args(["unpack", "--rootless", "--image"])
                .arg(format!("{}:latest", sb.join(out).display()))
                .arg(&bundle),
        );
        let rootfs = bundle.join("rootfs");
        tree(&rootfs)
            .into_iter()
            .map(|l| l.split(' ').next().unwrap().to_string())
            .filter(|p| rootfs.join(p).is_file())
            .collect()
    };
    let all = files("plain", "");
    for (class, own) in &samples {
        let kept = files(&format!("only-{class}"), class);
        let gone: BTreeSet<String> = all.difference(&kept).cloned().collect();
        let want: BTreeSet<String> = own.iter().cloned().collect();
        assert_eq!(gone, want, "`strip: [{class}]`");
    }
}

/// `unused-libraries` on the real PyTorch stack from the host's index (torch 2.9.1, CUDA 12.8,
/// with NVIDIA's CUDA, cuDNN, cuBLAS and NCCL wheels; the self-test on), one cache for every
/// build: `inspect --unused` on the unstripped image lists exactly what the class removes;
/// neither the CUDA runtime nor cuBLAS(Lt) is among them; the build warns about no library
/// only plugins need (`libibverbs`, `libquadmath`). cuDNN and cuBLAS alone, without the
/// self-test: cuBLASLt is used (cuDNN's engines load it by name).
#[test]
fn unused_libraries_of_the_real_pytorch_stack_are_what_inspect_previews() {
    let sb = Sandbox::new();
    let base = "base:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [base-files, base-passwd, libc6, libstdc++6, python3]\n";
    let build = |name: &str, rest: &str| -> (PathBuf, String) {
        let profile = sb.join(format!("{name}.yaml"));
        write(&profile, &format!("name: {name}\n{base}{rest}"));
        let out = sb.join(name);
        let mut cmd = with_host_index(sb.gpuimg_with_cache(&sb.join("cache")));
        cmd.args(["build", "-o"]).arg(&out).arg(&profile);
        let ran = run(&mut cmd);
        assert!(ran.status.success(), "{}", describe(&cmd, &ran));
        (out, String::from_utf8_lossy(&ran.stderr).into_owned())
    };
    let torch = |strip: &str| {
        format!("host:\n  gpus: [H100]\n  driver: \">=580\"\nstack:\n  pytorch: \"2.9.1\"\n  python: \"3.11\"\npython:\n  packages: []\nselftest: {{level: quick}}\nstrip: [{strip}]\n")
    };
    let unused = |out: &Path| -> (BTreeSet<String>, serde_json::Value) {
        let json = run_ok(sb.gpuimg().args(["inspect", "--unused", "--json"]).arg(out));
        let report: serde_json::Value = serde_json::from_str(&json).unwrap();
        let paths = (report["unused"].as_array().unwrap().iter())
            .map(|u| u["path"].as_str().unwrap().to_string())
            .collect();
        (paths, report)
    };
    let listed = |paths: &BTreeSet<String>, name: &str| {
        paths.iter().any(|p| p.ends_with(&format!("/{name}")))
    };
    let (plain, log) = build("plain", &torch("docs"));
    for name in ["libibverbs", "libquadmath"] {
        assert!(!log.contains(&format!("`{name}")), "{log}");
    }
    let (preview, report) = unused(&plain);
    for used in ["libcudart.so.12", "libcublasLt.so.12", "libcublas.so.12"] {
        assert!(!listed(&preview, used), "{used} is used: {report}");
    }
    let missing = report["missing"].to_string();
    assert!(
        !missing.contains("libibverbs") && !missing.contains("libquadmath"),
        "{report}"
    );

    let (stripped, _) = build("stripped", &torch("docs, unused-libraries"));
    let files = |out: &Path| -> BTreeSet<String> {
        let json = run_ok(sb.gpuimg().args(["inspect", "--files", "--json"]).arg(out));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        (v["files"].as_array().unwrap().iter())
            .map(|f| f["path"].as_str().unwrap().to_string())
            .collect()
    };
    let removed: BTreeSet<String> = files(&plain)
        .difference(&files(&stripped))
        .cloned()
        .collect();
    assert_eq!(
        removed, preview,
        "what strip removes is what the preview lists"
    );

    let (cudnn, _) = build(
        "cudnn",
        "python:\n  packages: [\"nvidia-cudnn-cu12==9.10.2.21\", \"nvidia-cublas-cu12==12.8.4.1\"]\nselftest: {enabled: false}\nstrip: [docs]\n",
    );
    let (preview, report) = unused(&cudnn);
    assert!(!listed(&preview, "libcublasLt.so.12"), "{report}");
}
