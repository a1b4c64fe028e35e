//! Stage `lock`: the lock file that pins everything a build fetches.
//!
//! Owns the lock's on-disk format (`<profile>.lock.json`, canonical JSON, written atomically)
//! and staleness checks (`inputs`: the profile keys resolution and fetching depend on).
//! Format version 2 holds typed `artifacts` (`{"kind": "deb", ...}`, `{"kind": "wheel", ...}`) and a `resolution` in the
//! lock's own types (`LockedResolution`); a version 1 lock is read and converted, and the next
//! write makes it version 2. Must never fetch or resolve: it records what `resolve` and
//! `sources` decided.

mod artifact;
mod error;
mod inputs;
mod packages;
mod resolution;
mod v1;
mod wheel;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::profile::Profile;
use crate::resolve::Resolution;

pub use artifact::LockedArtifact;
pub use error::LockError;
pub use gpuimg_store::canonical_json::canonical_pretty as canonical_json;
pub use inputs::LockInputs;
pub use packages::{upstream_release, LockedPackage};
pub use resolution::{
    LockedCompat, LockedGpu, LockedHost, LockedKernelModule, LockedResolution,
    LockedResolutionError,
};
pub use wheel::LockedWheel;

/// The lock format version `write` produces.
pub const LOCK_VERSION: u32 = 2;

/// The format versions `read` accepts (older ones are converted).
pub const READABLE_VERSIONS: [u32; 2] = [1, 2];

/// A lock, whichever format version it was read from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lock {
    /// Everything the build fetches; .debs sorted by name then architecture, then wheels
    /// sorted by name.
    pub artifacts: Vec<LockedArtifact>,
    /// The resolved stack and host ranges.
    pub resolution: Option<Resolution>,
    /// The profile keys this lock was made from, and their digest.
    pub inputs: Option<LockInputs>,
    /// An image index's lock: each platform's own artifacts and resolution (`os/arch[/variant]`
    /// → a part with no inputs and no parts); the top-level artifacts and resolution are then
    /// empty. Empty for one platform.
    pub platforms: BTreeMap<String, Lock>,
}

/// The version 2 file, as serialised.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockV2 {
    version: u32,
    artifacts: Vec<LockedArtifact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resolution: Option<LockedResolution>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inputs: Option<LockInputs>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    platforms: BTreeMap<String, PlatformPart>,
}

/// One platform's part of an index's lock, as serialised.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlatformPart {
    artifacts: Vec<LockedArtifact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resolution: Option<LockedResolution>,
}

/// Only the version, to choose the schema the rest is read with.
#[derive(Deserialize)]
struct VersionProbe {
    version: u32,
}

impl Lock {
    /// A lock for `profile` holding `resolution` (artifacts are added by `sources`).
    pub fn new(profile: &Profile, resolution: Resolution) -> Lock {
        Lock {
            artifacts: vec![],
            resolution: Some(resolution),
            inputs: Some(LockInputs::of(profile)),
            platforms: BTreeMap::new(),
        }
    }

    /// An image index's lock: `parts` (platform → that platform's lock) under the inputs of
    /// `profile`.
    pub fn of_platforms(profile: &Profile, parts: BTreeMap<String, Lock>) -> Lock {
        let parts = parts
            .into_iter()
            .map(|(p, l)| {
                let part = Lock {
                    inputs: None,
                    platforms: BTreeMap::new(),
                    ..l
                };
                (p, part)
            })
            .collect();
        Lock {
            artifacts: vec![],
            resolution: None,
            inputs: Some(LockInputs::of(profile)),
            platforms: parts,
        }
    }

    /// What one platform's build reads: the part for `platform` of an index's lock, or the
    /// whole lock of one platform.
    pub fn part(&self, platform: &str) -> Result<Lock, LockError> {
        if self.platforms.is_empty() {
            return Ok(self.clone());
        }
        match self.platforms.get(platform) {
            Some(p) => Ok(Lock {
                inputs: self.inputs.clone(),
                ..p.clone()
            }),
            None => Err(LockError::NoPlatform {
                platform: platform.to_string(),
                has: self
                    .platforms
                    .keys()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// The locked .debs, in lock order.
    pub fn debs(&self) -> impl Iterator<Item = &LockedPackage> {
        self.artifacts.iter().filter_map(LockedArtifact::as_deb)
    }

    /// Replaces every locked .deb with `debs` (other kinds of artifact stay).
    pub fn set_debs(&mut self, debs: Vec<LockedPackage>) {
        self.artifacts.retain(|a| a.as_deb().is_none());
        self.artifacts
            .extend(debs.into_iter().map(LockedArtifact::Deb));
        self.sort_artifacts();
    }

    /// The locked wheels, in lock order (by name).
    pub fn wheels(&self) -> impl Iterator<Item = &LockedWheel> {
        self.artifacts.iter().filter_map(LockedArtifact::as_wheel)
    }

    /// Replaces every locked wheel with `wheels` (other kinds of artifact stay).
    pub fn set_wheels(&mut self, wheels: Vec<LockedWheel>) {
        self.artifacts.retain(|a| a.as_wheel().is_none());
        self.artifacts
            .extend(wheels.into_iter().map(LockedArtifact::Wheel));
        self.sort_artifacts();
    }

    /// .debs first (in the order given), then wheels by name.
    fn sort_artifacts(&mut self) {
        self.artifacts.sort_by(|a, b| match (a, b) {
            (LockedArtifact::Wheel(x), LockedArtifact::Wheel(y)) => x.name.cmp(&y.name),
            (LockedArtifact::Deb(_), LockedArtifact::Wheel(_)) => std::cmp::Ordering::Less,
            (LockedArtifact::Wheel(_), LockedArtifact::Deb(_)) => std::cmp::Ordering::Greater,
            (LockedArtifact::Deb(_), LockedArtifact::Deb(_)) => std::cmp::Ordering::Equal,
        });
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
    parse(&text, path)
}

/// Reads lock text of any readable version; `path` only names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<Lock, LockError> {
    let parse_err = |source| LockError::Parse {
        path: path.display().to_string(),
        source,
    };
    let probe: VersionProbe = serde_json::from_str(text).map_err(parse_err)?;
    let (artifacts, resolution, inputs, parts) = match probe.version {
        1 => {
            let (a, r, i) = serde_json::from_str::<v1::LockV1>(text)
                .map_err(parse_err)?
                .convert();
            (a, r, i, BTreeMap::new())
        }
        LOCK_VERSION => {
            let l: LockV2 = serde_json::from_str(text).map_err(parse_err)?;
            (l.artifacts, l.resolution, l.inputs, l.platforms)
        }
        found => {
            return Err(LockError::UnsupportedVersion {
                path: path.display().to_string(),
                found,
            })
        }
    };
    let resolution_of = |r: Option<LockedResolution>| {
        r.map(Resolution::try_from)
            .transpose()
            .map_err(|source| LockError::Resolution {
                path: path.display().to_string(),
                source,
            })
    };
    let mut platforms = BTreeMap::new();
    for (p, part) in parts {
        let l = Lock {
            artifacts: part.artifacts,
            resolution: resolution_of(part.resolution)?,
            inputs: None,
            platforms: BTreeMap::new(),
        };
        platforms.insert(p, l);
    }
    Ok(Lock {
        artifacts,
        resolution: resolution_of(resolution)?,
        inputs,
        platforms,
    })
}

/// The version 2 canonical JSON text of `lock`, ending in a newline.
pub fn to_json(lock: &Lock) -> String {
    let file = LockV2 {
        version: LOCK_VERSION,
        artifacts: lock.artifacts.clone(),
        resolution: lock.resolution.as_ref().map(LockedResolution::from),
        inputs: lock.inputs.clone(),
        platforms: lock
            .platforms
            .iter()
            .map(|(p, l)| {
                let part = PlatformPart {
                    artifacts: l.artifacts.clone(),
                    resolution: l.resolution.as_ref().map(LockedResolution::from),
                };
                (p.clone(), part)
            })
            .collect(),
    };
    // Plain data (strings, numbers, maps with string keys) always serialises.
    let value = serde_json::to_value(&file).unwrap_or(serde_json::Value::Null);
    let mut text = canonical_json(&value);
    text.push('\n');
    text
}

/// Writes `to_json(lock)` over `path` (see [`write_text`]).
pub fn write(path: &Path, lock: &Lock) -> Result<(), LockError> {
    write_text(path, &to_json(lock))
}

/// Writes `text` to a temporary file beside `path`, then renames it over `path` (keeping the
/// old file's mode, else 0644): a reader sees the old file or the new one, never a part.
pub fn write_text(path: &Path, text: &str) -> Result<(), LockError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source: std::io::Error| LockError::Write {
        path: path.display().to_string(),
        source,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
    tmp.write_all(text.as_bytes()).map_err(err)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(err)?;
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

#[cfg(test)]
mod tests;
