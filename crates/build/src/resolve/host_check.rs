//! `gpuimg catalog check-host`'s verdict: what a running host reports (its kernel, its loaded
//! NVIDIA module's version and flavour, its GPUs by model name) held to the rules the node
//! resolver applies to a driver × flavour × GPUs × kernel (`node_rules`, the one home of
//! those rules). A host that runs but that a rule refuses means the catalog is wrong.
//! Pure: the caller read the host (`ops::host_read`); must never read one itself.

use gpuimg_expect::host_text::name_matches;
use gpuimg_expect::version::Version;

use super::fact::Fact;
use super::node_rules::{self, Kernel, Rule, Subject, Verdict};
use crate::catalog::{Catalog, Gpu, ModuleFlavour};

/// What a running host reports, as read from its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningHost {
    /// `uname -r` (`/proc/sys/kernel/osrelease`).
    pub kernel_release: String,
    /// `uname -v` (`/proc/sys/kernel/version`).
    pub kernel_version: String,
    /// The upstream Linux version the host states (`6.1.158`), where it states one.
    pub kernel_upstream: Option<Version>,
    /// The text it was read from (`Debian 6.1.158-1 in /proc/sys/kernel/version`).
    pub kernel_upstream_from: Option<String>,
    /// The loaded module's version and flavour (`/proc/driver/nvidia/version`).
    pub driver: Version,
    pub flavour: ModuleFlavour,
    pub gpus: Vec<HostGpu>,
}

/// One GPU the driver lists (`/proc/driver/nvidia/gpus/<bus>/information`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostGpu {
    /// The PCI bus location (`0000:18:00.0`).
    pub bus: String,
    /// Its `Model:` (`NVIDIA H100 80GB HBM3`).
    pub model: String,
}

/// The check: each GPU's catalog name, and every rule's verdict.
#[derive(Debug, Clone)]
pub struct HostCheck {
    /// The catalog GPU each host GPU is (by bus), none where the catalog has no such GPU.
    pub gpus: Vec<(String, Option<String>)>,
    pub verdicts: Vec<Verdict>,
}

impl HostCheck {
    /// The rules that refuse what the host runs (empty: the catalog admits it).
    pub fn refused_by(&self) -> Vec<Rule> {
        let mut out: Vec<Rule> = Vec::new();
        for v in self.verdicts.iter().filter(|v| !v.holds) {
            if !out.contains(&v.rule) {
                out.push(v.rule);
            }
        }
        out
    }
}

/// The catalog GPU a model name is: the one whose name or alias matches it by whole words,
/// the longest such name where several do (`H100 NVL` before `H100`).
pub fn catalog_gpu<'c>(catalog: &'c Catalog, model: &str) -> Option<&'c Gpu> {
    catalog
        .gpus
        .iter()
        .flat_map(|g| std::iter::once((g, &g.name)).chain(g.aliases.iter().map(move |a| (g, a))))
        .filter(|(_, name)| name_matches(model, name))
        .max_by_key(|(_, name)| name.len())
        .map(|(g, _)| g)
}

/// Hold `host` to the node rules: each GPU found in the catalog, then every rule for the
/// driver, flavour, those GPUs (each model once) and the running kernel.
pub fn check(catalog: &Catalog, host: &RunningHost) -> HostCheck {
    let mut verdicts = Vec::new();
    let mut gpus: Vec<&Gpu> = Vec::new();
    let mut names = Vec::new();
    let mut unknown: Vec<&str> = Vec::new();
    for g in &host.gpus {
        let found = catalog_gpu(catalog, &g.model);
        names.push((g.bus.clone(), found.map(|f| f.name.clone())));
        match found {
            Some(f) if gpus.iter().any(|x| x.name == f.name) => {}
            Some(f) => gpus.push(f),
            None if unknown.contains(&g.model.as_str()) => {}
            None => {
                unknown.push(&g.model);
                verdicts.push(Verdict {
                    rule: Rule::GpuInCatalog,
                    holds: false,
                    facts: vec![Fact::new(
                        format!("the host runs a `{}`", g.model),
                        &["host".to_string()],
                    )],
                    conclusion: format!(
                        "the catalog has no GPU named in `{}` (`gpuimg catalog list gpus`)",
                        g.model
                    ),
                })
            }
        }
    }
    let subject = Subject {
        driver: &host.driver,
        flavour: host.flavour,
        gpus: &gpus,
        kernel: Some(Kernel {
            release: &host.kernel_release,
            upstream: host.kernel_upstream.as_ref(),
        }),
    };
    verdicts.extend(node_rules::verdicts(catalog, &subject));
    HostCheck {
        gpus: names,
        verdicts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_name_is_the_catalog_gpu_it_names_by_whole_words() {
        let c = Catalog::embedded().unwrap();
        for (model, name) in [
            ("NVIDIA H100 80GB HBM3", Some("H100")),
            ("NVIDIA H100 NVL", Some("H100")),
            ("NVIDIA H200", Some("H200")),
            ("NVIDIA A100-SXM4-80GB", Some("A100")),
            ("Tesla V100-SXM2-16GB", Some("V100")),
            ("NVIDIA GB200", Some("GB200")),
            ("NVIDIA A10G", Some("A10G")),
            ("NVIDIA Imaginary X1", None),
        ] {
            assert_eq!(
                catalog_gpu(&c, model).map(|g| g.name.as_str()),
                name,
                "{model}"
            );
        }
    }
}
