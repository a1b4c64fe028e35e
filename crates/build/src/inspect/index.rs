//! An OCI image index read back from a layout or an oci-archive: whether the blob a tag names
//! is an index (`is_index`), and the list of its platform manifests ([`index_of`]: digest,
//! media type, size and platform of each, `unknown` where the descriptor states none), which
//! `inspect` shows per platform; a push of an index sends its bytes (`IndexListing::bytes`)
//! after each manifest's blobs (`stored` with the [`PlatformManifest`]).
//!
//! Bounded: the index blob is read up to [`MAX_JSON`](super::MAX_JSON) bytes and checked
//! against its digest; more than [`MAX_MANIFESTS`] manifests, or a manifest descriptor that is
//! itself an index (a nested index), refuse the image. Must never read a layer or write
//! anything.

use std::collections::BTreeMap;

use oci_spec::image::{Descriptor, ImageIndex};
use serde::{Deserialize, Serialize};

use gpuimg_oci::image::{Platform, INDEX_MEDIA_TYPE};
use gpuimg_store::digest::Digest;

use super::{parse, read_blob, tagged_descriptor, Image, ImageInfo, InspectError};

/// Manifests an image index may list (an index gpuimg writes has one per platform).
pub const MAX_MANIFESTS: usize = 64;

/// Docker's manifest list, the index's older form: read as an index.
const DOCKER_LIST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// How a platform is shown when the index's descriptor states none.
pub const UNKNOWN_PLATFORM: &str = "unknown";

/// The image index a tag names, and its manifests in the index's order.
#[derive(Debug, Clone, Serialize)]
pub struct IndexListing {
    pub tag: Option<String>,
    pub digest: Digest,
    pub media_type: String,
    pub size: u64,
    pub annotations: BTreeMap<String, String>,
    #[serde(skip)]
    pub manifests: Vec<PlatformManifest>,
    /// The index blob's own bytes (what a push sends).
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

/// One manifest of an index, as its descriptor states it.
#[derive(Debug, Clone, Serialize)]
pub struct PlatformManifest {
    /// `os/arch[/variant]`, or [`UNKNOWN_PLATFORM`].
    #[serde(serialize_with = "platform_name")]
    pub platform: Option<Platform>,
    pub digest: Digest,
    pub media_type: String,
    pub size: u64,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// The index that lists it.
    #[serde(skip)]
    pub index: Digest,
}

impl PlatformManifest {
    /// `os/arch[/variant]`, or `unknown`.
    pub fn platform_name(&self) -> String {
        self.platform
            .as_ref()
            .map_or_else(|| UNKNOWN_PLATFORM.to_string(), Platform::to_string)
    }

    /// Whether `wanted` (`os/arch[/variant]`) names this manifest's platform: exactly, or by
    /// `os/arch` alone when `wanted` gives no variant.
    fn is_for(&self, wanted: &str) -> bool {
        match &self.platform {
            None => wanted == UNKNOWN_PLATFORM,
            Some(p) => wanted == p.to_string() || wanted == format!("{}/{}", p.os, p.architecture),
        }
    }
}

fn platform_name<S: serde::Serializer>(p: &Option<Platform>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.collect_str(p),
        None => s.serialize_str(UNKNOWN_PLATFORM),
    }
}

impl IndexListing {
    /// Every platform, in the index's order, joined for a message.
    pub fn platform_names(&self) -> String {
        self.manifests
            .iter()
            .map(PlatformManifest::platform_name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The manifests for `platform` (every one when `None`); a platform the index does not
    /// have is refused, naming those it has.
    pub fn matching(&self, platform: Option<&str>) -> Result<Vec<&PlatformManifest>, InspectError> {
        let Some(wanted) = platform else {
            return Ok(self.manifests.iter().collect());
        };
        let found: Vec<&PlatformManifest> =
            self.manifests.iter().filter(|m| m.is_for(wanted)).collect();
        if found.is_empty() {
            return Err(InspectError::NoSuchPlatform {
                platform: wanted.to_string(),
                index: self.tag.clone().unwrap_or_else(|| self.digest.to_string()),
                available: self.platform_names(),
            });
        }
        Ok(found)
    }
}

/// What the shown platforms of an index hold together, each blob counted once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IndexSize {
    /// The index blob, and each platform's manifest, config and layers, a layer that several
    /// platforms share counted once: what pulling every platform downloads.
    pub total: u64,
    /// Layers that more than one platform's manifest lists (byte-identical across platforms).
    pub shared_layers: usize,
}

/// [`IndexSize`] of `index` over the summaries `images` of its platforms.
pub fn index_size(index: &IndexListing, images: &[&ImageInfo]) -> IndexSize {
    let mut holders: BTreeMap<&str, (u64, usize)> = BTreeMap::new();
    let mut total = index.size;
    for image in images {
        // Manifest and config: the image's size less its layers.
        total = total.saturating_add(image.image_size.saturating_sub(image.compressed_size));
        let own: BTreeMap<&str, u64> = image
            .layers
            .iter()
            .map(|l| (l.digest.as_str(), l.size))
            .collect();
        for (digest, size) in own {
            holders.entry(digest).or_insert((size, 0)).1 += 1;
        }
    }
    for (size, _) in holders.values() {
        total = total.saturating_add(*size);
    }
    IndexSize {
        total,
        shared_layers: holders.values().filter(|(_, n)| *n > 1).count(),
    }
}

/// The image index that `tag` (or the first entry) of `img` names; `None` when it names a
/// single image manifest.
pub fn index_of(img: &Image, tag: Option<&str>) -> Result<Option<IndexListing>, InspectError> {
    let (tag, desc) = tagged_descriptor(img, tag)?;
    let digest = desc.digest().to_string();
    let bytes = read_blob(img, &digest)?;
    if !is_index(desc.media_type().as_ref(), &bytes) {
        return Ok(None);
    }
    listing(tag, &digest, bytes).map(Some)
}

/// Whether the blob `bytes`, named by a descriptor of media type `described`, is an image
/// index (by either media type, or by its shape where it states none).
pub(super) fn is_index(described: &str, bytes: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Shape {
        #[serde(rename = "mediaType")]
        media_type: Option<String>,
        manifests: Option<serde::de::IgnoredAny>,
        layers: Option<serde::de::IgnoredAny>,
    }
    let an_index = |t: &str| t == INDEX_MEDIA_TYPE || t == DOCKER_LIST_MEDIA_TYPE;
    if an_index(described) {
        return true;
    }
    match serde_json::from_slice::<Shape>(bytes) {
        Ok(Shape {
            media_type: Some(t),
            ..
        }) => an_index(&t),
        Ok(Shape {
            media_type: None,
            manifests,
            layers,
        }) => manifests.is_some() && layers.is_none(),
        Err(_) => false,
    }
}

/// The index blob `bytes` (digest `digest`, checked by the caller) as a listing.
fn listing(
    tag: Option<String>,
    digest: &str,
    bytes: Vec<u8>,
) -> Result<IndexListing, InspectError> {
    let index: ImageIndex = parse(digest, &bytes)?;
    let own: Digest = digest
        .parse()
        .map_err(|_| InspectError::Corrupt(digest.to_string()))?;
    if index.manifests().len() > MAX_MANIFESTS {
        return Err(InspectError::TooManyManifests {
            index: digest.to_string(),
            count: index.manifests().len(),
            cap: MAX_MANIFESTS,
        });
    }
    let manifests = index
        .manifests()
        .iter()
        .map(|d| manifest(&own, d))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(IndexListing {
        tag,
        digest: own,
        media_type: index
            .media_type()
            .as_ref()
            .map_or_else(|| INDEX_MEDIA_TYPE.to_string(), |m| m.to_string()),
        size: bytes.len() as u64,
        annotations: index
            .annotations()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        manifests,
        bytes,
    })
}

/// One descriptor of the index `index`; an index inside it is refused.
fn manifest(index: &Digest, d: &Descriptor) -> Result<PlatformManifest, InspectError> {
    let media_type = d.media_type().to_string();
    if media_type == INDEX_MEDIA_TYPE || media_type == DOCKER_LIST_MEDIA_TYPE {
        return Err(InspectError::NestedIndex {
            index: index.to_string(),
            nested: d.digest().to_string(),
        });
    }
    Ok(PlatformManifest {
        platform: d.platform().as_ref().map(|p| Platform {
            os: p.os().to_string(),
            architecture: p.architecture().to_string(),
            variant: p.variant().clone(),
        }),
        digest: d
            .digest()
            .to_string()
            .parse()
            .map_err(|_| InspectError::Corrupt(d.digest().to_string()))?,
        media_type,
        size: d.size(),
        annotations: d
            .annotations()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        index: *index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pm(platform: Option<(&str, &str, Option<&str>)>) -> PlatformManifest {
        PlatformManifest {
            platform: platform.map(|(os, arch, v)| Platform {
                os: os.into(),
                architecture: arch.into(),
                variant: v.map(Into::into),
            }),
            digest: Digest::of(b"m"),
            media_type: gpuimg_oci::image::MANIFEST_MEDIA_TYPE.into(),
            size: 1,
            annotations: BTreeMap::new(),
            index: Digest::of(b"i"),
        }
    }

    #[test]
    fn a_platform_is_named_exactly_or_without_its_variant() {
        let arm = pm(Some(("linux", "arm64", Some("v8"))));
        assert_eq!(arm.platform_name(), "linux/arm64/v8");
        assert!(arm.is_for("linux/arm64/v8"));
        assert!(arm.is_for("linux/arm64"));
        assert!(!arm.is_for("linux/arm64/v9"));
        assert!(!arm.is_for("linux/amd64"));
        assert!(!arm.is_for("linux"));
        let none = pm(None);
        assert_eq!(none.platform_name(), "unknown");
        assert!(none.is_for("unknown"));
        assert!(!none.is_for("linux/amd64"));
    }

    #[test]
    fn an_index_is_known_by_either_media_type_or_its_shape() {
        let m = gpuimg_oci::image::MANIFEST_MEDIA_TYPE;
        assert!(is_index(INDEX_MEDIA_TYPE, b"{}"));
        assert!(is_index(
            m,
            br#"{"mediaType":"application/vnd.oci.image.index.v1+json"}"#
        ));
        assert!(is_index(m, br#"{"schemaVersion":2,"manifests":[]}"#));
        assert!(!is_index(
            m,
            br#"{"schemaVersion":2,"config":{},"layers":[]}"#
        ));
        assert!(!is_index(m, br#"{"mediaType":"x","manifests":[]}"#));
        assert!(!is_index(m, b"not json"));
    }

    #[test]
    fn an_unknown_platform_names_those_the_index_has() {
        let list = IndexListing {
            tag: None,
            digest: Digest::of(b"i"),
            media_type: INDEX_MEDIA_TYPE.into(),
            size: 1,
            annotations: BTreeMap::new(),
            manifests: vec![pm(Some(("linux", "amd64", None))), pm(None)],
            bytes: Vec::new(),
        };
        assert_eq!(list.matching(None).unwrap().len(), 2);
        assert_eq!(list.matching(Some("linux/amd64")).unwrap().len(), 1);
        let e = list.matching(Some("linux/arm64")).unwrap_err().to_string();
        assert!(
            e.contains("`linux/arm64`") && e.contains("linux/amd64, unknown"),
            "{e}"
        );
    }
}
