//! Merging catalog files: later files add records or replace records with the same key.
//!
//! Keys: a source's id, a family's major, a compute capability, a release's version, a GPU's
//! name, a driver branch, a module build failure's id. A key written twice in one file is an error (no silent duplicates).

use std::collections::BTreeSet;

use super::{Catalog, CatalogError, CatalogFile};

fn upsert<T, K: PartialEq + std::fmt::Display>(
    into: &mut Vec<T>,
    from: Vec<T>,
    key: impl Fn(&T) -> K,
    file: &str,
    section: &str,
    problems: &mut Vec<String>,
) {
    let mut seen: Vec<K> = Vec::new();
    for rec in from {
        let k = key(&rec);
        if seen.contains(&k) {
            problems.push(format!("`{file}`: {section} `{k}` is listed twice"));
            continue;
        }
        match into.iter().position(|r| key(r) == k) {
            Some(i) => into[i] = rec,
            None => into.push(rec),
        }
        seen.push(k);
    }
}

pub(super) fn merge(files: Vec<(String, CatalogFile)>) -> Result<Catalog, CatalogError> {
    let mut c = Catalog::default();
    let mut problems = Vec::new();
    for (name, f) in files {
        let p = &mut problems;
        upsert(
            &mut c.sources,
            f.sources,
            |r| r.id.clone(),
            &name,
            "source",
            p,
        );
        upsert(
            &mut c.cuda_families,
            f.cuda_families,
            |r| r.major,
            &name,
            "CUDA family",
            p,
        );
        upsert(
            &mut c.compute_capabilities,
            f.compute_capabilities,
            |r| r.cc.clone(),
            &name,
            "compute capability",
            p,
        );
        upsert(
            &mut c.cuda,
            f.cuda,
            |r| r.version.clone(),
            &name,
            "CUDA release",
            p,
        );
        upsert(
            &mut c.gpus,
            f.gpus,
            |r| r.name.to_lowercase(),
            &name,
            "GPU",
            p,
        );
        upsert(
            &mut c.drivers,
            f.drivers,
            |r| r.branch,
            &name,
            "driver branch",
            p,
        );
        upsert(
            &mut c.python,
            f.python,
            |r| r.version.clone(),
            &name,
            "Python",
            p,
        );
        upsert(
            &mut c.pytorch,
            f.pytorch,
            |r| r.version.clone(),
            &name,
            "PyTorch release",
            p,
        );
        upsert(
            &mut c.tensorflow,
            f.tensorflow,
            |r| r.version.clone(),
            &name,
            "TensorFlow release",
            p,
        );
        upsert(
            &mut c.jax,
            f.jax,
            |r| r.version.clone(),
            &name,
            "JAX release",
            p,
        );
        upsert(
            &mut c.cudnn,
            f.cudnn,
            |r| r.version.clone(),
            &name,
            "cuDNN release",
            p,
        );
        upsert(
            &mut c.nccl,
            f.nccl,
            |r| r.version.clone(),
            &name,
            "NCCL release",
            p,
        );
        upsert(
            &mut c.stack_wheels,
            f.stack_wheels,
            |r| format!("{}/{:?}", r.component, r.cuda_major),
            &name,
            "stack wheels",
            p,
        );
        upsert(
            &mut c.stack_debs,
            f.stack_debs,
            |r| format!("{}/{:?}", r.component, r.cuda_major),
            &name,
            "stack packages",
            p,
        );
        upsert(
            &mut c.cuda_components,
            f.cuda_components,
            |r| r.cuda.clone(),
            &name,
            "CUDA components of release",
            p,
        );
        upsert(
            &mut c.module_build_failures,
            f.module_build_failures,
            |r| r.id.clone(),
            &name,
            "module build failure",
            p,
        );
        upsert(
            &mut c.systems,
            f.systems,
            |r| r.name.to_lowercase(),
            &name,
            "system",
            p,
        );
    }
    if !problems.is_empty() {
        return Err(CatalogError::Invalid { problems });
    }
    c.cuda.sort_by(|a, b| b.version.cmp(&a.version));
    c.python.sort_by(|a, b| b.version.cmp(&a.version));
    c.pytorch.sort_by(|a, b| b.version.cmp(&a.version));
    c.tensorflow.sort_by(|a, b| b.version.cmp(&a.version));
    c.jax.sort_by(|a, b| b.version.cmp(&a.version));
    c.cudnn.sort_by(|a, b| b.version.cmp(&a.version));
    c.nccl.sort_by(|a, b| b.version.cmp(&a.version));
    c.drivers.sort_by_key(|d| d.branch);
    c.cuda_families.sort_by_key(|f| f.major);
    c.compute_capabilities.sort_by(|a, b| a.cc.cmp(&b.cc));
    let names: BTreeSet<&str> = c.gpus.iter().map(|g| g.name.as_str()).collect();
    debug_assert_eq!(names.len(), c.gpus.len());
    Ok(c)
}
