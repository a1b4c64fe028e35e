//! One locked Python wheel: enough to fetch exactly the same file again and to explain why it
//! is there. The index is named, never addressed: `host` (each build machine's own
//! configuration) or the name the profile gives it; no URL and no credential is recorded.
//! A lock entry and the resolver's `gpuimg_pypi::PinnedWheel` say the same thing: the
//! conversions both ways are here and never add or drop a field.

use serde::{Deserialize, Serialize};

use gpuimg_pypi::PinnedWheel;
use gpuimg_store::digest::Digest;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedWheel {
    /// The project name, normalised (PEP 503).
    pub name: String,
    /// The exact version, normalised (PEP 440).
    pub version: String,
    /// The wheel's file name on the index.
    pub filename: String,
    pub sha256: Digest,
    pub size: u64,
    /// `host` or the profile's name for the index it came from.
    pub index: String,
    /// Whether the profile's own requirements name it (the image gets its `REQUESTED`).
    pub requested: bool,
    /// The requirements that brought it in, sorted (`requests>=2` from the profile, or
    /// `requests 2.32.3` for a dependency).
    pub required_by: Vec<String>,
}

impl From<&LockedWheel> for PinnedWheel {
    fn from(w: &LockedWheel) -> Self {
        PinnedWheel {
            name: w.name.clone(),
            version: w.version.clone(),
            filename: w.filename.clone(),
            sha256: w.sha256,
            size: w.size,
            index: w.index.clone(),
            requested: w.requested,
            required_by: w.required_by.clone(),
        }
    }
}

impl From<PinnedWheel> for LockedWheel {
    fn from(p: PinnedWheel) -> Self {
        LockedWheel {
            name: p.name,
            version: p.version,
            filename: p.filename,
            sha256: p.sha256,
            size: p.size,
            index: p.index,
            requested: p.requested,
            required_by: p.required_by,
        }
    }
}
