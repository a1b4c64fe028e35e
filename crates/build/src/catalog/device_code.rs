//! Which GPUs a framework's wheels carry device code for: the compute capabilities with SASS
//! and the highest PTX target of a framework variant (`pytorch 2.15.0 cu132`), with the
//! sources that say so and whether the catalog marks the list unverified. For the image's
//! `NVIDIA_REQUIRE_CUDA` `arch>=`, its `io.gpuimg.*` annotations and the self-test's coverage
//! check. Must never decide compatibility: it only looks the record up.

use gpuimg_expect::version::Version;

use super::Catalog;

/// The device code a framework variant's wheels carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceCode {
    /// Compute capabilities with SASS (`9.0`, `10.0`, …), ascending.
    pub sm: Vec<Version>,
    /// The highest PTX target embedded (JIT for newer GPUs), if any.
    pub ptx: Option<Version>,
    /// Source ids of the record (`catalog/sources.yaml`).
    pub sources: Vec<String>,
    /// True when the catalog marks the SM list unverified (`unverified: [sm]`).
    pub unverified: bool,
    /// With `strip: [device-code]`: the compute capabilities the image's device code was
    /// pruned for (`sm` and `ptx` then hold only what they can select).
    pub pruned_for: Vec<Version>,
}

impl DeviceCode {
    /// The SM list as the annotations and the expectation write it: `sm_75,sm_80,…,sm_120`.
    pub fn sm_list(&self) -> String {
        self.sm
            .iter()
            .map(|v| format!("sm_{}{}", v.field(0), v.field(1)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The lowest covered compute capability among `targets` (a GPU of capability `cc` is
    /// covered by SASS of the same major and a minor ≤ its own, or by PTX ≤ `cc`).
    pub fn lowest_covered<'a>(
        &self,
        targets: impl IntoIterator<Item = &'a Version>,
    ) -> Option<Version> {
        targets
            .into_iter()
            .filter(|cc| self.covers(cc))
            .min()
            .cloned()
    }

    /// What is left after pruning for the GPUs `ccs` (`strip: [device-code]`): the SMs one of
    /// them can select (a cubin of the same major and a minor ≤ the GPU's), the PTX only when
    /// one of them is at or above it.
    pub fn pruned(&self, ccs: &[Version]) -> DeviceCode {
        let selectable = |s: &Version| {
            ccs.iter()
                .any(|c| c.field(0) == s.field(0) && s.field(1) <= c.field(1))
        };
        DeviceCode {
            sm: self.sm.iter().filter(|s| selectable(s)).cloned().collect(),
            ptx: self.ptx.clone().filter(|p| ccs.iter().any(|c| p <= c)),
            sources: self.sources.clone(),
            unverified: self.unverified,
            pruned_for: sorted(ccs),
        }
    }

    /// The device code of an image pruned for `ccs` without a catalog record of its framework:
    /// at most a cubin for each of them.
    pub fn pruned_only(ccs: &[Version]) -> DeviceCode {
        DeviceCode {
            sm: sorted(ccs),
            ptx: None,
            sources: Vec::new(),
            unverified: false,
            pruned_for: sorted(ccs),
        }
    }

    /// Whether a GPU of compute capability `cc` can run this code.
    pub fn covers(&self, cc: &Version) -> bool {
        self.sm
            .iter()
            .any(|s| s.field(0) == cc.field(0) && s.field(1) <= cc.field(1))
            || self.ptx.as_ref().is_some_and(|p| p <= cc)
    }
}

fn sorted(ccs: &[Version]) -> Vec<Version> {
    let mut v: Vec<Version> = ccs.iter().map(|c| c.truncate(2)).collect();
    v.sort();
    v.dedup();
    v
}

impl Catalog {
    /// The device code of the framework `framework` (`pytorch`) release `version` in its CUDA
    /// variant `variant` (`cu132`); `None` when the catalog has no such record (TensorFlow and
    /// JAX record no SM list).
    pub fn device_code(
        &self,
        framework: &str,
        version: &Version,
        variant: &str,
    ) -> Option<DeviceCode> {
        if framework != "pytorch" {
            return None;
        }
        let release = self.pytorch.iter().find(|r| &r.version == version)?;
        let v = release.variants.iter().find(|v| v.name == variant)?;
        let mut sm = v.sm.clone();
        sm.sort();
        Some(DeviceCode {
            sm,
            ptx: v.ptx.clone(),
            sources: v.source.clone(),
            unverified: v.unverified.iter().any(|u| u == "sm"),
            pruned_for: Vec::new(),
        })
    }

    /// The CUDA variant of `pytorch` `version` that the package index serves by default (the
    /// record marked `pypi: true`), if the catalog knows one.
    pub fn default_pytorch_variant(&self, version: &Version) -> Option<&str> {
        let release = self.pytorch.iter().find(|r| &r.version == version)?;
        release
            .variants
            .iter()
            .find(|v| v.pypi)
            .map(|v| v.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn pytorch_2_15_cu132_covers_hopper_and_blackwell_not_volta() {
        let c = Catalog::embedded().unwrap();
        assert_eq!(c.default_pytorch_variant(&v("2.15.0")), Some("cu132"));
        let d = c.device_code("pytorch", &v("2.15.0"), "cu132").unwrap();
        assert_eq!(d.sm_list(), "sm_75,sm_80,sm_86,sm_90,sm_100,sm_120");
        assert!(d.covers(&v("9.0")));
        assert!(d.covers(&v("8.9")), "sm_86 SASS runs on 8.9");
        assert!(!d.covers(&v("7.0")));
        assert!(!d.sources.is_empty());
        assert_eq!(
            d.lowest_covered([&v("7.0"), &v("10.0"), &v("9.0")]),
            Some(v("9.0"))
        );
        assert_eq!(c.device_code("jax", &v("0.4.30"), "cuda12"), None);
    }

    #[test]
    fn pruning_keeps_what_the_gpus_can_select_and_covers_nothing_else() {
        let c = Catalog::embedded().unwrap();
        let d = c.device_code("pytorch", &v("2.15.0"), "cu132").unwrap();
        let h = d.pruned(&[v("9.0")]);
        assert_eq!(h.sm_list(), "sm_90");
        assert_eq!(h.ptx, None, "compute_120 is above 9.0");
        assert!(h.covers(&v("9.0")) && !h.covers(&v("8.0")) && !h.covers(&v("10.0")));
        let a = d.pruned(&[v("8.0")]);
        assert_eq!(a.sm_list(), "sm_80", "sm_86 needs 8.6");
        assert!(a.covers(&v("8.6")) && !a.covers(&v("9.0")));
        assert_eq!(a.pruned_for, vec![v("8.0")]);
        let both = d.pruned(&[v("10.0"), v("9.0")]);
        assert_eq!(both.sm_list(), "sm_90,sm_100");
        let only = DeviceCode::pruned_only(&[v("9.0")]);
        assert!(only.covers(&v("9.0")) && !only.covers(&v("8.9")));
    }
}
