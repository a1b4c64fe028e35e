//! The manifest annotations a resolution adds: each component's version and variant, the host
//! ranges, the GPUs and their compute capabilities, and a one-line description. The names
//! are `image::annotations`'.

use std::collections::BTreeMap;

use crate::resolve::Resolution;
use gpuimg_expect::KernelModule;
use gpuimg_oci::image::annotations::*;

/// The annotations of `r` (none for a plain image without a stack).
pub fn stack_annotations(r: &Resolution) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    if r.is_empty() {
        return a;
    }
    for (c, v) in &r.components {
        a.insert(format!("{ANN_STACK_PREFIX}{c}"), v.to_string());
    }
    for (c, v) in &r.variants {
        a.insert(format!("{ANN_STACK_PREFIX}{c}.variant"), v.clone());
    }
    a.insert(ANN_HOST_DRIVER.into(), r.host.driver.to_string());
    a.insert(ANN_HOST_KERNEL.into(), r.host.kernel.to_string());
    a.insert(
        ANN_HOST_KERNEL_MODULE.into(),
        match r.host.kernel_module {
            KernelModule::Open => "open",
            KernelModule::Proprietary => "proprietary",
            KernelModule::Any => "any",
        }
        .into(),
    );
    if !r.host.gpus.is_empty() {
        let names: Vec<&str> = r.host.gpus.iter().map(|g| g.name.as_str()).collect();
        a.insert(ANN_HOST_GPUS.into(), names.join(","));
    }
    let ccs: Vec<String> = r
        .compute_capabilities
        .iter()
        .map(|c| c.to_string())
        .collect();
    if !ccs.is_empty() {
        a.insert(ANN_COMPUTE_CAPABILITIES.into(), ccs.join(","));
    }
    let parts: Vec<String> = r
        .components
        .iter()
        .map(|(c, v)| format!("{c} {v}"))
        .collect();
    if !parts.is_empty() {
        a.insert(ANN_DESCRIPTION.into(), parts.join(", "));
    }
    a
}
