//! The SBOM's inventory from the plan's facts: every apt package (its lock entry and control
//! file's `Maintainer`), every wheel (its lock entry and the supplier and licence its `METADATA`
//! headers name), and the GPU facts
//! the image config carries (`io.gpuimg.*` annotations, the CUDA and NVIDIA environment).

use std::collections::BTreeMap;

use super::{Facts, ImagePlan, PythonInstall};
use crate::profile::Profile;
use crate::sbom::{Inventory, PackageFacts, PackageKind, SbomPackage};
use gpuimg_oci::image::rfc3339;

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
            facts: facts
                .wheel_headers
                .get(&w.name)
                .map(|h| facts_of(h))
                .unwrap_or_default(),
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

/// The longest licence text kept (a legacy `License:` may hold a whole licence).
const MAX_LICENSE_TEXT: usize = 300;

/// Supplier and licence from METADATA headers: `Maintainer`/`Author` (or their `-email`),
/// `License-Expression` (PEP 639, an SPDX expression) when it is one, else the legacy
/// `License:` as text.
fn facts_of(headers: &[(String, String)]) -> PackageFacts {
    let one = |k: &str| {
        headers
            .iter()
            .find(|(n, v)| n == k && !v.trim().is_empty() && v.trim() != "UNKNOWN")
            .map(|(_, v)| v.trim().to_string())
    };
    let supplier = match (one("maintainer"), one("maintainer-email")) {
        (Some(n), Some(e)) if !e.contains('<') => Some(format!("{n} <{e}>")),
        (n, e) if n.is_some() || e.is_some() => e.or(n),
        _ => match (one("author"), one("author-email")) {
            (Some(n), Some(e)) if !e.contains('<') => Some(format!("{n} <{e}>")),
            (n, e) => e.or(n),
        },
    };
    let expression = one("license-expression");
    let spdx_like = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || " .-+:()".contains(c))
    };
    let (license_expression, text) = match expression {
        Some(e) if spdx_like(&e) => (Some(e), None),
        other => (None, other.or_else(|| one("license"))),
    };
    let license_text = text.map(|t| {
        let t: String = t
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        match t.char_indices().nth(MAX_LICENSE_TEXT) {
            Some((i, _)) => format!("{}…", &t[..i]),
            None => t,
        }
    });
    PackageFacts {
        supplier,
        license_expression,
        license_text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn licence_and_supplier_from_metadata() {
        let f = facts_of(&h(&[
            ("author-email", "Jane <jane@example.org>"),
            ("license-expression", "MIT OR Apache-2.0"),
            ("license", "ignored"),
        ]));
        assert_eq!(f.supplier.as_deref(), Some("Jane <jane@example.org>"));
        assert_eq!(f.license_expression.as_deref(), Some("MIT OR Apache-2.0"));
        assert_eq!(f.license_text, None);
        let f = facts_of(&h(&[
            ("author", "Bob"),
            ("author-email", "bob@example.org"),
            ("license", "BSD, see LICENSE"),
        ]));
        assert_eq!(f.supplier.as_deref(), Some("Bob <bob@example.org>"));
        assert_eq!(f.license_expression, None);
        assert_eq!(f.license_text.as_deref(), Some("BSD, see LICENSE"));
        assert_eq!(facts_of(&[]), PackageFacts::default());
    }
}
