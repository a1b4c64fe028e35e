//! The image index of a multi-platform image: one manifest descriptor per platform (each with
//! its `platform`), and the layout's `index.json` that names it by tag. No file I/O.

use std::collections::HashMap;

use oci_spec::image::{DescriptorBuilder, ImageIndexBuilder, MediaType, PlatformBuilder};

use super::{json_err, oci_digest, spec_err, ImageError, ImageJson, Platform, ANN_REF_NAME};
use gpuimg_store::canonical_json::to_canonical;
use gpuimg_store::digest::Digest;

/// The JSON of an image index.
#[derive(Debug, Clone)]
pub struct IndexJson {
    /// The image index blob (what a registry tag or the layout's `index.json` points at).
    pub index: (Digest, Vec<u8>),
    /// The layout's `index.json`: the image index, named by the tag.
    pub layout: Vec<u8>,
}

/// The image index of `images` (each with its platform, in the order given) under `tag`.
pub fn build_index(tag: &str, images: &[(&ImageJson, &Platform)]) -> Result<IndexJson, ImageError> {
    let manifests = images
        .iter()
        .map(|(json, platform)| {
            DescriptorBuilder::default()
                .media_type(MediaType::ImageManifest)
                .digest(oci_digest(&json.manifest.0)?)
                .size(json.manifest.1.len() as u64)
                .platform(oci_platform(platform)?)
                .build()
                .map_err(spec_err("manifest descriptor"))
        })
        .collect::<Result<Vec<_>, ImageError>>()?;
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(manifests)
        .build()
        .map_err(spec_err("image index"))?;
    let (index_bytes, index_digest) = to_canonical(&index).map_err(json_err("image index"))?;
    let mut ref_ann = HashMap::new();
    ref_ann.insert(ANN_REF_NAME.to_string(), tag.to_string());
    let desc = DescriptorBuilder::default()
        .media_type(MediaType::ImageIndex)
        .digest(oci_digest(&index_digest)?)
        .size(index_bytes.len() as u64)
        .annotations(ref_ann)
        .build()
        .map_err(spec_err("image index descriptor"))?;
    let layout = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![desc])
        .build()
        .map_err(spec_err("index"))?;
    let (layout_bytes, _) = to_canonical(&layout).map_err(json_err("index"))?;
    Ok(IndexJson {
        index: (index_digest, index_bytes),
        layout: layout_bytes,
    })
}

/// `platform` as an OCI descriptor states it.
pub(crate) fn oci_platform(p: &Platform) -> Result<oci_spec::image::Platform, ImageError> {
    let b = PlatformBuilder::default()
        .architecture(p.architecture.as_str())
        .os(p.os.as_str());
    match &p.variant {
        Some(v) => b.variant(v.clone()),
        None => b,
    }
    .build()
    .map_err(spec_err("platform"))
}
