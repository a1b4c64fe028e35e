//! The SBOM's inventory from the plan's facts: every apt package (its lock entry and control
//! file's `Maintainer`), every wheel (its lock entry and `METADATA` facts), and the GPU facts
//! the image config carries (`io.gpuimg.*` annotations, the CUDA and NVIDIA environment).

use std::collections::BTreeMap;

use super::{Facts, ImagePlan, PythonInstall};
use crate::image::rfc3339;
use crate::profile::Profile;
use crate::sbom::{Inventory, PackageFacts, PackageKind, SbomPackage};

/// The environment variables that are GPU facts (the rest of the environment is not).
const GPU_ENV: &[&str] = &[
    "CUDA_VERSION",
    "NVIDIA_REQUIRE_CUDA",
    "NVIDIA_DRIVER_CAPABILITIES",
];

pub fn inventory(
    profile: &Profile,
    facts: &Facts,
    python: Option<&PythonInstall>,
    image: &ImagePlan,
    epoch: u64,
) -> Inventory {
    let mut packages = Vec::new();
    if let Some(apt) = &facts.apt {
        for (p, m) in apt.packages.iter().zip(&apt.metas) {
            // A profile URL is the repository's base; `host:` sources name no URL.
            let download = (!p.repository.starts_with("host:")).then(|| {
                format!(
                    "{}/{}",
                    p.repository.trim_end_matches('/'),
                    p.filename.trim_start_matches('/')
                )
            });
            packages.push(SbomPackage {
                kind: PackageKind::Deb,
                name: p.name.clone(),
                version: p.version.clone(),
                architecture: Some(p.architecture.clone()),
                download,
                sha256: p.sha256,
                filename: p
                    .filename
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                facts: PackageFacts {
                    supplier: m.maintainer.clone(),
                    ..PackageFacts::default()
                },
            });
        }
    }
    for w in python.map(|p| p.wheels.as_slice()).unwrap_or_default() {
        packages.push(SbomPackage {
            kind: PackageKind::Wheel,
            name: w.name.clone(),
            version: w.version.clone(),
            architecture: None,
            // The lock names the index, never its URL.
            download: None,
            sha256: w.sha256,
            filename: w.filename.clone(),
            facts: facts.wheel_facts.get(&w.name).cloned().unwrap_or_default(),
        });
    }
    let mut gpu: BTreeMap<String, String> = image
        .annotations
        .iter()
        .filter(|(k, _)| k.starts_with("io.gpuimg."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for k in GPU_ENV {
        if let Some(v) = profile.config.env.get(*k).or(image.env.get(*k)) {
            gpu.insert((*k).to_string(), v.clone());
        }
    }
    Inventory {
        name: profile.name.to_string(),
        created: rfc3339(epoch),
        packages,
        facts: gpu,
    }
}
