//! What the plan and the SBOM need to know of each pinned wheel beyond its lock entry: the
//! shared libraries it installs (their ELF facts, for the loader, `ld.so.cache` and the
//! one-provider rule) and the `METADATA` headers that name its supplier and licence.
//!
//! Both are recorded per wheel in the cache (`Bucket::WheelMetadata`, keyed by the wheel's
//! sha256 and, for libraries, the scheme that places them) and used only while the cache's
//! stamp vouches for the record. A wheel whose libraries are not recorded is read in one of
//! two ways: before planning, as soon as it is downloaded ([`read_libraries`]), or from the
//! taps its layer's writing took ([`taken_libraries`]), so that a cold build inflates each
//! library once. The reading is the installer's (`gpuimg_wheel::library_reads`); this file
//! keys, records and schedules it. Must never decide anything about the image: facts only.

use std::collections::BTreeMap;
use std::path::Path;

use crate::lock::LockedWheel;
use gpuimg_fetch::observe::Observer;
use gpuimg_pypi::ImagePython;
use gpuimg_pypi::{self as pypi, PypiError, PythonRequest};
use gpuimg_pypi::{FetchedWheel, PinnedWheel};
use gpuimg_store::cache::{Bucket, Cache, Key};
use gpuimg_store::digest::Digest;
use gpuimg_wheel::{LibraryRead, Taps, WheelError, WheelLibrary};

/// Why a wheel's facts could not be had.
#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    #[error(transparent)]
    Pypi(#[from] PypiError),
    #[error(transparent)]
    Wheel(#[from] WheelError),
}

impl FactsError {
    pub fn exit_code(&self) -> u8 {
        match self {
            FactsError::Pypi(e) => e.exit_code(),
            FactsError::Wheel(e) => e.exit_code(),
        }
    }
}

/// The `METADATA` headers the SBOM reads (lower-case names).
pub const SBOM_HEADERS: &[&str] = &[
    "maintainer",
    "maintainer-email",
    "author",
    "author-email",
    "license-expression",
    "license",
];

/// The key of a wheel's shared libraries as installed for `python` (the scheme places them).
fn libraries_key(wheel: &LockedWheel, python: &ImagePython) -> Digest {
    let mut k = Key::new("wheel-libraries-v3").tool_version();
    k.digest(&wheel.sha256)
        .str(&python.site_dir)
        .str(&python.scripts_dir);
    k.finish()
}

/// The key of a wheel's SBOM headers: its sha256 decides its METADATA.
fn headers_key(w: &LockedWheel) -> Digest {
    let mut k = Key::new("wheel-sbom-headers-v1");
    k.digest(&w.sha256);
    k.finish()
}

/// What the cache has recorded under `key` for each wheel (by wheel name; a record the stamp
/// does not vouch for, or that does not parse, is not taken), and the wheels it has not.
fn recorded<'w, T: serde::de::DeserializeOwned>(
    cache: &Cache,
    wheels: impl IntoIterator<Item = &'w LockedWheel>,
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

/// The libraries the cache has recorded, by wheel name (a wheel missing is not known yet).
pub fn recorded_libraries(
    cache: &Cache,
    wheels: &[LockedWheel],
    python: &ImagePython,
) -> BTreeMap<String, Vec<WheelLibrary>> {
    recorded(cache, wheels, |w| libraries_key(w, python)).0
}

/// The SBOM headers the cache has recorded, by wheel name.
pub fn recorded_headers<'w>(
    cache: &Cache,
    wheels: impl IntoIterator<Item = &'w LockedWheel>,
) -> BTreeMap<String, Vec<(String, String)>> {
    recorded(cache, wheels, headers_key).0
}

fn record_libraries(cache: &Cache, w: &LockedWheel, python: &ImagePython, libs: &[WheelLibrary]) {
    // Only saves reading the wheel next time: failing to record is no error.
    let _ = cache.put_record(Bucket::WheelMetadata, &libraries_key(w, python), &libs);
}

/// The SBOM headers of the wheel at `path`, recorded for `w`; a wheel whose METADATA fails to
/// read has none (the SBOM then says NOASSERTION) and the reason is returned to warn with.
pub fn read_headers(
    cache: &Cache,
    w: &LockedWheel,
    path: &Path,
) -> (Vec<(String, String)>, Option<String>) {
    let read = || -> Result<Vec<(String, String)>, String> {
        let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
        let size = file.metadata().map_err(|e| e.to_string())?.len();
        let bytes = pypi::parsers::zip_metadata(&mut pypi::parsers::LocalFile { file, size })?;
        Ok(pypi::parsers::metadata_headers(&bytes)
            .into_iter()
            .filter(|(k, _)| SBOM_HEADERS.contains(&k.as_str()))
            .collect())
    };
    match read() {
        Ok(h) => {
            let _ = cache.put_record(Bucket::WheelMetadata, &headers_key(w), &h);
            (h, None)
        }
        Err(e) => (
            Vec::new(),
            Some(format!(
                "Failed to read the METADATA of `{}` for the SBOM ({e}); its supplier and licence are NOASSERTION",
                w.filename
            )),
        ),
    }
}

/// Every wheel's libraries: recorded, else read from each wheel as soon as it is in the cache
/// (fetched when missing), while the others still download, one library at a time on each of
/// the readers (the biggest of a wheel first), and recorded. Each wheel's SBOM headers are read
/// and recorded on the way.
pub fn read_libraries(
    wheels: &[LockedWheel],
    python: &ImagePython,
    request: &PythonRequest,
    cache: &Cache,
    offline: bool,
    obs: &mut dyn Observer,
) -> Result<BTreeMap<String, Vec<WheelLibrary>>, FactsError> {
    let (mut out, missing) = recorded(cache, wheels, |w| libraries_key(w, python));
    if missing.is_empty() {
        return Ok(out);
    }
    let pins: Vec<PinnedWheel> = missing.iter().map(|w| PinnedWheel::from(*w)).collect();
    let readers = std::thread::available_parallelism().map_or(1, |n| n.get());
    enum Job {
        Headers(std::path::PathBuf),
        Library(Box<LibraryRead>),
    }
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Job)>();
    let rx = std::sync::Mutex::new(rx);
    // Per wheel: whether its libraries were handed to the readers, or why they could not be.
    let listed: std::sync::Mutex<Vec<Option<Result<(), WheelError>>>> =
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
                            // Only saves a read later (the SBOM's reader warns).
                            Job::Headers(path) => {
                                if let Some(w) = missing.get(i) {
                                    let _ = read_headers(cache, w, &path);
                                }
                            }
                            Job::Library(l) => done.push((i, l.read_with(None))),
                        }
                    }
                })
            })
            .collect();
        let fetched = pypi::fetch_each(&pins, request, cache, obs, offline, &|i, f| {
            // Sending fails only if every reader panicked, which joining them reports.
            let _ = tx.send((i, Job::Headers(f.path.clone())));
            let listing = gpuimg_wheel::library_reads(&f, python).map(|reads| {
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
        let read: Option<Vec<(usize, Result<WheelLibrary, WheelError>)>> = handles
            .into_iter()
            .map(|h| h.join().ok())
            .collect::<Option<Vec<_>>>()
            .map(|v| v.into_iter().flatten().collect());
        (fetched, read)
    });
    fetched?;
    let read = read.ok_or(WheelError::Internal(
        "a worker reading wheel libraries stopped",
    ))?;
    let listed = listed.into_inner().map_err(|_| {
        WheelError::Internal("a download worker stopped while listing wheel libraries")
    })?;
    let mut by_wheel: Vec<Vec<Result<WheelLibrary, WheelError>>> =
        (0..pins.len()).map(|_| Vec::new()).collect();
    for (i, r) in read {
        if let Some(v) = by_wheel.get_mut(i) {
            v.push(r);
        }
    }
    for ((w, listed), libs) in missing.iter().zip(listed).zip(by_wheel) {
        listed.ok_or(WheelError::Internal(
            "a wheel was fetched but its libraries were never listed",
        ))??;
        let mut libs = libs.into_iter().collect::<Result<Vec<_>, _>>()?;
        libs.sort_by(|a, b| a.path.cmp(&b.path));
        record_libraries(cache, w, python, &libs);
        out.insert(w.name.clone(), libs);
    }
    Ok(out)
}

/// The libraries of `wheels` (fetched: `files`, in the same order) from what the taps took of
/// each as its layer was written; a library they did not see in full (stripped, or never read)
/// is read from its wheel. Recorded.
pub fn taken_libraries(
    wheels: &[&LockedWheel],
    files: &[FetchedWheel],
    python: &ImagePython,
    taps: &Taps,
    cache: &Cache,
) -> Result<BTreeMap<String, Vec<WheelLibrary>>, FactsError> {
    let mut out = BTreeMap::new();
    for (w, f) in wheels.iter().zip(files) {
        let mut libs = gpuimg_wheel::library_reads(f, python)?
            .into_iter()
            .map(|l| {
                let tap = taps.get(&l.tap_key());
                l.read_with(tap.map(|t| &**t))
            })
            .collect::<Result<Vec<_>, _>>()?;
        libs.sort_by(|a, b| a.path.cmp(&b.path));
        record_libraries(cache, w, python, &libs);
        out.insert(w.name.clone(), libs);
    }
    Ok(out)
}
