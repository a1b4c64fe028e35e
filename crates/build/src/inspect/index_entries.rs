//! What a layout's or an oci-archive's tag names, as a push sends it: one image ([`Stored`]), or
//! an image index: the index's own bytes and, for each manifest it lists, its platform and its
//! [`Stored`] (the manifest's bytes and every blob it references, with where the bytes lie).
//!
//! The listing is `index.rs`'s (bounded: index JSON up to [`super::MAX_JSON`] bytes, at most
//! [`super::MAX_MANIFESTS`] manifests, one level only); this adds the refusal of an index that
//! lists nothing and of a manifest whose blob the image does not hold. Must never modify the image, nor decide what a registry gets
//! beyond listing what the image holds.

use super::{index_of, stored, Image, InspectError, Stored};

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

/// The image or image index tagged `tag` (or the first) in `img`: the listing is
/// [`index_of`]'s (bounded, one level), each manifest read as one image with [`stored`].
pub fn stored_tagged(img: &Image, tag: Option<&str>) -> Result<Tagged, IndexError> {
    let Some(listing) = index_of(img, tag)? else {
        return Ok(Tagged::Image(stored(img, tag)?));
    };
    let index_digest = listing.digest.to_string();
    if listing.manifests.is_empty() {
        return Err(IndexError::Empty {
            image: img.location(),
            index: index_digest,
        });
    }
    let mut manifests = Vec::with_capacity(listing.manifests.len());
    for m in &listing.manifests {
        let platform = m.platform_name();
        let missing = |e: InspectError| match e {
            InspectError::Read { path, source }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                IndexError::MissingBlob {
                    platform: platform.clone(),
                    index: index_digest.clone(),
                    manifest: m.digest.to_string(),
                    path,
                }
            }
            e => IndexError::Inspect(e),
        };
        let stored = stored(img, m).map_err(missing)?;
        manifests.push(StoredEntry { platform, stored });
    }
    Ok(Tagged::Index(StoredIndex {
        index: listing.bytes,
        media_type: listing.media_type,
        tag: listing.tag,
        manifests,
    }))
}
