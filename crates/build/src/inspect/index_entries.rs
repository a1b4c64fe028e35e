//! What a layout's or an oci-archive's tag names, as a push sends it: one image ([`Stored`]), or
//! an image index: the index's own bytes and, for each manifest it lists, its platform and its
//! [`Stored`] (the manifest's bytes and every blob it references, with where the bytes lie).
//!
//! Bounds what it reads from the image: index JSON up to [`super::MAX_JSON`] bytes, at most
//! [`MAX_MANIFESTS`] manifests; refuses an index inside the index (one level only), an index that
//! lists nothing and a manifest whose blob the image does not hold. Every JSON blob it reads is
//! checked against its digest. Must never modify the image, nor decide what a registry gets
//! beyond listing what the image holds.

use oci_spec::image::{Descriptor, ImageIndex, ImageManifest, MediaType};

use super::{parse, pick, read_blob, stored_of, Image, InspectError, Stored};
use gpuimg_oci::image::Platform;

/// The most manifests one image index may list.
pub const MAX_MANIFESTS: usize = 64;

/// A Docker manifest list: an index by another name.
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// What a tag names.
#[derive(Debug, Clone)]
pub enum Tagged {
    Image(Stored),
    Index(StoredIndex),
}

/// An image index as a push sends it.
#[derive(Debug, Clone)]
pub struct StoredIndex {
    /// The index's own bytes.
    pub index: Vec<u8>,
    pub media_type: String,
    pub tag: Option<String>,
    pub manifests: Vec<StoredEntry>,
}

/// One manifest of an index.
#[derive(Debug, Clone)]
pub struct StoredEntry {
    /// `os/arch[/variant]` from the index's descriptor; `unknown` where it states none.
    pub platform: String,
    pub stored: Stored,
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Inspect(#[from] InspectError),
    #[error("The image index `{index}` in `{image}` lists another index (`{nested}`); gpuimg reads one level of index only")]
    Nested {
        image: String,
        index: String,
        nested: String,
    },
    #[error("The image index `{index}` in `{image}` lists {count} manifests, more than the {max} gpuimg reads")]
    TooMany {
        image: String,
        index: String,
        count: usize,
        max: usize,
    },
    #[error("The image index `{index}` in `{image}` lists no manifests")]
    Empty { image: String, index: String },
    #[error("The {platform} manifest `{manifest}` of the image index `{index}` needs `{path}`, which is missing")]
    MissingBlob {
        platform: String,
        index: String,
        manifest: String,
        path: String,
    },
}

/// The image or image index tagged `tag` (or the first) in `img`.
pub fn stored_tagged(img: &Image, tag: Option<&str>) -> Result<Tagged, IndexError> {
    let (tag, desc) = pick(img, tag)?;
    if !is_index(desc.media_type()) {
        let digest = desc.digest().to_string();
        let bytes = read_blob(img, &digest)?;
        let manifest: ImageManifest = parse(&digest, &bytes)?;
        return Ok(Tagged::Image(stored_of(img, bytes, &manifest, tag)?));
    }
    let index_digest = desc.digest().to_string();
    let bytes = read_blob(img, &index_digest)?;
    let index: ImageIndex = parse(&index_digest, &bytes)?;
    let listed = index.manifests();
    if listed.is_empty() {
        return Err(IndexError::Empty {
            image: img.location(),
            index: index_digest,
        });
    }
    if listed.len() > MAX_MANIFESTS {
        return Err(IndexError::TooMany {
            image: img.location(),
            index: index_digest,
            count: listed.len(),
            max: MAX_MANIFESTS,
        });
    }
    let mut manifests = Vec::with_capacity(listed.len());
    for d in listed {
        if is_index(d.media_type()) {
            return Err(IndexError::Nested {
                image: img.location(),
                index: index_digest,
                nested: d.digest().to_string(),
            });
        }
        let platform = platform_of(d);
        let digest = d.digest().to_string();
        let missing = |e: InspectError| match e {
            InspectError::Read { path, source }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                IndexError::MissingBlob {
                    platform: platform.clone(),
                    index: index_digest.clone(),
                    manifest: digest.clone(),
                    path,
                }
            }
            e => IndexError::Inspect(e),
        };
        let manifest_bytes = read_blob(img, &digest).map_err(missing)?;
        let manifest: ImageManifest = parse(&digest, &manifest_bytes)?;
        let stored = stored_of(img, manifest_bytes, &manifest, None).map_err(missing)?;
        manifests.push(StoredEntry { platform, stored });
    }
    Ok(Tagged::Index(StoredIndex {
        index: bytes,
        media_type: desc.media_type().to_string(),
        tag,
        manifests,
    }))
}

/// Whether a descriptor's media type names an image index (OCI's, or Docker's manifest list).
fn is_index(m: &MediaType) -> bool {
    match m {
        MediaType::ImageIndex => true,
        MediaType::Other(s) => s == DOCKER_LIST,
        _ => false,
    }
}

/// `os/arch[/variant]` as the descriptor states it, else `unknown`.
fn platform_of(d: &Descriptor) -> String {
    match d.platform() {
        Some(p) => Platform {
            os: p.os().to_string(),
            architecture: p.architecture().to_string(),
            variant: p.variant().clone(),
        }
        .to_string(),
        None => "unknown".into(),
    }
}
