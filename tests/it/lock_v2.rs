//! Lock v2 through the CLI: `gpuimg lock` writes version 2 with typed `deb` artifacts; a v1 lock
//! (committed, from the previous writer, or derived from a v2 one) still drives `build --locked`
//! to the same manifest digest and `verify-host x.lock.json` to the same expectation; a bad lock
//! exits 2 with one line.

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use common::{assert_error, pkg, run, run_ok, signed_repo, write, Sandbox, SignedRepo};

/// A signed fixture repository (suite `s`) with two packages, served on loopback.
fn repo() -> SignedRepo {
    let mut hello = pkg("hello", "2.1-1").field("Depends", "libgreet (>= 1.0)");
    hello.files = vec![("/usr/bin/hello", b"#!/bin/sh\necho hello\n", 0o755)];
    let mut lib = pkg("libgreet", "1.0-3");
    lib.files = vec![("/usr/lib/libgreet.so.1", b"not really a library", 0o644)];
    signed_repo(&[("s", vec![&hello, &lib])])
}

/// A profile on the fixture repository with a CUDA stack, so both the package set and the
/// resolution reach the image (CUDA_VERSION, NVIDIA_REQUIRE_CUDA, the self-test expectation).
fn apt_profile(dir: &Path, repo: &SignedRepo) -> PathBuf {
    repo.keyring_into(dir);
    let p = dir.join("p.yaml");
    write(
        &p,
        &format!(
            "name: lockv2\nbase:\n  apt:\n    mirror: {}\n    suite: s\n    packages: [hello]\n    keyring: repo.gpg\nhost:\n  gpus: [H100]\n  driver: \">=550\"\nstack:\n  cuda: \"12.4\"\n",
            repo.url
        ),
    );
    p
}

fn lock(dir: &Sandbox, profile: &Path) {
    run_ok(dir.gpuimg().arg("lock").arg(profile));
}

fn build(dir: &Sandbox, out: &str) -> String {
    let json = run_ok(
        dir.gpuimg()
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .arg("build")
            .arg(dir.join("p.yaml"))
            .arg("-o")
            .arg(dir.join(out))
            .arg("--json")
            .arg("--locked"),
    );
    common::manifest_digest(&json)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The v1 text of a v2 lock: `packages` without `kind`, the same resolution and inputs.
fn as_v1(v2: &Value) -> Value {
    let packages: Vec<Value> = v2["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            assert_eq!(a["kind"], "deb");
            let mut a = a.clone();
            a.as_object_mut().unwrap().remove("kind");
            a
        })
        .collect();
    json!({
        "version": 1,
        "packages": packages,
        "resolution": v2["resolution"],
        "inputs": v2["inputs"],
    })
}

#[test]
fn build_locked_with_a_v1_lock_gives_the_v2_digest() {
    let repo = repo();
    let t = Sandbox::new();
    let d = &t;
    let profile = apt_profile(d, &repo);
    lock(d, &profile);
    let lock_file = d.join("p.lock.json");
    let v2_text = std::fs::read_to_string(&lock_file).unwrap();
    let v2: Value = serde_json::from_str(&v2_text).unwrap();
    assert_eq!(v2["version"], 2);
    assert!(v2.get("packages").is_none());
    let names: Vec<&str> = v2["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hello", "libgreet"]);
    assert_eq!(v2["artifacts"][0]["kind"], "deb");
    assert_eq!(v2["artifacts"][0]["version"], "2.1-1");
    assert!(v2["artifacts"][1]["sha256"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert_eq!(v2["resolution"]["components"]["cuda"], "12.4.1");
    let with_v2 = build(d, "out-v2");

    // The same lock as version 1: read, converted, the same image.
    let v1 = as_v1(&v2);
    std::fs::write(&lock_file, serde_json::to_string_pretty(&v1).unwrap()).unwrap();
    let converted = gpuimg_build::lock::read(&lock_file).unwrap();
    assert_eq!(
        gpuimg_build::lock::to_json(&converted),
        v2_text,
        "v1 converts to the v2 bytes"
    );
    assert_eq!(build(d, "out-v1"), with_v2);

    // The resolution matters: a v1 lock with another CUDA version gives another image.
    let mut other = v1.clone();
    other["resolution"]["components"]["cuda"] = json!("12.4.0");
    std::fs::write(&lock_file, other.to_string()).unwrap();
    assert_ne!(build(d, "out-other"), with_v2);

    // And the package set matters: without `libgreet` the build refuses or differs.
    let mut fewer = v1.clone();
    fewer["packages"].as_array_mut().unwrap().pop();
    std::fs::write(&lock_file, fewer.to_string()).unwrap();
    let out = run(d
        .gpuimg()
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .args(["build", "--json", "--locked", "-o"])
        .arg(d.join("out-fewer"))
        .arg(&profile));
    if out.status.success() {
        let digest = common::manifest_digest(&String::from_utf8_lossy(&out.stdout));
        assert_ne!(digest, with_v2);
    }

    // The next `gpuimg lock` writes version 2 again, byte for byte what it wrote first.
    std::fs::write(&lock_file, serde_json::to_string_pretty(&v1).unwrap()).unwrap();
    lock(d, &profile);
    assert_eq!(std::fs::read_to_string(&lock_file).unwrap(), v2_text);
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/locks")
        .join(name)
}

fn verify_host(sb: &Sandbox, lock: &Path) -> (Option<i32>, Value) {
    let out = run(sb.gpuimg().arg("verify-host").arg(lock).arg("--json"));
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify-host printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v.as_object_mut().unwrap().remove("duration_ms");
    (out.status.code(), v)
}

#[test]
fn verify_host_reads_a_committed_v1_lock_like_its_v2_rewrite() {
    for name in ["torch-forward", "torch-nogpu", "plain"] {
        let t = Sandbox::new();
        let profile = t.path().join(format!("{name}.yaml"));
        std::fs::copy(fixture(&format!("{name}.yaml")), &profile).unwrap();
        let lock_file = t.path().join(format!("{name}.lock.json"));
        std::fs::copy(fixture(&format!("{name}.v1.lock.json")), &lock_file).unwrap();
        let (code_v1, from_v1) = verify_host(&t, &lock_file);
        let loaded = gpuimg_build::profile::load(&profile, &|_| None).unwrap();
        let expect = |lock: &Path| {
            let l = gpuimg_build::lock::read(lock).unwrap();
            gpuimg_build::lock::check_fresh(&loaded, &l).unwrap();
            gpuimg_build::plan::expectation(&loaded, l.resolution.as_ref()).to_json()
        };
        let expect_v1 = expect(&lock_file);
        lock(&t, &profile);
        let rewritten = read_json(&lock_file);
        assert_eq!(rewritten["version"], 2, "{name}");
        let (code_v2, from_v2) = verify_host(&t, &lock_file);
        assert_eq!(code_v1, code_v2, "{name}");
        assert_eq!(from_v1, from_v2, "{name}");
        // What verify-host and the image's self-test compare against is the same.
        assert_eq!(expect_v1, expect(&lock_file), "{name}");
        // The rewrite kept the v1 resolution exactly.
        let v1 = read_json(&fixture(&format!("{name}.v1.lock.json")));
        assert_eq!(rewritten["resolution"], v1["resolution"], "{name}");
        assert_eq!(rewritten["inputs"], v1["inputs"], "{name}");
    }
}

#[test]
fn bad_locks_exit_2_with_one_line() {
    let t = Sandbox::new();
    let d = &t;
    let profile = d.join("p.yaml");
    write(
        &profile,
        "name: bad\nhost:\n  gpus: [H100]\nstack:\n  cuda: \"12.4\"\n",
    );
    lock(d, &profile);
    let lock_file = d.join("p.lock.json");
    let good = read_json(&lock_file);
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        f(&mut v);
        v.to_string()
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "version 9",
            edit(&|v| v["version"] = json!(9)),
            "format version `9`",
        ),
        ("garbage", "PK\u{3}\u{4} not json".into(), "is not valid"),
        (
            "truncated",
            good.to_string()[..40].to_string(),
            "is not valid",
        ),
        (
            "version text",
            edit(&|v| v["version"] = json!("two")),
            "invalid type",
        ),
        (
            "components list",
            edit(&|v| v["resolution"]["components"] = json!(["cuda"])),
            "invalid type",
        ),
        (
            "driver number",
            edit(&|v| v["resolution"]["host"]["driver"] = json!(550)),
            "invalid type",
        ),
        (
            "kind rpm",
            edit(&|v| v["artifacts"] = json!([{"kind": "rpm"}])),
            "unknown variant `rpm`",
        ),
    ];
    for (what, text, want) in cases {
        std::fs::write(&lock_file, &text).unwrap();
        for args in [
            vec![
                "build".into(),
                "--locked".into(),
                profile.clone().into_os_string(),
            ],
            vec!["verify-host".into(), lock_file.clone().into_os_string()],
        ] {
            let out = run(d.gpuimg().args(&args));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{what} {args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{what} {args:?}: {stderr}");
            assert!(stderr.starts_with("error: Lock `"), "{what}: {stderr}");
            assert!(stderr.contains(want), "{what} {args:?}: {stderr}");
            assert_error(&stderr, &[d.path()]);
        }
    }
}
