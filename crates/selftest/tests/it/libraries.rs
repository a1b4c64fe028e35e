//! What the image carries, checked against recorded probe results (no GPU needed): each CUDA
//! library of an expectation (format 2) loads and reports its locked version, suits the
//! host's driver, and the GPU is covered by the image's device code.

use crate::fixture::{check, failed, h200, matching, run, status};
use gpuimg_expect::{DeviceCode, Expectation, LibraryExpectation, SelftestLevel, VersionCall};
use gpuimg_selftest::{LibraryProbe, Measurements, Status, Verdict};

const SITE: &str = "/usr/local/lib/python3.11/dist-packages";

fn lib(name: &str, soname: &str, version: &str, call: VersionCall) -> LibraryExpectation {
    LibraryExpectation {
        name: name.into(),
        soname: soname.into(),
        dir: format!("{SITE}/nvidia/cu13/lib"),
        version: version.into(),
        provider: format!("wheel nvidia-{name}"),
        cuda_major: 13,
        call,
        level: SelftestLevel::Quick,
        companions: vec![],
    }
}

fn probe(l: &LibraryExpectation, reported: &[u64], raw: &str) -> LibraryProbe {
    LibraryProbe {
        name: l.name.clone(),
        path: l.path(),
        reported: Some(reported.to_vec()),
        raw: Some(raw.into()),
        error: None,
        ms: 1.0,
    }
}

/// The H200 host (driver CUDA 13.0) with torch 2.11's cudart 13.0.96 and cuDNN 9.19.0.56.
fn image() -> (Expectation, Measurements) {
    let mut e = matching();
    e.libraries = vec![
        lib(
            "cudart",
            "libcudart.so.13",
            "13.0.96",
            VersionCall::CudaRuntimeGetVersion,
        ),
        lib(
            "cudnn",
            "libcudnn.so.9",
            "9.19.0.56",
            VersionCall::CudnnGetVersion,
        ),
    ];
    let mut m = h200();
    m.libraries = vec![
        probe(&e.libraries[0], &[13, 0], "13000"),
        probe(&e.libraries[1], &[9, 19, 0], "91900"),
    ];
    (e, m)
}

#[test]
fn libraries_reporting_their_locked_versions_pass() {
    let (e, m) = image();
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    let c = check(&r, "library[cudart]");
    assert_eq!(c.status, Status::Pass);
    assert_eq!(c.expected.as_deref(), Some("13.0 (locked 13.0.96)"));
    assert_eq!(
        c.measured.as_deref(),
        Some("13.0 (cudaRuntimeGetVersion 13000)")
    );
    assert_eq!(status(&r, "library[cudnn]"), Status::Pass);
    assert!(r.to_text().contains("library cudart: "), "{}", r.to_text());
    assert!(r.to_json().contains("\"libraries\""));
}

#[test]
fn a_version_other_than_the_locked_one_fails_naming_the_library() {
    let (e, mut m) = image();
    m.libraries[1] = probe(&e.libraries[1], &[9, 17, 1], "91701");
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(failed(&r), vec!["library[cudnn]"]);
    let d = check(&r, "library[cudnn]").detail.clone().unwrap();
    assert_eq!(
        d,
        "libcudnn.so.9 (cudnn, wheel nvidia-cudnn) reports 9.17.1, the image's lock says 9.19.0.56"
    );
}

#[test]
fn a_library_that_does_not_load_fails_naming_it() {
    let (e, mut m) = image();
    m.libraries[0].reported = None;
    m.libraries[0].error =
        Some("dlopen failed: libcudart.so.13: cannot open shared object file".into());
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["library[cudart]"]);
    let c = check(&r, "library[cudart]");
    assert!(c.measured.as_deref().unwrap().starts_with("dlopen failed"));
    assert!(
        c.detail.as_deref().unwrap().starts_with(
            "libcudart.so.13 (cudart, wheel nvidia-cudart) does not load from /usr/local/lib/python3.11/dist-packages/nvidia/cu13/lib"
        ),
        "{c:?}"
    );
    // Never probed at all (the probe did not run): a failure too.
    m.libraries.clear();
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["library[cudart]", "library[cudnn]"]);
    // The probe timed out: the timeout fails, the libraries are not measured.
    m.timed_out = vec!["libraries".into()];
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["probe-timeout"]);
    assert_eq!(status(&r, "library[cudart]"), Status::NotMeasured);
}

#[test]
fn a_library_of_a_newer_cuda_major_than_the_driver_fails() {
    let (mut e, mut m) = image();
    m.cuda_driver_version = Some("12.8".into());
    e.cuda_driver_floor = None;
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["library[cudart]", "library[cudnn]"]);
    let d = check(&r, "library[cudart]").detail.clone().unwrap();
    assert!(
        d.contains("is a CUDA 13 library; the driver supports CUDA 12.8"),
        "{d}"
    );
}

#[test]
fn a_runtime_newer_than_the_driver_within_its_major_warns_about_ptx() {
    let (mut e, mut m) = image();
    e.libraries[0].version = "13.2.86".into();
    // cudaRuntimeGetVersion says 13020 for 13.2.86.
    m.libraries[0] = probe(&e.libraries[0], &[13, 2], "13020");
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    let c = check(&r, "library[cudart]");
    assert_eq!(c.status, Status::Warn);
    assert!(
        c.detail
            .as_deref()
            .unwrap()
            .contains("minor-version compatibility"),
        "{c:?}"
    );
}

#[test]
fn full_level_libraries_are_skipped_at_the_quick_level() {
    let (mut e, mut m) = image();
    let mut lt = lib(
        "cublaslt",
        "libcublasLt.so.13",
        "13.1.0.3",
        VersionCall::CublasLtGetVersion,
    );
    lt.level = SelftestLevel::Full;
    e.libraries.push(lt.clone());
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(status(&r, "library[cublaslt]"), Status::Skip);
    assert_eq!(r.verdict, Verdict::Pass);
    m.libraries.push(probe(&lt, &[13, 1, 0], "130100"));
    let r = run(&e, &m, SelftestLevel::Full);
    assert_eq!(status(&r, "library[cublaslt]"), Status::Pass);
}

#[test]
fn device_code_that_does_not_cover_the_gpu_fails_naming_the_coverage() {
    let (mut e, m) = image();
    let code = |targets: &[&str]| DeviceCode {
        targets: targets.iter().map(|t| t.parse().unwrap()).collect(),
        source: "catalog: test".into(),
        ptx_bytes: None,
    };
    e.device_code = Some(code(&["sm_80", "sm_86"]));
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(failed(&r), vec!["device-code[0]"]);
    let c = check(&r, "device-code[0]");
    assert_eq!(c.expected.as_deref(), Some("sm_80 sm_86 (catalog: test)"));
    assert_eq!(c.measured.as_deref(), Some("cc 9.0"));
    assert!(
        c.detail
            .as_deref()
            .unwrap()
            .contains("no kernel image is available"),
        "{c:?}"
    );
    for covering in [
        &["sm_80", "sm_90"][..],
        &["sm_90a"],
        &["sm_75", "compute_80"],
    ] {
        e.device_code = Some(code(covering));
        let r = run(&e, &m, SelftestLevel::Quick);
        assert_eq!(status(&r, "device-code[0]"), Status::Pass, "{covering:?}");
    }
    e.device_code = Some(code(&["sm_100a", "compute_100"]));
    assert_eq!(
        status(&run(&e, &m, SelftestLevel::Quick), "device-code[0]"),
        Status::Fail
    );
}

#[test]
fn a_format_2_expectation_round_trips_through_its_file() {
    let (mut e, _) = image();
    e.device_code = Some(DeviceCode {
        targets: vec!["sm_90".parse().unwrap(), "compute_90".parse().unwrap()],
        source: "catalog".into(),
        ptx_bytes: Some(41_234_567),
    });
    let json = e.to_json();
    assert!(json.contains("\"format\": 2"), "{json}");
    assert!(
        json.contains("\"call\": \"cudaRuntimeGetVersion\""),
        "{json}"
    );
    assert!(json.contains("\"compute_90\""), "{json}");
    assert!(json.contains("\"ptx_bytes\": 41234567"), "{json}");
    assert_eq!(Expectation::from_json(&json, "e").unwrap(), e);
}

#[test]
fn a_gpu_covered_only_by_ptx_passes_saying_its_size_and_the_first_start_jit() {
    let (mut e, m) = image();
    let code = |targets: &[&str], ptx_bytes| DeviceCode {
        targets: targets.iter().map(|t| t.parse().unwrap()).collect(),
        source: "catalog: test".into(),
        ptx_bytes,
    };
    // The H200 (cc 9.0) with cubins for Ampere only and PTX for compute_80.
    e.device_code = Some(code(&["sm_80", "sm_86", "compute_80"], Some(412_345_678)));
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    let c = check(&r, "device-code[0]");
    assert_eq!(c.status, Status::Pass);
    let d = c.detail.as_deref().unwrap_or_default();
    assert!(
        d.starts_with("Covered by PTX only (compute_80, 412.3 MB of PTX): no cubin for cc 9.0, so the first start JIT-compiles it"),
        "{d}"
    );
    assert!(d.contains("the driver caches the result afterwards"), "{d}");
    // An image whose build did not measure the PTX says so rather than a size.
    e.device_code = Some(code(&["sm_80", "compute_80"], None));
    let r = run(&e, &m, SelftestLevel::Quick);
    let d = check(&r, "device-code[0]")
        .detail
        .clone()
        .unwrap_or_default();
    assert!(
        d.starts_with("Covered by PTX only (compute_80, its size is not recorded)"),
        "{d}"
    );
    // A cubin for the GPU: no JIT, nothing to say.
    e.device_code = Some(code(&["sm_90", "compute_90"], Some(412_345_678)));
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(check(&r, "device-code[0]").detail, None);
}
