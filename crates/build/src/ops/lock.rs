//! `gpuimg lock`: resolve the profile (a lock is always written from a fresh resolution), for
//! an apt base the exact package set, and with `python:` the wheels for the image's Python;
//! write `<profile>.lock.json` beside the profile (and, when asked, the Python part as a PEP 751
//! `pylock.toml` beside it).

use std::path::{Path, PathBuf};

use super::known::{self, Reach};
use super::python_packages::{self as python, PythonHost};
use super::settle::{self, Settle};
use super::OpsError;
use crate::catalog::Catalog;
use crate::driver::apt_options;
use crate::lock::{self, Lock};
use crate::plan::source_specs;
use crate::profile::{Base, Profile};
use crate::resolve::Component;
use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::Trust;

/// What `lock` wrote.
#[derive(Debug, Clone)]
pub struct Locked {
    pub path: PathBuf,
    pub lock: Lock,
    /// The exported PEP 751 lock, when one was asked for.
    pub exported: Option<PathBuf>,
}

/// Another lock format written beside gpuimg's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    /// PEP 751 `pylock.toml`: the Python packages, each wheel located on the index configured
    /// now.
    Pylock,
}

/// The file name a PEP 751 export gets, beside the profile.
pub const PYLOCK_NAME: &str = "pylock.toml";

/// Resolve `profile` and write its lock. `cache_root` holds the apt indexes; with `offline`
/// only cached ones are used. `export` also writes another format beside the profile. A
/// profile of several platforms gets one part per platform, each resolved for its platform;
/// `pick` (`--platform`) locks one of them, keeping the other parts of a fresh lock already
/// there.
#[allow(clippy::too_many_arguments)]
pub fn lock(
    profile: &Profile,
    pick: Option<&crate::profile::Platform>,
    catalog: &Catalog,
    cache_root: &Path,
    offline: bool,
    trust: &Trust,
    host: &PythonHost,
    export: Option<Export>,
    obs: &mut dyn Observer,
) -> Result<Locked, OpsError> {
    let reach = Reach {
        cache_root,
        offline,
        trust,
        python: host,
    };
    if profile.kind == crate::profile::ProfileKind::Host {
        return Err(OpsError::HostNotYet {
            command: "lock",
            profile: profile.file.clone(),
        });
    }
    let chosen = super::platforms::chosen(profile, pick)?;
    let path = lock::lock_path(profile);
    let (new, pylock) = if profile.is_index() {
        if export.is_some() && chosen.len() > 1 {
            return Err(OpsError::PylockOfIndex {
                has: super::platforms::names(&chosen),
            });
        }
        // Another platform's part of a fresh lock stays as it is.
        let mut parts = match lock::read(&path) {
            Ok(old) if pick.is_some() && lock::check_fresh(profile, &old).is_ok() => old.platforms,
            _ => Default::default(),
        };
        let mut pylock = None;
        for p in &chosen {
            obs.message(&format!("{:>12} {p}", "platform"));
            let (part, py) = lock_one(&profile.for_platform(p), catalog, reach, export, obs)?;
            parts.insert(p.to_string(), part);
            pylock = pylock.or(py);
        }
        (Lock::of_platforms(profile, parts), pylock)
    } else {
        lock_one(profile, catalog, reach, export, obs)?
    };
    let exported = match (export, pylock) {
        (None, _) => None,
        (Some(Export::Pylock), None) => return Err(OpsError::NothingToExport),
        (Some(Export::Pylock), Some(text)) => Some((profile.dir.join(PYLOCK_NAME), text)),
    };
    lock::write(&path, &new)?;
    if let Some((to, text)) = &exported {
        lock::write_text(to, text)?;
    }
    Ok(Locked {
        path,
        lock: new,
        exported: exported.map(|(to, _)| to),
    })
}

/// One platform's lock (not written) and, when asked, its PEP 751 text.
fn lock_one(
    profile: &Profile,
    catalog: &Catalog,
    reach: Reach<'_>,
    export: Option<Export>,
    obs: &mut dyn Observer,
) -> Result<(Lock, Option<String>), OpsError> {
    let (cache_root, offline, trust, host) =
        (reach.cache_root, reach.offline, reach.trust, reach.python);
    let settled = settle::settle(profile, catalog, Settle::Resolve, reach, obs)?;
    let resolution = settled
        .resolution
        .ok_or(OpsError::Incompatible("nothing was resolved".into()))?;
    let mut known = settled.known.unwrap_or_default();
    let mut debs = None;
    let mut pylock = None;
    if let Base::Apt(spec) = &profile.base {
        super::stack::check_base_packages(profile, spec)?;
        let roots = super::stack::apt_roots(profile, &resolution, catalog)?;
        let resolved = match known.base_debs.take() {
            // The base's own set, resolved for its Python, is the image's: no roots to add.
            Some(d) if roots.is_empty() => d,
            _ => {
                let mut aopts = apt_options(cache_root, offline, trust);
                aopts.prefer = super::stack::apt_preferences(profile, &roots);
                gpuimg_apt::resolve(
                    &source_specs::apt_packages(
                        &super::stack::apt_spec(spec, &roots),
                        &profile.dir,
                    ),
                    &source_specs::architecture(&profile.platform).debian(),
                    &aopts,
                    obs,
                )
                .map_err(|e| super::apt_error_at(profile, e))?
            }
        };
        super::stack::check_apt_agreement(profile, &roots, &resolved)?;
        debs = Some(resolved);
    }
    if profile.python.is_some() || resolution.version(Component::Python).is_some() {
        let packages = known::base_packages(profile, debs.as_deref())?;
        known::check_stack_python(Some(&resolution), packages.as_deref())?;
        if export == Some(Export::Pylock) {
            if let (Some(request), Some(wheels)) = (
                python::request(profile, host, Some((&resolution, catalog)))?,
                settled.wheels.as_deref(),
            ) {
                let image = python::image_python(profile, Some(&resolution), packages.as_deref())?;
                pylock = Some(python::pylock(
                    &request, &image, wheels, cache_root, offline,
                )?);
            }
        }
    }
    let mut new = Lock::new(profile, resolution);
    if let Some(d) = debs {
        new.set_debs(d);
    }
    if let Some(w) = settled.wheels {
        new.set_wheels(w);
    }
    Ok((new, pylock))
}
