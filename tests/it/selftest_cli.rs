//! `gpuimg-selftest` and `gpuimg verify-host` as built binaries, on a machine without a GPU (CI).
//!
//! Covers the no-GPU path (one line, exit 4), bad input, `--report`, and the exec hand-off:
//! arguments, exit status, PID and signals pass through to the wrapped command; and the
//! loading paths against `gcc`-built fakes (`common::fake_cuda`): a library cut in half fails
//! its check instead of killing the process, a `libcuda.so.1` lacking a function is named.

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{assert_error, fake_cuda, line_with, Sandbox};

/// These tests describe a host the self-test finds no GPU on. The precondition is the product's
/// own rule (`selftest::run` → `no-gpu`: no driver library loads, or the driver shows no
/// device), not a guess from device nodes: a `/dev/nvidiactl` without a loaded driver is a
/// host without a GPU here as it is for the self-test.
fn require_no_gpu() {
    let report = gpuimg_selftest::run(
        &gpuimg_expect::Expectation::default(),
        gpuimg_expect::SelftestLevel::Quick,
        &std::collections::BTreeMap::new(),
    );
    assert_eq!(
        report.verdict,
        gpuimg_selftest::Verdict::NoGpu,
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
    let out = dir.selftest().arg("--expect").arg(&e).output().unwrap();
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
        assert_error(&stderr, &[dir.path()]);
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
    assert_error(
        line_with(
            &String::from_utf8_lossy(&out.stderr),
            "not starting `touch`",
        ),
        &[dir.path()],
    );
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
    assert_error(&String::from_utf8_lossy(&out.stderr), &[dir.path()]);
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
    assert_error(&stderr, &[dir.path()]);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// The self-test's JSON report of a run against `expect` with `LD_LIBRARY_PATH=lib_dir`, and
/// its exit status (a signal fails the test: the self-test must answer, never die).
fn run_with_driver_in(dir: &Sandbox, lib_dir: &Path, expect: &Path) -> (i32, serde_json::Value) {
    let out = dir
        .selftest()
        .env("LD_LIBRARY_PATH", lib_dir)
        .args(["--json", "--expect"])
        .arg(expect)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let Some(code) = out.status.code() else {
        panic!(
            "the self-test died of signal {:?} instead of answering: {stderr}",
            out.status.signal()
        );
    };
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}), exit {code}: {stderr}"));
    (code, report)
}

#[test]
fn a_library_cut_in_half_fails_its_check_instead_of_killing_the_self_test() {
    let dir = Sandbox::new();
    let driver = dir.path().join("driver");
    let image = dir.path().join("image");
    std::fs::create_dir_all(&driver).unwrap();
    std::fs::create_dir_all(&image).unwrap();
    fake_cuda::libcuda(&driver, None);
    let cudart = fake_cuda::cudart(&image, "libcudart.so.13");
    fake_cuda::cudart(&image, "libcudnn.so.9");
    let library = |name: &str, soname: &str, call: &str| {
        serde_json::json!({
            "name": name, "soname": soname, "dir": image, "version": "13.0.96",
            "provider": format!("wheel {name}"), "cuda_major": 13, "call": call,
        })
    };
    let e = dir.path().join("e.json");
    let expectation = serde_json::json!({"format": 2, "libraries": [
        library("cudart", "libcudart.so.13", "cudaRuntimeGetVersion"),
        library("cudnn", "libcudnn.so.9", "cudaRuntimeGetVersion"),
    ]});
    std::fs::write(&e, expectation.to_string()).unwrap();
    let check = |report: &serde_json::Value, name: &str| {
        report["checks"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == name).cloned())
            .unwrap_or_else(|| panic!("no `{name}` check: {report}"))
    };

    // Whole, the fake driver's one device is seen and the library answers.
    let (_, report) = run_with_driver_in(&dir, &driver, &e);
    assert_eq!(
        check(&report, "library[cudart]")["status"],
        "pass",
        "{report}"
    );

    // Cut in half: the check fails with the cause, the process answers with exit 1.
    let size = std::fs::metadata(&cudart).unwrap().len();
    let half = fake_cuda::cut_in_half(&cudart);
    let (code, report) = run_with_driver_in(&dir, &driver, &e);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["verdict"], "fail");
    let c = check(&report, "library[cudart]");
    assert_eq!(c["status"], "fail", "{c}");
    let measured = c["measured"].as_str().unwrap_or_default();
    assert!(
        measured.starts_with("Truncated: loadable segment")
            && measured.contains(&format!("the file has {half} bytes"))
            && half < size,
        "{c}"
    );
    // The others of the image are not loaded beside it, and say why.
    let other = check(&report, "library[cudnn]");
    assert_eq!(other["status"], "fail");
    assert!(
        other["measured"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Not loaded: `libcudart.so.13` (cudart) of this image is truncated"),
        "{other}"
    );
}

#[test]
fn a_libcuda_lacking_a_function_is_named_with_it_not_reported_missing() {
    require_no_gpu();
    let dir = Sandbox::new();
    let driver = dir.path().join("driver");
    std::fs::create_dir_all(&driver).unwrap();
    fake_cuda::libcuda(&driver, Some("cuInit"));
    let e = write(dir.path(), "e.json", r#"{"format": 1}"#);
    let out = dir
        .selftest()
        .env("LD_LIBRARY_PATH", &driver)
        .arg("--expect")
        .arg(&e)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // No NVML here either: no usable driver, said with what was measured.
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "gpuimg-selftest: No usable NVIDIA driver: `libnvidia-ml.so.1` not found; `libcuda.so.1` lacks `cuInit`"
    );
}

/// Issue 37, item 4: the built self-test compares the expectation's platform with its host's
/// `uname -m`. An image for another architecture fails (exit 1, the `platform` check in the
/// JSON report) even here, without a GPU; the host's own architecture is the no-GPU answer
/// (exit 4) as before.
#[test]
fn the_selftest_compares_the_images_platform_with_uname() {
    require_no_gpu();
    let dir = Sandbox::new();
    let (here, other, machine) = match std::env::consts::ARCH {
        "aarch64" => ("arm64", "amd64", "aarch64"),
        _ => ("amd64", "arm64", "x86_64"),
    };
    let expect = |arch: &str| {
        write(
            dir.path(),
            &format!("{arch}.json"),
            &format!(r#"{{"format": 2, "platform": {{"os": "linux", "architecture": "{arch}"}}}}"#),
        )
    };
    let out = dir
        .selftest()
        .args(["--json", "--expect"])
        .arg(expect(other))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "fail");
    let c = &v["checks"][0];
    assert_eq!(
        (&c["name"], &c["status"]),
        (&"platform".into(), &"fail".into()),
        "{v}"
    );
    assert_eq!(c["expected"], format!("linux/{other}"));
    assert_eq!(c["measured"], format!("linux/{here} (uname -m: {machine})"));

    let out = dir
        .selftest()
        .arg("--expect")
        .arg(expect(here))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
