//! The Debian packages a stack pin becomes when the profile takes it from apt
//! (`catalog/debs.yaml`): NVIDIA's repository's `cuda-cudart-12-4`, `libcudnn9-cuda-12`,
//! `libnccl2`, or Debian's own `libcudart11.0`, as apt relation groups. Must never decide
//! which alternative exists or whether the installed version fits: the apt solver and the
//! caller's checks do.

use gpuimg_expect::version::Version;

use super::wheels::{fill_version, record_for};
use super::Catalog;

/// Relation groups for one stack component, and where the mapping comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackPackages {
    /// Apt relation groups without versions (`cuda-cudart-11-8 | libcudart11.0`); the first
    /// group's package carries the component.
    pub groups: Vec<String>,
    pub sources: Vec<String>,
}

impl Catalog {
    /// The packages `component` (`cuda`, `cudnn`, `nccl`) at the resolved `version` becomes
    /// for an image whose CUDA major is `cuda_major`; `None` when the catalog records none.
    pub fn stack_packages(
        &self,
        component: &str,
        version: &Version,
        cuda_major: Option<u64>,
    ) -> Option<StackPackages> {
        let rec = record_for(&self.stack_debs, component, cuda_major, |r| {
            (&r.component, r.cuda_major)
        })?;
        let cuda = cuda_major.map(|m| m.to_string());
        let fill = |t: &str| -> Option<String> {
            let s = fill_version(t, version);
            match &cuda {
                Some(m) => Some(s.replace("{cuda_major}", m)),
                None if s.contains("{cuda_major}") => None,
                None => Some(s),
            }
        };
        let groups = rec
            .packages
            .iter()
            .map(|g| fill(g))
            .collect::<Option<Vec<_>>>()?;
        Some(StackPackages {
            groups,
            sources: rec.source.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn stack_pins_become_nvidia_and_debian_packages() {
        let c = Catalog::embedded().unwrap();
        let r = c.stack_packages("cuda", &v("11.8"), Some(11)).unwrap();
        assert_eq!(r.groups, ["cuda-cudart-11-8 | libcudart11.0"]);
        assert!(r.sources.iter().any(|s| s == "debian-nonfree"));
        let r = c.stack_packages("cuda", &v("12.4"), Some(12)).unwrap();
        assert_eq!(r.groups, ["cuda-cudart-12-4 | libcudart12"]);
        let r = c.stack_packages("cudnn", &v("9.1"), Some(12)).unwrap();
        assert_eq!(r.groups, ["libcudnn9-cuda-12 | libcudnn9"]);
        assert_eq!(c.stack_packages("cudnn", &v("9.1"), None), None);
        let r = c.stack_packages("nccl", &v("2.21.5"), Some(12)).unwrap();
        assert_eq!(r.groups, ["libnccl2"]);
        assert_eq!(c.stack_packages("pytorch", &v("2.15"), Some(13)), None);
    }
}
