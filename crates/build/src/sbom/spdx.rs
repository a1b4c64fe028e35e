//! The SPDX 2.3 document: packages, relationships, annotations, in canonical JSON.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use gpuimg_store::canonical_json::to_canonical;
use gpuimg_store::digest::Digest;

/// What kind of package an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PackageKind {
    Deb,
    Wheel,
}

/// What a package's own metadata says beyond its lock entry: the Debian control file's
/// `Maintainer`, a wheel's `METADATA` author or maintainer and licence.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PackageFacts {
    /// `Name <email>` or `Name (email)`, as the package writes it.
    pub supplier: Option<String>,
    /// An SPDX licence expression the package declares (`License-Expression`).
    pub license_expression: Option<String>,
    /// Free-text licence (a wheel's legacy `License:`), kept as a comment.
    pub license_text: Option<String>,
}

/// One package in the image.
#[derive(Debug, Clone)]
pub struct SbomPackage {
    pub kind: PackageKind,
    pub name: String,
    pub version: String,
    /// Debian architecture (`amd64`, `all`); none for wheels.
    pub architecture: Option<String>,
    /// The archive's URL, where the lock records one (never for `host` sources).
    pub download: Option<String>,
    /// The `.deb`'s or wheel's sha256.
    pub sha256: Digest,
    /// The archive's file name.
    pub filename: String,
    pub facts: PackageFacts,
}

/// Everything the document describes.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// The image's name (the profile's `name`).
    pub name: String,
    /// SOURCE_DATE_EPOCH as RFC 3339 (`YYYY-MM-DDThh:mm:ssZ`).
    pub created: String,
    pub packages: Vec<SbomPackage>,
    /// GPU facts as `key → value` (the image's `io.gpuimg.*` annotations and CUDA/NVIDIA
    /// environment), one annotation each.
    pub facts: BTreeMap<String, String>,
}

const NOASSERTION: &str = "NOASSERTION";
const ROOT_ID: &str = "SPDXRef-Image";

fn tool() -> String {
    format!("Tool: gpuimg-{}", env!("CARGO_PKG_VERSION"))
}

/// The SPDX document for `inv`, as canonical JSON.
pub fn document(inv: &Inventory) -> Result<Vec<u8>, serde_json::Error> {
    let mut packages = inv.packages.clone();
    packages.sort_by(|a, b| {
        (a.kind, &a.name, &a.architecture, &a.version).cmp(&(
            b.kind,
            &b.name,
            &b.architecture,
            &b.version,
        ))
    });
    let annotations: Vec<Value> = inv
        .facts
        .iter()
        .map(|(k, v)| {
            json!({
                "annotationDate": inv.created,
                "annotationType": "OTHER",
                "annotator": tool(),
                "comment": format!("{k}={v}"),
            })
        })
        .collect();
    let mut root = json!({
        "SPDXID": ROOT_ID,
        "name": inv.name,
        "downloadLocation": NOASSERTION,
        "filesAnalyzed": false,
        "licenseConcluded": NOASSERTION,
        "licenseDeclared": NOASSERTION,
        "copyrightText": NOASSERTION,
        "primaryPackagePurpose": "CONTAINER",
        "comment": "An OCI image built by gpuimg; its GPU facts are the annotations.",
    });
    if !annotations.is_empty() {
        root["annotations"] = Value::Array(annotations);
    }
    let mut out = vec![root];
    let mut relationships = vec![json!({
        "spdxElementId": "SPDXRef-DOCUMENT",
        "relationshipType": "DESCRIBES",
        "relatedSpdxElement": ROOT_ID,
    })];
    let mut used = BTreeSet::new();
    for p in &packages {
        let id = unique_id(p, &mut used);
        out.push(package(p, &id));
        relationships.push(json!({
            "spdxElementId": ROOT_ID,
            "relationshipType": "CONTAINS",
            "relatedSpdxElement": id,
        }));
    }
    let mut doc = json!({
        "hasExtractedLicensingInfos": extracted(&packages),
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": format!("{} SBOM", inv.name),
        "creationInfo": {
            "created": inv.created,
            "creators": [tool()],
        },
        "packages": out,
        "relationships": relationships,
    });
    // The namespace names this content: the digest of the document without it.
    let (_, digest) = to_canonical(&doc)?;
    doc["documentNamespace"] = Value::String(format!(
        "urn:gpuimg:spdx:{}:{}",
        inv.name.replace('/', ":"),
        digest.hex()
    ));
    to_canonical(&doc).map(|(bytes, _)| bytes)
}

/// Each `LicenseRef-…` a package's declared expression uses, declared as SPDX requires
/// (gpuimg has no text for it: the package's own licence files carry it).
fn extracted(packages: &[SbomPackage]) -> Vec<Value> {
    let refs: BTreeSet<&str> = packages
        .iter()
        .filter_map(|p| p.facts.license_expression.as_deref())
        .flat_map(|e| e.split(|c: char| c.is_whitespace() || c == '(' || c == ')'))
        .filter(|t| t.starts_with("LicenseRef-"))
        .collect();
    refs.into_iter()
        .map(|r| {
            json!({
                "licenseId": r,
                "name": r.trim_start_matches("LicenseRef-"),
                "extractedText": "Declared by the package's metadata; the text is in the package's own licence files.",
            })
        })
        .collect()
}

fn package(p: &SbomPackage, id: &str) -> Value {
    let (supplier, purpose) = match p.kind {
        PackageKind::Deb => (debian_supplier(p.facts.supplier.as_deref()), "LIBRARY"),
        PackageKind::Wheel => (person(p.facts.supplier.as_deref()), "LIBRARY"),
    };
    let mut v = json!({
        "SPDXID": id,
        "name": p.name,
        "versionInfo": p.version,
        "packageFileName": p.filename,
        "supplier": supplier,
        "downloadLocation": p.download.as_deref().unwrap_or(NOASSERTION),
        "filesAnalyzed": false,
        "checksums": [{"algorithm": "SHA256", "checksumValue": p.sha256.hex()}],
        "licenseConcluded": NOASSERTION,
        "licenseDeclared": p.facts.license_expression.as_deref().unwrap_or(NOASSERTION),
        "copyrightText": NOASSERTION,
        "primaryPackagePurpose": purpose,
    });
    if let Some(t) = &p.facts.license_text {
        v["licenseComments"] = Value::String(format!("METADATA License: {t}"));
    }
    match p.kind {
        PackageKind::Deb => {
            v["comment"] = Value::String(format!(
                "Debian package, architecture {}",
                p.architecture.as_deref().unwrap_or("unknown")
            ));
        }
        PackageKind::Wheel => {
            v["externalRefs"] = json!([{
                "referenceCategory": "PACKAGE-MANAGER",
                "referenceType": "purl",
                "referenceLocator": format!("pkg:pypi/{}@{}", p.name, p.version),
            }]);
        }
    }
    v
}

/// `SPDXRef-deb-<name>-<arch>` / `SPDXRef-wheel-<name>`, with characters outside
/// `[A-Za-z0-9.-]` as `-` and a counter where two would meet.
fn unique_id(p: &SbomPackage, used: &mut BTreeSet<String>) -> String {
    let raw = match p.kind {
        PackageKind::Deb => format!(
            "deb-{}-{}",
            p.name,
            p.architecture.as_deref().unwrap_or("any")
        ),
        PackageKind::Wheel => format!("wheel-{}", p.name),
    };
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut id = format!("SPDXRef-{clean}");
    let mut n = 1;
    while !used.insert(id.clone()) {
        n += 1;
        id = format!("SPDXRef-{clean}-{n}");
    }
    id
}

/// A Debian maintainer: a team or list is an organisation, anyone else a person.
fn debian_supplier(m: Option<&str>) -> String {
    let Some(m) = m.filter(|m| !m.trim().is_empty()) else {
        return NOASSERTION.into();
    };
    let (name, email) = split_contact(m);
    let lower = name.to_ascii_lowercase();
    let org = ["team", "maintainers", "group", "developers", "project"]
        .iter()
        .any(|w| lower.contains(w));
    let kind = if org { "Organization" } else { "Person" };
    actor(kind, &name, email.as_deref())
}

fn person(m: Option<&str>) -> String {
    match m.filter(|m| !m.trim().is_empty()) {
        Some(m) => {
            let (name, email) = split_contact(m);
            actor("Person", &name, email.as_deref())
        }
        None => NOASSERTION.into(),
    }
}

/// `Kind: name (email)`, with parentheses in the name made brackets so the email stays
/// the only parenthesised part.
fn actor(kind: &str, name: &str, email: Option<&str>) -> String {
    let name: String = name
        .chars()
        .map(|c| match c {
            '(' => '[',
            ')' => ']',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    let name = name.trim();
    let name = if name.is_empty() {
        email.unwrap_or("unknown")
    } else {
        name
    };
    match email {
        Some(e) => format!("{kind}: {name} ({e})"),
        None => format!("{kind}: {name}"),
    }
}

/// `Name <email>` → (`Name`, `email`); the first of a comma-separated list.
fn split_contact(s: &str) -> (String, Option<String>) {
    let first = s.split(',').next().unwrap_or(s).trim();
    match (first.find('<'), first.rfind('>')) {
        (Some(a), Some(b)) if a < b => {
            let email = first[a + 1..b].trim();
            let name = first[..a].trim().trim_matches('"').trim();
            (
                name.to_string(),
                (!email.is_empty() && !email.contains(['(', ')'])).then(|| email.to_string()),
            )
        }
        _ if first.contains('@') && !first.contains(' ') => (String::new(), Some(first.into())),
        _ => (first.to_string(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(kind: PackageKind, name: &str) -> SbomPackage {
        SbomPackage {
            kind,
            name: name.into(),
            version: "1.0".into(),
            architecture: (kind == PackageKind::Deb).then(|| "amd64".into()),
            download: None,
            sha256: Digest::of(name.as_bytes()),
            filename: format!("{name}.deb"),
            facts: PackageFacts::default(),
        }
    }

    #[test]
    fn the_document_is_deterministic_and_names_itself_by_digest() {
        let mut inv = Inventory {
            name: "demo/x".into(),
            created: "2023-11-14T22:13:20Z".into(),
            packages: vec![
                pkg(PackageKind::Wheel, "b"),
                pkg(PackageKind::Deb, "libstdc++6"),
            ],
            facts: BTreeMap::from([("io.gpuimg.stack.cuda".into(), "12.4.1".into())]),
        };
        let a = document(&inv).unwrap();
        inv.packages.reverse();
        assert_eq!(document(&inv).unwrap(), a);
        let v: Value = serde_json::from_slice(&a).unwrap();
        let ns = v["documentNamespace"].as_str().unwrap();
        assert!(ns.starts_with("urn:gpuimg:spdx:demo:x:"), "{ns}");
        let ids: Vec<&str> = v["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["SPDXID"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            [ROOT_ID, "SPDXRef-deb-libstdc--6-amd64", "SPDXRef-wheel-b"]
        );
        assert_eq!(
            v["packages"][0]["annotations"][0]["comment"],
            "io.gpuimg.stack.cuda=12.4.1"
        );
        inv.created = "2024-01-01T00:00:00Z".into();
        let b: Value = serde_json::from_slice(&document(&inv).unwrap()).unwrap();
        assert_ne!(b["documentNamespace"], v["documentNamespace"]);
    }

    #[test]
    fn suppliers_are_spdx_actors() {
        assert_eq!(
            debian_supplier(Some("GNU Libc Maintainers <debian-glibc@lists.debian.org>")),
            "Organization: GNU Libc Maintainers (debian-glibc@lists.debian.org)"
        );
        assert_eq!(
            debian_supplier(Some("Jane Doe <jane@example.org>")),
            "Person: Jane Doe (jane@example.org)"
        );
        assert_eq!(debian_supplier(None), NOASSERTION);
        assert_eq!(
            person(Some("\"A (B)\" <a@b.c>, C <c@d.e>")),
            "Person: A [B] (a@b.c)"
        );
        assert_eq!(person(Some("a@b.c")), "Person: a@b.c (a@b.c)");
        assert_eq!(person(Some("Someone")), "Person: Someone");
    }
}
