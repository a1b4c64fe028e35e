//! An image built for GPUs carries the self-test: binary, expect.json, annotation, wrapped
//! entrypoint. Without a GPU (CI) podman runs it and the self-test reports no-GPU, exit 4;
//! with `selftest.enabled: false` the entrypoint is left alone.

use crate::common;

use common::*;

fn profile(dir: &std::path::Path, enabled: bool) -> std::path::PathBuf {
    let root = busybox_rootfs(dir);
    add_glibc_for(&root, Bin::Selftest.path());
    let p = dir.join(format!("p-{enabled}.yaml"));
    write(
        &p,
        &format!(
            r#"name: gpu-demo
base:
  rootfs: ./rootfs
host:
  gpus: [H200]
  driver: ">=550"
stack:
  cuda: "12.4"
selftest:
  enabled: {enabled}
config:
  entrypoint: ["/bin/echo", "workload ran"]
"#
        ),
    );
    p
}

#[test]
fn gpu_image_carries_selftest_and_reports_no_gpu_under_podman() {
    require("umoci");
    let t = Sandbox::new();
    let p = profile(t.path(), true);
    let out = t.path().join("out");
    let json = run_ok(
        t.gpuimg()
            .arg("build")
            .arg(&p)
            .arg("-o")
            .arg(&out)
            .arg("--json"),
    );
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let comps: Vec<&str> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    assert_eq!(comps, ["base", "selftest", "expect"]);

    // The config: wrapped entrypoint, NVIDIA variables, annotation with the binary's sha256.
    let info = run_ok(t.gpuimg().args(["inspect", "--json"]).arg(&out));
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(
        info["config"]["Entrypoint"],
        serde_json::json!([
            "/usr/local/bin/gpuimg-selftest",
            "--",
            "/bin/echo",
            "workload ran"
        ])
    );
    let env: Vec<String> = info["config"]["Env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect();
    assert!(
        env.iter()
            .any(|e| e.starts_with("NVIDIA_REQUIRE_CUDA=cuda>=12")),
        "{env:?}"
    );
    assert!(
        env.iter().any(|e| e.starts_with("CUDA_VERSION=12.4")),
        "{env:?}"
    );
    let (want, _) =
        gpuimg_store::digest::hash_reader(std::fs::File::open(Bin::Selftest.path()).unwrap())
            .unwrap();
    assert_eq!(
        info["annotations"]["io.gpuimg.selftest.sha256"],
        want.to_string()
    );

    // The expectation file in the image names the GPU and a driver floor.
    let bundle = t.path().join("bundle");
    run_ok(
        std::process::Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", out.display()))
            .arg(&bundle),
    );
    let expect: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(bundle.join("rootfs/etc/gpuimg/expect.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(expect["gpus"], serde_json::json!(["H200"]));
    // The profile's platform (the default), which the self-test compares with `uname -m`.
    assert_eq!(
        expect["platform"],
        serde_json::json!({"os": "linux", "architecture": "amd64"})
    );
    assert!(
        expect["driver"].as_str().unwrap().contains(">="),
        "{expect}"
    );

    // No GPU here: the self-test says so, exits 4, and the workload does not run.
    let run = podman_run(t.path(), &format!("oci:{}:latest", out.display()), &[]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        run.status.code(),
        Some(4),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(!stdout.contains("workload ran"), "{stdout}");
    assert!(
        stderr.to_lowercase().contains("no gpu") || stderr.contains("no-gpu"),
        "{stderr}"
    );
}

#[test]
fn selftest_disabled_leaves_entrypoint_alone() {
    let t = Sandbox::new();
    let p = profile(t.path(), false);
    let out = t.path().join("out");
    run_ok(t.gpuimg().arg("build").arg(&p).arg("-o").arg(&out));
    let run = podman_run(t.path(), &format!("oci:{}:latest", out.display()), &[]);
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("workload ran"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}
