//! `Resolution`: what `resolve` decided, as plain data for the lock, the image and the self-test.
//!
//! Also renders the image's environment (`NVIDIA_REQUIRE_CUDA` and friends) and annotations.
//! Must never consult the catalog again: everything later stages need is copied in here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::profile::{CompatMode, KernelModule};
use gpuimg_expect::version::{Version, VersionSet};

use super::request::Component;

/// Brands NVIDIA's own CUDA images list in the forward-compatibility terms of `NVIDIA_REQUIRE_CUDA`.
const COMPAT_BRANDS: &[&str] = &[
    "unknown",
    "grid",
    "tesla",
    "nvidia",
    "quadro",
    "quadrortx",
    "nvidiartx",
    "vapps",
    "vpc",
    "vcs",
    "vws",
    "cloudgaming",
];

/// A GPU the image is resolved for, with what the self-test compares against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedGpu {
    pub name: String,
    pub compute_capability: Version,
    #[serde(default)]
    pub arch: Option<String>,
    /// Peak memory bandwidth from the catalog, GB/s.
    #[serde(default)]
    pub peak_bandwidth_gbps: Option<f64>,
}

/// What the host must provide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRequirements {
    pub driver: VersionSet,
    pub kernel: VersionSet,
    pub kernel_module: KernelModule,
    pub gpus: Vec<ResolvedGpu>,
    /// Long-term branches usable only through the image's cuda-compat (compat: forward).
    #[serde(default)]
    pub forward_compat_branches: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    /// Exact versions, only for the components the stack has.
    pub components: BTreeMap<Component, Version>,
    /// Build variants where a component has several (`pytorch: cu126`, `jax: cuda12`).
    #[serde(default)]
    pub variants: BTreeMap<Component, String>,
    pub host: HostRequirements,
    pub compat: CompatMode,
    /// The CUDA version the driver must report (`cuda>=` of `NVIDIA_REQUIRE_CUDA`), major.minor.
    #[serde(default)]
    pub cuda_driver_floor: Option<Version>,
    /// Compute capabilities the image may run on: the listed GPUs', or every one the stack supports.
    #[serde(default)]
    pub compute_capabilities: Vec<Version>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl Resolution {
    /// True for a plain image: no CUDA stack and no GPUs.
    pub fn is_empty(&self) -> bool {
        self.components.is_empty() && self.host.gpus.is_empty()
    }

    pub fn version(&self, c: Component) -> Option<&Version> {
        self.components.get(&c)
    }

    /// `NVIDIA_REQUIRE_CUDA`: space-separated OR terms of comma-separated AND terms.
    pub fn require_cuda(&self) -> Option<String> {
        self.require_cuda_for(false)
    }

    /// `NVIDIA_REQUIRE_CUDA`; with `exact_arch` (an image whose device code was pruned for
    /// exactly `compute_capabilities`, `strip: [device-code]`), one alternative per capability
    /// (`arch=9.0`) instead of a floor (`arch>=9.0`).
    pub fn require_cuda_for(&self, exact_arch: bool) -> Option<String> {
        let floor = self.cuda_driver_floor.as_ref()?;
        // Space-separated terms are alternatives: a pruned image gets one set per GPU.
        let archs: Vec<String> = if exact_arch && !self.compute_capabilities.is_empty() {
            let mut ccs = self.compute_capabilities.clone();
            ccs.sort();
            ccs.dedup();
            ccs.iter()
                .map(|cc| format!(",arch={}", cc.truncate(2)))
                .collect()
        } else {
            vec![self
                .compute_capabilities
                .iter()
                .min()
                .map(|cc| format!(",arch>={}", cc.truncate(2)))
                .unwrap_or_default()]
        };
        let mut terms = Vec::new();
        for arch in &archs {
            terms.push(format!("cuda>={floor}{arch}"));
            for b in &self.host.forward_compat_branches {
                for brand in COMPAT_BRANDS {
                    terms.push(format!("brand={brand},driver>={b},driver<{}{arch}", b + 1));
                }
            }
        }
        Some(terms.join(" "))
    }

    /// The image's environment: the NVIDIA container variables and every component's version.
    pub fn image_env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        if let Some(r) = self.require_cuda() {
            env.insert("NVIDIA_REQUIRE_CUDA".into(), r);
        }
        if self.version(Component::Cuda).is_some() || !self.host.gpus.is_empty() {
            env.insert(
                "NVIDIA_DRIVER_CAPABILITIES".into(),
                "compute,utility".into(),
            );
            env.insert("NVIDIA_VISIBLE_DEVICES".into(), "all".into());
        }
        for (c, v) in &self.components {
            let key = match c {
                Component::Cuda => "CUDA_VERSION",
                Component::Cudnn => "NV_CUDNN_VERSION",
                Component::Nccl => "NCCL_VERSION",
                Component::Python => "PYTHON_VERSION",
                Component::Pytorch => "PYTORCH_VERSION",
                Component::Tensorflow => "TENSORFLOW_VERSION",
                Component::Jax => "JAX_VERSION",
            };
            env.insert(key.into(), v.to_string());
        }
        env
    }
}
