//! `python:` end to end through the CLI, with no network: wheels the test writes, served by a
//! loopback PEP 503 index, installed for the Python a rootfs's dpkg database names (3.11,
//! glibc 2.36). `lock` records the wheels with no URL; `build --locked` puts them in their own
//! `python-packages` layer, checked after `umoci unpack` (site directory, scripts with the
//! image's `#!`, INSTALLER/REQUESTED/RECORD) and through `inspect --files` (owners); a rebuild
//! with an emptied cache gives the same digest. Refusals: a stale lock, `stack.python` the
//! base lacks (exit 1), `python3-minimal` alone and a rootfs without a dpkg database (exit 2).

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

const SITE: &str = "usr/local/lib/python3.11/dist-packages";

const BOOKWORM_STATUS: &str = "\
Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u10\n\n\
Package: python3\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-1+b1\n\n\
Package: python3.11\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n\n\
Package: python3.11-minimal\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n\n\
Package: libpython3.11-stdlib\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n";

/// A root filesystem directory whose dpkg database says `status`.
fn rootfs(dir: &Path, status: &str) -> PathBuf {
    let root = dir.join("rootfs");
    write(&root.join("var/lib/dpkg/status"), status);
    write(&root.join("etc/hostname"), "py\n");
    root
}

fn wheels() -> Vec<WheelSpec> {
    vec![
        WheelSpec::new("demo-app", "1.0")
            .file("demo_app/__init__.py", "from dep_lib import VALUE\n")
            .file("demo_app/cli.py", "def main():\n    print('demo')\n")
            .entry_points("[console_scripts]\ndemo = demo_app.cli:main\n")
            .requires("dep-lib>=2"),
        WheelSpec::new("dep-lib", "2.1").file("dep_lib/__init__.py", "VALUE = 42\n"),
        WheelSpec::new("dep-lib", "1.0").file("dep_lib/__init__.py", "VALUE = 1\n"),
    ]
}

/// A sandbox with the rootfs, the index served, and a profile asking for `packages`.
struct Setup {
    sb: Sandbox,
    profile: PathBuf,
    _server: Server,
}

fn setup(status: &str, python_extra: &str, top_extra: &str) -> Setup {
    let sb = Sandbox::new();
    rootfs(sb.path(), status);
    let server = serve(&wheel_index(sb.path(), &wheels()));
    let url = format!("{}/simple/", server.url);
    let profile = sb.join("py.yaml");
    write(
        &profile,
        &format!(
            "name: py\nbase:\n  rootfs: ./rootfs\nselftest: {{enabled: false}}\n{top_extra}python:\n  index: {url}\n  packages: [\"demo-app\"]\n{python_extra}"
        ),
    );
    Setup {
        sb,
        profile,
        _server: server,
    }
}

fn unpack(sb: &Sandbox, out: &Path, name: &str) -> PathBuf {
    require("umoci");
    let bundle = sb.join(name);
    run_ok(
        std::process::Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", out.display()))
            .arg(&bundle),
    );
    bundle.join("rootfs")
}

#[test]
fn locked_wheels_build_into_their_own_layer_installed_for_the_images_python() {
    let s = setup(BOOKWORM_STATUS, "", "");
    let sb = &s.sb;
    run_ok(sb.gpuimg().arg("lock").arg(&s.profile));
    let lock_text = read(&sb.join("py.lock.json"));
    assert!(
        !lock_text.contains("127.0.0.1"),
        "no index URL in the lock:\n{lock_text}"
    );
    let lock: serde_json::Value = serde_json::from_str(&lock_text).unwrap();
    let wheels: Vec<&serde_json::Value> = lock["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "wheel")
        .collect();
    let got: Vec<(&str, &str, bool)> = wheels
        .iter()
        .map(|w| {
            (
                w["name"].as_str().unwrap(),
                w["version"].as_str().unwrap(),
                w["requested"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("demo-app", "1.0", true), ("dep-lib", "2.1", false)]);
    assert_eq!(
        wheels[1]["required_by"],
        serde_json::json!(["demo-app 1.0"])
    );
    assert_eq!(wheels[0]["index"], "index", "the profile's index, by name");
    assert_eq!(wheels[1]["filename"], "dep_lib-2.1-py3-none-any.whl");
    assert!(wheels[1]["sha256"].as_str().unwrap().starts_with("sha256:"));
    assert!(lock["inputs"]["keys"]["python.packages"].is_string());

    let out = sb.join("out");
    let json = run_ok(
        sb.gpuimg()
            .args(["build", "--locked", "--json", "-o"])
            .arg(&out)
            .arg(&s.profile),
    );
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let components: Vec<&str> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    // The SBOM comes last, in its own layer.
    assert_eq!(components, ["base", "python-packages", "sbom"]);
    assert_eq!(v["wheels"], 2);

    let root = unpack(sb, &out, "bundle");
    let site = root.join(SITE);
    assert_eq!(read(&site.join("dep_lib/__init__.py")), "VALUE = 42\n");
    let launcher = root.join("usr/local/bin/demo");
    assert!(read(&launcher).starts_with("#!/usr/bin/python3.11\n"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&launcher).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let di = site.join("demo_app-1.0.dist-info");
    assert_eq!(read(&di.join("INSTALLER")), "gpuimg\n");
    assert!(di.join("REQUESTED").is_file());
    assert!(!site.join("dep_lib-2.1.dist-info/REQUESTED").exists());
    let record = read(&di.join("RECORD"));
    assert!(record.contains("../../../bin/demo,sha256="), "{record}");
    // Nothing of the build host: no staging path, no cache path anywhere.
    for p in [
        sb.path().to_string_lossy().into_owned(),
        "gpuimg-tmp".to_string(),
    ] {
        let listing = tree(&root);
        assert!(
            !listing.iter().any(|l| l.contains(&p)),
            "{p} in {listing:?}"
        );
        for f in walk_files(&root.join("usr/local")) {
            let data = std::fs::read(&f).unwrap();
            assert!(
                !data.windows(p.len()).any(|w| w == p.as_bytes()),
                "`{}` holds `{p}`",
                f.display()
            );
        }
    }

    // inspect --files names each file's wheel.
    let files = run_ok(sb.gpuimg().args(["inspect", "--files", "--json"]).arg(&out));
    let files: serde_json::Value = serde_json::from_str(&files).unwrap();
    let owner = |path: &str| {
        files["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == path)
            .unwrap_or_else(|| panic!("no {path}"))["owner"]
            .clone()
    };
    assert_eq!(
        owner(&format!("/{SITE}/dep_lib/__init__.py")),
        "wheel dep-lib"
    );
    assert_eq!(owner("/usr/local/bin/demo"), "wheel demo-app");
    assert_eq!(
        owner(&format!("/{SITE}/demo_app-1.0.dist-info/RECORD")),
        "wheel demo-app"
    );

    // The same lock with an emptied cache: the same image.
    std::fs::remove_dir_all(sb.cache()).unwrap();
    let again = run_ok(
        sb.gpuimg()
            .args(["build", "--locked", "--json", "-o"])
            .arg(sb.join("out2"))
            .arg(&s.profile),
    );
    assert_eq!(manifest_digest(&again), manifest_digest(&json));
    // And offline from that cache.
    let offline = run_ok(
        sb.gpuimg()
            .args(["build", "--locked", "--offline", "--json", "-o"])
            .arg(sb.join("out3"))
            .arg(&s.profile),
    );
    assert_eq!(manifest_digest(&offline), manifest_digest(&json));

    // A changed requirement makes the lock stale.
    let edited = read(&s.profile).replace("[\"demo-app\"]", "[\"demo-app\", \"dep-lib<3\"]");
    write(&s.profile, &edited);
    let o = run(sb
        .gpuimg()
        .args(["build", "--locked", "-o"])
        .arg(sb.join("out4"))
        .arg(&s.profile));
    assert_eq!(o.status.code(), Some(2), "{}", describe_out(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("stale") && err.contains("python.packages"),
        "{err}"
    );
    assert_error(&err, &[sb.path()]);
}

/// Issue 34, item 9: a build prints each line once. The wheels are fetched for the lock's
/// resolution, then read from the cache for their layer and again for the install: each
/// read printed its wheels' `cached` lines and a `wheels cached` line again.
#[test]
fn a_python_build_prints_each_line_once() {
    let s = setup(BOOKWORM_STATUS, "", "");
    let o = run(s
        .sb
        .gpuimg()
        .args(["build", "-o"])
        .arg(s.sb.join("out"))
        .arg(&s.profile));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("dep_lib-2.1-py3-none-any.whl"), "{err}");
    let mut seen = std::collections::HashSet::new();
    for l in err.lines().filter(|l| !l.trim().is_empty()) {
        assert!(seen.insert(l), "`{l}` repeats:\n{err}");
    }
}

fn describe_out(o: &std::process::Output) -> String {
    format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// `gpuimg build` of the setup's profile: (exit code, stderr).
fn build_fails(s: &Setup) -> (Option<i32>, String) {
    let o = run(s
        .sb
        .gpuimg()
        .args(["build", "-o"])
        .arg(s.sb.join("out"))
        .arg(&s.profile));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_error(&err, &[s.sb.path()]);
    (o.status.code(), err)
}

#[test]
fn a_stack_python_the_base_does_not_have_is_a_no_naming_what_it_has() {
    let s = setup(BOOKWORM_STATUS, "", "stack:\n  python: \"3.12\"\n");
    let (code, err) = build_fails(&s);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Python 3.12")
            && err.contains("Python 3.11")
            && err.contains("python3.11-minimal 3.11.2-6+deb12u6"),
        "{err}"
    );
    let o = run(s.sb.gpuimg().arg("lock").arg(&s.profile));
    assert_eq!(o.status.code(), Some(1), "{}", describe_out(&o));
}

#[test]
fn python3_minimal_alone_is_refused_naming_python3() {
    let minimal = "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\n\n\
                   Package: python3-minimal\nStatus: install ok installed\nVersion: 3.11.2-1+b1\n\n\
                   Package: python3.11-minimal\nStatus: install ok installed\nVersion: 3.11.2-6\n";
    let s = setup(minimal, "", "");
    let (code, err) = build_fails(&s);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("has only `python3-minimal`")
            && err.contains("add `python3`")
            && err.contains("libpython3.11-stdlib"),
        "{err}"
    );
}

#[test]
fn a_rootfs_without_a_dpkg_database_cannot_host_python_packages() {
    let s = setup(BOOKWORM_STATUS, "", "");
    std::fs::remove_file(s.sb.join("rootfs/var/lib/dpkg/status")).unwrap();
    let (code, err) = build_fails(&s);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("no dpkg database") && err.contains("hint:"),
        "{err}"
    );
}

#[test]
fn compile_writes_pyc_files_into_the_layer() {
    let s = setup(BOOKWORM_STATUS, "  compile: true\n", "");
    let out = s.sb.join("out");
    run_ok(
        s.sb.gpuimg()
            .args(["build", "-o"])
            .arg(&out)
            .arg(&s.profile),
    );
    let root = unpack(&s.sb, &out, "bundle");
    let pyc = root
        .join(SITE)
        .join("dep_lib/__pycache__/__init__.cpython-311.pyc");
    let data = std::fs::read(&pyc).unwrap_or_else(|e| panic!("{}: {e}", pyc.display()));
    assert_eq!(&data[..2], &3495u16.to_le_bytes());
    assert_eq!(&data[4..8], &[1, 0, 0, 0], "unchecked-hash");
    let record = read(&root.join(SITE).join("dep_lib-2.1.dist-info/RECORD"));
    assert!(
        record.contains("dep_lib/__pycache__/__init__.cpython-311.pyc,sha256="),
        "{record}"
    );
}

/// The wheels of a lock file, as (name, version, filename, sha256).
fn locked_wheels(lock: &Path) -> Vec<(String, String, String, String)> {
    let v: serde_json::Value = serde_json::from_str(&read(lock)).unwrap();
    v["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "wheel")
        .map(|w| {
            let s = |k: &str| w[k].as_str().unwrap().to_string();
            (s("name"), s("version"), s("filename"), s("sha256"))
        })
        .collect()
}

#[test]
fn lock_exports_a_pylock_that_locks_the_same_set_again() {
    let s = setup(BOOKWORM_STATUS, "", "");
    let sb = &s.sb;
    // A user part in the index URL must never reach the export.
    let profile = read(&s.profile).replace("http://", "http://reader:s3cret@");
    write(&s.profile, &profile);
    let json = run_ok(
        sb.gpuimg()
            .args(["lock", "--export", "pylock", "--json"])
            .arg(&s.profile),
    );
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let exported = PathBuf::from(v["exported"].as_str().unwrap());
    assert_eq!(exported, sb.join("pylock.toml"));
    let text = read(&exported);
    assert!(
        !text.contains("s3cret") && !text.contains("reader@"),
        "{text}"
    );
    let doc: toml_edit::DocumentMut = text.parse().unwrap();
    assert_eq!(doc["lock-version"].as_str(), Some("1.0"));
    assert_eq!(doc["created-by"].as_str(), Some("gpuimg"));
    assert_eq!(doc["requires-python"].as_str(), Some("==3.11.2"));
    let locked = locked_wheels(&sb.join("py.lock.json"));
    let packages = doc["packages"].as_array_of_tables().unwrap();
    assert_eq!(packages.len(), locked.len());
    let index = profile
        .lines()
        .find_map(|l| l.trim().strip_prefix("index: "))
        .unwrap()
        .replace("reader:s3cret@", "");
    for (p, (name, version, filename, sha256)) in packages.iter().zip(&locked) {
        assert_eq!(p["name"].as_str(), Some(name.as_str()));
        assert_eq!(p["version"].as_str(), Some(version.as_str()));
        assert_eq!(p["index"].as_str(), Some(index.as_str()));
        let wheels = p["wheels"].as_array().unwrap();
        assert_eq!(wheels.len(), 1, "one locked wheel per package");
        let w = wheels.get(0).unwrap().as_inline_table().unwrap();
        assert_eq!(
            w.get("name").and_then(|n| n.as_str()),
            Some(filename.as_str())
        );
        // The URL the index lists for that file, resolved against the page.
        let url = w.get("url").and_then(|u| u.as_str()).unwrap();
        let base = index.trim_end_matches("/simple/");
        assert_eq!(url, format!("{base}/files/{filename}"));
        let bytes = std::fs::read(sb.join("index/files").join(filename)).unwrap();
        assert_eq!(
            w.get("size").and_then(|n| n.as_integer()),
            Some(bytes.len() as i64)
        );
        let hash = w
            .get("hashes")
            .and_then(|h| h.as_inline_table())
            .and_then(|h| h.get("sha256"))
            .and_then(|h| h.as_str())
            .unwrap();
        assert_eq!(format!("sha256:{hash}"), *sha256);
        assert_eq!(gpuimg_store::digest::Digest::of(&bytes).hex(), hash);
    }

    // The export read back as `python.requirements` locks exactly the same files.
    let again = sb.join("again.yaml");
    write(
        &again,
        &profile
            .replace("packages: [\"demo-app\"]", "requirements: pylock.toml")
            .replace("name: py", "name: again"),
    );
    run_ok(sb.gpuimg().arg("lock").arg(&again));
    assert_eq!(locked_wheels(&sb.join("again.lock.json")), locked);

    // Nothing Python to export: one line, exit 2, and no file.
    let plain = sb.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let bare = plain.join("bare.yaml");
    write(
        &bare,
        "name: bare\nbase:\n  rootfs: ../rootfs\nselftest: {enabled: false}\n",
    );
    let o = run(sb.gpuimg().args(["lock", "--export", "pylock"]).arg(&bare));
    assert_eq!(o.status.code(), Some(2), "{}", describe_out(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no `python:` packages"),
        "{}",
        describe_out(&o)
    );
    assert_error(&String::from_utf8_lossy(&o.stderr), &[sb.path()]);
    assert!(!plain.join("pylock.toml").exists());
}

/// Issue 33, class 1: code in the directory gpuimg is started from never runs. The build's
/// working directory holds a `py_compile.py`, an `importlib/` package and a `python3.11` on a
/// relative `PATH` entry, each of which would leave a mark; the compiled image is built, the
/// real interpreter's `.pyc` are in it, and no mark exists.
#[test]
fn code_in_the_working_directory_never_runs_when_compiling() {
    let s = setup(BOOKWORM_STATUS, "  compile: true\n", "");
    let mark = s.sb.join("ran");
    let plant = format!(
        "open({:?}, 'a').write(__name__ + '\\n')\n",
        mark.display().to_string()
    );
    write(&s.sb.join("py_compile.py"), &plant);
    write(&s.sb.join("importlib/__init__.py"), &plant);
    write(&s.sb.join("site.py"), &plant);
    let fake = s.sb.join("python3.11");
    write(
        &fake,
        &format!("#!/bin/sh\necho fake >> {}\nexit 1\n", mark.display()),
    );
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(".:bin::{}", std::env::var("PATH").unwrap_or_default());
    let out = s.sb.join("out");
    run_ok(
        s.sb.gpuimg()
            .env("PATH", path)
            .args(["build", "-o"])
            .arg(&out)
            .arg(&s.profile),
    );
    assert!(!mark.exists(), "ran: {}", read(&mark));
    let root = unpack(&s.sb, &out, "bundle");
    let pyc = root
        .join(SITE)
        .join("dep_lib/__pycache__/__init__.cpython-311.pyc");
    assert!(pyc.is_file(), "{}", pyc.display());
}
