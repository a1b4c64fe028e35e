//! Stage `lock`: the lock file that pins everything a build fetches.
//!
//! Owns the lock's on-disk format (`<profile>.lock.json`, canonical JSON, written atomically)
//! and staleness checks (`inputs`: the profile keys resolution and fetching depend on).
//! Must never fetch or resolve: it records what `resolve` and `sources` decided.

mod error;
mod inputs;
mod packages;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::profile::Profile;
use crate::resolve::Resolution;

pub use crate::canonical_json::canonical_pretty as canonical_json;
pub use error::LockError;
pub use inputs::LockInputs;
pub use packages::LockedPackage;

/// The current lock format version.
pub const LOCK_VERSION: u32 = 1;

/// The lock file contents (format version 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// Format version; bump rather than migrate.
    pub version: u32,
    /// Every package the base installs, sorted by name then architecture.
    #[serde(default)]
    pub packages: Vec<LockedPackage>,
    /// The resolved stack and host ranges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
    /// The profile keys this lock was made from, and their digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<LockInputs>,
}

impl Lock {
    /// A lock for `profile` holding `resolution` (packages are added by `sources`).
    pub fn new(profile: &Profile, resolution: Resolution) -> Lock {
        Lock {
            version: LOCK_VERSION,
            packages: vec![],
            resolution: Some(resolution),
            inputs: Some(LockInputs::of(profile)),
        }
    }
}

/// `<profile dir>/<profile file stem>.lock.json`.
pub fn lock_path(profile: &Profile) -> PathBuf {
    let stem = Path::new(&profile.file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| profile.name.replace('/', "_"));
    profile.dir.join(format!("{stem}.lock.json"))
}

pub fn read(path: &Path) -> Result<Lock, LockError> {
    let text = fs_err::read_to_string(path).map_err(|source| LockError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let lock: Lock = serde_json::from_str(&text).map_err(|source| LockError::Parse {
        path: path.display().to_string(),
        source,
    })?;
    if lock.version != LOCK_VERSION {
        return Err(LockError::UnsupportedVersion {
            path: path.display().to_string(),
            found: lock.version,
        });
    }
    Ok(lock)
}

/// Writes canonical JSON to a temporary file beside `path`, then renames it over `path`.
pub fn write(path: &Path, lock: &Lock) -> Result<(), LockError> {
    let err = |source: std::io::Error| LockError::Write {
        path: path.display().to_string(),
        source,
    };
    let value = serde_json::to_value(lock).map_err(|e| err(std::io::Error::other(e)))?;
    let mut text = canonical_json(&value);
    text.push('\n');
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
    tmp.write_all(text.as_bytes()).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

/// Refuses a lock made from different profile keys, naming the first key that changed.
pub fn check_fresh(profile: &Profile, lock: &Lock) -> Result<(), LockError> {
    let Some(had) = &lock.inputs else {
        return Err(LockError::NoInputs);
    };
    let now = LockInputs::of(profile);
    if had.digest == now.digest {
        return Ok(());
    }
    let keys: std::collections::BTreeSet<&String> =
        had.keys.keys().chain(now.keys.keys()).collect();
    let key = keys
        .into_iter()
        .find(|k| had.keys.get(*k) != now.keys.get(*k))
        .cloned()
        .unwrap_or_else(|| "inputs".to_string());
    Err(LockError::Stale { key })
}
