//! `gpuimg verify-host`: the expectation to check this host against, from a profile (resolved
//! now), a lock (its recorded resolution, with the selftest settings of the profile beside it)
//! or an expectation file (used as it is). For a profile or a lock it is exactly the one an
//! image built from it carries (`plan::expectation`).

use std::path::{Path, PathBuf};

use super::known::Reach;
use super::settle::{self, Settle};
use super::OpsError;
use crate::catalog::Catalog;
use crate::lock;
use gpuimg_expect::Expectation;
use gpuimg_fetch::observe::Observer;

/// The expectation for `path`: a `.lock.json`, any other `.json` (an expectation file), or a
/// profile (its `${VAR}` expanded through `env`, resolved as `build` resolves it: what the
/// resolution depends on gathered through `reach`).
pub fn expectation(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    catalog: impl FnOnce() -> Result<Catalog, crate::catalog::CatalogError>,
    reach: Reach<'_>,
    obs: &mut dyn Observer,
) -> Result<Expectation, OpsError> {
    let name = path.to_string_lossy();
    if let Some(stem) = name.strip_suffix(".lock.json") {
        let lock = lock::read(path)?;
        let profile = ["yaml", "yml"]
            .iter()
            .map(|ext| PathBuf::from(format!("{stem}.{ext}")))
            .find(|p| p.is_file())
            .ok_or_else(|| OpsError::NoProfileBesideLock {
                lock: name.to_string(),
                stem: stem.to_string(),
            })?;
        let profile = super::platforms::for_this_host(&crate::profile::load(&profile, env)?);
        let settled = settle::from_lock(&profile, lock)?;
        let e = crate::plan::expectation(&profile, settled.resolution.as_ref());
        e.validate()?;
        return Ok(e);
    }
    if name.ends_with(".json") {
        return Ok(Expectation::load(path)?);
    }
    let profile = super::platforms::for_this_host(&crate::profile::load(path, env)?);
    let settled = settle::settle(&profile, &catalog()?, Settle::Resolve, reach, obs)?;
    let e = crate::plan::expectation(&profile, settled.resolution.as_ref());
    e.validate()?;
    Ok(e)
}
