//! `gpuimg lock`: resolve the profile (a lock is always written from a fresh resolution) and,
//! for an apt base, the exact package set; write `<profile>.lock.json` beside the profile.

use std::path::{Path, PathBuf};

use super::settle::{self, Settle};
use super::OpsError;
use crate::catalog::Catalog;
use crate::driver::apt_options;
use crate::fetch::Trust;
use crate::lock::{self, Lock};
use crate::observe::Observer;
use crate::profile::{Base, Profile};

/// What `lock` wrote.
#[derive(Debug, Clone)]
pub struct Locked {
    pub path: PathBuf,
    pub lock: Lock,
}

/// Resolve `profile` and write its lock. `cache_root` holds the apt indexes; with `offline`
/// only cached ones are used.
pub fn lock(
    profile: &Profile,
    catalog: &Catalog,
    cache_root: &Path,
    offline: bool,
    trust: &Trust,
    obs: &mut dyn Observer,
) -> Result<Locked, OpsError> {
    let settled = settle::settle(profile, catalog, Settle::Resolve)?;
    let resolution = settled
        .resolution
        .ok_or(OpsError::Incompatible("nothing was resolved".into()))?;
    let mut new = Lock::new(profile, resolution);
    if let Base::Apt(spec) = &profile.base {
        let debs = crate::sources::apt::resolve(
            spec,
            &profile.platform,
            &profile.dir,
            &apt_options(cache_root, offline, trust),
            obs,
        )?;
        new.set_debs(debs);
    }
    let path = lock::lock_path(profile);
    lock::write(&path, &new)?;
    Ok(Locked { path, lock: new })
}
