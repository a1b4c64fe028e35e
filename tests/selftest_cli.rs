//! `gpuimg-selftest` and `gpuimg verify-host` as built binaries, on a machine without a GPU (CI).
//!
//! Covers the no-GPU path (one line, exit 4), bad input, `--report`, and the exec hand-off:
//! arguments, exit status, PID and signals pass through to the wrapped command.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::Sandbox;

/// These tests describe a host the self-test finds no GPU on. The precondition is the product's
/// own rule (`selftest::run` → `no-gpu`: no driver library loads, or the driver shows no
/// device), not a guess from device nodes: a `/dev/nvidiactl` without a loaded driver is a
/// host without a GPU here as it is for the self-test.
fn require_no_gpu() {
    let report = gpuimg::selftest::run(
        &gpuimg::expect::Expectation::default(),
        gpuimg::expect::SelftestLevel::Quick,
        &std::collections::BTreeMap::new(),
    );
    assert_eq!(
        report.verdict,
        gpuimg::selftest::Verdict::NoGpu,
        "these tests need a host where the self-test finds no GPU (CI); this one has one ({:?}): on a GPU host run scripts/gpu-selftest.sh",
        report.message
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn warn_expectation(dir: &Path) -> PathBuf {
    write(dir, "warn.json", r#"{"format": 1, "on_failure": "warn"}"#)
}

#[test]
fn no_gpu_says_so_in_one_line_and_exits_4() {
    require_no_gpu();
    let dir = Sandbox::new();
    let e = write(dir.path(), "e.json", r#"{"format": 1, "driver": ">=550"}"#);
    let start = std::time::Instant::now();
    let out = dir.selftest().arg("--expect").arg(&e).output().unwrap();
    eprintln!("no-GPU path took {:?}", start.elapsed());
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("gpuimg-selftest: No NVIDIA driver: `libnvidia-ml.so.1`"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());

    let report = dir.path().join("r.json");
    let out = dir
        .selftest()
        .args(["--json", "--level", "full", "--expect"])
        .arg(&e)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "no-gpu");
    assert_eq!(v["level"], "full");
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(written["verdict"], "no-gpu");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = Sandbox::new();
    let cases = [
        (
            write(dir.path(), "a.json", "{not json"),
            "Invalid expectation",
        ),
        (
            write(dir.path(), "b.json", r#"{"format": 1, "driver": ">=five"}"#),
            "Invalid `driver` range: `>=five` is not a version constraint",
        ),
        (
            write(dir.path(), "c.json", r#"{"format": 1, "gpu": ["H200"]}"#),
            "unknown field `gpu`",
        ),
        (dir.path().join("missing.json"), "Failed to read"),
    ];
    for (path, want) in cases {
        let out = dir.selftest().arg("--expect").arg(&path).output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(want),
            "{stderr}"
        );
    }
    let out = dir.selftest().args(["--level", "fast"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn abort_does_not_start_the_command() {
    require_no_gpu();
    let dir = Sandbox::new();
    let marker = dir.path().join("ran");
    let e = write(dir.path(), "e.json", r#"{"format": 1}"#);
    let out = dir
        .selftest()
        .arg("--expect")
        .arg(&e)
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(!marker.exists());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not starting `touch`"));
}

#[test]
fn exec_passes_arguments_exit_code_and_pid() {
    require_no_gpu();
    let dir = Sandbox::new();
    let e = warn_expectation(dir.path());
    let out = dir
        .selftest()
        .arg("--expect")
        .arg(&e)
        .args([
            "--",
            "sh",
            "-c",
            r#"printf '%s|' "$@"; exit 7"#,
            "sh",
            "a",
            "b c",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "a|b c|--json|");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("starting the command anyway (on-failure: warn)"),
        "{stderr}"
    );

    // exec, not spawn: the command runs as the self-test's own process.
    let child = dir
        .selftest()
        .arg("--expect")
        .arg(&e)
        .args(["--", "sh", "-c", "echo $$"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        pid.to_string()
    );

    let out = dir
        .selftest()
        .arg("--expect")
        .arg(&e)
        .args(["--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("error: Failed to run `/nonexistent/program`"));
}

#[test]
fn signals_reach_the_wrapped_command() {
    require_no_gpu();
    let dir = Sandbox::new();
    let e = warn_expectation(dir.path());
    let mut child = dir
        .selftest()
        .arg("--expect")
        .arg(&e)
        .args([
            "--",
            "sh",
            "-c",
            "trap 'echo got-term; exit 42' TERM; echo ready; while :; do sleep 0.05; done",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert_eq!(lines.next().unwrap().unwrap(), "got-term");
    assert_eq!(child.wait().unwrap().code(), Some(42));

    // A command killed by a signal is reported as killed by that signal.
    let status = dir
        .selftest()
        .arg("--expect")
        .arg(&e)
        .args(["--", "sh", "-c", "kill -KILL $$"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(9));
}

#[test]
fn verify_host_runs_the_same_checks() {
    require_no_gpu();
    let dir = Sandbox::new();
    let p = write(
        dir.path(),
        "p.yaml",
        "name: demo\nhost:\n  gpus: [H200, \"9.0\"]\n  driver: \">=550\"\n  kernel_module: open\nstack:\n  cuda: \"12.4\"\n",
    );
    let out = dir
        .gpuimg()
        .arg("verify-host")
        .arg(&p)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "no-gpu");
    // A lock: its recorded resolution gives the same expectation.
    let locked = dir.gpuimg().arg("lock").arg(&p).output().unwrap();
    assert!(
        locked.status.success(),
        "{}",
        String::from_utf8_lossy(&locked.stderr)
    );
    let out = dir
        .gpuimg()
        .arg("verify-host")
        .arg(dir.path().join("p.lock.json"))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "no-gpu");
    // A broken lock is bad input.
    let lock = write(dir.path(), "q.lock.json", "{}");
    let out = dir.gpuimg().arg("verify-host").arg(&lock).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let bad = write(
        dir.path(),
        "bad.yaml",
        "name: demo\nhost:\n  driver: \">=x\"\n",
    );
    let out = dir.gpuimg().arg("verify-host").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.yaml:3:"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
