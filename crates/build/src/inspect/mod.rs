//! Read an OCI image back from a layout directory or an oci-archive (`source.rs`: read in
//! place, bounded): tag, manifest digest, config and layers with sizes, and (`files.rs`)
//! every path of the image with its layer and owning package; (`sizes.rs`) the size report
//! from the layers' size records; (`index.rs`) an image index and its platform manifests, each
//! then read as one image ([`Pick::Manifest`]).
//!
//! Verifies the digest of every blob it reads. Must never modify the image.

mod files;
mod index;
mod index_entries;
mod owners;
mod sizes;
mod source;
mod unused;

pub use files::{inspect_files, FileEntry, FileKind, FileListing};
pub use index::{
    index_of, index_size, IndexListing, IndexSize, PlatformManifest, MAX_MANIFESTS,
    UNKNOWN_PLATFORM,
};
pub use index_entries::{stored_tagged, IndexError, StoredEntry, StoredIndex, Tagged};
pub use owners::{component_owner, owner_readers, Claims, DpkgLists, ImageView, OwnerReader};
pub use sizes::{size_report, ComponentRow, LayerRow, OwnerRow, SizeReport, Totals};
pub use source::{Image, MAX_ENTRIES, MAX_JSON};
pub use unused::{inspect_unused, MissingLibrary, UnusedLibrary, UnusedReport};

use std::path::PathBuf;

use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest};
use serde::Serialize;

use gpuimg_oci::image::{ANN_COMPONENT, ANN_LAYER_SIZES, ANN_REF_NAME, ANN_UNCOMPRESSED_SIZE};
use gpuimg_oci::layer::LayerSizes;
use gpuimg_store::digest::Digest;

#[derive(Debug, Serialize)]
pub struct ImageInfo {
    pub tag: Option<String>,
    pub manifest_digest: Digest,
    pub platform: String,
    pub created: Option<String>,
    pub config: serde_json::Value,
    pub annotations: std::collections::BTreeMap<String, String>,
    pub layers: Vec<LayerInfo>,
    pub compressed_size: u64,
    pub uncompressed_size: Option<u64>,
    /// What a pull downloads: the manifest, the config and every layer blob (the size
    /// `gpuimg build --max-size` limits).
    pub image_size: u64,
}

#[derive(Debug, Serialize)]
pub struct LayerInfo {
    pub digest: String,
    pub media_type: String,
    pub size: u64,
    pub uncompressed_size: Option<u64>,
    pub component: Option<String>,
    /// The layer's size record (`io.gpuimg.layer.sizes`), when it has a readable one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sizes: Option<LayerSizes>,
}

#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("Failed to read `{path}`: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}` is not valid OCI JSON: {message}")]
    Json { path: String, message: String },
    #[error("`{0}` is not an OCI image layout (no `oci-layout` file)")]
    NotLayout(String),
    #[error("`{0}` does not exist")]
    Missing(String),
    #[error("`{0}` is a file, not an OCI image layout directory; an archive is read as `oci-archive:{0}`")]
    FileNotLayout(String),
    #[error("`{path}` is not an oci-archive: {reason}")]
    NotArchive { path: String, reason: String },
    #[error("`{path}` is larger than the {cap} bytes read for one JSON file")]
    TooLarge { path: String, cap: u64 },
    #[error("No image tagged `{tag}` in `{layout}`; tags: {available}")]
    NoSuchTag {
        tag: String,
        layout: String,
        available: String,
    },
    #[error("The image `{tag}` in `{location}` is an image index (platforms: {platforms}): one platform's manifest must be chosen")]
    IsIndex {
        tag: String,
        location: String,
        platforms: String,
    },
    #[error(
        "The image index `{index}` lists `{nested}`, itself an index: nested indexes are not read"
    )]
    NestedIndex { index: String, nested: String },
    #[error("The image index `{index}` lists {count} manifests, more than the {cap} read")]
    TooManyManifests {
        index: String,
        count: usize,
        cap: usize,
    },
    #[error("The image index `{index}` has no manifest for platform `{platform}`; platforms: {available}")]
    NoSuchPlatform {
        platform: String,
        index: String,
        available: String,
    },
    #[error("The image `{tag}` is for platform `{has}`, not `{platform}` (it is one image, not an index)")]
    OtherPlatform {
        tag: String,
        has: String,
        platform: String,
    },
    #[error("Blob `{0}` does not match its digest")]
    Corrupt(String),
    #[error("Layer `{layer}` (blob `{digest}`) does not match its digest: the image is damaged")]
    LayerCorrupt { layer: String, digest: String },
    #[error("Layer `{layer}` (blob `{digest}`) is not a readable tar stream: {message}")]
    LayerUnreadable {
        layer: String,
        digest: String,
        message: String,
    },
    #[error("Layer `{layer}` has media type `{media_type}`, which gpuimg cannot read")]
    LayerMediaType { layer: String, media_type: String },
    #[error(
        "`{path}` in layer `{layer}` is larger than the {cap} bytes read for one ownership record"
    )]
    RecordTooLarge {
        path: String,
        layer: String,
        cap: u64,
    },
    #[error("The image's ownership records (`{path}` and those before it) exceed the {cap} bytes read in all")]
    RecordsTooLarge { path: String, cap: u64 },
}

/// The blob `digest` of `img`, whole (a JSON blob: at most [`MAX_JSON`] bytes), checked.
fn read_blob(img: &Image, digest: &str) -> Result<Vec<u8>, InspectError> {
    let d: Digest = digest
        .parse()
        .map_err(|_| InspectError::Corrupt(digest.to_string()))?;
    let bytes = img.read_small(&blob_name(&d))?;
    if Digest::of(&bytes) != d {
        return Err(InspectError::Corrupt(digest.to_string()));
    }
    Ok(bytes)
}

/// Where the blob `d` is inside a layout: `blobs/sha256/<hex>`.
fn blob_name(d: &Digest) -> String {
    format!("blobs/sha256/{}", d.hex())
}

fn parse<T: serde::de::DeserializeOwned>(path: &str, bytes: &[u8]) -> Result<T, InspectError> {
    serde_json::from_slice(bytes).map_err(|e| InspectError::Json {
        path: path.to_string(),
        message: e.to_string(),
    })
}

/// Which image of a layout or archive to read: the one a tag (or the first entry of
/// `index.json`) names, which must then be a single image, or one manifest of an index
/// ([`index_of`]). An `Option<&str>` tag converts into it.
#[derive(Debug, Clone, Copy)]
pub enum Pick<'a> {
    Tag(Option<&'a str>),
    Manifest(&'a PlatformManifest),
}

impl<'a> From<Option<&'a str>> for Pick<'a> {
    fn from(tag: Option<&'a str>) -> Self {
        Pick::Tag(tag)
    }
}

impl<'a> From<&'a PlatformManifest> for Pick<'a> {
    fn from(m: &'a PlatformManifest) -> Self {
        Pick::Manifest(m)
    }
}

/// The manifest chosen by a [`Pick`].
struct Selected {
    tag: Option<String>,
    manifest_digest: String,
    manifest: ImageManifest,
    manifest_size: u64,
}

/// The descriptor `tag` (or the first entry) of the layout's `index.json` names, and its tag.
fn tagged_descriptor(
    img: &Image,
    tag: Option<&str>,
) -> Result<(Option<String>, Descriptor), InspectError> {
    let index_bytes = img.read_small("index.json")?;
    let index_path = img.shown("index.json");
    let index: ImageIndex = parse(&index_path, &index_bytes)?;
    let tag_of = |m: &Descriptor| {
        m.annotations()
            .as_ref()
            .and_then(|a| a.get(ANN_REF_NAME).cloned())
    };
    let desc = match tag {
        Some(t) => index
            .manifests()
            .iter()
            .find(|m| tag_of(m).as_deref() == Some(t))
            .ok_or_else(|| InspectError::NoSuchTag {
                tag: t.to_string(),
                layout: img.location(),
                available: index
                    .manifests()
                    .iter()
                    .filter_map(tag_of)
                    .collect::<Vec<_>>()
                    .join(", "),
            })?,
        None => index
            .manifests()
            .first()
            .ok_or_else(|| InspectError::Json {
                path: index_path.clone(),
                message: "the index lists no manifests".into(),
            })?,
    };
    Ok((tag_of(desc), desc.clone()))
}

fn select(img: &Image, pick: Pick<'_>) -> Result<Selected, InspectError> {
    let (tag, desc_type, manifest_digest) = match pick {
        Pick::Tag(tag) => {
            let (tag, desc) = tagged_descriptor(img, tag)?;
            (
                tag,
                desc.media_type().to_string(),
                desc.digest().to_string(),
            )
        }
        Pick::Manifest(m) => (None, m.media_type.clone(), m.digest.to_string()),
    };
    let bytes = read_blob(img, &manifest_digest)?;
    if matches!(pick, Pick::Manifest(m) if m.size != bytes.len() as u64) {
        return Err(InspectError::Corrupt(manifest_digest));
    }
    if index::is_index(&desc_type, &bytes) {
        return Err(match pick {
            Pick::Tag(t) => InspectError::IsIndex {
                tag: tag.or(t.map(str::to_string)).unwrap_or_else(|| "-".into()),
                location: img.location(),
                platforms: index_of(img, t)?
                    .map(|l| l.platform_names())
                    .unwrap_or_default(),
            },
            Pick::Manifest(m) => InspectError::NestedIndex {
                index: m.index.to_string(),
                nested: manifest_digest,
            },
        });
    }
    let manifest: ImageManifest = parse(&manifest_digest, &bytes)?;
    Ok(Selected {
        tag,
        manifest_digest,
        manifest,
        manifest_size: bytes.len() as u64,
    })
}

/// The image tagged `tag` (or the first) as a push sends it: the manifest's own bytes and
/// every blob it references, with where the blob's bytes lie.
#[derive(Debug, Clone)]
pub struct Stored {
    pub manifest: Vec<u8>,
    pub media_type: String,
    pub tag: Option<String>,
    pub blobs: Vec<StoredBlob>,
}

#[derive(Debug, Clone)]
pub struct StoredBlob {
    pub digest: Digest,
    pub size: u64,
    /// The file holding it and where in that file it starts (0 in a layout).
    pub file: PathBuf,
    pub offset: u64,
    /// `config`, or the layer's component (else its index).
    pub label: String,
}

/// [`Stored`] for the image `which` picks in `img` (a tag, or one manifest of an index): the
/// config and layers, each present with the size its descriptor gives (their bytes are
/// checked by the registry on upload).
pub fn stored<'a>(img: &Image, which: impl Into<Pick<'a>>) -> Result<Stored, InspectError> {
    let sel = select(img, which.into())?;
    let bytes = read_blob(img, &sel.manifest_digest)?;
    let mut blobs = Vec::new();
    let config = sel.manifest.config();
    let mut descs: Vec<(&oci_spec::image::Descriptor, String)> =
        vec![(config, "config".to_string())];
    for (i, l) in sel.manifest.layers().iter().enumerate() {
        let label = l
            .annotations()
            .as_ref()
            .and_then(|a| a.get(ANN_COMPONENT).cloned())
            .unwrap_or_else(|| format!("layer {}", i + 1));
        descs.push((l, label));
    }
    for (d, label) in descs {
        let digest: Digest = d
            .digest()
            .to_string()
            .parse()
            .map_err(|_| InspectError::Corrupt(d.digest().to_string()))?;
        let (file, offset, size) = img.locate(&blob_name(&digest))?;
        if size != d.size() {
            return Err(InspectError::Corrupt(digest.to_string()));
        }
        blobs.push(StoredBlob {
            digest,
            size,
            file,
            offset,
            label,
        });
    }
    Ok(Stored {
        manifest: bytes,
        media_type: sel
            .manifest
            .media_type()
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_else(|| "application/vnd.oci.image.manifest.v1+json".into()),
        tag: sel.tag,
        blobs,
    })
}

/// Inspect the image `which` picks in `img`: tagged (or the only/first one), or one manifest
/// of an index.
pub fn inspect<'a>(img: &Image, which: impl Into<Pick<'a>>) -> Result<ImageInfo, InspectError> {
    let Selected {
        tag,
        manifest_digest,
        manifest,
        manifest_size,
    } = select(img, which.into())?;
    let config_digest = manifest.config().digest().to_string();
    let config_bytes = read_blob(img, &config_digest)?;
    let config: ImageConfiguration = parse(&config_digest, &config_bytes)?;
    let config_json: serde_json::Value = parse(&config_digest, &config_bytes)?;

    let layers: Vec<LayerInfo> = manifest
        .layers()
        .iter()
        .map(|l| {
            let ann = l.annotations().as_ref();
            LayerInfo {
                digest: l.digest().to_string(),
                media_type: l.media_type().to_string(),
                size: l.size(),
                uncompressed_size: ann
                    .and_then(|a| a.get(ANN_UNCOMPRESSED_SIZE))
                    .and_then(|s| s.parse().ok()),
                component: ann.and_then(|a| a.get(ANN_COMPONENT).cloned()),
                // Another tool's (or a damaged) record is no record: the report says which
                // layers have none.
                sizes: ann
                    .and_then(|a| a.get(ANN_LAYER_SIZES))
                    .and_then(|s| serde_json::from_str(s).ok()),
            }
        })
        .collect();
    // Sizes come from the image: sums saturate rather than overflow.
    let compressed_size: u64 = layers.iter().map(|l| l.size).fold(0, u64::saturating_add);
    let image_size = compressed_size
        .saturating_add(manifest_size)
        .saturating_add(config_bytes.len() as u64);
    let uncompressed_size = layers.iter().map(|l| l.uncompressed_size).sum();
    Ok(ImageInfo {
        tag,
        manifest_digest: manifest_digest
            .parse()
            .map_err(|_| InspectError::Corrupt(manifest_digest.clone()))?,
        platform: format!("{}/{}", config.os(), config.architecture()),
        created: config.created().clone(),
        config: config_json.get("config").cloned().unwrap_or_default(),
        annotations: manifest
            .annotations()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        layers,
        compressed_size,
        uncompressed_size,
        image_size,
    })
}
