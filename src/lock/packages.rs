//! One locked .deb package: enough to fetch exactly the same bytes again.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedPackage {
    pub name: String,
    pub version: String,
    pub architecture: String,
    /// `host:<suite>` (resolved through each build host's apt sources, so no mirror host name
    /// lands in the lock) or the repository's base URL as written in the profile.
    pub repository: String,
    /// Path of the .deb below the repository's base URL (the index's `Filename`).
    pub filename: String,
    pub size: u64,
    pub sha256: Digest,
}
