//! One locked Python wheel: enough to fetch exactly the same file again and to explain why it
//! is there. The index is named, never addressed: `host` (each build machine's own
//! configuration) or the name the profile gives it; no URL and no credential is recorded.

use serde::{Deserialize, Serialize};

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
