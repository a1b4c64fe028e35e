//! Errors from downloading and caching artifacts: each names the URL or path involved.

use std::path::PathBuf;

use crate::digest::Digest;

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("Failed to download `{url}` after {attempts} attempts: {message}")]
    Http {
        url: String,
        attempts: u32,
        message: String,
    },
    #[error("`{url}` does not exist on the server (HTTP 404)")]
    NotFound { url: String },
    #[error("Download of `{url}` is truncated: got {actual} bytes, expected {expected}")]
    Truncated {
        url: String,
        expected: u64,
        actual: u64,
    },
    #[error("Checksum mismatch for `{url}`: expected `{expected}`, got `{actual}`")]
    HashMismatch {
        url: String,
        expected: Digest,
        actual: Digest,
    },
    #[error("`{url}` (`{digest}`) is not in the cache and `--offline` forbids downloading")]
    Offline { url: String, digest: String },
    #[error("Failed to access cache path `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
