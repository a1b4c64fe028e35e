//! The Python requirements a stack pin becomes (`catalog/wheels.yaml`): `torch==2.15.0` for
//! `pytorch`, NVIDIA's runtime, cuDNN and NCCL wheels (`-cu12` for CUDA 12, none for 13) for
//! `cuda`, `cudnn` and `nccl`, with the sources of each record; and each CUDA toolkit release's
//! component wheel versions (`catalog/cuda-components.yaml`): the constraints a CUDA minor puts
//! on them, and the minor a component wheel's version belongs to. Must never decide whether
//! they fit together: the package resolver and the caller's checks do.

use std::collections::BTreeMap;

use gpuimg_expect::version::Version;

use super::{Catalog, CudaComponents};

/// Requirements for one stack component, and where the mapping comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackRequirements {
    /// PEP 508 strings (`nvidia-cuda-runtime-cu12==12.4.*`).
    pub requirements: Vec<String>,
    pub sources: Vec<String>,
}

/// What a CUDA minor asks of NVIDIA's component wheels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaConstraints {
    /// One PEP 508 constraint per component wheel any toolkit release of the minor pins, held
    /// to the versions those releases pin (`nvidia-cublas==13.1.0.3.*` for 13.0.2 alone;
    /// `nvidia-cublas-cu12>=12.8.3.14,<=12.8.4.1` across 12.8.0 and 12.8.1).
    pub constraints: Vec<String>,
    pub sources: Vec<String>,
}

impl Catalog {
    /// The constraints CUDA `cuda`'s major.minor puts on its component wheels; `None` when
    /// the catalog lists no toolkit release of that minor.
    pub fn cuda_constraints(&self, cuda: &Version) -> Option<CudaConstraints> {
        let minor = cuda.truncate(2);
        let releases: Vec<&CudaComponents> = self
            .cuda_components
            .iter()
            .filter(|r| r.cuda.truncate(2) == minor)
            .collect();
        if releases.is_empty() {
            return None;
        }
        let mut range: BTreeMap<&str, (&Version, &Version)> = BTreeMap::new();
        for r in &releases {
            for (name, v) in &r.wheels {
                let e = range.entry(name.as_str()).or_insert((v, v));
                if v < e.0 {
                    e.0 = v;
                }
                if v > e.1 {
                    e.1 = v;
                }
            }
        }
        let mut sources: Vec<String> = releases.iter().flat_map(|r| r.source.clone()).collect();
        sources.sort();
        sources.dedup();
        Some(CudaConstraints {
            constraints: range
                .into_iter()
                .map(|(name, (lo, hi))| match lo == hi {
                    true => format!("{name}=={lo}.*"),
                    false => format!("{name}>={lo},<={hi}"),
                })
                .collect(),
            sources,
        })
    }

    /// The lowest CUDA major.minor of `major` whose toolkit release pins wheel `name`
    /// (normalised) at `version` (as a prefix, as the metapackage's `==v.*` does): the
    /// minor that wheel belongs to. `None` for a wheel no release of `major` lists.
    pub fn cuda_minor_of(&self, name: &str, version: &Version, major: u64) -> Option<Version> {
        self.cuda_components
            .iter()
            .filter(|r| r.cuda.field(0) == major)
            .filter(|r| r.wheels.get(name).is_some_and(|v| version.starts_with(v)))
            .map(|r| r.cuda.truncate(2))
            .min()
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
    fn a_cuda_minor_holds_each_component_to_what_its_toolkit_releases_pin() {
        let c = Catalog::embedded().unwrap();
        let r = c.cuda_constraints(&v("12.8.1")).unwrap();
        let has = |t: &str| r.constraints.iter().any(|x| x == t);
        assert!(has("nvidia-cublas-cu12>=12.8.3.14,<=12.8.5.5"), "{r:?}");
        assert!(has("nvidia-cufft-cu12>=11.3.3.41,<=11.3.3.83"), "{r:?}");
        assert_eq!(r.sources, ["pypi-cuda-toolkit"]);
        // cuBLAS is numbered ahead of the toolkit in CUDA 13: 13.0.2 ships 13.1.0.3.
        let r = c.cuda_constraints(&v("13.0")).unwrap();
        assert!(
            r.constraints
                .iter()
                .any(|t| t == "nvidia-cublas>=13.0.0.19,<=13.1.1.3"),
            "{r:?}"
        );
        assert_eq!(c.cuda_constraints(&v("10.2")), None);
        assert_eq!(
            c.cuda_minor_of("nvidia-cublas", &v("13.1.0.3"), 13),
            Some(v("13.0"))
        );
        assert_eq!(
            c.cuda_minor_of("nvidia-cublas-cu12", &v("12.9.1.4"), 12),
            Some(v("12.9"))
        );
        assert_eq!(
            c.cuda_minor_of("nvidia-cudnn-cu12", &v("9.10.2.21"), 12),
            None
        );
    }
}
