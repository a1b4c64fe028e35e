//! The catalog's record types, as written in `catalog/*.yaml` and in overlay files.
//!
//! Every record names its sources (`source`) and lists which of its facts no source confirmed
//! (`unverified`). Only shapes live here; cross-record checks are in `validate.rs`.

use serde::{Deserialize, Serialize};

use crate::version::{Constraint, Version};

/// One catalog file: any subset of the sections. Overlays use the same shape.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogFile {
    #[serde(default)]
    pub sources: Vec<Source>,
    #[serde(default)]
    pub cuda_families: Vec<CudaFamily>,
    #[serde(default)]
    pub compute_capabilities: Vec<CcSupport>,
    #[serde(default)]
    pub cuda: Vec<CudaRelease>,
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    #[serde(default)]
    pub drivers: Vec<DriverBranch>,
    #[serde(default)]
    pub python: Vec<PythonRelease>,
    #[serde(default)]
    pub pytorch: Vec<PytorchRelease>,
    #[serde(default)]
    pub tensorflow: Vec<TensorflowRelease>,
    #[serde(default)]
    pub jax: Vec<JaxRelease>,
    #[serde(default)]
    pub cudnn: Vec<CudnnRelease>,
    #[serde(default)]
    pub nccl: Vec<NcclRelease>,
    #[serde(default)]
    pub stack_wheels: Vec<StackWheels>,
    #[serde(default)]
    pub stack_debs: Vec<StackDebs>,
    #[serde(default)]
    pub cuda_components: Vec<CudaComponents>,
}

/// NVIDIA's CUDA component wheels of one CUDA major (`catalog/wheels.yaml`): `toolkit`, the
/// wheels versioned as the toolkit itself (`nvidia-cublas-cu12 12.8.4.1` in CUDA 12.8), which
/// a `stack.cuda` pin holds to its minor; `own`, those with a numbering of their own that no
/// sourced table maps to a CUDA minor (left unconstrained, and said). Names normalised.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CudaComponents {
    pub cuda_major: u64,
    pub toolkit: Vec<String>,
    #[serde(default)]
    pub own: Vec<String>,
    pub source: Vec<String>,
}

/// The Python requirements a stack component's pin becomes (`catalog/wheels.yaml`):
/// `{version}`, `{major}`, `{minor}` stand for the resolved version.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StackWheels {
    /// `pytorch`, `cuda`, `cudnn`, `nccl`.
    pub component: String,
    /// The CUDA major version the record is for (the wheels' `-cuNN` suffix), if it matters.
    #[serde(default)]
    pub cuda_major: Option<u64>,
    pub requirements: Vec<String>,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
}

/// The Debian packages a stack component's pin becomes when the profile takes it from apt
/// (`catalog/debs.yaml`): apt relation groups (`a | b`: the first alternative the configured
/// repositories have), `{major}`, `{minor}` standing for the resolved version and
/// `{cuda_major}` for the image's CUDA major. The first group's package carries the
/// component's version (checked against the pin).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StackDebs {
    /// `cuda`, `cudnn`, `nccl`.
    pub component: String,
    #[serde(default)]
    pub cuda_major: Option<u64>,
    pub packages: Vec<String>,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub id: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub what: String,
}

/// A CUDA major family: the driver floor of minor-version compatibility.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CudaFamily {
    pub major: u64,
    pub minor_compat_driver: Version,
    pub sm_min: Version,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
}

/// Which CUDA releases can compile for a compute capability (`first_cuda` none: before the catalog).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CcSupport {
    pub cc: Version,
    pub first_cuda: Option<Version>,
    pub last_cuda: Option<Version>,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CudaRelease {
    pub version: Version,
    #[serde(default)]
    pub label: String,
    /// The release's own Linux driver minimum (none: not known).
    pub driver: Option<Version>,
    pub sm_min: Version,
    pub sm_max: Version,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleFlavour {
    Open,
    Proprietary,
}

impl ModuleFlavour {
    pub fn as_str(self) -> &'static str {
        match self {
            ModuleFlavour::Open => "open",
            ModuleFlavour::Proprietary => "proprietary",
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub cc: Version,
    pub arch: String,
    /// Data-center class: forward compatibility (cuda-compat) works on it.
    pub datacenter: bool,
    /// Kernel-module flavours that drive it.
    pub modules: Vec<ModuleFlavour>,
    /// First driver known to support it (any flavour), or `unknown` where no source gives it.
    /// Required: a record without it is refused by validation (absent is never "any driver").
    #[serde(default)]
    pub min_driver: Option<DriverFloor>,
    /// First open-module release that lists it.
    #[serde(default)]
    pub open_min_driver: Option<Version>,
    /// Last driver branch that drives it (e.g. 580).
    #[serde(default)]
    pub last_branch: Option<u64>,
    /// Peak memory bandwidth, GB/s.
    #[serde(default)]
    pub bandwidth_gbps: Option<f64>,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
}

/// A GPU's first driver: a version a source gives, or `unknown`, stated as such.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverFloor {
    Known(Version),
    Unknown,
}

impl DriverFloor {
    pub fn known(&self) -> Option<&Version> {
        match self {
            DriverFloor::Known(v) => Some(v),
            DriverFloor::Unknown => None,
        }
    }
}

impl Serialize for DriverFloor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DriverFloor::Known(v) => v.serialize(s),
            DriverFloor::Unknown => s.serialize_str("unknown"),
        }
    }
}

impl<'de> Deserialize<'de> for DriverFloor {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == "unknown" {
            return Ok(DriverFloor::Unknown);
        }
        s.parse().map(DriverFloor::Known).map_err(|e| {
            serde::de::Error::custom(format!("`min_driver` is a version or `unknown`: {e}"))
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BranchKind {
    Ltsb,
    Production,
    NewFeature,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DriverBranch {
    pub branch: u64,
    #[serde(default)]
    pub kind: Option<BranchKind>,
    #[serde(default)]
    pub eol: Option<String>,
    /// Newest CUDA major it runs without forward compatibility.
    #[serde(default)]
    pub max_cuda_major: Option<u64>,
    pub min_cc: Version,
    pub min_kernel: Option<Version>,
    #[serde(default)]
    pub first_release: Option<Version>,
    #[serde(default)]
    pub last_release: Option<Version>,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PythonRelease {
    pub version: Version,
    pub source: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PytorchRelease {
    pub version: Version,
    pub python: Vec<Version>,
    pub python_source: Vec<String>,
    #[serde(default)]
    pub python_note: Option<String>,
    pub variants: Vec<PytorchVariant>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PytorchVariant {
    /// `cu126`, `cu130`, ...
    pub name: String,
    /// The CUDA release line the wheels are built for (a prefix: `12.6`).
    pub cuda: Version,
    /// Compute capabilities with SASS in the wheels.
    pub sm: Vec<Version>,
    /// Highest PTX target embedded, if any (JIT for newer GPUs).
    #[serde(default)]
    pub ptx: Option<Version>,
    #[serde(default)]
    pub sm_note: Option<String>,
    /// The default wheel on the Python package index.
    #[serde(default)]
    pub pypi: bool,
    #[serde(default)]
    pub cudnn: Option<Version>,
    #[serde(default)]
    pub nccl: Option<Version>,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TensorflowRelease {
    pub version: Version,
    pub python: Vec<Version>,
    pub cuda: Constraint,
    pub cudnn: Constraint,
    #[serde(default)]
    pub nccl: Option<Constraint>,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JaxRelease {
    pub version: Version,
    pub python: Vec<Version>,
    pub python_source: Vec<String>,
    pub variants: Vec<JaxVariant>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JaxVariant {
    pub name: String,
    pub cuda: Constraint,
    pub driver: Constraint,
    pub sm_min: Version,
    pub cudnn: Constraint,
    pub nccl: Constraint,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CudnnRelease {
    pub version: Version,
    pub builds: Vec<CudnnBuild>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CudnnBuild {
    /// CUDA releases it supports, as prefixes (`12.4`, or `12` for the whole major).
    pub cuda: Vec<Version>,
    pub driver: Option<Version>,
    /// Compute capabilities it runs on (none: not known).
    pub cc: Option<Vec<Version>>,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub label: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NcclRelease {
    pub version: Version,
    /// CUDA majors a build exists for.
    pub cuda: Vec<u64>,
    /// Newest compute capability it supports (none: no known limit).
    #[serde(default)]
    pub cc_max: Option<Version>,
    pub source: Vec<String>,
    #[serde(default)]
    pub unverified: Vec<String>,
}
