//! Checks that the merged catalog holds together, one named check per rule: every source id
//! resolves, every pinned cuDNN/NCCL version has a record, every CUDA release has a family,
//! every GPU's compute capability is known, every GPU states its first driver (a version or
//! `unknown`: absent is never "any driver"), a GPU's `cpu` names a known architecture and its
//! own sources, `unverified` names a fact the record has, every CUDA component wheel is named
//! as normalised.

use std::collections::BTreeSet;

use super::{Catalog, CatalogError};

const UNVERIFIABLE: &[&str] = &[
    "driver",
    "sm",
    "cc",
    "kernel",
    "modules",
    "bandwidth",
    "open_min_driver",
    "datacenter",
    "variant",
    "cpu",
];

/// The CPU architectures a GPU record may name (OCI names, as a profile's `platform` has them).
const CPU_ARCHES: &[&str] = &["amd64", "arm64"];

pub(super) fn validate(c: &Catalog) -> Result<(), CatalogError> {
    let mut problems = Vec::new();
    sources_resolve(c, &mut problems);
    unverified_names_facts(c, &mut problems);
    pins_have_records(c, &mut problems);
    families_and_ccs_exist(c, &mut problems);
    gpu_names_unique(c, &mut problems);
    gpu_floors_stated(c, &mut problems);
    cuda_component_names(c, &mut problems);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CatalogError::Invalid { problems })
    }
}

/// A CUDA component wheel is named as normalised (`nvidia-cublas-cu12`: the resolver compares
/// normalised names).
fn cuda_component_names(c: &Catalog, problems: &mut Vec<String>) {
    for r in &c.cuda_components {
        for n in r.wheels.keys() {
            let normal = !n.is_empty()
                && n.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-');
            if !normal {
                problems.push(format!(
                    "CUDA {} components: `{n}` is not a normalised wheel name",
                    r.cuda
                ));
            }
        }
    }
}

fn sources_resolve(c: &Catalog, problems: &mut Vec<String>) {
    let known: BTreeSet<&str> = c.sources.iter().map(|s| s.id.as_str()).collect();
    let mut check = |what: String, ids: &[String]| {
        if ids.is_empty() {
            problems.push(format!("{what} names no source"));
        }
        for id in ids {
            if !known.contains(id.as_str()) {
                problems.push(format!("{what} cites unknown source `{id}`"));
            }
        }
    };
    for r in &c.cuda_families {
        check(format!("CUDA family {}", r.major), &r.source);
    }
    for r in &c.stack_wheels {
        check(format!("stack wheels of {}", r.component), &r.source);
    }
    for r in &c.stack_debs {
        check(format!("stack packages of {}", r.component), &r.source);
    }
    for r in &c.cuda_components {
        check(format!("CUDA {} components", r.cuda), &r.source);
    }
    for r in &c.compute_capabilities {
        check(format!("compute capability {}", r.cc), &r.source);
    }
    for r in &c.cuda {
        check(format!("CUDA {}", r.version), &r.source);
    }
    for r in &c.gpus {
        check(format!("GPU {}", r.name), &r.source);
        if let Some(cpu) = &r.cpu {
            check(format!("GPU {} cpu", r.name), &cpu.source);
        }
    }
    for r in &c.drivers {
        check(format!("driver branch R{}", r.branch), &r.source);
    }
    for r in &c.python {
        check(format!("Python {}", r.version), &r.source);
    }
    for r in &c.pytorch {
        check(format!("pytorch {} python", r.version), &r.python_source);
        for v in &r.variants {
            check(format!("pytorch {} {}", r.version, v.name), &v.source);
        }
    }
    for r in &c.tensorflow {
        check(format!("tensorflow {}", r.version), &r.source);
    }
    for r in &c.jax {
        check(format!("jax {} python", r.version), &r.python_source);
        for v in &r.variants {
            check(format!("jax {} {}", r.version, v.name), &v.source);
        }
    }
    for r in &c.cudnn {
        for b in &r.builds {
            check(format!("cuDNN {}", r.version), &b.source);
        }
    }
    for r in &c.nccl {
        check(format!("NCCL {}", r.version), &r.source);
    }
    for r in &c.module_build_failures {
        check(format!("module build failure {}", r.id), &r.source);
    }
    for r in &c.systems {
        check(format!("system {}", r.name), &r.source);
    }
}

fn unverified_names_facts(c: &Catalog, problems: &mut Vec<String>) {
    let mut check = |what: String, names: &[String]| {
        for n in names {
            if !UNVERIFIABLE.contains(&n.as_str()) {
                problems.push(format!("{what}: `unverified` names unknown fact `{n}`"));
            }
        }
    };
    for r in &c.cuda {
        check(format!("CUDA {}", r.version), &r.unverified);
    }
    for r in &c.gpus {
        check(format!("GPU {}", r.name), &r.unverified);
    }
    for r in &c.drivers {
        check(format!("driver branch R{}", r.branch), &r.unverified);
    }
    for r in &c.pytorch {
        for v in &r.variants {
            check(format!("pytorch {} {}", r.version, v.name), &v.unverified);
        }
    }
    for r in &c.cudnn {
        for b in &r.builds {
            check(format!("cuDNN {}", r.version), &b.unverified);
        }
    }
    for r in &c.nccl {
        check(format!("NCCL {}", r.version), &r.unverified);
    }
    for r in &c.compute_capabilities {
        check(format!("compute capability {}", r.cc), &r.unverified);
    }
    for r in &c.module_build_failures {
        check(format!("module build failure {}", r.id), &r.unverified);
    }
}

fn pins_have_records(c: &Catalog, problems: &mut Vec<String>) {
    for r in &c.pytorch {
        for v in &r.variants {
            if let Some(p) = &v.cudnn {
                if c.cudnn_record(p).is_none() {
                    problems.push(format!(
                        "pytorch {} {} pins cuDNN {p}, which has no record",
                        r.version, v.name
                    ));
                }
            }
            if let Some(p) = &v.nccl {
                if !c.nccl.iter().any(|n| &n.version == p) {
                    problems.push(format!(
                        "pytorch {} {} pins NCCL {p}, which has no record",
                        r.version, v.name
                    ));
                }
            }
            if !c.cuda.iter().any(|t| t.version.starts_with(&v.cuda)) {
                problems.push(format!(
                    "pytorch {} {} is built for CUDA {}, which has no release",
                    r.version, v.name, v.cuda
                ));
            }
            for py in &r.python {
                if !c.python.iter().any(|p| &p.version == py) {
                    problems.push(format!(
                        "pytorch {} lists Python {py}, which has no record",
                        r.version
                    ));
                }
            }
        }
    }
}

fn families_and_ccs_exist(c: &Catalog, problems: &mut Vec<String>) {
    for t in &c.cuda {
        if c.family(t.version.major()).is_none() {
            problems.push(format!(
                "CUDA {} has no family record for major {}",
                t.version,
                t.version.major()
            ));
        }
    }
    for g in &c.gpus {
        if c.cc_support(&g.cc).is_none() {
            problems.push(format!(
                "GPU {} has compute capability {}, which has no record",
                g.name, g.cc
            ));
        }
        if g.modules.is_empty() {
            problems.push(format!("GPU {} lists no kernel-module flavour", g.name));
        }
        if let Some(cpu) = g
            .cpu
            .as_ref()
            .filter(|c| !CPU_ARCHES.contains(&c.arch.as_str()))
        {
            problems.push(format!(
                "GPU {}: `cpu.arch: {}` is not one of {}",
                g.name,
                cpu.arch,
                CPU_ARCHES.join(", ")
            ));
        }
    }
}

fn gpu_names_unique(c: &Catalog, problems: &mut Vec<String>) {
    let mut seen = BTreeSet::new();
    for g in &c.gpus {
        for n in std::iter::once(&g.name).chain(&g.aliases) {
            let k: String = n
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric())
                .collect();
            if !seen.insert(k) {
                problems.push(format!("GPU name or alias `{n}` is used twice"));
            }
        }
    }
}

/// A GPU's first driver is a fact or explicitly `unknown`; a record that says neither would
/// read as "any driver drives it".
fn gpu_floors_stated(c: &Catalog, problems: &mut Vec<String>) {
    for g in &c.gpus {
        if g.min_driver.is_none() {
            problems.push(format!(
                "GPU {} states no `min_driver` (its first driver, or `unknown`)",
                g.name
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::DriverFloor;

    #[test]
    fn every_embedded_gpu_states_its_first_driver() {
        let c = Catalog::embedded().expect("embedded catalog");
        for g in &c.gpus {
            assert!(
                g.min_driver.is_some(),
                "GPU {} states no min_driver",
                g.name
            );
        }
        // nv-gpuop-b200 gives B200's; no source gives H200's.
        let b200 = c.gpu("B200").and_then(|g| g.min_driver.clone());
        assert_eq!(
            b200.as_ref()
                .and_then(DriverFloor::known)
                .map(|v| v.to_string()),
            Some("570.133.20".to_string())
        );
        assert_eq!(
            c.gpu("H200").and_then(|g| g.min_driver.clone()),
            Some(DriverFloor::Unknown)
        );
    }

    #[test]
    fn a_gpu_without_a_first_driver_is_refused() {
        let mut c = Catalog::embedded().expect("embedded catalog");
        let Some(h200) = c.gpus.iter_mut().find(|g| g.name == "H200") else {
            panic!("H200 in the catalog");
        };
        h200.min_driver = None;
        let e = validate(&c)
            .expect_err("a GPU without min_driver validated")
            .to_string();
        assert!(
            e.contains("GPU H200 states no `min_driver` (its first driver, or `unknown`)"),
            "{e}"
        );
    }

    #[test]
    fn the_grace_gpus_are_arm64_and_the_pcie_parts_any_platform() {
        let c = Catalog::embedded().expect("embedded catalog");
        for name in ["GH200", "GB200", "GB300", "GB10"] {
            let cpu = c.gpu(name).and_then(|g| g.cpu.clone());
            let Some(cpu) = cpu else {
                panic!("GPU {name} states no cpu");
            };
            assert_eq!(cpu.arch, "arm64", "{name}");
            assert!(!cpu.source.is_empty(), "{name}");
        }
        for name in ["H100", "H200", "B200", "A100", "L4"] {
            assert_eq!(c.gpu(name).and_then(|g| g.cpu.clone()), None, "{name}");
        }
    }

    #[test]
    fn a_cpu_of_an_unknown_architecture_or_source_is_refused() {
        let mut c = Catalog::embedded().expect("embedded catalog");
        let Some(gh200) = c.gpus.iter_mut().find(|g| g.name == "GH200") else {
            panic!("GH200 in the catalog");
        };
        gh200.cpu = Some(crate::catalog::GpuCpu {
            arch: "aarch64".into(),
            source: vec!["nv-nowhere".into()],
        });
        let e = validate(&c).expect_err("a bad cpu validated").to_string();
        assert!(
            e.contains("GPU GH200: `cpu.arch: aarch64` is not one of amd64, arm64"),
            "{e}"
        );
        assert!(
            e.contains("GPU GH200 cpu cites unknown source `nv-nowhere`"),
            "{e}"
        );
    }
}
