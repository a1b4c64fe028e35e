//! The strip rules of a build: the catalog's strip table (`catalog/strip.yaml`) turned into
//! `strip::Rules` (class names typed, paths parsed, bundled files' terms before their
//! package's), plus the `.pyc` tag `python.compile` writes. And the refusal of the classes
//! gpuimg does not implement yet.

use super::{PlanError, PythonInstall};
use crate::catalog::{self, PackageStrip};
use crate::profile::{Profile, StripClass};
use crate::strip::{PathPattern, Rules, Terms};
use gpuimg_wheel::cache_tag;

/// The catalog's rules, for every layer.
pub fn strip_rules() -> Result<Rules, PlanError> {
    rules_of(catalog::strip_table().map_err(PlanError::StripTable)?)
}

impl super::Plan {
    /// The strip rules of layer `lp`: the catalog's, and for a wheel layer of a build that
    /// compiles `.pyc`, the tag `python-caches` keeps (only the wheel layers' `.pyc` are
    /// gpuimg's; their key holds the compiler, the other layers' does not).
    pub fn strip_rules_for(&self, lp: &super::LayerJob) -> Rules {
        let mut rules = self.strip_rules.clone();
        if matches!(lp.inputs, super::Inputs::Wheels { .. }) {
            rules.compiled_tag = compiled_tag(self.python.as_ref());
        }
        rules
    }
}

fn compiled_tag(python: Option<&PythonInstall>) -> Option<String> {
    python
        .filter(|p| p.compiler.is_some())
        .map(|p| cache_tag(p.python.version))
}

/// The compute capabilities `strip: [device-code]` prunes for: the profile's GPUs' (empty
/// without the class); the class with no GPUs named is an error.
pub fn device_code_gpus(
    profile: &Profile,
    resolution: Option<&crate::resolve::Resolution>,
) -> Result<Vec<gpuimg_expect::version::Version>, PlanError> {
    if !profile.strip.contains(&StripClass::DeviceCode) {
        return Ok(Vec::new());
    }
    let mut ccs: Vec<gpuimg_expect::version::Version> = resolution
        .map(|r| {
            r.host
                .gpus
                .iter()
                .map(|g| g.compute_capability.truncate(2))
                .collect()
        })
        .unwrap_or_default();
    ccs.sort();
    ccs.dedup();
    if ccs.is_empty() {
        return Err(PlanError::DeviceCodeWithoutGpus);
    }
    Ok(ccs)
}

/// The files `device-code` leaves out for the GPUs `ccs` (as `device_code_gpus` gives
/// them): those the strip table says serve only GPUs of other compute capabilities.
pub fn gpu_files_removed(
    ccs: &[gpuimg_expect::version::Version],
) -> Result<Vec<(StripClass, PathPattern)>, PlanError> {
    if ccs.is_empty() {
        return Ok(Vec::new());
    }
    gpu_files_of(catalog::strip_table().map_err(PlanError::StripTable)?, ccs)
}

fn gpu_files_of(
    table: &[PackageStrip],
    ccs: &[gpuimg_expect::version::Version],
) -> Result<Vec<(StripClass, PathPattern)>, PlanError> {
    let bound = |p: &PackageStrip, v: &Option<String>| -> Result<_, PlanError> {
        v.as_deref()
            .map(|t| {
                t.parse::<gpuimg_expect::version::Version>().map_err(|_| {
                    PlanError::StripTable(catalog::StripTableError::new(format!(
                        "package `{}`: `{t}` is not a compute capability",
                        p.package
                    )))
                })
            })
            .transpose()
    };
    let mut out = Vec::new();
    for p in table {
        for f in &p.gpu_files {
            let from = bound(p, &f.from)?;
            let below = bound(p, &f.below)?;
            let serves = |cc: &gpuimg_expect::version::Version| {
                from.as_ref().is_none_or(|l| cc >= l) && below.as_ref().is_none_or(|h| cc < h)
            };
            if !ccs.iter().any(serves) {
                out.push((StripClass::DeviceCode, PathPattern::parse(&f.path)));
            }
        }
    }
    Ok(out)
}

fn class(package: &str, name: &str) -> Result<StripClass, PlanError> {
    StripClass::from_name(name).ok_or_else(|| {
        PlanError::StripTable(catalog::StripTableError::new(format!(
            "package `{package}`: `{name}` is not a strip class"
        )))
    })
}

fn rules_of(table: &[PackageStrip]) -> Result<Rules, PlanError> {
    let mut rules = Rules::default();
    let mut own = Vec::new();
    for p in table {
        for (name, paths) in &p.remove {
            let c = class(&p.package, name)?;
            rules
                .remove
                .extend(paths.iter().map(|x| (c, PathPattern::parse(x))));
        }
        for (name, paths) in &p.keep {
            let c = class(&p.package, name)?;
            rules
                .keep
                .extend(paths.iter().map(|x| (c, PathPattern::parse(x))));
        }
        for f in &p.files {
            rules.terms.push(Terms {
                path: PathPattern::parse(&f.path),
                package: p.package.clone(),
                licence: f.licence.clone(),
                modify: f.modify,
                remove: f.remove,
            });
        }
        own.extend(p.paths.iter().map(|x| Terms {
            path: PathPattern::parse(x),
            package: p.package.clone(),
            licence: p.licence.clone(),
            modify: p.modify,
            remove: true,
        }));
    }
    rules.terms.extend(own);
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_becomes_rules_with_bundled_files_first() {
        let r = rules_of(catalog::strip_table().unwrap()).unwrap();
        let site = "usr/local/lib/python3.11/dist-packages";
        let ptxas = format!("{site}/triton/backends/nvidia/bin/ptxas");
        let t = r.terms_of(&ptxas).unwrap();
        assert_eq!(
            (t.package.as_str(), t.licence.as_str()),
            ("triton", "NVIDIA CUDA Toolkit EULA")
        );
        assert!(!r.may_modify(&ptxas) && r.may_remove(&ptxas));
        let own = format!("{site}/triton/language/core.py");
        assert_eq!(r.terms_of(&own).unwrap().licence, "MIT");
        assert!(r
            .remove
            .iter()
            .any(|(c, p)| *c == StripClass::OtherGpuBackends
                && p.matches(&format!("{site}/triton/backends/amd/lib/x.so"))));
        assert!(r.compiled_tag.is_none());
        assert!(r.keep.iter().any(
            |(c, p)| *c == StripClass::Headers && p.matches("usr/include/python3.11/Python.h")
        ));
        assert!(!r
            .keep
            .iter()
            .any(|(c, p)| *c == StripClass::Headers && p.matches("usr/include/stdio.h")));
    }

    #[test]
    fn device_code_leaves_out_the_files_that_serve_none_of_the_gpus() {
        let site = "usr/local/lib/python3.11/dist-packages";
        let bc = |sm: &str| format!("{site}/nvidia/nvshmem/lib/libnvshmem_device_sm_{sm}.bc");
        let cupti = format!("{site}/triton/backends/nvidia/lib/cupti-blackwell/libcupti.so");
        let kept = |ccs: &[&str]| -> Vec<String> {
            let ccs: Vec<gpuimg_expect::version::Version> =
                ccs.iter().map(|c| c.parse().unwrap()).collect();
            let removed = gpu_files_removed(&ccs).unwrap();
            assert!(removed.iter().all(|(c, _)| *c == StripClass::DeviceCode));
            let mut all: Vec<String> = ["75", "80", "89", "90"].iter().map(|s| bc(s)).collect();
            all.push(cupti.clone());
            all.into_iter()
                .filter(|f| !removed.iter().any(|(_, p)| p.matches(f)))
                .collect()
        };
        assert_eq!(kept(&["9.0"]), vec![bc("90")]);
        assert_eq!(kept(&["8.6"]), vec![bc("80")]);
        assert_eq!(kept(&["8.0", "9.0"]), vec![bc("80"), bc("90")]);
        assert_eq!(kept(&["10.0"]), vec![bc("90"), cupti.clone()]);
        assert_eq!(kept(&["7.0"]), Vec::<String>::new());
        // Without device-code (no GPUs to prune for), nothing.
        assert!(gpu_files_removed(&[]).unwrap().is_empty());
    }
}
