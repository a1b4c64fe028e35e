//! Where a command's resolution comes from, decided in one place: resolve the profile against
//! the catalog, or read the lock beside it (checked fresh), or say no.

use crate::catalog::Catalog;
use crate::lock::{self, Lock, LockedPackage, LockedWheel};
use crate::observe::Observer;
use crate::profile::{Base, Profile};
use crate::resolve::{Request, Resolution, ResolveError};

use super::OpsError;

/// How to settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Resolve against the catalog.
    Resolve,
    /// Read the lock beside the profile and refuse a stale one (`--locked`).
    Locked,
}

/// A settled profile: its resolution and, read from the lock, the exact apt package set (for
/// an apt base) and wheel set (for a profile with `python:`).
#[derive(Debug, Clone)]
pub struct Settled {
    pub resolution: Option<Resolution>,
    /// `Some` when the package set is already fixed (from the lock).
    pub debs: Option<Vec<LockedPackage>>,
    /// `Some` when the wheel set is already fixed (from the lock).
    pub wheels: Option<Vec<LockedWheel>>,
}

/// Settle `profile` as `from` says.
pub fn settle(profile: &Profile, catalog: &Catalog, from: Settle) -> Result<Settled, OpsError> {
    match from {
        Settle::Resolve => Ok(Settled {
            resolution: Some(crate::resolve::resolve(profile, catalog)?),
            debs: None,
            wheels: None,
        }),
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
    let debs = matches!(profile.base, Base::Apt(_)).then(|| lock.debs().cloned().collect());
    let wheels = profile
        .python
        .is_some()
        .then(|| lock.wheels().cloned().collect());
    Ok(Settled {
        resolution: lock.resolution,
        debs,
        wheels,
    })
}

/// A fresh resolution refined by a fact the packages state (the base's Python, the framework
/// variant the index installs): the profile's request resolved again with `pin` applied, each
/// pinned constraint citing its [`crate::resolve::Origin`] (never `profile`, so a "no" names
/// the true source and no hint asks the profile to change it).
/// Says `said` and the new resolution's warnings that `first` did not give.
pub fn refine(
    profile: &Profile,
    catalog: &Catalog,
    first: &Resolution,
    pin: impl FnOnce(&mut Request),
    said: &str,
    obs: &mut dyn Observer,
) -> Result<Resolution, ResolveError> {
    let mut req = Request::from_profile(profile, catalog)?;
    pin(&mut req);
    let r = crate::resolve::resolve_request(&req, catalog)?;
    obs.message(said);
    for w in r.warnings.iter().filter(|w| !first.warnings.contains(w)) {
        obs.warn(w);
    }
    Ok(r)
}
