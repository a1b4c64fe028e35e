//! `LockedResolution`: the lock's own record of what `resolve` decided, converted to and from
//! `resolve::Resolution` explicitly (`From` one way, `TryFrom` the other).
//!
//! The lock format owns these types: versions and host ranges are kept as the text the
//! resolver printed, enums as lowercase words, so a refactor of the resolver's types never
//! changes a lock's bytes. Must stay plain data; adding a field here is a lock format change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::profile::{CompatMode, KernelModule};
use crate::resolve::{Component, HostRequirements, Resolution, ResolvedGpu};
use gpuimg_expect::version::{ConstraintError, Version, VersionError, VersionSet};

/// How strictly the driver must match the CUDA version (`compat` in the profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockedCompat {
    Strict,
    Minor,
    Forward,
}

/// Which NVIDIA kernel module flavour the host must run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockedKernelModule {
    Open,
    Proprietary,
    Any,
}

/// A GPU the image was resolved for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedGpu {
    pub name: String,
    /// `9.0`.
    pub compute_capability: String,
    pub arch: Option<String>,
    /// Peak memory bandwidth, GB/s.
    pub peak_bandwidth_gbps: Option<f64>,
}

/// What the host must provide; ranges as text (`>=535,<536 || >=580.65.06`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedHost {
    pub driver: String,
    pub kernel: String,
    pub kernel_module: LockedKernelModule,
    pub gpus: Vec<LockedGpu>,
    /// Long-term driver branches usable only through cuda-compat.
    pub forward_compat_branches: Vec<u64>,
}

/// The resolved stack and host ranges, as the lock records them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedResolution {
    /// Component name (`cuda`, `pytorch`, ...) → exact version as the resolver wrote it.
    pub components: BTreeMap<String, String>,
    /// Component name → build variant (`pytorch` → `cu126`).
    pub variants: BTreeMap<String, String>,
    pub host: LockedHost,
    pub compat: LockedCompat,
    /// `cuda>=` of `NVIDIA_REQUIRE_CUDA`, major.minor.
    pub cuda_driver_floor: Option<String>,
    pub compute_capabilities: Vec<String>,
    pub warnings: Vec<String>,
}

/// A lock's resolution that names something this gpuimg cannot read back.
#[derive(Debug, thiserror::Error)]
pub enum LockedResolutionError {
    #[error("`{name}` in `resolution.{field}` is not a stack component")]
    Component { field: &'static str, name: String },
    #[error("`resolution.{field}` is not a version")]
    Version {
        field: String,
        #[source]
        source: VersionError,
    },
    #[error("`resolution.{field}` is not a version range")]
    Range {
        field: &'static str,
        #[source]
        source: ConstraintError,
    },
}

impl From<CompatMode> for LockedCompat {
    fn from(c: CompatMode) -> Self {
        match c {
            CompatMode::Strict => LockedCompat::Strict,
            CompatMode::Minor => LockedCompat::Minor,
            CompatMode::Forward => LockedCompat::Forward,
        }
    }
}

impl From<LockedCompat> for CompatMode {
    fn from(c: LockedCompat) -> Self {
        match c {
            LockedCompat::Strict => CompatMode::Strict,
            LockedCompat::Minor => CompatMode::Minor,
            LockedCompat::Forward => CompatMode::Forward,
        }
    }
}

impl From<KernelModule> for LockedKernelModule {
    fn from(k: KernelModule) -> Self {
        match k {
            KernelModule::Open => LockedKernelModule::Open,
            KernelModule::Proprietary => LockedKernelModule::Proprietary,
            KernelModule::Any => LockedKernelModule::Any,
        }
    }
}

impl From<LockedKernelModule> for KernelModule {
    fn from(k: LockedKernelModule) -> Self {
        match k {
            LockedKernelModule::Open => KernelModule::Open,
            LockedKernelModule::Proprietary => KernelModule::Proprietary,
            LockedKernelModule::Any => KernelModule::Any,
        }
    }
}

impl From<&Resolution> for LockedResolution {
    fn from(r: &Resolution) -> Self {
        LockedResolution {
            components: r
                .components
                .iter()
                .map(|(c, v)| (c.as_str().to_string(), v.to_string()))
                .collect(),
            variants: r
                .variants
                .iter()
                .map(|(c, v)| (c.as_str().to_string(), v.clone()))
                .collect(),
            host: LockedHost {
                driver: r.host.driver.to_string(),
                kernel: r.host.kernel.to_string(),
                kernel_module: r.host.kernel_module.into(),
                gpus: r
                    .host
                    .gpus
                    .iter()
                    .map(|g| LockedGpu {
                        name: g.name.clone(),
                        compute_capability: g.compute_capability.to_string(),
                        arch: g.arch.clone(),
                        peak_bandwidth_gbps: g.peak_bandwidth_gbps,
                    })
                    .collect(),
                forward_compat_branches: r.host.forward_compat_branches.clone(),
            },
            compat: r.compat.into(),
            cuda_driver_floor: r.cuda_driver_floor.as_ref().map(Version::to_string),
            compute_capabilities: r
                .compute_capabilities
                .iter()
                .map(|v| v.to_string())
                .collect(),
            warnings: r.warnings.clone(),
        }
    }
}

impl From<Resolution> for LockedResolution {
    fn from(r: Resolution) -> Self {
        LockedResolution::from(&r)
    }
}

fn component(field: &'static str, name: &str) -> Result<Component, LockedResolutionError> {
    // Only the exact names `From<&Resolution>` writes (no aliases such as `torch`).
    Component::ALL
        .into_iter()
        .find(|c| c.as_str() == name)
        .ok_or_else(|| LockedResolutionError::Component {
            field,
            name: name.to_string(),
        })
}

fn version(field: impl Into<String>, text: &str) -> Result<Version, LockedResolutionError> {
    text.parse()
        .map_err(|source| LockedResolutionError::Version {
            field: field.into(),
            source,
        })
}

fn range(field: &'static str, text: &str) -> Result<VersionSet, LockedResolutionError> {
    text.parse()
        .map_err(|source| LockedResolutionError::Range { field, source })
}

impl TryFrom<&LockedResolution> for Resolution {
    type Error = LockedResolutionError;

    fn try_from(l: &LockedResolution) -> Result<Self, Self::Error> {
        let components = l
            .components
            .iter()
            .map(|(name, v)| {
                let c = component("components", name)?;
                Ok((c, version(format!("components.{name}"), v)?))
            })
            .collect::<Result<_, LockedResolutionError>>()?;
        let variants = l
            .variants
            .iter()
            .map(|(name, v)| Ok((component("variants", name)?, v.clone())))
            .collect::<Result<_, LockedResolutionError>>()?;
        let gpus = l
            .host
            .gpus
            .iter()
            .map(|g| {
                Ok(ResolvedGpu {
                    name: g.name.clone(),
                    compute_capability: version(
                        format!("host.gpus.{}.compute_capability", g.name),
                        &g.compute_capability,
                    )?,
                    arch: g.arch.clone(),
                    peak_bandwidth_gbps: g.peak_bandwidth_gbps,
                })
            })
            .collect::<Result<_, LockedResolutionError>>()?;
        Ok(Resolution {
            components,
            variants,
            host: HostRequirements {
                driver: range("host.driver", &l.host.driver)?,
                kernel: range("host.kernel", &l.host.kernel)?,
                kernel_module: l.host.kernel_module.into(),
                gpus,
                forward_compat_branches: l.host.forward_compat_branches.clone(),
            },
            compat: l.compat.into(),
            cuda_driver_floor: l
                .cuda_driver_floor
                .as_deref()
                .map(|v| version("cuda_driver_floor", v))
                .transpose()?,
            compute_capabilities: l
                .compute_capabilities
                .iter()
                .map(|v| version("compute_capabilities", v))
                .collect::<Result<_, _>>()?,
            warnings: l.warnings.clone(),
        })
    }
}

impl TryFrom<LockedResolution> for Resolution {
    type Error = LockedResolutionError;

    fn try_from(l: LockedResolution) -> Result<Self, Self::Error> {
        Resolution::try_from(&l)
    }
}
