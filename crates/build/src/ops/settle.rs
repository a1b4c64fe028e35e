//! Where a command's resolution comes from, decided in one place: resolve the profile against
//! the catalog once, with the facts it depends on gathered first (`ops::known`), or read the
//! lock beside it (checked fresh, used as it is), or say no. Nothing here refines a
//! resolution (the one refinement left, the wheels' CUDA minor, is `cuda_minor`'s).

use crate::catalog::Catalog;
use crate::lock::{self, Lock, LockedPackage, LockedWheel};
use crate::profile::{Base, Profile};
use crate::resolve::Resolution;
use gpuimg_fetch::observe::Observer;

use super::known::{self, Known, Reach};
use super::OpsError;

/// How to settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Resolve against the catalog.
    Resolve,
    /// Read the lock beside the profile and refuse a stale one (`--locked`).
    Locked,
}

/// A settled profile: its resolution, the wheel set (for a profile with `python:`: read from
/// the lock, or resolved with the resolution) and, read from the lock, the exact apt package
/// set (for an apt base).
#[derive(Debug, Clone)]
pub struct Settled {
    pub resolution: Option<Resolution>,
    /// `Some` when the package set is already fixed (from the lock).
    pub debs: Option<Vec<LockedPackage>>,
    /// `Some` when the wheel set is already fixed (from the lock, or resolved with the
    /// resolution).
    pub wheels: Option<Vec<LockedWheel>>,
    /// The facts the resolution was made with (`None` for a lock's).
    pub known: Option<Known>,
}

/// Settle `profile` as `from` says; resolving gathers what the resolution depends on first
/// (through `reach`), and says the facts it took.
pub fn settle(
    profile: &Profile,
    catalog: &Catalog,
    from: Settle,
    reach: Reach<'_>,
    obs: &mut dyn Observer,
) -> Result<Settled, OpsError> {
    match from {
        Settle::Resolve => {
            let known = known::gather(profile, catalog, reach, obs)?;
            let r = known::resolve(profile, catalog, &known)?;
            for line in known.said(profile, &r) {
                obs.message(&line);
            }
            let (r, wheels) = known::wheels(profile, catalog, &known, r, reach, obs)?;
            Ok(Settled {
                resolution: Some(r),
                debs: None,
                wheels,
                known: Some(known),
            })
        }
        Settle::Locked => {
            let path = lock::lock_path(profile);
            if !path.exists() {
                return Err(OpsError::NoLock {
                    path: path.display().to_string(),
                    profile: profile.file.clone(),
                });
            }
            let lock = lock::read(&path)?;
            Ok(from_lock(profile, lock)?)
        }
    }
}

/// A lock already read: checked fresh against `profile`.
pub fn from_lock(profile: &Profile, lock: Lock) -> Result<Settled, OpsError> {
    lock::check_fresh(profile, &lock)?;
    // An index's lock holds a part per platform; this pipeline reads its platform's.
    let lock = lock.part(&profile.platform.to_string())?;
    let debs = matches!(profile.base, Base::Apt(_)).then(|| lock.debs().cloned().collect());
    let wheels = profile
        .python
        .is_some()
        .then(|| lock.wheels().cloned().collect());
    Ok(Settled {
        resolution: lock.resolution,
        debs,
        wheels,
        known: None,
    })
}
