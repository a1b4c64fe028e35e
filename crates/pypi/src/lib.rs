//! `gpuimg-pypi`: Python packages from a package index, for the image's interpreter (never the
//! build host's): a native client of the simple repository API and a pubgrub resolver.
//!
//! Its entry is [`PythonRequest`] (built by [`PythonRequest::new`] from a [`RequestSpec`] and the
//! host's [`HostSettings`]: the indexes, profile first, then variables, then pip's and uv's
//! files, then pip's own default, and the requirements) with what it is used for: [`resolve`]
//! picks one wheel per package, reading metadata from PEP 658 files or range reads, never a
//! wheel's body; [`installs`] lists what `name==V` installs; [`fetch`] / [`fetch_each`]
//! download the pinned wheels (sha256-checked, parallel, cached in `wheels-v1`); [`pylock`]
//! writes the set as a PEP 751 lock. Beside it, the plain data the root package and the wheel
//! installer share: [`ImagePython`], [`PinnedWheel`], [`FetchedWheel`], the PEP 508 syntax
//! checks ([`requirement`]) and the one reader of zip directories ([`zipdir`]).
//! Parts: `hostconf` (host configuration), `auth` (URL user parts, netrc), `requirements`
//! (requirements files), `pylock` (PEP 751 locks as requirements), `export` (the set written as
//! a PEP 751 lock), `client` + `page` (index pages, metadata), `zipdir` (a wheel's METADATA by
//! range reads), `target` (markers, tags), `solver`, `report`.
//! Depends on `gpuimg-store` and `gpuimg-fetch` only of the workspace. Must never build from
//! source, run package code, know gpuimg's lock file or an image layer, or put a credential
//! or an index URL in a [`PinnedWheel`].

mod auth;
pub mod budget;
mod client;
mod error;
mod export;
mod filename;
mod hostconf;
mod image_python;
mod local;
mod metadata;
mod page;
mod pinned;
mod pylock;
mod report;
mod request;
pub mod requirement;
mod requirements;
mod solver;
mod target;
/// Shared with the wheel installer (`gpuimg-wheel`'s `archive`): one reader of zip
/// directories.
pub mod zipdir;

use std::collections::{BTreeMap, BTreeSet};

pub use error::PypiError;
pub use export::pylock;
pub use image_python::ImagePython;
pub use pinned::{FetchedWheel, PinnedWheel};

/// The parsers of untrusted bytes, for the fuzz targets (the root's tests/it/fuzz); not a stable API.
#[doc(hidden)]
pub mod parsers {
    pub use super::client::MAX_PAGE_BYTES;
    pub use super::metadata::{headers as metadata_headers, parse as parse_metadata, CoreMetadata};
    pub use super::page::{may_link, parse as parse_page, DistFile, JSON, MAX_FILES};
    pub use super::zipdir::{metadata as zip_metadata, LocalFile, Ranged, MAX_METADATA_BYTES};
}
pub use budget::Budget;
pub use request::{
    FindLinkSpec, HostSettings, Index, Links, PythonRequest, RequestSpec, Requirement,
};

use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::Artifact;
use gpuimg_store::cache::{Bucket, Cache};

use client::Client;
use solver::{Pkg, Provider};

/// Resolve `request` for the image's interpreter `target`: one wheel per package, sorted by
/// name. A conflict is [`PypiError::NoSolution`] (exit 1) with its derivation. With `offline`,
/// only cached index pages and metadata are read.
pub fn resolve(
    request: &PythonRequest,
    target: &ImagePython,
    cache: &Cache,
    observer: &mut dyn Observer,
    offline: bool,
) -> Result<Vec<PinnedWheel>, PypiError> {
    let tgt = target::Target::new(target).map_err(|m| PypiError::bad("the image's Python", m))?;
    let client = Client::new(request, cache.root(), offline)?;
    let provider = Provider::new(&client, &tgt, request)?;
    let solution = match pubgrub::resolve(&provider, Pkg::Root, pep440_rs::Version::new([0])) {
        Ok(s) => s,
        Err(pubgrub::PubGrubError::NoSolution(tree)) => {
            return Err(PypiError::NoSolution {
                explanation: report::explain(&tree, &provider),
            });
        }
        Err(pubgrub::PubGrubError::ErrorChoosingVersion { source, .. })
        | Err(pubgrub::PubGrubError::ErrorRetrievingDependencies { source, .. }) => {
            return Err(source)
        }
        Err(pubgrub::PubGrubError::ErrorInShouldCancel(e)) => return Err(e),
    };
    let pins = pins(&provider, &client, &solution)?;
    observer.message(&format!(
        "resolved {} Python package{} for Python {}.{} ({})",
        pins.len(),
        if pins.len() == 1 { "" } else { "s" },
        target.version.0,
        target.version.1,
        target.machine
    ));
    Ok(pins)
}

/// The pinned wheels of a solution, each with what required it.
fn pins(
    provider: &Provider<'_, '_>,
    client: &Client<'_>,
    solution: &pubgrub::SelectedDependencies<Pkg, pep440_rs::Version>,
) -> Result<Vec<PinnedWheel>, PypiError> {
    let request = provider.request;
    let env = &provider.target.markers;
    let chosen: BTreeMap<_, _> = solution
        .iter()
        .filter_map(|(p, v)| match p {
            Pkg::Dist(n) => Some((n.clone(), v.clone())),
            _ => None,
        })
        .collect();
    let mut required_by: BTreeMap<_, BTreeSet<String>> = BTreeMap::new();
    let mut requested = BTreeSet::new();
    for r in &request.requirements {
        if r.requirement.evaluate_markers(env, &[]) && chosen.contains_key(&r.requirement.name) {
            requested.insert(r.requirement.name.clone());
            required_by
                .entry(r.requirement.name.clone())
                .or_default()
                .insert(r.text.clone());
        }
    }
    for (p, v) in solution.iter() {
        let (name, extras, shown) = match p {
            Pkg::Root => continue,
            Pkg::Dist(n) => (n, vec![], format!("{n} {v}")),
            Pkg::Extra(n, e) => (n, vec![e.clone()], format!("{n}[{e}] {v}")),
        };
        let meta = provider
            .metadata_of(name, v)
            .map_err(|m| metadata_error(name, v, m))?;
        for r in &meta.0.requires_dist {
            if r.name != *name && chosen.contains_key(&r.name) && r.evaluate_markers(env, &extras) {
                required_by
                    .entry(r.name.clone())
                    .or_default()
                    .insert(shown.clone());
            }
        }
    }
    let mut out = Vec::new();
    for (name, version) in &chosen {
        let cand = provider
            .candidate(name, version)
            .ok_or_else(|| metadata_error(name, version, "chosen but not a candidate".into()))?;
        let size_known = provider
            .metadata
            .borrow()
            .get(&(name.clone(), version.clone()))
            .and_then(|m| m.1);
        let size = client
            .size_of(&cand.file, size_known)
            .map_err(|m| metadata_error(name, version, m))?;
        request.budget.check_wheel_size(&cand.file.filename, size)?;
        let sha256 = match (cand.file.sha256, client::local_path(&cand.file.url)) {
            (Some(d), _) => d,
            (None, Some(path)) => {
                let (f, _) = local::open_regular(&path).map_err(|source| PypiError::Read {
                    path: path.clone(),
                    source,
                })?;
                use std::io::Read as _;
                gpuimg_store::digest::hash_reader(std::io::BufReader::new(f.take(size)))
                    .map_err(|source| PypiError::Read { path, source })?
                    .0
            }
            (None, None) => {
                return Err(metadata_error(
                    name,
                    version,
                    format!(
                        "the index gives no sha256 for `{}`, which the lock needs",
                        cand.file.filename
                    ),
                ))
            }
        };
        if request.require_hashes && !request.hashes.contains_key(name) {
            return Err(PypiError::bad(
                "the requirements file",
                format!(
                    "hash-checking mode: {name} {version} has no `--hash` (every package, dependencies too, needs one)"
                ),
            ));
        }
        out.push(PinnedWheel {
            name: name.to_string(),
            version: version.to_string(),
            filename: cand.file.filename.clone(),
            sha256,
            size,
            index: cand.index.clone(),
            requested: requested.contains(name),
            required_by: required_by
                .remove(name)
                .unwrap_or_default()
                .into_iter()
                .collect(),
        });
    }
    Ok(out)
}

fn metadata_error(
    name: &pep508_rs::PackageName,
    v: &pep440_rs::Version,
    message: String,
) -> PypiError {
    PypiError::Metadata {
        package: name.to_string(),
        version: v.to_string(),
        message,
    }
}

/// What `name==V` installs for the image's interpreter `target`, for each public version `V`
/// of `name` the configured indexes serve a usable wheel of (tags, `Requires-Python`, hashes;
/// yanked files left out): the local label of the version the resolver takes for it, as
/// [`resolve`] orders candidates (newest first: `2.14.1+cu130` before `2.14.1+cu126`, both
/// before a plain `2.14.1`), `None` for a plain one. Keyed by the public version's text.
/// Reads the project's pages only (with `offline`, the cached ones), never metadata or a wheel.
pub fn installs(
    request: &PythonRequest,
    target: &ImagePython,
    cache: &Cache,
    offline: bool,
    name: &str,
) -> Result<BTreeMap<String, Option<String>>, PypiError> {
    use std::str::FromStr as _;
    let tgt = target::Target::new(target).map_err(|m| PypiError::bad("the image's Python", m))?;
    let client = Client::new(request, cache.root(), offline)?;
    let provider = Provider::new(&client, &tgt, request)?;
    let project = pep508_rs::PackageName::from_str(name)
        .map_err(|e| PypiError::bad("a framework's package name", e.to_string()))?;
    let cands = provider.candidates(&project)?;
    let mut out = BTreeMap::new();
    for c in cands.versions.iter().filter(|c| !c.yanked) {
        let text = c.version.to_string();
        let (public, local) = match text.split_once('+') {
            Some((p, l)) => (p.to_string(), Some(l.to_string())),
            None => (text, None),
        };
        out.entry(public).or_insert(local);
    }
    Ok(out)
}

/// The requirements of `name==version`'s wheel for the image's interpreter `target`, read from
/// its metadata (PEP 658 file, else the wheel's own, read in ranges): every name its
/// `Requires-Dist` lists, and the names whose markers hold for the image (no extras). `None`
/// when the indexes serve no usable wheel of that version. What a framework's wheel needs on
/// this platform (its NVIDIA requirements marked `platform_machine == "x86_64"`, say) is read
/// here, never assumed from its version.
pub fn requirements_for(
    request: &PythonRequest,
    target: &ImagePython,
    cache: &Cache,
    offline: bool,
    name: &str,
    version: &str,
) -> Result<Option<Requirements>, PypiError> {
    use std::str::FromStr as _;
    let tgt = target::Target::new(target).map_err(|m| PypiError::bad("the image's Python", m))?;
    let client = Client::new(request, cache.root(), offline)?;
    let provider = Provider::new(&client, &tgt, request)?;
    let project = pep508_rs::PackageName::from_str(name)
        .map_err(|e| PypiError::bad("a framework's package name", e.to_string()))?;
    let v = pep440_rs::Version::from_str(version)
        .map_err(|e| PypiError::bad("a framework's version", e.to_string()))?;
    provider.candidates(&project)?;
    if provider.candidate(&project, &v).is_none() {
        return Ok(None);
    }
    let meta = provider
        .metadata_of(&project, &v)
        .map_err(|m| metadata_error(&project, &v, m))?;
    let all: BTreeSet<String> = meta
        .0
        .requires_dist
        .iter()
        .map(|r| r.name.to_string())
        .collect();
    let applying: BTreeSet<String> = meta
        .0
        .requires_dist
        .iter()
        .filter(|r| r.evaluate_markers(&tgt.markers, &[]))
        .map(|r| r.name.to_string())
        .collect();
    Ok(Some(Requirements { all, applying }))
}

/// A wheel's requirements by name: all it lists, and those that apply to the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirements {
    pub all: BTreeSet<String>,
    pub applying: BTreeSet<String>,
}

/// Download `pins` (from the cache when there) into the cache's `wheels-v1` bucket, each
/// checked against its sha256 and size, several at a time, one progress line per file. A
/// wheel not in the cache is looked up on the index its pin names (`host`: this host's
/// indexes) to find its URL; with `offline`, a missing wheel is an error.
pub fn fetch(
    pins: &[PinnedWheel],
    request: &PythonRequest,
    cache: &Cache,
    observer: &mut dyn Observer,
    offline: bool,
) -> Result<Vec<FetchedWheel>, PypiError> {
    fetch_each(pins, request, cache, observer, offline, &|_, _| {})
}

/// [`fetch`], also handing each wheel to `each` (its index in `pins`) on the downloading
/// thread as soon as it is verified in the cache, while the rest still download.
pub fn fetch_each(
    pins: &[PinnedWheel],
    request: &PythonRequest,
    cache: &Cache,
    observer: &mut dyn Observer,
    offline: bool,
    each: &(dyn Fn(usize, FetchedWheel) + Sync),
) -> Result<Vec<FetchedWheel>, PypiError> {
    // A claimed size over the maximum is refused before any byte of any wheel is fetched.
    for pin in pins {
        request.budget.check_wheel_size(&pin.filename, pin.size)?;
    }
    let client = Client::new(request, cache.root(), offline)?;
    let store = cache.store(Bucket::Wheels);
    // The index lookups of the wheels not in the cache, several at a time.
    let looked_up = client.map_parallel(pins, |pin| {
        let cached = store.trusted(&pin.sha256).is_some() || offline;
        (!cached).then(|| url_of(&client, request, pin))
    });
    let mut artifacts = Vec::new();
    for (pin, url) in pins.iter().zip(looked_up) {
        let url = match url {
            // Served from the cache (or reported missing by the fetcher, offline).
            None => format!("wheels-v1/{}", pin.filename),
            Some(url) => {
                let url = url?;
                if let Some(path) = client::local_path(&url) {
                    client.import_local(&path, pin)?;
                }
                url
            }
        };
        artifacts.push(Artifact {
            url,
            sha256: pin.sha256,
            size: pin.size,
            bucket: Bucket::Wheels,
        });
    }
    let names: Vec<String> = pins.iter().map(|p| p.filename.clone()).collect();
    let paths = client.fetcher.fetch_all_each(
        &artifacts,
        "wheels",
        Some(&names),
        observer,
        &|i, path| {
            if let Some(pin) = pins.get(i) {
                each(
                    i,
                    FetchedWheel {
                        pin: pin.clone(),
                        path: path.to_path_buf(),
                    },
                )
            }
        },
    )?;
    Ok(pins
        .iter()
        .cloned()
        .zip(paths)
        .map(|(pin, path)| FetchedWheel { pin, path })
        .collect())
}

/// Where `pin`'s file is now: its index's page (or find-links) lists it by name, with the same
/// sha256 when the page gives one.
fn url_of(
    client: &Client<'_>,
    request: &PythonRequest,
    pin: &PinnedWheel,
) -> Result<String, PypiError> {
    let name: pep508_rs::PackageName = pin
        .name
        .parse()
        .map_err(|e| PypiError::bad(format!("the pin `{}`", pin.filename), format!("{e}")))?;
    let known = pin.index == "find-links" || !request.indexes_named(&pin.index).is_empty();
    if !known {
        return Err(PypiError::UnknownIndex {
            filename: pin.filename.clone(),
            index: pin.index.clone(),
        });
    }
    let project = client.project_on(&name, &pin.index)?;
    let file = project
        .iter()
        .find(|f| f.filename == pin.filename)
        .ok_or_else(|| PypiError::Vanished {
            filename: pin.filename.clone(),
            index: pin.index.clone(),
        })?;
    if let Some(d) = file.sha256 {
        if d != pin.sha256 {
            return Err(PypiError::HashMismatch {
                filename: pin.filename.clone(),
                expected: pin.sha256.to_string(),
                actual: d.to_string(),
            });
        }
    }
    Ok(file.url.clone())
}
