//! Images from the build host's configured Debian mirror (`mirror: host`): podman runs the
//! image's python3; dpkg inside the image sees exactly the locked set; the same lock built with
//! an emptied cache gives the same digest; a stale lock is refused.

use crate::common;

use common::*;

const PROFILE: &str = r#"name: deb-python
base:
  apt:
    mirror: host
    suite: bookworm
    packages: [base-files, base-passwd, libc6, python3-minimal]
strip: [docs, man]
config:
  entrypoint: ["python3", "-c"]
  cmd: ["import sys; print('sum', sum(range(101)), sys.version_info[:2])"]
"#;

fn build(dir: &Sandbox, cache: &str, out: &str, extra: &[&str]) -> serde_json::Value {
    let json = run_ok(
        dir.gpuimg_with_cache(&dir.join(cache))
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .arg("build")
            .arg(dir.join("p.yaml"))
            .arg("-o")
            .arg(dir.join(out))
            .arg("--json")
            .args(extra),
    );
    serde_json::from_str(json.trim()).unwrap()
}

#[test]
fn debian_image_from_host_mirror_locks_runs_and_reproduces() {
    require("umoci");
    require("dpkg-query");
    let t = Sandbox::new();
    write(&t.path().join("p.yaml"), PROFILE);

    // Lock: the package set with sha256s.
    run_ok(
        t.gpuimg_with_cache(&t.path().join("cache-a"))
            .arg("lock")
            .arg(t.path().join("p.yaml")),
    );
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("p.lock.json")).unwrap())
            .unwrap();
    assert_eq!(lock["version"], 2);
    let locked: Vec<String> = lock["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["kind"], "deb");
            format!(
                "{}\t{}",
                p["name"].as_str().unwrap(),
                p["version"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        locked.iter().any(|p| p.starts_with("python3.11-minimal\t")),
        "{locked:?}"
    );
    assert!(lock["artifacts"][0]["sha256"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));

    let a = build(&t, "cache-a", "out-a", &["--locked"]);

    // podman runs the image's python3.
    let ran = podman_run(
        t.path(),
        &format!("oci:{}:latest", t.path().join("out-a").display()),
        &[],
    );
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(
        stdout.contains("sum 5050 (3, 11)"),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&ran.stderr)
    );

    // dpkg's database in the image lists exactly the locked set.
    let bundle = t.path().join("bundle");
    run_ok(
        std::process::Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", t.path().join("out-a").display()))
            .arg(&bundle),
    );
    let listed = run_ok(
        std::process::Command::new("dpkg-query")
            .arg(format!(
                "--admindir={}",
                bundle.join("rootfs/var/lib/dpkg").display()
            ))
            .args(["-W", "-f", "${Package}\\t${Version}\\n"]),
    );
    let mut listed: Vec<String> = listed.lines().map(str::to_string).collect();
    listed.sort();
    let mut want = locked.clone();
    want.sort();
    assert_eq!(listed, want);
    // Licence files survive `strip: [docs]`.
    assert!(bundle
        .join("rootfs/usr/share/doc/libc6/copyright")
        .is_file());
    assert!(!bundle
        .join("rootfs/usr/share/doc/libc6/changelog.Debian.gz")
        .exists());

    // The same lock, an emptied cache, another output: the same digest.
    let b = build(&t, "cache-b", "out-b", &["--locked"]);
    assert_eq!(a["manifest_digest"], b["manifest_digest"]);

    // An unchanged rebuild reuses every component layer without unpacking or compressing.
    let c = build(&t, "cache-b", "out-c", &["--locked"]);
    assert_eq!(c["cached_layers"], c["layers"].as_array().unwrap().len());
    assert!(c["cached_layers"].as_u64().unwrap() >= 3, "{c}");
    assert_eq!(a["manifest_digest"], c["manifest_digest"]);

    // Offline from a warm cache works; a stale lock is refused with exit 2.
    build(&t, "cache-b", "out-d", &["--locked", "--offline"]);
    write(
        &t.path().join("p.yaml"),
        &PROFILE.replace("python3-minimal]", "python3-minimal, zlib1g]"),
    );
    let out = run(t
        .gpuimg_with_cache(&t.path().join("cache-b"))
        .arg("build")
        .arg(t.path().join("p.yaml"))
        .arg("-o")
        .arg(t.path().join("out-e"))
        .arg("--locked"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stale"), "{stderr}");
    assert!(!t.path().join("out-e").exists());
}
