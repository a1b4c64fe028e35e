//! The wheels Python package resolution hands the wheel installer: a pinned wheel set, then its
//! verified files.
//!
//! Plain data only. Resolution produces [`PinnedWheel`]s (what the lock records); fetching turns
//! them into [`FetchedWheel`]s (a verified file in the cache); the installer reads those for the
//! image's interpreter ([`ImagePython`](crate::ImagePython)).
//! Must never hold a credential or an index URL: an index is named `host` or by the profile.

use std::path::PathBuf;

use gpuimg_store::digest::Digest;

/// One wheel chosen by resolution: what the lock's `wheel` entries record.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PinnedWheel {
    /// The distribution name, normalised as in PEP 503 (`typing-extensions`).
    pub name: String,
    /// The exact version (PEP 440, normalised).
    pub version: String,
    /// The wheel's file name on the index (`numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl`).
    pub filename: String,
    /// The sha256 the index gave for the file (and the lock records).
    pub sha256: Digest,
    /// The file's size in bytes.
    pub size: u64,
    /// Which index it came from: `host` or the profile's name for it; never a URL.
    pub index: String,
    /// True when the profile's own requirements name it (the installer writes `REQUESTED`).
    pub requested: bool,
    /// The requirements that brought it in (`requests>=2` from the profile, or
    /// `requests 2.32.3` for a dependency), sorted.
    pub required_by: Vec<String>,
}

/// A pinned wheel whose bytes were fetched and checked against its sha256 and size.
#[derive(Debug, Clone)]
pub struct FetchedWheel {
    pub pin: PinnedWheel,
    /// The verified file in the cache's wheel bucket (never modified in place).
    pub path: PathBuf,
}
