//! Errors from reading, writing and checking a lock file.

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("Failed to read lock `{path}`")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Lock `{path}` is not valid")]
    Parse {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("Lock `{path}` has format version `{found}`; this gpuimg reads versions `1` and `2` (run `gpuimg lock` again)")]
    UnsupportedVersion { path: String, found: u32 },
    #[error("Lock `{path}` holds a resolution this gpuimg cannot read")]
    Resolution {
        path: String,
        #[source]
        source: super::LockedResolutionError,
    },
    #[error("Failed to write lock `{path}`")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("The lock is stale: it was made for a different `{key}` (run `gpuimg lock` again)")]
    Stale { key: String },
    #[error("The lock holds no `{platform}` part (it has {has}): run `gpuimg lock` again, or pick a platform it has with `--platform`")]
    NoPlatform { platform: String, has: String },
    #[error("The lock records no profile inputs, so its freshness cannot be checked (run `gpuimg lock` again)")]
    NoInputs,
}
