//! The self-test's checks against recorded probe results (no GPU needed).
//!
//! Each test changes one fact of `fixture::h200()` or one expectation and asserts
//! which checks fail.

use crate::fixture::{check, failed, h200, matching, run, status, UUID};
use gpuimg_expect::{KernelModule, SelftestLevel};
use gpuimg_selftest::{InitOutcome, LoadError, Measurements, Status, Verdict};

#[test]
fn matching_host_passes_both_levels() {
    for level in [SelftestLevel::Quick, SelftestLevel::Full] {
        let r = run(&matching(), &h200(), level);
        assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
        assert_eq!(failed(&r), Vec::<&str>::new());
        for name in [
            "kernel",
            "driver",
            "kernel-module",
            "cuda-driver",
            "gpu-model[0]",
            "functional[0]",
        ] {
            assert_eq!(status(&r, name), Status::Pass, "{name}");
        }
    }
    let full = run(&matching(), &h200(), SelftestLevel::Full);
    assert_eq!(status(&full, "device-device-bandwidth[0]"), Status::Pass);
    assert_eq!(status(&full, "host-device-bandwidth[0]"), Status::Pass);
    assert_eq!(status(&full, "pcie-link[0]"), Status::Pass);
}

#[test]
fn newer_driver_fails_the_driver_check_only() {
    let mut e = matching();
    e.driver = Some(">=590".into());
    let r = run(&e, &h200(), SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(failed(&r), vec!["driver"]);
    let c = r.checks.iter().find(|c| c.name == "driver").unwrap();
    assert_eq!(c.expected.as_deref(), Some(">=590"));
    assert_eq!(c.measured.as_deref(), Some("580.159.04"));
}

#[test]
fn other_gpu_and_other_flavour_fail_by_name() {
    let mut e = matching();
    e.gpus = vec!["B200".into(), "GH200".into()];
    e.compute_capabilities = vec!["10.0".into()];
    assert_eq!(
        failed(&run(&e, &h200(), SelftestLevel::Quick)),
        vec!["gpu-model[0]"]
    );
    let mut e = matching();
    e.gpus = vec![];
    e.compute_capabilities = vec!["9.0".into()];
    assert_eq!(
        failed(&run(&e, &h200(), SelftestLevel::Quick)),
        Vec::<&str>::new()
    );
    let mut e = matching();
    e.kernel_module = KernelModule::Proprietary;
    assert_eq!(
        failed(&run(&e, &h200(), SelftestLevel::Quick)),
        vec!["kernel-module"]
    );
}

#[test]
fn cuda_floor_kernel_range_and_gpu_count() {
    let mut e = matching();
    e.cuda_driver_floor = Some("13.1".into());
    e.kernel = Some(">=6.19".into());
    e.min_gpus = 2;
    let r = run(&e, &h200(), SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["kernel", "cuda-driver", "gpu-count"]);
}

#[test]
fn library_mismatch_is_a_failure_not_no_gpu() {
    let mut m = h200();
    m.nvml_error = Some(
        "NVML_ERROR_LIB_RM_VERSION_MISMATCH (RM has detected an NVML/RM version mismatch.)".into(),
    );
    m.nvml_init = InitOutcome::Failed;
    m.gpus.clear();
    m.cuda_error = Some("cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)".into());
    m.cuda_init = InitOutcome::Failed;
    m.cuda_devices.clear();
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::Fail);
    let f = failed(&r);
    assert!(
        f.contains(&"driver-libraries") && f.contains(&"cuda-init"),
        "{f:?}"
    );
    let mut m = h200();
    m.driver_version = Some("580.126.09".into());
    assert_eq!(
        failed(&run(&matching(), &m, SelftestLevel::Quick)),
        vec!["driver-libraries"]
    );
}

#[test]
fn health_rules_from_fleet_practice() {
    let mut m = h200();
    m.gpus[0].ecc.remap_pending = Some(true);
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["ecc-health[0]"]);
    assert!(r.checks.iter().any(|c| c
        .detail
        .as_deref()
        .is_some_and(|d| d.contains("row remap pending"))));
    let mut m = h200();
    m.gpus[0].ecc.remap_failure = Some(true);
    assert_eq!(
        failed(&run(&matching(), &m, SelftestLevel::Quick)),
        vec!["ecc-health[0]"]
    );
    let mut m = h200();
    m.gpus[0].ecc.volatile_uncorrected = Some(2);
    assert_eq!(
        failed(&run(&matching(), &m, SelftestLevel::Quick)),
        vec!["ecc-health[0]"]
    );
    let mut m = h200();
    m.gpus[0].ecc.aggregate_uncorrected = Some(1);
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(
        (r.verdict, status(&r, "ecc-health[0]")),
        (Verdict::Pass, Status::Warn)
    );
    let mut m = h200();
    m.gpus[0].throttle_reasons = vec!["hw_thermal_slowdown".into()];
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(
        (r.verdict, status(&r, "throttle[0]")),
        (Verdict::Pass, Status::Warn)
    );
}

#[test]
fn functional_failure_and_timeouts_fail() {
    let mut m = h200();
    m.cuda_devices[0].kernel_error = Some("Element 12 is 0x00000000, expected 0x1234abcd".into());
    assert_eq!(
        failed(&run(&matching(), &m, SelftestLevel::Quick)),
        vec!["functional[0]"]
    );
    let mut m = h200();
    // As `collect` records a kernel that did not finish.
    m.timed_out = vec!["cuda: kernel on GPU 0".into()];
    m.cuda_devices[0].kernel_verified = None;
    m.cuda_devices[0].kernel_error = Some("Did not finish within 15 s".into());
    let f = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&f), vec!["probe-timeout", "functional[0]"]);
}

#[test]
fn bandwidth_floors_and_link_under_load() {
    let mut m = h200();
    let bw = m.cuda_devices[0].bandwidth.as_mut().unwrap();
    bw.device_to_device_gbps = 3000.0; // < 80% of 4800
    bw.host_to_device_gbps = 30.0; // < 48 on Gen5 x16
    bw.link_gen_under_load = Some(4);
    let r = run(&matching(), &m, SelftestLevel::Full);
    assert_eq!(
        failed(&r),
        vec![
            "pcie-link[0]",
            "host-device-bandwidth[0]",
            "device-device-bandwidth[0]"
        ]
    );
    // A profile override of the host-device floor, and a Gen4 x16 card's default floor.
    let mut e = matching();
    e.bandwidth.host_device_gbps = Some(25.0);
    e.bandwidth.device_device_fraction = 0.6;
    let r = run(&e, &m, SelftestLevel::Full);
    assert_eq!(failed(&r), vec!["pcie-link[0]"]);
    let mut m = h200();
    m.gpus[0].pcie.max_gen = Some(4);
    let bw = m.cuda_devices[0].bandwidth.as_mut().unwrap();
    bw.host_to_device_gbps = 23.0;
    bw.device_to_host_gbps = 24.0;
    bw.link_gen_under_load = Some(4);
    let r = run(&matching(), &m, SelftestLevel::Full);
    let c = r
        .checks
        .iter()
        .find(|c| c.name == "host-device-bandwidth[0]")
        .unwrap();
    assert_eq!(
        (c.status, c.expected.as_deref()),
        (Status::Pass, Some(">=22.0 GB/s"))
    );
    // No catalog peak: skipped, not failed.
    let mut e = matching();
    e.bandwidth.peak_device_gbps.clear();
    assert_eq!(
        status(
            &run(&e, &h200(), SelftestLevel::Full),
            "device-device-bandwidth[0]"
        ),
        Status::Skip
    );
}

#[test]
fn no_driver_and_no_device_are_no_gpu() {
    let r = run(&matching(), &Measurements::default(), SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::NoGpu);
    assert_eq!(r.verdict.exit_code(), 4);
    assert!(r.message.as_deref().unwrap().contains("libcuda.so.1"));
    let m = Measurements {
        nvml_loaded: true,
        cuda_loaded: true,
        nvml_error: Some("NVML_ERROR_DRIVER_NOT_LOADED (Driver Not Loaded)".into()),
        cuda_error: Some("cuInit: CUDA_ERROR_NO_DEVICE (100)".into()),
        ..Measurements::default()
    };
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::NoGpu);
    assert!(
        r.message.as_deref().unwrap().contains("DRIVER_NOT_LOADED"),
        "{:?}",
        r.message
    );
}

#[test]
fn json_report_has_the_contract_fields() {
    let r = run(&matching(), &h200(), SelftestLevel::Quick);
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["verdict"], "pass");
    assert_eq!(v["driver_version"], "580.159.04");
    assert_eq!(v["cuda_driver_version"], "13.0");
    assert_eq!(v["kernel"], "6.18.0-1-cloud-amd64");
    assert_eq!(v["duration_ms"], 5);
    let g = &v["gpus"][0];
    assert_eq!(
        (g["index"].as_u64(), g["name"].as_str()),
        (Some(0), Some("NVIDIA H200"))
    );
    assert_eq!(g["uuid"], UUID);
    assert_eq!(g["compute_capability"], "9.0");
    assert_eq!(g["memory_total_mib"], 143771);
    let c = &v["checks"][1];
    for k in ["name", "status", "expected", "measured", "detail"] {
        assert!(c.get(k).is_some(), "check lacks `{k}`: {c}");
    }
    let text = r.to_text();
    assert!(
        text.starts_with("gpuimg-selftest: PASS (quick level"),
        "{text}"
    );
    assert!(text.contains("GPU 0: NVIDIA H200"), "{text}");
}

#[test]
fn a_libcuda_that_lacks_a_function_is_named_with_it_not_reported_missing() {
    let lacks = LoadError::Symbol {
        library: "libcuda.so.1".into(),
        symbol: "cuInit".into(),
    };
    // NVML answers; libcuda is there but lacks cuInit.
    let mut m = h200();
    m.cuda_loaded = false;
    m.cuda_load_error = Some(lacks.clone());
    m.cuda_init = InitOutcome::NotCalled;
    m.cuda_driver_version = None;
    m.cuda_devices.clear();
    let r = run(&matching(), &m, SelftestLevel::Quick);
    let c = check(&r, "cuda-init");
    assert_eq!(c.status, Status::Fail);
    assert_eq!(c.measured.as_deref(), Some("`libcuda.so.1` lacks `cuInit`"));
    let d = c.detail.as_deref().unwrap_or_default();
    assert!(d.contains("was found but lacks `cuInit`"), "{d}");
    assert!(!d.contains("did not inject"), "{d}");
    // No file at all: the container runtime did not inject it.
    m.cuda_load_error = Some(LoadError::NotFound {
        library: "libcuda.so.1".into(),
    });
    let r = run(&matching(), &m, SelftestLevel::Quick);
    let c = check(&r, "cuda-init");
    assert_eq!(c.measured.as_deref(), Some("`libcuda.so.1` not found"));
    assert!(c
        .detail
        .as_deref()
        .unwrap_or_default()
        .contains("did not inject"));
    // Neither driver library loads, one of them for want of a function: not "not found".
    let m = Measurements {
        nvml_load_error: Some(LoadError::NotFound {
            library: "libnvidia-ml.so.1".into(),
        }),
        cuda_load_error: Some(lacks),
        ..Measurements::default()
    };
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::NoGpu);
    assert_eq!(
        r.message.as_deref(),
        Some(
            "No usable NVIDIA driver: `libnvidia-ml.so.1` not found; `libcuda.so.1` lacks `cuInit`"
        )
    );
}
