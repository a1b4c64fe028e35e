//! The image's Python packages, for `build` and `lock`: the interpreter read from the base's
//! packages (`ops::known` gathers them), the request (the profile's `python:` with the stack's
//! pins), the wheels (the lock's, or resolved now for that interpreter, never the build
//! host's), each wheel's libraries and SBOM facts, and the PEP 751 export.
//! Must never change the resolution: it installs what the resolution says.

use std::path::{Path, PathBuf};

use super::OpsError;
use crate::catalog::Catalog;
use crate::lock::LockedWheel;
use crate::plan::{source_specs, PythonInstall};
use crate::profile::{Base, Profile, StripClass};
use crate::resolve::{Component, Resolution};
use crate::sources::image_interpreter;
use crate::sources::wheel_facts;
use gpuimg_fetch::observe::Observer;
use gpuimg_pypi::ImagePython;
use gpuimg_pypi::{self as pypi, HostSettings, PythonRequest};
use gpuimg_store::cache::Cache;
use gpuimg_wheel::HostPython;

/// What the host offers the Python part: its index settings and, for `python.compile`, the
/// directories of its `PATH` where a compiling interpreter is looked for.
#[derive(Debug, Clone, Default)]
pub struct PythonHost {
    pub settings: HostSettings,
    pub path: Vec<PathBuf>,
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
    let pins: Vec<gpuimg_pypi::PinnedWheel> = wheels.iter().map(Into::into).collect();
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
/// its wheels; `None` without `python:`. `packages` are the base's
/// ([`super::known::base_packages`]).
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
        wheel_facts::read_libraries(&wheels, &python, &request, &cache, offline, obs)
            .map_err(OpsError::from)?
    } else {
        wheel_facts::recorded_libraries(&cache, &wheels, &python)
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
