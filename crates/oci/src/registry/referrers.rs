//! The SBOM beside the image in the registry: an OCI 1.1 artifact manifest (`artifactType`
//! `application/spdx+json`, the empty config, the SPDX document as its one layer) whose
//! `subject` is the image manifest, pushed by digest (`image::referrer` writes its JSON). A registry with the referrers API says so
//! with `OCI-Subject`; for one without (distribution 2.8), the referrers tag schema's index
//! (`sha256-<hex of the subject>`) gets the artifact added, keeping what it listed before.

use ureq::http::Method;

use super::session::{Body, Request};
use super::upload::{Outcome, Uploader};
use super::{Blob, BlobSource, RegistryError};
use crate::image::referrer::{self, EMPTY_CONFIG};
use crate::image::{INDEX_MEDIA_TYPE as INDEX, MANIFEST_MEDIA_TYPE as MANIFEST};
use gpuimg_store::digest::Digest;

/// How the registry lists the artifact among the subject's referrers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The registry's referrers API (it answered with `OCI-Subject`).
    Api,
    /// The referrers tag schema's index.
    TagSchema,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Api => "referrers-api",
            Via::TagSchema => "tag-schema",
        }
    }
}

/// What attaching the SBOM did.
pub struct Attached {
    pub digest: Digest,
    pub via: Via,
    /// The two blobs (empty config, document) with how each got there.
    pub blobs: Vec<(u64, Outcome)>,
}

/// Push `sbom` as a referrer of the image `subject`.
pub fn attach(
    up: &Uploader<'_>,
    sbom: &[u8],
    subject: &Digest,
    subject_size: u64,
) -> Result<Attached, RegistryError> {
    let sbom_blob = Blob {
        digest: Digest::of(sbom),
        size: sbom.len() as u64,
        source: BlobSource::Bytes(sbom.to_vec()),
    };
    let empty = Blob {
        digest: Digest::of(EMPTY_CONFIG),
        size: EMPTY_CONFIG.len() as u64,
        source: BlobSource::Bytes(EMPTY_CONFIG.to_vec()),
    };
    let mut blobs = Vec::new();
    for b in [&empty, &sbom_blob] {
        blobs.push((b.size, up.push_known(b, &|_| {})?));
    }
    let bytes = referrer::sbom_manifest(&sbom_blob.digest, sbom_blob.size, subject, subject_size)?;
    let digest = Digest::of(&bytes);
    let s = up.session;
    let url = s.url(&format!("/v2/{}/manifests/{digest}", up.repo));
    let resp = s.send(
        &Request::new(Method::PUT, url)
            .header("Content-Type", MANIFEST)
            .body(Body::Bytes(&bytes)),
    )?;
    if resp.status != 201 {
        return Err(RegistryError::Status {
            registry: s.registry.clone(),
            what: format!("the SBOM's artifact manifest PUT in `{}`", up.repo),
            status: resp.status,
            message: resp.error_text(),
        });
    }
    let via = if resp.header("oci-subject") == Some(subject.to_string().as_str()) {
        Via::Api
    } else {
        add_to_tag_index(up, subject, &digest, bytes.len() as u64)?;
        Via::TagSchema
    };
    Ok(Attached { digest, via, blobs })
}

/// Fetch the subject's fallback index (`sha256-<hex>`), add the artifact unless it is listed,
/// and put it back.
fn add_to_tag_index(
    up: &Uploader<'_>,
    subject: &Digest,
    artifact: &Digest,
    size: u64,
) -> Result<(), RegistryError> {
    let s = up.session;
    let url = s.url(&format!(
        "/v2/{}/manifests/sha256-{}",
        up.repo,
        subject.hex()
    ));
    let resp = s.send(&Request::new(Method::GET, url.clone()).header("Accept", INDEX))?;
    let mut index: serde_json::Value = match resp.status {
        200 => serde_json::from_slice(&resp.body).map_err(|e| RegistryError::Protocol {
            registry: s.registry.clone(),
            reason: format!(
                "the referrers index `sha256-{}` is not JSON: {e}",
                subject.hex()
            ),
        })?,
        404 => referrer::empty_referrers_index()?,
        st => {
            return Err(RegistryError::Status {
                registry: s.registry.clone(),
                what: "reading the referrers index".into(),
                status: st,
                message: resp.error_text(),
            })
        }
    };
    let entry = referrer::sbom_index_entry(artifact, size)?;
    let Some(list) = index.get_mut("manifests").and_then(|m| m.as_array_mut()) else {
        return Err(RegistryError::Protocol {
            registry: s.registry.clone(),
            reason: format!(
                "the referrers index `sha256-{}` has no `manifests` list",
                subject.hex()
            ),
        });
    };
    let listed = list
        .iter()
        .any(|m| m.get("digest").and_then(|d| d.as_str()) == Some(&artifact.to_string()));
    if listed {
        return Ok(());
    }
    list.push(entry);
    let bytes = referrer::index_bytes(&index)?;
    let resp = s.send(
        &Request::new(Method::PUT, url)
            .header("Content-Type", INDEX)
            .body(Body::Bytes(&bytes)),
    )?;
    if resp.status != 201 {
        return Err(RegistryError::Status {
            registry: s.registry.clone(),
            what: "the referrers index PUT".into(),
            status: resp.status,
            message: resp.error_text(),
        });
    }
    Ok(())
}
