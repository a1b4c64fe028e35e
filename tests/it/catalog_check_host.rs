//! Issue 38, "on the GPU machine": `gpuimg catalog check-host` holds a running host's kernel,
//! loaded NVIDIA module and GPUs to the node resolver's rules. The host here is a real one: the
//! files the project's GPU machine reported (`tests/fixtures/hosts/h100-device`, copied
//! verbatim from its `/proc` and `/sys`; the README beside it says how), read through `--root`.
//! The catalog admits what that host runs (exit 0, each GPU mapped to its catalog record);
//! the same texts changed to what the catalog refuses (the open module on a V100, Debian's
//! open 535.261.03 on a kernel it does not compile against) are exit 1 naming the rule; no
//! driver loaded, or the module's two version files disagreeing, is one line and exit 2.

use std::path::{Path, PathBuf};

use crate::common::*;

/// The recorded GPU host (its files under their own paths).
fn real_host() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/h100-device")
}

fn text(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn check(sb: &Sandbox, root: &Path, json: bool) -> (Option<i32>, String, String) {
    let mut cmd = sb.gpuimg();
    cmd.args(["catalog", "check-host", "--root"]).arg(root);
    if json {
        cmd.arg("--json");
    }
    let out = run(&mut cmd);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A copy of the real host's tree to change.
fn copy_of_real(sb: &Sandbox) -> PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let (src, dst) = (e.path(), to.join(e.file_name()));
            if e.file_type().unwrap().is_dir() {
                copy(&src, &dst);
            } else {
                std::fs::copy(&src, &dst).unwrap();
            }
        }
    }
    let root = sb.join("host");
    copy(&real_host(), &root);
    root
}

/// Every GPU's `information` file under `root`.
fn informations(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("proc/driver/nvidia/gpus"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("information"))
        .collect();
    v.sort();
    v
}

#[test]
fn the_catalog_admits_what_a_real_gpu_host_runs() {
    let sb = Sandbox::new();
    let root = real_host();
    let (code, out, err) = check(&sb, &root, true);
    assert_eq!(code, Some(0), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // What the host's own files say, read here independently of gpuimg.
    let nvrm = text(&root, "proc/driver/nvidia/version");
    let driver = text(&root, "sys/module/nvidia/version");
    assert!(nvrm.contains(driver.trim()), "{nvrm}");
    assert_eq!(v["host"]["driver"], driver.trim());
    let flavour = if nvrm.contains("Open Kernel Module") {
        "open"
    } else {
        "proprietary"
    };
    assert_eq!(v["host"]["flavour"], flavour);
    assert_eq!(
        v["host"]["kernel_release"],
        text(&root, "proc/sys/kernel/osrelease").trim()
    );
    let infos = informations(&root);
    assert!(!infos.is_empty());
    let gpus = v["host"]["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), infos.len(), "{v}");
    for (g, info) in gpus.iter().zip(&infos) {
        let model = std::fs::read_to_string(info).unwrap();
        assert!(model.contains(g["model"].as_str().unwrap()), "{v}");
        let name = g["catalog"].as_str().unwrap_or_else(|| panic!("{v}"));
        assert!(model.contains(&format!(" {name} ")), "{name}: {model}");
    }
    let rules: Vec<&str> = (v["verdicts"].as_array().unwrap().iter())
        .map(|x| x["rule"].as_str().unwrap())
        .collect();
    for rule in ["gpu-module", "gpu-min-driver", "branch-min-kernel"] {
        assert!(rules.contains(&rule), "{rule}: {v}");
    }
    assert_eq!(v["refused_by"], serde_json::json!([]));
    // The same, as text: the host's facts, then each rule with its sources.
    let (code, out, _) = check(&sb, &root, false);
    assert_eq!(code, Some(0));
    assert!(out.contains(&format!("driver   {}, {flavour} module", driver.trim())));
    assert!(
        out.contains("ok gpu-module") && out.contains("[nv-"),
        "{out}"
    );
    assert!(
        out.ends_with("ok: the catalog admits what this host runs\n"),
        "{out}"
    );
}

#[test]
fn a_host_running_what_the_catalog_refuses_is_exit_1_naming_the_rule() {
    let sb = Sandbox::new();
    let root = copy_of_real(&sb);
    let set = |rel: &str, body: &str| std::fs::write(root.join(rel), body).unwrap();
    // The open module on a V100: the GPU's own rule.
    for info in informations(&root) {
        let old = std::fs::read_to_string(&info).unwrap();
        let new: Vec<String> = old
            .lines()
            .map(|l| match l.starts_with("Model:") {
                true => "Model: \t\t Tesla V100-SXM2-16GB".to_string(),
                false => l.to_string(),
            })
            .collect();
        std::fs::write(&info, new.join("\n") + "\n").unwrap();
    }
    set(
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.261.03  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Jul  1 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n",
    );
    set("sys/module/nvidia/version", "535.261.03\n");
    let (code, out, err) = check(&sb, &root, false);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("NO gpu-module")
            && out.contains("V100 is driven by the proprietary module only")
            && out.contains("no: this host runs what the catalog would refuse (gpu-module)"),
        "{out}"
    );
    // Debian's open 535.261.03 on bookworm-security's 6.1.192: the known build failure.
    for info in informations(&root) {
        let old = std::fs::read_to_string(&info).unwrap();
        std::fs::write(
            &info,
            old.replace("Tesla V100-SXM2-16GB", "NVIDIA H100 80GB HBM3"),
        )
        .unwrap();
    }
    set("proc/sys/kernel/osrelease", "6.1.0-57-cloud-amd64\n");
    set(
        "proc/sys/kernel/version",
        "#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-11-20)\n",
    );
    let _ = std::fs::remove_file(root.join("proc/version_signature"));
    let (code, out, err) = check(&sb, &root, true);
    assert_eq!(code, Some(1), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["refused_by"], serde_json::json!(["known-build-failure"]));
    assert_eq!(v["host"]["kernel_upstream"], "6.1.192");
    let facts = v["verdicts"].to_string();
    assert!(
        facts.contains("pci_resize_resource") && facts.contains("gpuimg-node-build-measured"),
        "{v}"
    );
}

#[test]
fn no_driver_or_disagreeing_module_files_is_one_line_and_exit_2() {
    let sb = Sandbox::new();
    let root = copy_of_real(&sb);
    std::fs::write(root.join("sys/module/nvidia/version"), "1.2.3\n").unwrap();
    let (code, out, err) = check(&sb, &root, false);
    assert_eq!(code, Some(2), "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("1.2.3") && out.is_empty(), "{err}");
    std::fs::remove_dir_all(root.join("proc/driver/nvidia")).unwrap();
    let (code, out, err) = check(&sb, &root, true);
    assert_eq!(code, Some(2), "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no NVIDIA driver is loaded") && out.is_empty(),
        "{err}"
    );
}
