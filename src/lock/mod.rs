//! Stage `lock`: the lock file that pins everything a build fetches.
//!
//! Owns the lock's on-disk format (`<profile>.lock.json`, canonical JSON) and staleness checks.
//! Must never fetch or resolve: it records what `resolve` and `sources` decided.

mod packages;

use serde::{Deserialize, Serialize};

pub use packages::LockedPackage;

/// The lock file contents (format version 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// Format version; bump rather than migrate.
    pub version: u32,
    /// Every package the base installs, sorted by name then architecture.
    #[serde(default)]
    pub packages: Vec<LockedPackage>,
}
