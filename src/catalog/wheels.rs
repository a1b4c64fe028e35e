//! The Python requirements a stack pin becomes (`catalog/wheels.yaml`): `torch==2.15.0` for
//! `pytorch`, NVIDIA's runtime, cuDNN and NCCL wheels (`-cu12` for CUDA 12, none for 13) for
//! `cuda`, `cudnn` and `nccl`, with the sources of each record; and NVIDIA's CUDA component
//! wheels per major (`cuda_components`): the constraints a resolved CUDA minor puts on those
//! versioned as the toolkit, and which are numbered on their own. Must never decide whether
//! they fit together: the package resolver and the caller's checks do.

use crate::version::Version;

use super::Catalog;

/// Requirements for one stack component, and where the mapping comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackRequirements {
    /// PEP 508 strings (`nvidia-cuda-runtime-cu12==12.4.*`).
    pub requirements: Vec<String>,
    pub sources: Vec<String>,
}

/// What a resolved CUDA version asks of NVIDIA's component wheels of its major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaConstraints {
    /// One PEP 508 constraint per wheel versioned as the toolkit (`nvidia-cublas-cu12==12.8.*`).
    pub constraints: Vec<String>,
    /// The wheels numbered on their own, which no constraint holds.
    pub unconstrained: Vec<String>,
    pub sources: Vec<String>,
}

impl Catalog {
    /// The constraints CUDA `cuda` (its major.minor) puts on the component wheels of its major;
    /// `None` when the catalog records none for that major.
    pub fn cuda_constraints(&self, cuda: &Version) -> Option<CudaConstraints> {
        let (major, minor) = (cuda.field(0), cuda.field(1));
        let rec = self
            .cuda_components
            .iter()
            .find(|r| r.cuda_major == major)?;
        Some(CudaConstraints {
            constraints: rec
                .toolkit
                .iter()
                .map(|n| format!("{n}=={major}.{minor}.*"))
                .collect(),
            unconstrained: rec.own.clone(),
            sources: rec.source.clone(),
        })
    }

    /// The CUDA major of `name` (normalised) when it is a wheel versioned as the toolkit.
    pub fn toolkit_wheel_major(&self, name: &str) -> Option<u64> {
        self.cuda_components
            .iter()
            .find(|r| r.toolkit.iter().any(|n| n == name))
            .map(|r| r.cuda_major)
    }

    /// Whether `name` (normalised) is a CUDA component wheel numbered on its own.
    pub fn own_numbered_wheel(&self, name: &str) -> bool {
        self.cuda_components
            .iter()
            .any(|r| r.own.iter().any(|n| n == name))
    }

    /// The requirements `component` (`pytorch`, `cuda`, `cudnn`, `nccl`) at the resolved
    /// `version` becomes, for an image whose CUDA major is `cuda_major` (the wheels' suffix);
    /// `None` when the catalog records none.
    pub fn stack_requirements(
        &self,
        component: &str,
        version: &Version,
        cuda_major: Option<u64>,
    ) -> Option<StackRequirements> {
        let rec = record_for(&self.stack_wheels, component, cuda_major, |r| {
            (&r.component, r.cuda_major)
        })?;
        let fill = |t: &str| fill_version(t, version);
        Some(StackRequirements {
            requirements: rec.requirements.iter().map(|r| fill(r)).collect(),
            sources: rec.source.clone(),
        })
    }
}

/// The record of `component` for CUDA major `cuda_major`, else its record for any major.
pub(super) fn record_for<'a, T>(
    records: &'a [T],
    component: &str,
    cuda_major: Option<u64>,
    key: impl Fn(&T) -> (&str, Option<u64>),
) -> Option<&'a T> {
    records
        .iter()
        .find(|r| key(r) == (component, cuda_major))
        .or_else(|| records.iter().find(|r| key(r) == (component, None)))
}

/// `t` with `{version}`, `{major}` and `{minor}` standing for `version` and its first fields.
pub(super) fn fill_version(t: &str, version: &Version) -> String {
    t.replace("{version}", &version.to_string())
        .replace("{major}", &version.field(0).to_string())
        .replace("{minor}", &version.field(1).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn stack_pins_become_nvidia_and_framework_wheels() {
        let c = Catalog::embedded().unwrap();
        let r = c.stack_requirements("cuda", &v("12.4"), Some(12)).unwrap();
        assert_eq!(r.requirements, ["nvidia-cuda-runtime-cu12==12.4.*"]);
        assert!(r.sources.iter().any(|s| s == "wheel-inspection"));
        let r = c.stack_requirements("cuda", &v("13.2"), Some(13)).unwrap();
        assert_eq!(r.requirements, ["nvidia-cuda-runtime==13.2.*"]);
        let r = c
            .stack_requirements("cudnn", &v("9.26.0"), Some(13))
            .unwrap();
        assert_eq!(r.requirements, ["nvidia-cudnn-cu13==9.26.*"]);
        let r = c
            .stack_requirements("pytorch", &v("2.15.0"), Some(13))
            .unwrap();
        assert_eq!(r.requirements, ["torch==2.15.0"]);
        assert_eq!(c.stack_requirements("cuda", &v("11.8"), Some(11)), None);
        let r = c.stack_requirements("jax", &v("0.5.3"), Some(12)).unwrap();
        assert_eq!(r.requirements, ["jax[cuda12]==0.5.3"]);
        let r = c
            .stack_requirements("tensorflow", &v("2.21.0"), Some(12))
            .unwrap();
        assert_eq!(r.requirements, ["tensorflow[and-cuda]==2.21.0"]);
    }

    #[test]
    fn a_cuda_minor_constrains_the_wheels_versioned_as_the_toolkit() {
        let c = Catalog::embedded().unwrap();
        let r = c.cuda_constraints(&v("12.8.1")).unwrap();
        assert!(r
            .constraints
            .iter()
            .any(|t| t == "nvidia-cublas-cu12==12.8.*"));
        assert!(r
            .constraints
            .iter()
            .any(|t| t == "nvidia-cuda-runtime-cu12==12.8.*"));
        assert!(r.unconstrained.iter().any(|n| n == "nvidia-cufft-cu12"));
        let r = c.cuda_constraints(&v("13.2")).unwrap();
        assert!(r.constraints.iter().any(|t| t == "nvidia-cublas==13.2.*"));
        assert_eq!(c.cuda_constraints(&v("11.8")), None);
        assert_eq!(c.toolkit_wheel_major("nvidia-cuda-nvrtc-cu12"), Some(12));
        assert_eq!(c.toolkit_wheel_major("nvidia-cufft-cu12"), None);
        assert!(c.own_numbered_wheel("nvidia-cufft"));
    }
}
