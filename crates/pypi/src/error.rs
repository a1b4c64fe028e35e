//! Errors from Python package resolution and fetching: each names the package, file, index or
//! setting involved. A conflict ([`PypiError::NoSolution`]) is an answer of "no" (exit 1) with
//! its derivation; everything else is bad input, the network or I/O (exit 2).
//! Must never hold a credential: URLs in messages are the ones with their user part removed.

use std::path::PathBuf;

use gpuimg_fetch::FetchError;

#[derive(Debug, thiserror::Error)]
pub enum PypiError {
    /// No set of wheels satisfies the requirements for the image: the derivation, one fact per
    /// line.
    #[error("no set of Python packages satisfies the requirements for this image:\n{explanation}")]
    NoSolution { explanation: String },
    #[error(
        "No Python package index is configured and the host's pip could not name its default ({why}); set `python.index` in the profile or `PIP_INDEX_URL`"
    )]
    NoIndex { why: String },
    #[error("{origin}: {message}")]
    BadInput { origin: String, message: String },
    #[error("Failed to read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("The index page `{url}` is not a valid simple index page: {message}")]
    BadPage { url: String, message: String },
    #[error("{package} {version}: {message}")]
    Metadata {
        package: String,
        version: String,
        message: String,
    },
    #[error("`{project}` is not in the cache and `--offline` forbids asking the index `{index}`")]
    Offline { project: String, index: String },
    #[error(
        "The lock names `{filename}` from the index `{index}`, which this host does not configure"
    )]
    UnknownIndex { filename: String, index: String },
    #[error("`{filename}` is no longer listed by the index `{index}`")]
    Vanished { filename: String, index: String },
    #[error(
        "`{filename}` has the sha256 `{actual}` on the index, not the `{expected}` the lock or requirements file gives"
    )]
    HashMismatch {
        filename: String,
        expected: String,
        actual: String,
    },
    /// A page or lock claims a wheel larger than the maximum: refused before any byte of it.
    #[error(
        "`{filename}` is listed as {size} bytes, over the {max} bytes a wheel may have (`{setting}` raises it)"
    )]
    WheelTooLarge {
        filename: String,
        size: u64,
        max: u64,
        setting: &'static str,
    },
    /// Resolution ran out of its budget before an answer (not a conflict: exit 2).
    #[error(
        "Python resolution stopped before an answer: {what}, its budget (`{setting}` raises it)"
    )]
    Budget { what: String, setting: &'static str },
    #[error(transparent)]
    Fetch(#[from] FetchError),
}

impl PypiError {
    /// 1 for "no solution", 2 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            PypiError::NoSolution { .. } => 1,
            _ => 2,
        }
    }

    pub(super) fn bad(origin: impl Into<String>, message: impl Into<String>) -> Self {
        PypiError::BadInput {
            origin: origin.into(),
            message: message.into(),
        }
    }
}
