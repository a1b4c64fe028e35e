//! Issue 37, item 2 (its first part): the wheel tags gpuimg generates for `linux/arm64` (the
//! manylinux ladder down to 2_17 and its `manylinux2014` alias) against NVIDIA's real aarch64
//! CUDA wheels on the build host's Python index: the runtime's (`manylinux2014_aarch64`) and
//! cuDNN's (`manylinux_2_27_aarch64`) are locked, and every wheel of the lock is aarch64 or
//! pure Python.

use crate::common::{run, with_host_index, Sandbox};

#[test]
fn an_arm64_lock_takes_nvidias_manylinux2014_and_2_27_aarch64_wheels() {
    let sb = Sandbox::new();
    let profile = sb.join("w.yaml");
    std::fs::write(
        &profile,
        "name: w\nplatform: linux/arm64\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [base-files, libc6, python3]\npython:\n  packages: [\"nvidia-cuda-runtime==13.0.96\", \"nvidia-cudnn-cu13==9.13.1.26\"]\nselftest: {enabled: false}\n",
    )
    .unwrap();
    let mut cmd = with_host_index(sb.gpuimg());
    let out = run(cmd.arg("lock").arg(&profile));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Python packages for Python 3.11 (aarch64)"),
        "{stderr}"
    );
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sb.join("w.lock.json")).unwrap()).unwrap();
    let wheels: Vec<(String, String)> = (lock["artifacts"].as_array().unwrap().iter())
        .filter(|a| a["kind"] == "wheel")
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap().to_string();
            (s("name"), s("filename"))
        })
        .collect();
    let file = |name: &str| -> &str {
        let found = wheels.iter().find(|(n, _)| n == name);
        &found
            .unwrap_or_else(|| panic!("{name} not locked: {wheels:?}"))
            .1
    };
    assert!(
        file("nvidia-cuda-runtime").contains("-manylinux2014_aarch64"),
        "{wheels:?}"
    );
    assert!(
        file("nvidia-cudnn-cu13").ends_with("-manylinux_2_27_aarch64.whl"),
        "{wheels:?}"
    );
    for (name, f) in &wheels {
        assert!(
            f.ends_with("aarch64.whl") || f.ends_with("-none-any.whl"),
            "{name}: {f} is neither aarch64 nor pure Python"
        );
        assert!(!f.contains("x86_64") && !f.contains("musllinux"), "{f}");
    }
}

/// Issue 37, item 2: whether a torch release's aarch64 wheel carries CUDA is read from its
/// metadata (its NVIDIA requirements' markers), never from its version. On the host's index,
/// torch 2.9.1's aarch64 wheel lists the NVIDIA packages for `x86_64` only: a GH200 profile
/// pinning it is a "no" citing the index; torch 2.11.0's lists them for aarch64 too and
/// resolves with CUDA.
#[test]
fn a_torch_aarch64_wheel_carries_cuda_only_where_its_metadata_says() {
    let sb = Sandbox::new();
    let profile = |torch: &str| {
        let p = sb.join(format!("gh-{torch}.yaml"));
        std::fs::write(
            &p,
            format!("name: gh\nplatform: linux/arm64\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [base-files, libc6, python3]\nhost: {{gpus: [GH200]}}\nstack: {{pytorch: \"{torch}\"}}\npython: {{packages: []}}\n"),
        )
        .unwrap();
        p
    };
    let out = run(with_host_index(sb.gpuimg())
        .args(["resolve", "--json"])
        .arg(profile("2.9.1")));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let no: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let facts = no["reasons"][0]["facts"][0]["fact"].as_str().unwrap();
    assert!(
        facts.contains("the index installs torch 2.9.1 (cpu), without CUDA")
            && facts.contains("(aarch64)"),
        "{no}"
    );
    let out = run(with_host_index(sb.gpuimg())
        .args(["resolve", "--json"])
        .arg(profile("2.11.0")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ok: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        ok["components"]["pytorch"]
            .as_str()
            .unwrap()
            .starts_with("2.11.0"),
        "{ok}"
    );
    assert!(
        ok["components"]["cuda"]
            .as_str()
            .unwrap()
            .starts_with("13."),
        "{ok}"
    );
}
