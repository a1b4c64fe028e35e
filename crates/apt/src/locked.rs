//! [`LockedPackage`]: one locked `.deb` package, enough to fetch exactly the same bytes again
//! (what [`resolve`](crate::resolve) gives, what a lock file records, what
//! [`install`](crate::install) takes).
//!
//! Plain data only: must never change its serialised form (the lock file's and the recorded
//! resolutions' bytes depend on it).

use serde::{Deserialize, Serialize};

use gpuimg_store::digest::Digest;

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
