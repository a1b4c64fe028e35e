//! The image's Python packages, for `build` and `lock`: the interpreter read from the base's
//! packages (`ops::known` gathers them), the request (the profile's `python:` with the stack's
//! pins), the wheels (the lock's, or resolved now for that interpreter, never the build
//! host's), each wheel's libraries and SBOM facts, and the PEP 751 export.
//! Must never change the resolution: it installs what the resolution says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::OpsError;
use crate::cache::{Bucket, Cache, Key};
use crate::catalog::Catalog;
use crate::digest::Digest;
use crate::lock::LockedWheel;
use crate::observe::Observer;
use crate::plan::{PackageFacts, PythonInstall};
use crate::profile::{Base, Profile, StripClass};
use crate::resolve::{Component, Resolution};
use crate::sources::base_python;
use crate::sources::pypi::{self, HostSettings, PythonRequest};
use crate::sources::python::{ImagePython, PinnedWheel};
use crate::sources::wheel::{self, HostPython, WheelLibrary};

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
    base_python::image_python(packages, &profile.platform, want).map_err(OpsError::BasePython)
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
    let pins: Vec<crate::sources::python::PinnedWheel> = wheels.iter().map(Into::into).collect();
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
    let Some(mut request) = PythonRequest::new(profile, &host.settings)? else {
        return Ok(None);
    };
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
    // Without a strip class that needs every library's facts before a wheel layer is written,
    // the facts the cache has no record of are taken while those layers are written.
    let needs_all = profile
        .strip
        .iter()
        .any(|c| matches!(c, StripClass::UnusedLibraries | StripClass::DeviceCode));
    let mode = if needs_all {
        LibraryFacts::Read
    } else {
        LibraryFacts::Later
    };
    let libraries = wheel_libraries(&wheels, &python, &request, cache_root, offline, mode, obs)?;
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

/// How [`wheel_libraries`] gets the libraries of the wheels the cache has no record of.
#[derive(Clone, Copy)]
pub enum LibraryFacts<'a> {
    /// Read from each wheel as soon as it is in the cache, while the others download.
    Read,
    /// Not now: the wheels are fetched and left out of the answer, to be taken while their
    /// layers are written (`driver::prewrite_wheels`, then [`LibraryFacts::Taken`]).
    Later,
    /// From what the taps took of each library as its layer was written; a library they did
    /// not see in full (stripped, or never read) is read from its wheel.
    Taken(&'a wheel::Taps),
}

/// The key of a wheel's shared libraries as installed for `python` (the scheme places them).
fn libraries_key(wheel: &LockedWheel, python: &ImagePython) -> Digest {
    let mut k = Key::new("wheel-libraries-v3").tool_version();
    k.digest(&wheel.sha256)
        .str(&python.site_dir)
        .str(&python.scripts_dir);
    k.finish()
}

/// The shared libraries each wheel installs (by wheel name), for the one-provider rule and
/// `ld.so.cache`: recorded per wheel in the cache, else taken as `mode` says (fetching the
/// wheel, from the cache when there) and recorded. A record the stamp does not vouch for is
/// taken again. Only with [`LibraryFacts::Later`] may a wheel be missing from the answer.
pub fn wheel_libraries(
    wheels: &[LockedWheel],
    python: &ImagePython,
    request: &PythonRequest,
    cache_root: &Path,
    offline: bool,
    mode: LibraryFacts<'_>,
    obs: &mut dyn Observer,
) -> Result<BTreeMap<String, Vec<WheelLibrary>>, OpsError> {
    let cache = Cache::open(cache_root).map_err(|source| OpsError::CacheOpen {
        path: cache_root.display().to_string(),
        source,
    })?;
    let (mut out, missing) = recorded(&cache, wheels, |w| libraries_key(w, python));
    if missing.is_empty() {
        return Ok(out);
    }
    let later = matches!(mode, LibraryFacts::Later);
    let pins: Vec<PinnedWheel> = missing.iter().map(|w| PinnedWheel::from(*w)).collect();
    // Reading a library inflates it up to its dynamic section: each wheel's libraries are
    // read as soon as it is in the cache, while the others still download, one library at a
    // time on each of the readers (the biggest of a wheel first).
    let readers = std::thread::available_parallelism().map_or(1, |n| n.get());
    // A wheel's first job reads its METADATA for the SBOM, so `wheel_facts` finds it recorded
    // instead of passing over every wheel again after the last download.
    enum Job {
        Facts(PathBuf),
        Library(Box<wheel::LibraryRead>),
    }
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Job)>();
    let rx = std::sync::Mutex::new(rx);
    // Per wheel: whether its libraries were handed to the readers, or why they could not be.
    let listed: std::sync::Mutex<Vec<Option<Result<(), wheel::WheelError>>>> =
        std::sync::Mutex::new((0..pins.len()).map(|_| None).collect());
    let (fetched, read) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..readers)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        // A poisoned lock only means another reader panicked: stop too.
                        let next = match rx.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => break done,
                        };
                        let Ok((i, job)) = next else { break done };
                        match job {
                            // Only saves a read later: a wheel whose METADATA fails to read
                            // (or to record) is left to `wheel_facts`, which warns.
                            Job::Facts(path) => {
                                if let (Some(w), Ok(facts)) = (missing.get(i), read_facts(&path)) {
                                    let _ = cache.put_record(
                                        Bucket::WheelMetadata,
                                        &facts_key(w),
                                        &facts,
                                    );
                                }
                            }
                            Job::Library(l) => {
                                let tap = match mode {
                                    LibraryFacts::Taken(taps) => taps.get(&l.tap_key()),
                                    LibraryFacts::Read | LibraryFacts::Later => None,
                                };
                                done.push((i, l.read_with(tap.map(|t| &**t))));
                            }
                        }
                    }
                })
            })
            .collect();
        let fetched = pypi::fetch_each(&pins, request, &cache, obs, offline, &|i, f| {
            // Sending fails only if every reader panicked, which joining them reports. The
            // taps' pass follows the pass that recorded the facts already.
            if !matches!(mode, LibraryFacts::Taken(_)) {
                let _ = tx.send((i, Job::Facts(f.path.clone())));
            }
            if later {
                return;
            }
            let listing = wheel::library_reads(&f, python).map(|reads| {
                for job in reads {
                    let _ = tx.send((i, Job::Library(Box::new(job))));
                }
            });
            if let Ok(mut l) = listed.lock() {
                if let Some(slot) = l.get_mut(i) {
                    *slot = Some(listing);
                }
            }
        });
        drop(tx);
        // A reader that panicked took its library with it: no partial answer.
        let read: Option<Vec<(usize, Result<WheelLibrary, wheel::WheelError>)>> = handles
            .into_iter()
            .map(|h| h.join().ok())
            .collect::<Option<Vec<_>>>()
            .map(|v| v.into_iter().flatten().collect());
        (fetched, read)
    });
    fetched?;
    if later {
        return Ok(out);
    }
    let read = read.ok_or(OpsError::Wheel(wheel::WheelError::Internal(
        "a worker reading wheel libraries stopped",
    )))?;
    let listed = listed.into_inner().map_err(|_| {
        OpsError::Wheel(wheel::WheelError::Internal(
            "a download worker stopped while listing wheel libraries",
        ))
    })?;
    let mut by_wheel: Vec<Vec<Result<WheelLibrary, wheel::WheelError>>> =
        (0..pins.len()).map(|_| Vec::new()).collect();
    for (i, r) in read {
        if let Some(v) = by_wheel.get_mut(i) {
            v.push(r);
        }
    }
    for ((w, listed), libs) in missing.iter().zip(listed).zip(by_wheel) {
        listed.ok_or(OpsError::Wheel(wheel::WheelError::Internal(
            "a wheel was fetched but its libraries were never listed",
        )))??;
        let mut libs = libs.into_iter().collect::<Result<Vec<_>, _>>()?;
        libs.sort_by(|a, b| a.path.cmp(&b.path));
        // Only saves reading the wheel next time: failing to record is no error.
        let _ = cache.put_record(Bucket::WheelMetadata, &libraries_key(w, python), &libs);
        out.insert(w.name.clone(), libs);
    }
    Ok(out)
}

/// What the cache has recorded under `key` for each wheel (by wheel name; a record the stamp
/// does not vouch for, or that does not parse, is not taken), and the wheels it has not.
fn recorded<'w, T: serde::de::DeserializeOwned>(
    cache: &Cache,
    wheels: &'w [LockedWheel],
    key: impl Fn(&LockedWheel) -> Digest,
) -> (BTreeMap<String, T>, Vec<&'w LockedWheel>) {
    let mut out = BTreeMap::new();
    let mut missing = Vec::new();
    for w in wheels {
        let found = (cache
            .read_record(Bucket::WheelMetadata, &key(w))
            .ok()
            .flatten())
        .filter(|r| r.trusted)
        .and_then(|r| serde_json::from_slice::<T>(&r.bytes).ok());
        match found {
            Some(v) => {
                out.insert(w.name.clone(), v);
            }
            None => missing.push(w),
        }
    }
    (out, missing)
}

/// The key of a wheel's SBOM facts: its sha256 decides its METADATA.
fn facts_key(w: &LockedWheel) -> Digest {
    let mut k = Key::new("wheel-sbom-facts-v1");
    k.digest(&w.sha256);
    k.finish()
}

/// What each wheel's `METADATA` says of its supplier and licence (for the SBOM), by wheel
/// name: recorded per wheel in the cache, else read from the wheel (fetched, from the cache
/// when there) and recorded.
pub fn wheel_facts(
    wheels: &[LockedWheel],
    request: &PythonRequest,
    cache_root: &Path,
    offline: bool,
    obs: &mut dyn Observer,
) -> Result<BTreeMap<String, PackageFacts>, OpsError> {
    let cache = Cache::open(cache_root).map_err(|source| OpsError::CacheOpen {
        path: cache_root.display().to_string(),
        source,
    })?;
    let (mut out, missing) = recorded(&cache, wheels, facts_key);
    if missing.is_empty() {
        return Ok(out);
    }
    let pins: Vec<PinnedWheel> = missing.iter().map(|w| PinnedWheel::from(*w)).collect();
    let fetched = pypi::fetch(&pins, request, &cache, obs, offline)?;
    for (w, f) in missing.iter().zip(&fetched) {
        let facts = match read_facts(&f.path) {
            Ok(facts) => facts,
            Err(e) => {
                obs.warn(&format!(
                    "Failed to read the METADATA of `{}` for the SBOM ({e}); its supplier and licence are NOASSERTION",
                    w.filename
                ));
                PackageFacts::default()
            }
        };
        // Only saves reading the wheel next time: failing to record is no error.
        let _ = cache.put_record(Bucket::WheelMetadata, &facts_key(w), &facts);
        out.insert(w.name.clone(), facts);
    }
    Ok(out)
}

/// The SBOM's facts from the `METADATA` of the wheel at `path`.
fn read_facts(path: &Path) -> Result<PackageFacts, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    let bytes = pypi::parsers::zip_metadata(&mut pypi::parsers::LocalFile { file, size })?;
    Ok(facts_of(&pypi::parsers::metadata_headers(&bytes)))
}

/// The longest licence text kept (a legacy `License:` may hold a whole licence).
const MAX_LICENSE_TEXT: usize = 300;

/// Supplier and licence from METADATA headers: `Maintainer`/`Author` (or their `-email`),
/// `License-Expression` (PEP 639, an SPDX expression) when it is one, else the legacy
/// `License:` as text.
fn facts_of(headers: &[(String, String)]) -> PackageFacts {
    let one = |k: &str| {
        headers
            .iter()
            .find(|(n, v)| n == k && !v.trim().is_empty() && v.trim() != "UNKNOWN")
            .map(|(_, v)| v.trim().to_string())
    };
    let supplier = match (one("maintainer"), one("maintainer-email")) {
        (Some(n), Some(e)) if !e.contains('<') => Some(format!("{n} <{e}>")),
        (n, e) if n.is_some() || e.is_some() => e.or(n),
        _ => match (one("author"), one("author-email")) {
            (Some(n), Some(e)) if !e.contains('<') => Some(format!("{n} <{e}>")),
            (n, e) => e.or(n),
        },
    };
    let expression = one("license-expression");
    let spdx_like = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || " .-+:()".contains(c))
    };
    let (license_expression, text) = match expression {
        Some(e) if spdx_like(&e) => (Some(e), None),
        other => (None, other.or_else(|| one("license"))),
    };
    let license_text = text.map(|t| {
        let t: String = t
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        match t.char_indices().nth(MAX_LICENSE_TEXT) {
            Some((i, _)) => format!("{}…", &t[..i]),
            None => t,
        }
    });
    PackageFacts {
        supplier,
        license_expression,
        license_text,
    }
}

#[cfg(test)]
mod facts_tests {
    use super::*;

    fn h(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn licence_and_supplier_from_metadata() {
        let f = facts_of(&h(&[
            ("author-email", "Jane <jane@example.org>"),
            ("license-expression", "MIT OR Apache-2.0"),
            ("license", "ignored"),
        ]));
        assert_eq!(f.supplier.as_deref(), Some("Jane <jane@example.org>"));
        assert_eq!(f.license_expression.as_deref(), Some("MIT OR Apache-2.0"));
        assert_eq!(f.license_text, None);
        let f = facts_of(&h(&[
            ("author", "Bob"),
            ("author-email", "bob@example.org"),
            ("license", "BSD, see LICENSE"),
        ]));
        assert_eq!(f.supplier.as_deref(), Some("Bob <bob@example.org>"));
        assert_eq!(f.license_expression, None);
        assert_eq!(f.license_text.as_deref(), Some("BSD, see LICENSE"));
        assert_eq!(facts_of(&[]), PackageFacts::default());
    }
}
