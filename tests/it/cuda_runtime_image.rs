//! `profiles/cuda-runtime.yaml` from the real index (through the build host's pip
//! configuration), run under podman on this GPU-less machine: the image's expectation (format
//! 2) lists libcudart and libnvrtc with the versions the installed wheels' `METADATA` give
//! (read by the test from the unpacked image) and their files lie where it says, and
//! `inspect --unused` counts them used (the self-test loads them by name);
//! the self-test's own library probe loads both from the unpacked image on this host (no
//! driver needed) and reads 12.4 through `cudaRuntimeGetVersion` and `nvrtcVersion`;
//! `gpuimg-selftest` run directly exits with the no-GPU code (4); the wrapped entrypoint with
//! `on-failure: warn` still runs the workload (the image's NVRTC compiling a kernel, which
//! needs no GPU), whose exit status the container returns.

use crate::common;

use std::process::Command;

use common::*;
use gpuimg_expect::Expectation;

const PROFILE: &str = include_str!("../../profiles/cuda-runtime.yaml");
const SITE: &str = "usr/local/lib/python3.11/dist-packages";

/// The workload: the image's NVRTC (no GPU needed) compiles a kernel to PTX for sm_90, which
/// needs its builtins library and so the image's libstdc++; then exit 7.
const NVRTC_WORKLOAD: &str = r#"
import ctypes, glob, sys
lib = "/usr/local/lib/python3.11/dist-packages/nvidia/cuda_nvrtc/lib/"
nvrtc = ctypes.CDLL(glob.glob(lib + "libnvrtc.so.12")[0])
prog = ctypes.c_void_p()
src = b'extern "C" __global__ void k(float* y) { y[threadIdx.x] = 2.0f * threadIdx.x; }'
assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None) == 0
opts = (ctypes.c_char_p * 1)(b"--gpu-architecture=compute_90")
rc = nvrtc.nvrtcCompileProgram(prog, 1, opts)
if rc != 0:
    n = ctypes.c_size_t(); nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value); nvrtc.nvrtcGetProgramLog(prog, log)
    sys.exit("nvrtcCompileProgram %d: %s" % (rc, log.value.decode(errors="replace")))
n = ctypes.c_size_t(); nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(n))
ptx = ctypes.create_string_buffer(n.value); nvrtc.nvrtcGetPTX(prog, ptx)
print("workload ran: NVRTC compiled %d bytes of PTX" % n.value)
print(ptx.value.decode())
sys.exit(7)
"#;

/// `gpuimg` in `sb`, seeing the host's Python index configuration (as tests/python_image.rs).
fn gpuimg(sb: &Sandbox) -> Command {
    with_host_index(sb.gpuimg_with_cache(&sb.join("cache")))
}

/// The `Version:` of the installed distribution `dist` (its `*.dist-info/METADATA`).
fn metadata_version(site: &std::path::Path, dist: &str) -> String {
    let prefix = format!("{}-", dist.replace('-', "_"));
    let info = std::fs::read_dir(site)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with(&prefix) && n.ends_with(".dist-info"))
        .unwrap_or_else(|| panic!("no {prefix}*.dist-info in {}", site.display()));
    let meta = read(&site.join(info).join("METADATA"));
    meta.lines()
        .find_map(|l| l.strip_prefix("Version: "))
        .unwrap_or_else(|| panic!("no Version in {dist}'s METADATA"))
        .trim()
        .to_string()
}

#[test]
fn cuda_runtime_profile_lists_its_libraries_and_runs_under_podman_without_a_gpu() {
    require("umoci");
    let sb = Sandbox::new();
    write(&sb.join("cuda-runtime.yaml"), PROFILE);
    run_ok(gpuimg(&sb).arg("lock").arg(sb.join("cuda-runtime.yaml")));
    run_ok(
        gpuimg(&sb)
            .args(["build", "--locked", "-q", "-o"])
            .arg(sb.join("out"))
            .arg(sb.join("cuda-runtime.yaml")),
    );

    // The expectation, read from the unpacked image, against the wheels' own METADATA.
    let bundle = sb.join("bundle");
    run_ok(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", sb.join("out").display()))
            .arg(&bundle),
    );
    let rootfs = bundle.join("rootfs");
    let site = rootfs.join(SITE);
    let e: serde_json::Value =
        serde_json::from_str(&read(&rootfs.join("etc/gpuimg/expect.json"))).unwrap();
    assert_eq!(e["format"], 2, "{e}");
    let libs = e["libraries"].as_array().unwrap_or_else(|| panic!("{e}"));
    let names: Vec<&str> = libs.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cudart", "nvrtc"], "{e}");
    for (lib, dist, soname, dir, call) in [
        (
            &libs[0],
            "nvidia-cuda-runtime-cu12",
            "libcudart.so.12",
            "nvidia/cuda_runtime/lib",
            "cudaRuntimeGetVersion",
        ),
        (
            &libs[1],
            "nvidia-cuda-nvrtc-cu12",
            "libnvrtc.so.12",
            "nvidia/cuda_nvrtc/lib",
            "nvrtcVersion",
        ),
    ] {
        let version = metadata_version(&site, dist);
        assert!(version.starts_with("12.4."), "{dist} {version}");
        assert_eq!(lib["version"], version.as_str(), "{lib}");
        assert_eq!(lib["soname"], soname, "{lib}");
        assert_eq!(lib["dir"], format!("/{SITE}/{dir}").as_str(), "{lib}");
        assert_eq!(lib["provider"], format!("wheel {dist}").as_str(), "{lib}");
        assert_eq!(lib["call"], call, "{lib}");
        assert_eq!(lib["cuda_major"], 12, "{lib}");
        assert_eq!(lib["level"], "quick", "{lib}");
        if lib["name"] == "nvrtc" {
            let builtins = format!("libnvrtc-builtins.so.{}", &version[..4]);
            assert_eq!(lib["companions"], serde_json::json!([builtins]), "{lib}");
            assert!(rootfs.join(SITE).join(dir).join(&builtins).is_file());
        }
        let file = rootfs.join(SITE).join(dir).join(soname);
        assert!(file.is_file(), "{} is not in the image", file.display());
    }

    // `inspect --unused`: what the self-test loads by name is used, though nothing links it
    // (as `strip: [unused-libraries]` counts it).
    let report: serde_json::Value = serde_json::from_str(&run_ok(
        sb.gpuimg()
            .args(["inspect", "--unused", "--json"])
            .arg(sb.join("out")),
    ))
    .unwrap();
    for used in ["libcudart.so.12", "libnvrtc.so.12"] {
        assert!(
            !report["unused"].to_string().contains(used),
            "{used} is used: {report}"
        );
    }

    // The self-test's probe, on the image's own files (re-rooted under the unpacked bundle):
    // each library loads and its own call reports the locked version's fields.
    let mut parsed =
        Expectation::from_json(&read(&rootfs.join("etc/gpuimg/expect.json")), "expect.json")
            .unwrap();
    for l in &mut parsed.libraries {
        l.dir = format!("{}{}", rootfs.display(), l.dir);
    }
    let probes = gpuimg_selftest::probe_libraries(&parsed.libraries);
    for (p, l) in probes.iter().zip(&parsed.libraries) {
        assert_eq!(p.error, None, "{p:?}");
        assert_eq!(p.reported, l.expected_fields(), "{p:?}");
        assert_eq!(p.reported.as_deref(), Some(&[12, 4][..]), "{p:?}");
    }
    assert_eq!(probes.len(), 2);

    // The loader finds both in the wheels' directories through the image's ld.so.cache (the
    // host's ldconfig reads it back), and in the container without LD_LIBRARY_PATH.
    require("ldconfig");
    let o = run_ok(
        Command::new("ldconfig")
            .args(["-p", "-C"])
            .arg(rootfs.join("etc/ld.so.cache")),
    );
    for (soname, dir) in [
        ("libcudart.so.12", "nvidia/cuda_runtime/lib"),
        ("libnvrtc.so.12", "nvidia/cuda_nvrtc/lib"),
    ] {
        let want = format!("=> /{SITE}/{dir}/{soname}");
        assert!(
            o.lines()
                .any(|l| l.trim_start().starts_with(soname) && l.ends_with(&want)),
            "{soname} not in the image's ld.so.cache from /{SITE}/{dir}:\n{o}"
        );
    }
    let image = format!("oci:{}:latest", sb.join("out").display());
    let loaded = podman_run_with(
        sb.path(),
        &["--entrypoint", "python3", "--env", "LD_LIBRARY_PATH="],
        &image,
        &[
            "-c",
            "import ctypes; [ctypes.CDLL(n) for n in ('libcudart.so.12', 'libnvrtc.so.12')]; print('loaded')",
        ],
    );
    assert_eq!(loaded.status.code(), Some(0), "{}", describe_run(&loaded));
    assert_eq!(String::from_utf8_lossy(&loaded.stdout).trim(), "loaded");

    // gpuimg-selftest run directly: no GPU here, exit 4.
    let ran = podman_run_with(
        sb.path(),
        &["--entrypoint", "/usr/local/bin/gpuimg-selftest"],
        &image,
        &[],
    );
    assert_eq!(ran.status.code(), Some(4), "{}", describe_run(&ran));
    assert!(
        String::from_utf8_lossy(&ran.stderr).contains("gpuimg-selftest: No NVIDIA"),
        "{}",
        describe_run(&ran)
    );

    // The same image with `on-failure: warn`: the workload runs and its status is the result.
    let warn = PROFILE.replace("on-failure: abort", "on-failure: warn");
    assert_ne!(warn, PROFILE);
    write(&sb.join("cuda-runtime-warn.yaml"), &warn);
    run_ok(
        gpuimg(&sb)
            .args(["build", "-q", "-o"])
            .arg(sb.join("out-warn"))
            .arg(sb.join("cuda-runtime-warn.yaml")),
    );
    let image = format!("oci:{}:latest", sb.join("out-warn").display());
    let ran = podman_run_with(sb.path(), &[], &image, &[NVRTC_WORKLOAD]);
    assert_eq!(ran.status.code(), Some(7), "{}", describe_run(&ran));
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(
        stdout.starts_with("workload ran: NVRTC compiled ") && stdout.contains(".target sm_90"),
        "{}",
        describe_run(&ran)
    );
    assert!(
        String::from_utf8_lossy(&ran.stderr).contains("starting the command anyway"),
        "{}",
        describe_run(&ran)
    );
}
