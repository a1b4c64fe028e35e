//! NVML against CUDA, and checks that claim only what was measured (no GPU needed).
//!
//! Crafted measurements: the two views agree, disagree on name, compute capability or memory,
//! show a GPU the other does not, match by UUID or only by PCI bus id, MIG devices; and
//! `cuInit` / NVML outcomes after which dependent checks must say "not measured" and why.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::fixture::{check, failed, h200, matching, named, run, BUS, UUID};
use gpuimg_expect::{Expectation, SelftestLevel};
use gpuimg_selftest::{
    memory_agrees, normalize_pci_bus_id, pair, report_from, Because, CudaDeviceResult, InitOutcome,
    MatchedBy, Measurements, MigDevice, Report, Status, Verdict, MEMORY_TOLERANCE_MIB,
};

const UUID_B: &str = "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9";
const BUS_B: &str = "0000:2a:00.0";

/// Two H200s, both seen alike by NVML and CUDA.
fn two_gpus() -> Measurements {
    let mut m = h200();
    let mut g = m.gpus[0].clone();
    g.index = 1;
    g.uuid = UUID_B.into();
    g.pci_bus_id = Some(BUS_B.into());
    m.gpus.push(g);
    let mut d = m.cuda_devices[0].clone();
    d.ordinal = 1;
    d.uuid = UUID_B.into();
    d.pci_bus_id = Some(BUS_B.into());
    m.cuda_devices.push(d);
    m
}

/// An H100 in MIG mode with two MIG devices; CUDA shows the first (as it does: one per process).
fn mig_host() -> Measurements {
    let mut m = h200();
    let g = &mut m.gpus[0];
    g.name = "NVIDIA H100 80GB HBM3".into();
    g.memory_total_mib = 81559;
    g.mig_enabled = Some(true);
    g.mig_devices = vec![
        MigDevice {
            index: 0,
            uuid: "MIG-7d3a9b4e-1c2f-5a6b-8c9d-0e1f2a3b4c5d".into(),
            name: "NVIDIA H100 80GB HBM3 MIG 3g.40gb".into(),
            memory_total_mib: 40_448,
        },
        MigDevice {
            index: 1,
            uuid: "MIG-11223344-5566-7788-99aa-bbccddeeff00".into(),
            name: "NVIDIA H100 80GB HBM3 MIG 3g.40gb".into(),
            memory_total_mib: 40_448,
        },
    ];
    // CUDA spells the MIG device's bytes as `GPU-` until the collector respells them.
    m.cuda_devices = vec![CudaDeviceResult {
        ordinal: 0,
        uuid: "GPU-7d3a9b4e-1c2f-5a6b-8c9d-0e1f2a3b4c5d".into(),
        name: "NVIDIA H100 80GB HBM3 MIG 3g.40gb".into(),
        compute_capability: "9.0".into(),
        memory_total_mib: Some(39_936),
        pci_bus_id: Some(BUS.into()),
        ..h200().cuda_devices[0].clone()
    }];
    m
}

fn any() -> Expectation {
    Expectation::default()
}

fn with_env(m: &Measurements, env: &[(&str, &str)]) -> Report {
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    report_from(
        &matching(),
        m,
        &env,
        SelftestLevel::Quick,
        Duration::from_millis(5),
    )
}

fn detail<'a>(r: &'a Report, name: &str) -> &'a str {
    check(r, name).detail.as_deref().unwrap_or("")
}

#[test]
fn agreeing_views_pass_and_say_how_they_matched() {
    let r = run(&matching(), &h200(), SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    let c = check(&r, "nvml-cuda[0]");
    assert_eq!(c.status, Status::Pass);
    assert_eq!(
        c.expected.as_deref(),
        Some("NVML: NVIDIA H200, cc 9.0, 143771 MiB")
    );
    assert_eq!(
        c.measured.as_deref(),
        Some("CUDA 0: NVIDIA H200, cc 9.0, 143156 MiB, by UUID")
    );
    assert!(c.detail.as_deref().unwrap().contains("3 % or 1024 MiB"));
    let r = run(&matching(), &two_gpus(), SelftestLevel::Quick);
    assert_eq!(
        named(&r, "nvml-cuda"),
        vec![
            ("nvml-cuda[0]", Status::Pass),
            ("nvml-cuda[1]", Status::Pass)
        ]
    );
}

#[test]
fn each_disagreement_fails_naming_both_values() {
    let mut m = h200();
    m.cuda_devices[0].name = "NVIDIA H100 80GB HBM3".into();
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(
        (r.verdict, failed(&r)),
        (Verdict::Fail, vec!["nvml-cuda[0]"])
    );
    assert_eq!(
        detail(&r, "nvml-cuda[0]"),
        format!("GPU 0 ({UUID}): NVML says name `NVIDIA H200`, CUDA says `NVIDIA H100 80GB HBM3`")
    );

    let mut m = h200();
    m.cuda_devices[0].compute_capability = "8.0".into();
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["nvml-cuda[0]"]);
    assert!(detail(&r, "nvml-cuda[0]").ends_with("NVML says compute capability 9.0, CUDA says 8.0"));

    // 80 GiB where NVML says 140 GiB: the example from the issue.
    let mut m = h200();
    m.cuda_devices[0].memory_total_mib = Some(81920);
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["nvml-cuda[0]"]);
    assert_eq!(
        detail(&r, "nvml-cuda[0]"),
        format!(
            "GPU 0 ({UUID}): NVML says 143771 MiB (140.4 GiB), CUDA says 81920 MiB (80.0 GiB) (tolerance 3 % or 1024 MiB)"
        )
    );

    // All three at once: one check, every difference named.
    let mut m = h200();
    m.cuda_devices[0].name = "Tesla T4".into();
    m.cuda_devices[0].compute_capability = "7.5".into();
    m.cuda_devices[0].memory_total_mib = Some(15_095);
    let r = run(&any(), &m, SelftestLevel::Quick);
    let d = detail(&r, "nvml-cuda[0]");
    assert_eq!(d.matches("NVML says").count(), 3, "{d}");
    assert!(r.to_text().contains("NVML says name `NVIDIA H200`"));
}

#[test]
fn memory_tolerance_is_the_larger_of_3_percent_and_1_gib() {
    // 3 % of 143771 MiB is 4313 MiB.
    assert!(memory_agrees(143_771, 143_771 - 4313));
    assert!(!memory_agrees(143_771, 143_771 - 4314));
    assert!(memory_agrees(143_771, 143_771 + 4313));
    assert!(!memory_agrees(143_771, 143_771 + 4314));
    // Small card: the 1024 MiB floor (a T4 shows 15360 MiB in NVML, about 15095 in CUDA).
    assert!(memory_agrees(15_360, 15_095));
    assert!(memory_agrees(4096, 4096 - MEMORY_TOLERANCE_MIB));
    assert!(!memory_agrees(4096, 4096 - MEMORY_TOLERANCE_MIB - 1));
    assert!(memory_agrees(0, 0));
    // Within tolerance passes; just outside fails, through the whole report.
    let mut m = h200();
    m.cuda_devices[0].memory_total_mib = Some(143_771 - 4313);
    assert_eq!(
        failed(&run(&any(), &m, SelftestLevel::Quick)),
        Vec::<&str>::new()
    );
    m.cuda_devices[0].memory_total_mib = Some(143_771 - 4314);
    assert_eq!(
        failed(&run(&any(), &m, SelftestLevel::Quick)),
        vec!["nvml-cuda[0]"]
    );
    // A side that did not report memory: not compared, and the check says so.
    let mut m = h200();
    m.cuda_devices[0].memory_total_mib = None;
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(check(&r, "nvml-cuda[0]").status, Status::Pass);
    assert!(detail(&r, "nvml-cuda[0]").contains("(memory not compared: not reported)"));
}

#[test]
fn a_gpu_only_one_api_shows_is_reported() {
    // NVML shows two, CUDA one.
    let mut m = two_gpus();
    m.cuda_devices.truncate(1);
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["nvml-cuda[1]"]);
    assert_eq!(
        detail(&r, "nvml-cuda[1]"),
        format!("NVML shows GPU 1 ({UUID_B}, bus {BUS_B}) but CUDA shows no device with its UUID or PCI bus id")
    );
    // ... because CUDA_VISIBLE_DEVICES hides it: a warning, not a failure.
    let r = with_env(&m, &[("CUDA_VISIBLE_DEVICES", "0")]);
    assert_eq!(check(&r, "nvml-cuda[1]").status, Status::Warn);
    assert!(detail(&r, "nvml-cuda[1]").contains("CUDA_VISIBLE_DEVICES=`0`"));
    assert_eq!(r.verdict, Verdict::Pass);
    // CUDA shows a device NVML does not.
    let mut m = two_gpus();
    m.gpus.truncate(1);
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["nvml-cuda[cuda1]"]);
    assert!(detail(&r, "nvml-cuda[cuda1]").starts_with(&format!(
        "CUDA shows device 1 ({UUID_B}) but NVML shows no GPU"
    )));
}

#[test]
fn pci_bus_id_is_the_fallback_when_uuids_do_not_match() {
    // NVML gave no UUID: matched by bus id (either spelling), and compared.
    let mut m = h200();
    m.gpus[0].uuid.clear();
    m.cuda_devices[0].pci_bus_id = normalize_pci_bus_id("0000:19:00.0");
    m.gpus[0].pci_bus_id = normalize_pci_bus_id("00000000:19:00.0");
    let r = run(&any(), &m, SelftestLevel::Quick);
    let c = check(&r, "nvml-cuda[0]");
    assert_eq!(c.status, Status::Pass, "{c:?}");
    assert!(c.measured.as_deref().unwrap().ends_with("by PCI bus id"));
    // Both have UUIDs that differ on one bus: the UUIDs disagree.
    let mut m = h200();
    m.cuda_devices[0].uuid = UUID_B.into();
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["nvml-cuda[0]"]);
    assert!(
        detail(&r, "nvml-cuda[0]").contains(&format!("NVML says UUID {UUID}, CUDA says {UUID_B}"))
    );
    // No UUID and no bus id in common: nothing pairs them.
    let mut m = h200();
    m.cuda_devices[0].uuid = UUID_B.into();
    m.cuda_devices[0].pci_bus_id = Some(BUS_B.into());
    let (pairs, unmatched) = pair(&m.gpus, &m.cuda_devices);
    assert!(pairs.is_empty());
    assert_eq!(unmatched.len(), 1);
    // UUID wins over bus id: two GPUs whose bus ids were swapped still pair by UUID.
    let mut m = two_gpus();
    m.cuda_devices[0].pci_bus_id = Some(BUS_B.into());
    m.cuda_devices[1].pci_bus_id = Some(BUS.into());
    let (pairs, _) = pair(&m.gpus, &m.cuda_devices);
    let got: Vec<(u32, u32, MatchedBy)> = pairs
        .iter()
        .map(|p| (p.gpu.index, p.cuda.ordinal, p.by))
        .collect();
    assert_eq!(got, vec![(0, 0, MatchedBy::Uuid), (1, 1, MatchedBy::Uuid)]);
    // Reordered by CUDA_VISIBLE_DEVICES=1,0: UUIDs pair them, not ordinals.
    let mut m = two_gpus();
    m.cuda_devices.reverse();
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), Vec::<&str>::new());
}

#[test]
fn bus_ids_normalise_from_both_spellings() {
    let cases = [
        ("00000000:19:00.0", Some("0000:19:00.0")),
        ("0000:19:00.0", Some("0000:19:00.0")),
        ("0000:C1:00.0", Some("0000:c1:00.0")),
        ("00000001:9A:1f.7", Some("0001:9a:1f.7")),
        ("19:00.0", Some("0000:19:00.0")),
        (" 0000:19:00.0\n", Some("0000:19:00.0")),
        ("", None),
        ("0000:19:00", None),
        ("0000:1234:00.0", None),
        ("0000:19:00.8", None),
        ("zz:19:00.0", None),
        ("0000:19:20.0", None),
    ];
    for (raw, want) in cases {
        assert_eq!(normalize_pci_bus_id(raw).as_deref(), want, "{raw:?}");
    }
}

#[test]
fn mig_devices_are_matched_and_compared_with_the_mig_device() {
    let m = mig_host();
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    let c = check(&r, "nvml-cuda[0/mig0]");
    assert_eq!(c.status, Status::Pass);
    assert_eq!(
        c.expected.as_deref(),
        Some("NVML: NVIDIA H100 80GB HBM3 MIG 3g.40gb, cc 9.0, 40448 MiB")
    );
    assert!(c.measured.as_deref().unwrap().ends_with("by MIG UUID"));
    // The parent's 80 GB is not what a MIG device has: no false failure from it, and the
    // functional check runs on the MIG device.
    assert_eq!(check(&r, "functional[0]").status, Status::Pass);
    // A MIG device's memory far from its NVML value fails, naming both.
    let mut m = mig_host();
    m.cuda_devices[0].memory_total_mib = Some(81_000);
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["nvml-cuda[0/mig0]"]);
    assert!(detail(&r, "nvml-cuda[0/mig0]").starts_with(
        "GPU 0 MIG 0 (MIG-7d3a9b4e-1c2f-5a6b-8c9d-0e1f2a3b4c5d): NVML says 40448 MiB (39.5 GiB), CUDA says 81000 MiB"
    ));
    // A CUDA name of the parent's plus a suffix is the same GPU; another GPU's is not.
    let mut m = mig_host();
    m.cuda_devices[0].name = "NVIDIA H100 80GB HBM3 MIG 3g.40gb (renamed)".into();
    assert_eq!(
        failed(&run(&any(), &m, SelftestLevel::Quick)),
        Vec::<&str>::new()
    );
    m.cuda_devices[0].name = "NVIDIA A100-SXM4-80GB MIG 3g.40gb".into();
    assert_eq!(
        failed(&run(&any(), &m, SelftestLevel::Quick)),
        vec!["nvml-cuda[0/mig0]"]
    );
    // The compute capability is the parent's.
    let mut m = mig_host();
    m.cuda_devices[0].compute_capability = "8.0".into();
    assert_eq!(
        failed(&run(&any(), &m, SelftestLevel::Quick)),
        vec!["nvml-cuda[0/mig0]"]
    );
}

#[test]
fn mig_without_a_mig_uuid_match_falls_back_without_false_failures() {
    // UUID bytes unknown to NVML (no MIG list), same bus: paired with the parent; memory is not
    // compared with the parent's (a MIG device has less), name and cc are.
    let mut m = mig_host();
    m.gpus[0].mig_devices.clear();
    let r = run(&any(), &m, SelftestLevel::Quick);
    let c = check(&r, "nvml-cuda[0/cuda0]");
    assert_eq!(c.status, Status::Pass, "{c:?}");
    assert!(c.detail.as_deref().unwrap().contains("memory not compared"));
    // One MIG device on the parent: that is the one, memory compared with it.
    let mut m = mig_host();
    m.gpus[0].mig_devices.truncate(1);
    m.gpus[0].mig_devices[0].uuid = "MIG-ffffffff-ffff-ffff-ffff-ffffffffffff".into();
    let r = run(&any(), &m, SelftestLevel::Quick);
    let c = check(&r, "nvml-cuda[0/mig0]");
    assert_eq!(c.status, Status::Pass, "{c:?}");
    assert!(c.measured.as_deref().unwrap().ends_with("by PCI bus id"));
    // MIG on and CUDA shows none of its MIG devices: nothing to compare, no failure.
    let mut m = mig_host();
    m.cuda_devices.clear();
    m.cuda_init = InitOutcome::Ok;
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(check(&r, "nvml-cuda[0]").status, Status::Skip);
    assert_eq!(failed(&r), Vec::<&str>::new());
    // MIG on with no MIG devices at all: CUDA cannot use it; a warning says so.
    m.gpus[0].mig_devices.clear();
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(check(&r, "nvml-cuda[0]").status, Status::Warn);
    assert!(detail(&r, "nvml-cuda[0]").contains("no MIG devices"));
}

/// The state `collect` leaves after `cuInit` did not answer: the version was read before it.
fn cuinit_timed_out() -> Measurements {
    let mut m = h200();
    m.cuda_init = InitOutcome::TimedOut;
    m.cuda_devices.clear();
    m.timed_out = vec!["cuda: cuInit".into()];
    m
}

#[test]
fn after_a_cuinit_timeout_dependent_checks_are_not_measured() {
    for level in [SelftestLevel::Quick, SelftestLevel::Full] {
        let mut m = cuinit_timed_out();
        // Without the version too (an older collector, or cuDriverGetVersion failed).
        for version in [Some("13.0"), None] {
            m.cuda_driver_version = version.map(String::from);
            let r = run(&matching(), &m, level);
            assert_eq!(r.verdict, Verdict::Fail);
            assert_eq!(r.verdict.exit_code(), 1);
            assert_eq!(
                failed(&r),
                vec!["probe-timeout", "cuda-init"],
                "{}",
                r.to_text()
            );
            assert_eq!(
                check(&r, "cuda-init").measured.as_deref(),
                Some("no answer")
            );
            for name in ["nvml-cuda", "functional[0]"] {
                let c = check(&r, name);
                assert_eq!(
                    (c.status, c.because),
                    (Status::NotMeasured, Some(Because::CuinitTimedOut)),
                    "{name}"
                );
                assert_eq!(c.detail.as_deref(), Some("Not measured: cuInit timed out"));
            }
            if level == SelftestLevel::Full {
                assert_eq!(
                    check(&r, "bandwidth[0]").because,
                    Some(Because::CuinitTimedOut)
                );
            }
            let cuda = check(&r, "cuda-driver");
            match version {
                Some(_) => assert_eq!(cuda.status, Status::Pass),
                None => assert_eq!(
                    (cuda.status, cuda.because),
                    (Status::NotMeasured, Some(Because::CudaVersionUnavailable))
                ),
            }
            // NVML answered: the count is NVML's, and says CUDA's is missing.
            assert_eq!(
                check(&r, "gpu-count").measured.as_deref(),
                Some("1 (NVML 1, CUDA not measured: cuInit timed out)")
            );
            // Nothing claims a cause nobody measured.
            let text = r.to_text();
            for never in ["older", "insufficient", "not visible"] {
                assert!(!text.contains(never), "`{never}` in:\n{text}");
            }
            let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
            assert_eq!(json["cuda_init"], "timed-out");
            let f = json["checks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "functional[0]")
                .unwrap()
                .clone();
            assert_eq!(
                (f["status"].as_str(), f["because"].as_str()),
                (Some("not-measured"), Some("cuinit-timed-out"))
            );
        }
    }
}

#[test]
fn other_cuinit_and_nvml_outcomes_name_their_cause() {
    // cuInit returned an error.
    let mut m = h200();
    m.cuda_init = InitOutcome::Failed;
    m.cuda_error = Some("cuInit: CUDA_ERROR_UNKNOWN (999)".into());
    m.cuda_devices.clear();
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!((r.verdict.exit_code(), failed(&r)), (1, vec!["cuda-init"]));
    assert_eq!(
        check(&r, "functional[0]").because,
        Some(Because::CuinitFailed)
    );
    assert_eq!(check(&r, "nvml-cuda").because, Some(Because::CuinitFailed));
    // The cuInit thread died.
    let mut m = cuinit_timed_out();
    m.cuda_init = InitOutcome::Crashed;
    m.timed_out = vec!["cuda: cuInit (probe crashed)".into()];
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["probe-timeout", "cuda-init"]);
    assert_eq!(
        check(&r, "functional[0]").because,
        Some(Because::CuinitCrashed)
    );
    // cuDriverGetVersion stalled, so cuInit was never called.
    let mut m = cuinit_timed_out();
    m.cuda_init = InitOutcome::NotCalled;
    m.cuda_driver_version = None;
    m.timed_out = vec!["cuda: cuDriverGetVersion".into()];
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["probe-timeout"]);
    assert_eq!(
        check(&r, "cuda-init").because,
        Some(Because::EarlierProbeTimedOut)
    );
    assert_eq!(
        check(&r, "cuda-driver").because,
        Some(Because::CudaVersionUnavailable)
    );
    // No libnvidia-ml (a compute-only container): the cross-check is not measured, and that
    // alone fails nothing.
    let mut m = h200();
    m.nvml_loaded = false;
    m.nvml_init = InitOutcome::NotCalled;
    m.driver_version = None;
    m.gpus.clear();
    let r = run(&any(), &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    assert_eq!(check(&r, "nvml-cuda").because, Some(Because::NvmlNotLoaded));
    // NVML timed out: the driver-library comparison is not measured; the timeout fails.
    let mut m = h200();
    m.nvml_init = InitOutcome::TimedOut;
    m.driver_version = None;
    m.gpus.clear();
    m.timed_out = vec!["nvml".into()];
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["probe-timeout"]);
    assert_eq!(
        check(&r, "driver-libraries").because,
        Some(Because::NvmlTimedOut)
    );
    assert_eq!(check(&r, "nvml-cuda").because, Some(Because::NvmlTimedOut));
    assert_eq!(
        check(&r, "gpu-count").measured.as_deref(),
        Some("1 (NVML not measured: NVML timed out, CUDA 1)")
    );
}

#[test]
fn a_kernel_timeout_leaves_later_gpus_not_measured() {
    let mut m = two_gpus();
    m.timed_out = vec!["cuda: kernel on GPU 0".into()];
    for d in &mut m.cuda_devices {
        d.kernel_verified = None;
        d.kernel_ms = None;
    }
    m.cuda_devices[0].kernel_error = Some("Did not finish within 15 s".into());
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["probe-timeout", "functional[0]"]);
    let c = check(&r, "functional[1]");
    assert_eq!(
        (c.status, c.because),
        (Status::NotMeasured, Some(Because::EarlierProbeTimedOut))
    );
    assert!(r.to_text().contains("not-measured"));
}
