//! Bad input: each case gives one clear line on stderr, exit code 2, no output written and no
//! panic. Tarballs with hostile entries are crafted with Python's tarfile module.

use crate::common;

use std::path::Path;

use common::*;

/// Build `profile` and assert the failure contract; returns the stderr line.
fn fails_cleanly(dir: &Sandbox, profile: &str, needle: &str) -> String {
    let p = dir.join("profile.yaml");
    write(&p, profile);
    let out_dir = dir.join("out");
    let out = run(dir
        .gpuimg()
        .env_remove("GPUIMG_TEST_UNSET")
        .arg("build")
        .arg(&p)
        .arg("-o")
        .arg(&out_dir));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(needle), "expected `{needle}` in: {stderr}");
    assert_error(&stderr, &[dir.path()]);
    assert!(!out_dir.exists(), "output written despite the error");
    // No staging leftovers beside the output either.
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("gpuimg-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    stderr
}

/// Make a tarball with Python's tarfile; `body` adds members to `t`.
fn python_tar(path: &Path, body: &str) {
    require("python3");
    let script = format!(
        "import tarfile, io\nt = tarfile.open({:?}, 'w')\n\
         def f(name, data=b'x'):\n    i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))\n\
         {body}\nt.close()\n",
        path.display().to_string()
    );
    run_ok(std::process::Command::new("python3").arg("-c").arg(script));
}

#[test]
fn yaml_syntax_error() {
    let t = Sandbox::new();
    let e = fails_cleanly(&t, "name: demo\nconfig: [unclosed\n", "profile.yaml:");
    assert!(e.contains(":2:"), "{e}");
}

#[test]
fn unknown_key_names_line_column_and_key() {
    let t = Sandbox::new();
    let e = fails_cleanly(
        &t,
        "name: demo\nconfig:\n  entrypoint: [sh]\n  wokdir: /\n",
        "profile.yaml:4:3:",
    );
    assert!(e.contains("`wokdir`"), "{e}");
    // Issue 34, item 8: the nearest key is suggested.
    assert!(e.contains("did you mean `workdir`?"), "{e}");
    let e = fails_cleanly(
        &t,
        "name: demo\nstak:\n  cuda: \"12.4\"\n",
        "profile.yaml:2:1:",
    );
    assert!(e.contains("did you mean `stack`?"), "{e}");
}

#[test]
fn wrong_type() {
    let t = Sandbox::new();
    fails_cleanly(
        &t,
        "name: demo\nselftest:\n  enabled: sometimes\n",
        "profile.yaml:3:12:",
    );
}

#[test]
fn missing_required_key() {
    let t = Sandbox::new();
    fails_cleanly(&t, "platform: linux/amd64\n", "`name`");
}

#[test]
fn missing_file() {
    let t = Sandbox::new();
    let e = fails_cleanly(
        &t,
        "name: demo\nfiles:\n  - {src: ./nope, dst: /opt/nope}\n",
        "profile.yaml:3:11: files.src:",
    );
    assert!(e.contains("does not exist"), "{e}");
}

#[test]
fn unset_variable() {
    let t = Sandbox::new();
    fails_cleanly(
        &t,
        "name: demo\nbase:\n  rootfs: ${GPUIMG_TEST_UNSET}/rootfs.tar\n",
        "profile.yaml:3:11: base.rootfs: Environment variable `GPUIMG_TEST_UNSET` is not set",
    );
}

#[test]
fn tarball_with_dotdot_entry() {
    let t = Sandbox::new();
    python_tar(
        &t.path().join("rootfs.tar"),
        "f('etc/ok')\nf('../../escape')",
    );
    fails_cleanly(
        &t,
        "name: demo\nbase:\n  rootfs: ./rootfs.tar\n",
        "escapes the root (`..` component)",
    );
}

#[test]
fn tarball_with_symlink_pointing_outside() {
    let t = Sandbox::new();
    python_tar(
        &t.path().join("rootfs.tar"),
        "i = tarfile.TarInfo('etc/evil'); i.type = tarfile.SYMTYPE; i.linkname = '/../../../etc/shadow'; t.addfile(i)",
    );
    fails_cleanly(
        &t,
        "name: demo\nbase:\n  rootfs: ./rootfs.tar\n",
        "symlink target leaves the root",
    );
}

#[test]
fn tarball_with_absolute_entry() {
    let t = Sandbox::new();
    python_tar(&t.path().join("rootfs.tar"), "f('/etc/passwd')");
    fails_cleanly(
        &t,
        "name: demo\nbase:\n  rootfs: ./rootfs.tar\n",
        "escapes the root (absolute path)",
    );
}

#[test]
fn tarball_with_device_node_refused_unless_allowed() {
    let t = Sandbox::new();
    python_tar(
        &t.path().join("rootfs.tar"),
        "i = tarfile.TarInfo('dev/null'); i.type = tarfile.CHRTYPE; i.devmajor = 1; i.devminor = 3; t.addfile(i)",
    );
    fails_cleanly(
        &t,
        "name: demo\nbase:\n  rootfs: ./rootfs.tar\n",
        "is a character device",
    );
    // With the opt-in it builds, and the node is in the layer.
    let p = t.path().join("allowed.yaml");
    write(
        &p,
        "name: demo\nbase:\n  rootfs: ./rootfs.tar\n  allow-special-files: true\n",
    );
    let out = run_ok(
        t.gpuimg()
            .arg("build")
            .arg(&p)
            .arg("-o")
            .arg(t.path().join("ok"))
            .args(["--json", "-q"]),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let layer = v["layers"][0]["digest"].as_str().unwrap();
    let blob = t
        .path()
        .join("ok/blobs/sha256")
        .join(layer.trim_start_matches("sha256:"));
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(&blob).unwrap());
    let mut found = None;
    for e in tar::Archive::new(gz).entries().unwrap() {
        let e = e.unwrap();
        let h = e.header();
        if e.path().unwrap().to_str() == Some("dev/null") {
            found = Some((
                h.entry_type(),
                h.device_major().unwrap(),
                h.device_minor().unwrap(),
            ));
        }
    }
    assert_eq!(
        found,
        Some((tar::EntryType::Char, Some(1), Some(3))),
        "the layer holds dev/null as character device 1:3"
    );
}

#[test]
fn bad_source_date_epoch() {
    let t = Sandbox::new();
    busybox_rootfs(t.path());
    let p = t.path().join("p.yaml");
    write(&p, "name: demo\nbase:\n  rootfs: ./rootfs\n");
    let out = run(t
        .gpuimg()
        .env("SOURCE_DATE_EPOCH", "yesterday")
        .arg("build")
        .arg(&p)
        .arg("-o")
        .arg(t.path().join("out")));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SOURCE_DATE_EPOCH"));
    assert_error(&String::from_utf8_lossy(&out.stderr), &[t.path()]);
    assert!(!t.path().join("out").exists());
}

/// Issue 33, class 13: host data never reaches a message. `requirements: /proc/self/environ`
/// (with `context: /`) is refused as a procfs file, quoting none of it; a requirements file
/// whose one line is 5,000 bytes of junk with terminal escapes is quoted at most 200 bytes,
/// escaped, on one line.
#[test]
fn quoted_input_is_capped_and_escaped_and_procfs_is_never_read() {
    let dir = Sandbox::new();
    let base = "name: t\nbase:\n  rootfs: ./rootfs\nselftest: {enabled: false}\n";
    write(&dir.join("rootfs/etc/hostname"), "t\n");
    let e = fails_cleanly(
        &dir,
        &format!(
            "{base}context: /\npython:\n  index: http://127.0.0.1:9/simple/\n  requirements: /proc/self/environ\n"
        ),
        "is on procfs",
    );
    assert!(!e.contains("PATH=") && !e.contains("HOME="), "{e}");
    let junk = format!("pkg \u{1b}[31m{}\u{7}", "=".repeat(5000));
    write(&dir.join("req.txt"), &format!("{junk}\n"));
    let e = fails_cleanly(
        &dir,
        &format!("{base}python:\n  index: http://127.0.0.1:9/simple/\n  requirements: ./req.txt\n"),
        "req.txt:1",
    );
    assert!(e.len() < 600, "{} bytes: {e}", e.len());
    assert!(!e.trim_end().chars().any(char::is_control), "{e:?}");
    assert!(e.contains("\\u{1b}[31m"), "{e}");
}

/// Issue 34, item 1 (the self-test's part): an image whose entrypoint cannot start on its
/// platform is never built. `platform: linux/arm64`, `gpus: [GH200]` with the (x86_64)
/// self-test is refused naming the binary, its machine and the platform; without the
/// self-test it builds.
#[test]
fn a_selftest_for_another_machine_is_refused_naming_both() {
    let dir = Sandbox::new();
    write(&dir.join("rootfs/etc/hostname"), "t\n");
    // No arm64 self-test: the line says which script builds it.
    let e = fails_cleanly(
        &dir,
        "name: t\nplatform: linux/arm64\nbase:\n  rootfs: ./rootfs\nhost:\n  gpus: [GH200]\n",
        "The self-test binary for `linux/arm64` was not found",
    );
    assert!(e.contains("scripts/build-selftest-arm64.sh"), "{e}");
    // The amd64 one named for arm64 (per platform): refused, naming both machines.
    let amd64 = common::Bin::Selftest.path();
    let e = fails_cleanly(
        &dir,
        &format!(
            "name: t\nplatforms: [linux/arm64]\nbase:\n  rootfs: ./rootfs\nhost:\n  gpus: [GH200]\nselftest:\n  binary: {{linux/arm64: {}}}\n",
            amd64.display()
        ),
        "cannot start on `linux/arm64`",
    );
    assert!(
        e.contains("gpuimg-selftest") && e.contains("an ELF file for x86_64"),
        "{e}"
    );
    let p = dir.join("profile.yaml");
    write(
        &p,
        "name: t\nplatform: linux/arm64\nbase:\n  rootfs: ./rootfs\nhost:\n  gpus: [GH200]\nselftest: {enabled: false}\n",
    );
    run_ok(
        dir.gpuimg()
            .arg("build")
            .arg(&p)
            .arg("-o")
            .arg(dir.join("out")),
    );
}
