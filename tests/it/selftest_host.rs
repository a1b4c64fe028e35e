//! `gpuimg-selftest --host` and `gpuimg verify-host` as built binaries, given a node image's
//! expectation: on a node tree the test makes (`common::node_tree`) under `--root`, where the
//! expectation is read by default, a node as built passes (exit 0) and a wrong expectation fails
//! naming the check and the file it read (exit 1); an expectation without a `node` section and
//! `--root` without `--host` are bad input (exit 2); `verify-host` given a node's expectation
//! runs the host checks on this machine's own files.

use crate::common;

use std::path::Path;

use common::node_tree::{self, Node, ABI};
use common::Sandbox;

fn node_root(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("node");
    node_tree::make(&root, &Node::default(), None);
    let expect = root.join("etc/gpuimg/expect.json");
    std::fs::create_dir_all(expect.parent().unwrap()).unwrap();
    std::fs::write(&expect, node_tree::expectation(None, "-")).unwrap();
    root
}

#[test]
fn the_host_checks_read_the_node_under_its_root() {
    let dir = Sandbox::new();
    let root = node_root(dir.path());
    let out = dir
        .selftest()
        .arg("--host")
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with("gpuimg-selftest: PASS (host level"),
        "{stdout}"
    );
    let osrelease = root.join("proc/sys/kernel/osrelease");
    assert!(
        stdout.contains(&format!("{ABI}  from {}", osrelease.display())),
        "{stdout}"
    );

    // Another kernel and driver expected: exit 1, each mismatch named with where it was read.
    let wrong = dir.path().join("wrong.json");
    std::fs::write(
        &wrong,
        node_tree::expectation(None, "-")
            .replace(ABI, "6.12.57+deb13-cloud-amd64")
            .replace(node_tree::DRIVER, "550.163.01"),
    )
    .unwrap();
    let out = dir
        .selftest()
        .args(["--host", "--json", "--root"])
        .arg(&root)
        .arg("--expect")
        .arg(&wrong)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "fail");
    assert_eq!(v["level"], "host");
    let check = |name: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {v}"))
            .clone()
    };
    let k = check("running-kernel");
    assert_eq!(
        (&k["status"], &k["expected"], &k["measured"]),
        (
            &"fail".into(),
            &"6.12.57+deb13-cloud-amd64".into(),
            &ABI.into()
        )
    );
    assert_eq!(k["read_from"], osrelease.display().to_string());
    let l = check("library-version");
    assert_eq!(
        (&l["status"], &l["expected"], &l["measured"]),
        (
            &"fail".into(),
            &"550.163.01".into(),
            &node_tree::DRIVER.into()
        )
    );
}

#[test]
fn host_input_errors_exit_2_in_one_line() {
    let dir = Sandbox::new();
    let root = node_root(dir.path());
    let container = dir.path().join("container.json");
    std::fs::write(&container, r#"{"format": 2, "driver": ">=535"}"#).unwrap();
    let out = dir
        .selftest()
        .arg("--host")
        .arg("--expect")
        .arg(&container)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: `{}` has no `node` section: --host checks a node image's expectation",
            container.display()
        )
    );
    // No expectation under the root (nothing to check a node against).
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = dir
        .selftest()
        .arg("--host")
        .arg("--root")
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("empty/etc/gpuimg/expect.json"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let out = dir.selftest().arg("--root").arg(&root).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn verify_host_given_a_node_expectation_runs_the_host_checks_here() {
    let dir = Sandbox::new();
    // A kernel ABI no machine runs: this machine is not that node.
    let e = dir.path().join("node.json");
    std::fs::write(
        &e,
        node_tree::expectation(None, "-").replace(ABI, "6.1.0-999-fixture-amd64"),
    )
    .unwrap();
    let out = dir
        .gpuimg()
        .arg("verify-host")
        .arg(&e)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["level"], "host");
    let k = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "running-kernel")
        .unwrap();
    assert_eq!(k["status"], "fail");
    assert_eq!(k["read_from"], "/proc/sys/kernel/osrelease");
}
