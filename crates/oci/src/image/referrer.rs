//! The SBOM beside the image, as OCI 1.1 JSON: the artifact manifest (`artifactType`
//! `application/spdx+json`, the empty config inline, the SPDX document its one layer titled
//! `sbom.spdx.json`) whose `subject` is the image manifest, and the descriptor a referrers
//! index lists it by. Built with oci-spec's types, written as canonical JSON: the bytes, so the
//! artifact's digest, are the same on every push.
//!
//! Must never talk to a registry: `registry::referrers` pushes these bytes.

use oci_spec::image::{DescriptorBuilder, ImageIndexBuilder, ImageManifestBuilder, MediaType};

use super::annotations::ANN_TITLE;
use super::{json_err, oci_digest, spec_err, ImageError};
use gpuimg_store::canonical_json::to_canonical;
use gpuimg_store::digest::Digest;

/// The SBOM's media type, and the artifact's `artifactType`.
pub const SPDX_JSON: &str = "application/spdx+json";
/// The empty config's bytes (`{}`), carried inline as its descriptor's `data`.
pub const EMPTY_CONFIG: &[u8] = b"{}";
/// The SBOM layer's title.
const SBOM_TITLE: &str = "sbom.spdx.json";

/// The artifact manifest for the SBOM (`sbom`, `sbom_size` bytes) about the image manifest
/// `subject` (`subject_size` bytes).
pub fn sbom_manifest(
    sbom: &Digest,
    sbom_size: u64,
    subject: &Digest,
    subject_size: u64,
) -> Result<Vec<u8>, ImageError> {
    let config = DescriptorBuilder::default()
        .media_type(MediaType::EmptyJSON)
        .digest(oci_digest(&Digest::of(EMPTY_CONFIG))?)
        .size(EMPTY_CONFIG.len() as u64)
        .data("e30=")
        .build()
        .map_err(spec_err("referrer config"))?;
    let layer = DescriptorBuilder::default()
        .media_type(MediaType::Other(SPDX_JSON.into()))
        .digest(oci_digest(sbom)?)
        .size(sbom_size)
        .annotations(std::collections::HashMap::from([(
            ANN_TITLE.to_string(),
            SBOM_TITLE.to_string(),
        )]))
        .build()
        .map_err(spec_err("referrer layer"))?;
    let subject = DescriptorBuilder::default()
        .media_type(MediaType::ImageManifest)
        .digest(oci_digest(subject)?)
        .size(subject_size)
        .build()
        .map_err(spec_err("referrer subject"))?;
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .artifact_type(MediaType::Other(SPDX_JSON.into()))
        .config(config)
        .layers(vec![layer])
        .subject(subject)
        .build()
        .map_err(spec_err("referrer manifest"))?;
    let (bytes, _) = to_canonical(&manifest).map_err(json_err("referrer manifest"))?;
    Ok(bytes)
}

/// The descriptor a referrers index lists the SBOM's artifact manifest (`artifact`, `size`
/// bytes) by.
pub fn sbom_index_entry(artifact: &Digest, size: u64) -> Result<serde_json::Value, ImageError> {
    let d = DescriptorBuilder::default()
        .media_type(MediaType::ImageManifest)
        .digest(oci_digest(artifact)?)
        .size(size)
        .artifact_type(MediaType::Other(SPDX_JSON.into()))
        .build()
        .map_err(spec_err("referrers index entry"))?;
    serde_json::to_value(d).map_err(json_err("referrers index entry"))
}

/// A referrers index's bytes as pushed: canonical JSON (keys sorted whatever map type parsed
/// it), its entries kept as they were.
pub fn index_bytes(index: &serde_json::Value) -> Result<Vec<u8>, ImageError> {
    let (bytes, _) = to_canonical(index).map_err(json_err("referrers index"))?;
    Ok(bytes)
}

/// A referrers index listing nothing yet.
pub fn empty_referrers_index() -> Result<serde_json::Value, ImageError> {
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(Vec::new())
        .build()
        .map_err(spec_err("referrers index"))?;
    serde_json::to_value(index).map_err(json_err("referrers index"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sbom_manifest_bytes_are_the_ones_pushed_before_oci_spec_built_them() {
        let sbom = Digest::of(b"sbom");
        let subject = Digest::of(b"image");
        let got = String::from_utf8(sbom_manifest(&sbom, 4, &subject, 5).unwrap()).unwrap();
        // The bytes the hand-written JSON gave (keys sorted, compact).
        let want = format!(
            concat!(
                r#"{{"artifactType":"application/spdx+json","#,
                r#""config":{{"data":"e30=","digest":"{empty}","mediaType":"application/vnd.oci.empty.v1+json","size":2}},"#,
                r#""layers":[{{"annotations":{{"org.opencontainers.image.title":"sbom.spdx.json"}},"digest":"{sbom}","mediaType":"application/spdx+json","size":4}}],"#,
                r#""mediaType":"application/vnd.oci.image.manifest.v1+json","schemaVersion":2,"#,
                r#""subject":{{"digest":"{subject}","mediaType":"application/vnd.oci.image.manifest.v1+json","size":5}}}}"#
            ),
            empty = Digest::of(b"{}"),
            sbom = sbom,
            subject = subject,
        );
        assert_eq!(got, want);
    }

    #[test]
    fn the_index_entry_and_the_empty_index() {
        let a = Digest::of(b"artifact");
        assert_eq!(
            sbom_index_entry(&a, 7).unwrap(),
            serde_json::json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": a.to_string(),
                "size": 7,
                "artifactType": SPDX_JSON,
            })
        );
        assert_eq!(
            empty_referrers_index().unwrap(),
            serde_json::json!({
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [],
            })
        );
    }
}
