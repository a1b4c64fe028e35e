//! Errors from downloading and caching artifacts: each names the URL or path involved, and a
//! failed download says what happened (the status and attempt count, truncation, the size it
//! exceeded, the measured rate).

use std::path::PathBuf;

use gpuimg_store::digest::Digest;

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("Failed to download `{url}` after {attempts} attempt{s}: {message}", s = plural(.attempts))]
    Http {
        url: String,
        attempts: u32,
        message: String,
    },
    #[error("`{url}` does not exist on the server (HTTP 404)")]
    NotFound { url: String },
    #[error(
        "Download of `{url}` is truncated: got {actual} of {expected} bytes (after {attempts} attempt{s})",
        s = plural(.attempts)
    )]
    Truncated {
        url: String,
        expected: u64,
        actual: u64,
        attempts: u32,
    },
    #[error("Download of `{url}` exceeds the signed size of {size} bytes ({seen})")]
    ExceedsSigned {
        url: String,
        size: u64,
        /// What the server announced or sent, in words.
        seen: String,
    },
    #[error("Download of `{url}` exceeds the cap of {cap} bytes ({seen})")]
    ExceedsCap { url: String, cap: u64, seen: String },
    #[error(
        "Download of `{url}` is too slow after {attempts} attempt{s}: {measured}, below the minimum of {min_rate} B/s",
        s = plural(.attempts)
    )]
    TooSlow {
        url: String,
        attempts: u32,
        measured: String,
        min_rate: u64,
    },
    #[error(
        "Download of `{url}` did not finish within its deadline of {secs:.1} s ({attempts} attempt{s}, got {got} bytes, last: {last})",
        s = plural(.attempts)
    )]
    Deadline {
        url: String,
        secs: f64,
        attempts: u32,
        got: u64,
        last: String,
    },
    #[error("Checksum mismatch for `{url}`: expected `{expected}`, got `{actual}`")]
    HashMismatch {
        url: String,
        expected: Digest,
        actual: Digest,
    },
    #[error("`{url}` (`{digest}`) is not in the cache and `--offline` forbids downloading")]
    Offline { url: String, digest: String },
    #[error("Failed to read the certificates of {setting} `{}`: {message}", path.display())]
    Trust {
        setting: String,
        path: PathBuf,
        message: String,
    },
    #[error("Failed to access cache path `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn plural(n: &u32) -> &'static str {
    if *n == 1 {
        ""
    } else {
        "s"
    }
}
