//! What a resolution puts into the image: NVIDIA_REQUIRE_CUDA (cuda floor, arch, forward-compat
//! brand terms), the NVIDIA variables, component versions, annotations; and its JSON round trip.

use std::path::Path;

use gpuimg_build::catalog::Catalog;
use gpuimg_build::resolve::{resolve, Resolution};

fn res(body: &str) -> Resolution {
    let text = format!("name: t\n{body}\n");
    let p = gpuimg_build::profile::parse(&text, "t.yaml", Path::new("."), &|_| None).unwrap();
    resolve(&p, &Catalog::embedded().unwrap()).unwrap()
}

#[test]
fn require_cuda_follows_compat_mode() {
    // nv-compat-minor: any 12.x driver runs a 12.4 build; strict needs the 12.4 driver.
    let minor = res("host: {gpus: [H100]}\nstack: {cuda: '12.4'}").image_env();
    assert_eq!(minor["NVIDIA_REQUIRE_CUDA"], "cuda>=12.0,arch>=9.0");
    assert_eq!(minor["CUDA_VERSION"], "12.4.1");
    assert_eq!(minor["NVIDIA_DRIVER_CAPABILITIES"], "compute,utility");
    assert_eq!(minor["NVIDIA_VISIBLE_DEVICES"], "all");
    let strict = res("compat: strict\nhost: {gpus: [H100]}\nstack: {cuda: '12.4'}").image_env();
    assert_eq!(strict["NVIDIA_REQUIRE_CUDA"], "cuda>=12.4,arch>=9.0");
}

#[test]
fn forward_compat_adds_brand_terms_for_lts_branches() {
    // nv-compat-forward + nv-dc-drivers-615: R535 is long-term; the image carries cuda-compat.
    let r = res("compat: forward\nhost: {gpus: [H100]}\nstack: {cuda: '13.0'}");
    let req = &r.image_env()["NVIDIA_REQUIRE_CUDA"];
    assert!(req.starts_with("cuda>=13.0,arch>=9.0 "), "{req}");
    assert!(
        req.contains(" brand=tesla,driver>=535,driver<536,arch>=9.0"),
        "{req}"
    );
    assert_eq!(r.host.forward_compat_branches, vec![535]);
}

#[test]
fn arch_floor_without_gpus_comes_from_the_stack() {
    // wheel-inspection: pytorch 2.11.0 (cu130) carries sm_75..sm_120.
    let r = res("stack: {pytorch: '=2.11.0', cuda: '13.0'}");
    assert_eq!(r.image_env()["NVIDIA_REQUIRE_CUDA"], "cuda>=13.0,arch>=7.5");
    assert!(r
        .compute_capabilities
        .iter()
        .all(|cc| cc.to_string() != "7.0"));
    let env = r.image_env();
    assert_eq!(env["PYTORCH_VERSION"], "2.11.0");
    assert_eq!(env["NV_CUDNN_VERSION"], "9.19.0.56");
    assert_eq!(env["NCCL_VERSION"], "2.28.9");
    let a = gpuimg_build::plan::annotations::stack_annotations(&r);
    assert_eq!(a["io.gpuimg.stack.pytorch"], "2.11.0");
    assert_eq!(a["io.gpuimg.stack.pytorch.variant"], "cu130");
    assert_eq!(a["io.gpuimg.host.driver"], ">=580.65.06");
}

#[test]
fn plain_image_has_no_gpu_environment() {
    let r = res("platform: linux/amd64");
    assert!(r.is_empty());
    assert!(r.image_env().is_empty());
    assert!(gpuimg_build::plan::annotations::stack_annotations(&r).is_empty());
}

#[test]
fn resolution_round_trips_through_json() {
    let r =
        res("host: {gpus: [H200], kernel_module: open}\nstack: {pytorch: '2.5', python: '3.11'}");
    let text = serde_json::to_string(&r).unwrap();
    let back: Resolution = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
    // Self-test data: module flavour, peak bandwidth from the catalog (gpuimg-h200-measured).
    assert_eq!(back.host.gpus[0].peak_bandwidth_gbps, Some(4800.0));
    assert_eq!(back.host.driver.to_string(), ">=550.40.65");
}
