//! The Python part of `build` and `lock`: the image's interpreter read from the base's
//! packages (the apt set, or a rootfs's dpkg database), the `stack.python` check against it,
//! and the wheels: the lock's, or resolved now for that interpreter (never the build host's).

use std::path::{Path, PathBuf};

use super::OpsError;
use crate::cache::Cache;
use crate::catalog::Catalog;
use crate::lock::{LockedPackage, LockedWheel};
use crate::observe::Observer;
use crate::plan::{source_specs, PythonInstall};
use crate::profile::{Base, Profile, StripClass};
use crate::resolve::{Component, Resolution};
use crate::sources::image_interpreter;
use crate::sources::image_interpreter::ImagePython;
use crate::sources::pypi::{self, HostSettings, PythonRequest};
use crate::sources::rootfs::{self, DPKG_STATUS};
use crate::sources::wheel::{self, HostPython};

/// Bytes of a rootfs's dpkg status file read.
const MAX_STATUS_BYTES: u64 = 64 << 20;

/// What the host offers the Python part: its index settings and, for `python.compile`, the
/// directories of its `PATH` where a compiling interpreter is looked for.
#[derive(Debug, Clone, Default)]
pub struct PythonHost {
    pub settings: HostSettings,
    pub path: Vec<PathBuf>,
}

/// The base's installed packages as (name, Debian version): the apt set, or the dpkg
/// database of a rootfs; `None` for a rootfs without one (or no base).
pub fn base_packages(
    profile: &Profile,
    debs: Option<&[LockedPackage]>,
) -> Result<Option<Vec<(String, String)>>, OpsError> {
    match &profile.base {
        Base::Apt(_) => Ok(debs.map(|d| {
            d.iter()
                .map(|p| (p.name.clone(), p.version.clone()))
                .collect()
        })),
        Base::Rootfs { path, .. } => {
            let status =
                rootfs::read_file(path, DPKG_STATUS, MAX_STATUS_BYTES).map_err(|source| {
                    OpsError::RootfsRead {
                        path: path.display().to_string(),
                        source,
                    }
                })?;
            Ok(status
                .map(|s| crate::sources::apt::installed_packages(&String::from_utf8_lossy(&s))))
        }
        Base::None => Ok(None),
    }
}

/// `stack.python` (resolved) must be a Python the base installs: otherwise the answer is no,
/// naming what the base has. Without a package list to read (a rootfs with no dpkg database),
/// there is nothing to check.
pub fn check_stack_python(
    resolution: Option<&Resolution>,
    packages: Option<&[(String, String)]>,
) -> Result<(), OpsError> {
    let (Some(want), Some(packages)) = (
        resolution.and_then(|r| r.version(Component::Python)),
        packages,
    ) else {
        return Ok(());
    };
    let want_mm = (want.field(0), want.field(1));
    let all = image_interpreter::base_pythons(packages).map_err(OpsError::BasePython)?;
    if all
        .keys()
        .any(|(a, b)| (u64::from(*a), u64::from(*b)) == want_mm)
    {
        return Ok(());
    }
    let has = match image_interpreter::default_python(packages).map_err(OpsError::BasePython)? {
        Some(p) => format!("Python {}.{} (`{}`)", p.version.0, p.version.1, p.package),
        None if all.is_empty() => "no Python".to_string(),
        None => all
            .values()
            .map(|p| format!("Python {}.{} (`{}`)", p.version.0, p.version.1, p.package))
            .collect::<Vec<_>>()
            .join(", "),
    };
    Err(OpsError::Incompatible(format!(
        "`stack.python` asks for Python {}.{}, but the base installs {has}",
        want_mm.0, want_mm.1
    )))
}

/// The resolution again for the base's Python, when `stack.python` is not pinned and the
/// resolution took another (the newest the framework has wheels for): the image has only the
/// base's interpreter, so the stack must fit it. `None` when the two agree, when the profile
/// pins `stack.python` (then [`check_stack_python`] has the say), or when the base has no
/// default Python. Says what changed, and the new resolution's warnings the first did not give.
pub fn settle_base_python(
    profile: &Profile,
    catalog: &Catalog,
    resolution: Option<&Resolution>,
    packages: Option<&[(String, String)]>,
    obs: &mut dyn Observer,
) -> Result<Option<Resolution>, OpsError> {
    let (Some(r), Some(packages)) = (resolution, packages) else {
        return Ok(None);
    };
    let Some(want) = r.version(Component::Python) else {
        return Ok(None);
    };
    if profile.stack.python.is_some() {
        return Ok(None);
    }
    let Some(base) = image_interpreter::default_python(packages).map_err(OpsError::BasePython)?
    else {
        return Ok(None);
    };
    let (a, b) = base.version;
    if (want.field(0), want.field(1)) == (u64::from(a), u64::from(b)) {
        return Ok(None);
    }
    let said = format!(
        "the base installs Python {a}.{b}: the stack resolved again for it (without `stack.python` it took {}.{})",
        want.field(0),
        want.field(1)
    );
    let pin = |req: &mut crate::resolve::Request| {
        let v = crate::version::Version::from_fields(&[u64::from(a), u64::from(b)]);
        req.pin(
            Component::Python,
            crate::version::Constraint::from_prefix(&v),
            crate::resolve::Origin {
                text: format!("the base installs Python {a}.{b} (`{}`)", base.package),
                source: "base".into(),
            },
        );
    };
    let r2 = super::settle::refine(profile, catalog, r, pin, &said, obs).map_err(|e| {
        OpsError::Incompatible(format!(
            "the base installs Python {a}.{b} (`{}`) and `stack.python` is not pinned, so the stack was resolved again for it, and: {e}",
            base.package
        ))
    })?;
    Ok(Some(r2))
}

/// The image's interpreter for `python:`, from the base's packages.
pub fn image_python(
    profile: &Profile,
    resolution: Option<&Resolution>,
    packages: Option<&[(String, String)]>,
) -> Result<ImagePython, OpsError> {
    let Some(packages) = packages else {
        return Err(OpsError::NoBasePackages {
            base: match &profile.base {
                Base::Rootfs { path, .. } => format!("the rootfs `{}`", path.display()),
                _ => "a profile without a base".into(),
            },
        });
    };
    let want = resolution
        .and_then(|r| r.version(Component::Python))
        .and_then(|v| {
            Some((
                u32::try_from(v.field(0)).ok()?,
                u32::try_from(v.field(1)).ok()?,
            ))
        });
    image_interpreter::image_python(
        packages,
        &source_specs::architecture(&profile.platform),
        want,
    )
    .map_err(OpsError::BasePython)
}

/// `wheels` as a PEP 751 lock for `python`, each located on the index it was locked from.
pub fn pylock(
    request: &PythonRequest,
    python: &ImagePython,
    wheels: &[LockedWheel],
    cache_root: &Path,
    offline: bool,
) -> Result<String, OpsError> {
    let cache = Cache::open(cache_root).map_err(|source| OpsError::CacheOpen {
        path: cache_root.display().to_string(),
        source,
    })?;
    let pins: Vec<crate::sources::pinned_wheels::PinnedWheel> =
        wheels.iter().map(Into::into).collect();
    Ok(pypi::pylock(request, python, &pins, &cache, offline)?)
}

/// The wheels of `profile` for `python`: `locked` when given, else resolved now against the
/// profile's indexes, as lock entries sorted by name.
pub fn wheels(
    request: &PythonRequest,
    python: &ImagePython,
    locked: Option<&[LockedWheel]>,
    cache_root: &Path,
    offline: bool,
    obs: &mut dyn Observer,
) -> Result<Vec<LockedWheel>, OpsError> {
    if let Some(l) = locked {
        return Ok(l.to_vec());
    }
    let cache = Cache::open(cache_root).map_err(|source| OpsError::CacheOpen {
        path: cache_root.display().to_string(),
        source,
    })?;
    let pins = pypi::resolve(request, python, &cache, obs, offline)?;
    let mut wheels: Vec<LockedWheel> = pins.into_iter().map(LockedWheel::from).collect();
    wheels.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(wheels)
}

/// The request of `profile`'s `python:` (`None` without one), with the stack's pins made
/// requirements (`ops::stack`) and a pinned CUDA minor made constraints (`ops::cuda_minor`)
/// when there is a resolution.
pub fn request(
    profile: &Profile,
    host: &PythonHost,
    stack: Option<(&Resolution, &Catalog)>,
) -> Result<Option<PythonRequest>, OpsError> {
    let Some(spec) = source_specs::python_request(profile) else {
        return Ok(None);
    };
    let mut request = PythonRequest::new(&spec, &host.settings)?;
    if let Some((resolution, catalog)) = stack {
        super::stack::add_to(&mut request, profile, resolution, catalog)?;
        super::cuda_minor::add_to(&mut request, profile, resolution, catalog)?;
    }
    Ok(Some(request))
}

/// Everything the plan needs about the Python part of `profile`, and the request that fetches
/// its wheels; `None` without `python:`. `packages` are the base's (see [`base_packages`]).
#[allow(clippy::too_many_arguments)]
pub fn install(
    profile: &Profile,
    resolution: Option<&Resolution>,
    catalog: &Catalog,
    packages: Option<&[(String, String)]>,
    locked: Option<&[LockedWheel]>,
    host: &PythonHost,
    cache_root: &Path,
    offline: bool,
    obs: &mut dyn Observer,
) -> Result<Option<(PythonInstall, PythonRequest)>, OpsError> {
    let Some(request) = request(profile, host, resolution.map(|r| (r, catalog)))? else {
        return Ok(None);
    };
    let python = image_python(profile, resolution, packages)?;
    let compile = profile.python.as_ref().is_some_and(|p| p.compile);
    let compiler = if compile {
        Some(HostPython::find(&host.path, &python)?)
    } else {
        None
    };
    let wheels = wheels(&request, &python, locked, cache_root, offline, obs)?;
    super::stack::check_agreement(profile, &wheels)?;
    // With a strip class that needs every library's facts before a wheel layer is written,
    // they are read now (as each wheel arrives); else the ones the cache has no record of are
    // taken while those layers are written (the plan's `Need::Derived`).
    let needs_all = profile
        .strip
        .iter()
        .any(|c| matches!(c, StripClass::UnusedLibraries | StripClass::DeviceCode));
    let cache = Cache::open(cache_root).map_err(|source| OpsError::CacheOpen {
        path: cache_root.display().to_string(),
        source,
    })?;
    let libraries = if needs_all {
        wheel::facts::read_libraries(&wheels, &python, &request, &cache, offline, obs)
            .map_err(OpsError::from)?
    } else {
        wheel::facts::recorded_libraries(&cache, &wheels, &python)
    };
    Ok(Some((
        PythonInstall {
            wheels,
            python,
            compiler,
            libraries,
        },
        request,
    )))
}
