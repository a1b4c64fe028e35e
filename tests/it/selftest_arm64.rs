//! Issue 37, item 3: the arm64 self-test, built from this repository's sources with Debian's
//! `rustc-web` (`scripts/build-selftest-arm64.sh`), run under `qemu-aarch64-static` on this
//! amd64 host with Debian's arm64 driver libraries unpacked beside it
//! (`scripts/arm64-driver-root.sh`): NVML and libcuda load, the driver has no device, and the
//! self-test answers exit 4 with its JSON report. No arm64 GPU can be reached from CI: this is
//! the whole arm64 path short of a device.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::arm64::arm64_selftest;
use crate::common::{require, run, run_ok, Sandbox};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn driver_root() -> PathBuf {
    let dir = root().join("target/arm64/driver-root");
    run_ok(
        Command::new("bash")
            .arg(root().join("scripts/arm64-driver-root.sh"))
            .arg(&dir),
    );
    dir
}

#[test]
fn the_arm64_self_test_loads_debians_arm64_driver_and_says_no_gpu_under_qemu() {
    require("qemu-aarch64-static");
    let bin = arm64_selftest();
    let head = std::fs::read(&bin).unwrap();
    assert_eq!(
        gpuimg_elf::machine::of_header(&head),
        gpuimg_elf::machine::of_architecture("arm64"),
        "an aarch64 ELF file"
    );
    let libs = driver_root();
    let sb = Sandbox::new();
    // The image's expectation: an arm64 image, as the plan writes it (its `platform` check
    // compares that with `uname -m`, which qemu-user answers `aarch64`).
    let expectation = |arch: &str| {
        let path = sb.join(format!("expect-{arch}.json"));
        let json = format!(
            r#"{{"format": 2, "driver": ">=530", "platform": {{"os": "linux", "architecture": "{arch}"}}}}"#
        );
        std::fs::write(&path, json).unwrap();
        path
    };
    let selftest = |expect: &Path| {
        run(Command::new("qemu-aarch64-static")
            .arg("-L")
            .arg(&libs)
            .args([
                "-E",
                "LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu/nvidia/current",
            ])
            .arg(&bin)
            .args(["--json", "--expect"])
            .arg(expect))
    };
    let out = selftest(&expectation("arm64"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {stderr}"));
    assert_eq!(report["verdict"], "no-gpu", "{report}");
    // NVML loaded and answered (its own error, not "not found"); libcuda loaded and told its
    // CUDA version, then `cuInit` failed: the driver libraries are arm64 and load.
    assert_eq!(
        report["message"], "No NVIDIA GPU: NVML_ERROR_DRIVER_NOT_LOADED (Driver Not Loaded)",
        "{report}"
    );
    assert_eq!(report["nvml_init"], "failed", "{report}");
    assert_eq!(report["cuda_init"], "failed", "{report}");
    assert!(
        report["cuda_driver_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("12.")),
        "libcuda 535 says CUDA 12.x: {report}"
    );
    assert_eq!(
        stderr.trim_end(),
        "gpuimg-selftest: No NVIDIA GPU: NVML_ERROR_DRIVER_NOT_LOADED (Driver Not Loaded)"
    );
    // The platform matched: nothing failed before "no GPU" (a host without a GPU lists no checks).
    assert_eq!(report["checks"], serde_json::json!([]), "{report}");
    let platform = |r: &serde_json::Value| -> serde_json::Value {
        let checks = r["checks"].as_array().unwrap();
        let c = checks.iter().find(|c| c["name"] == "platform");
        c.unwrap_or_else(|| panic!("no platform check: {r}"))["status"].clone()
    };

    // An amd64 image's self-test asked on this (arm64) host: its platform check fails, exit 1.
    let out = selftest(&expectation("amd64"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(platform(&report), "fail", "{report}");
}
