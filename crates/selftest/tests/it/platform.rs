//! The `platform` check: the expectation's OS and architecture against the host's `uname`
//! (`x86_64` is amd64, `aarch64` arm64): a match passes, a mismatch fails with exit 1 (with or
//! without a GPU), an older expectation without the field is not compared.

use gpuimg_expect::{ImagePlatform, SelftestLevel};
use gpuimg_selftest::{Measurements, Status, Verdict};

use super::fixture::{check, failed, h200, matching, run};

fn arm64() -> Option<ImagePlatform> {
    Some(ImagePlatform {
        os: "linux".into(),
        architecture: "arm64".into(),
    })
}

#[test]
fn the_hosts_machine_matching_the_image_passes() {
    let r = run(&matching(), &h200(), SelftestLevel::Quick);
    let c = check(&r, "platform");
    assert_eq!(c.status, Status::Pass);
    assert_eq!(c.expected.as_deref(), Some("linux/amd64"));
    assert_eq!(
        c.measured.as_deref(),
        Some("linux/amd64 (uname -m: x86_64)")
    );
    // A Grace host running an arm64 image.
    let mut e = matching();
    e.platform = arm64();
    let mut m = h200();
    m.machine = Some("aarch64".into());
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(check(&r, "platform").status, Status::Pass);
    assert_eq!(r.verdict, Verdict::Pass);
}

#[test]
fn an_image_for_another_machine_fails_naming_both() {
    let mut e = matching();
    e.platform = arm64();
    let r = run(&e, &h200(), SelftestLevel::Quick);
    assert_eq!(failed(&r), ["platform"]);
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(r.verdict.exit_code(), 1);
    let c = check(&r, "platform");
    assert_eq!(c.expected.as_deref(), Some("linux/arm64"));
    assert_eq!(
        c.measured.as_deref(),
        Some("linux/amd64 (uname -m: x86_64)")
    );
    assert_eq!(
        c.detail.as_deref(),
        Some("The image was built for linux/arm64; its programs and libraries cannot run on linux/amd64")
    );
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["verdict"], "fail");
    assert_eq!(v["checks"][0]["name"], "platform");
    assert_eq!(v["checks"][0]["status"], "fail");
}

#[test]
fn a_mismatch_fails_on_a_host_without_a_gpu_too() {
    let mut e = matching();
    e.platform = arm64();
    let m = Measurements {
        os: Some("Linux".into()),
        machine: Some("x86_64".into()),
        ..Measurements::default()
    };
    let r = run(&e, &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(r.verdict.exit_code(), 1);
    assert_eq!(failed(&r), ["platform"]);
    assert!(
        r.message.as_deref().unwrap().contains("libcuda.so.1"),
        "{:?}",
        r.message
    );
    // The same host with the image's own machine: no GPU, as before (exit 4).
    let r = run(&matching(), &m, SelftestLevel::Quick);
    assert_eq!(r.verdict, Verdict::NoGpu);
    assert!(r.checks.is_empty(), "{:?}", r.checks);
}

#[test]
fn an_expectation_without_a_platform_is_not_compared() {
    let mut e = matching();
    e.platform = None;
    let mut m = h200();
    m.machine = Some("aarch64".into());
    let r = run(&e, &m, SelftestLevel::Quick);
    let c = check(&r, "platform");
    assert_eq!(c.status, Status::Skip);
    assert_eq!(c.detail.as_deref(), Some("No expectation"));
    assert_eq!(r.verdict, Verdict::Pass);
    // An older image's file, as it was written: it loads, and the check skips.
    let older =
        gpuimg_expect::Expectation::from_json(r#"{"format": 2, "driver": ">=580,<581"}"#, "e")
            .unwrap();
    let r = run(&older, &h200(), SelftestLevel::Quick);
    assert_eq!(check(&r, "platform").status, Status::Skip);
}

#[test]
fn no_uname_answer_warns_and_decides_nothing() {
    let mut m = h200();
    m.os = None;
    m.machine = None;
    let r = run(&matching(), &m, SelftestLevel::Quick);
    let c = check(&r, "platform");
    assert_eq!(c.status, Status::Warn);
    assert_eq!(r.verdict, Verdict::Pass);
}
