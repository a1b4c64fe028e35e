//! One locked .deb package: enough to fetch exactly the same bytes again.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedPackage {
    pub name: String,
    pub version: String,
    pub architecture: String,
    /// The repository's base URL as written in the profile or host configuration.
    pub repository: String,
    /// Path of the .deb below the repository URL.
    pub filename: String,
    pub size: u64,
    pub sha256: Digest,
}
