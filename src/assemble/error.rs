//! Errors from assembling a component tree: each names the offending path.

#[derive(Debug, thiserror::Error)]
pub enum AssembleError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("Failed to read tarball `{path}`: {source}")]
    Tar {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{origin}`: entry `{entry}` escapes the root ({why})")]
    Escapes {
        origin: String,
        entry: String,
        why: &'static str,
    },
    #[error("`{origin}`: entry `{entry}` is a {kind}; special files are refused unless `base.allow-special-files: true`")]
    Special {
        origin: String,
        entry: String,
        kind: &'static str,
    },
    #[error("`files:` source `{path}` is a {kind}; `files:` copies only regular files, directories and symlinks")]
    SpecialSource { path: String, kind: &'static str },
    #[error("`{origin}`: entry `{entry}` has an unsupported type ({kind})")]
    Unsupported {
        origin: String,
        entry: String,
        kind: String,
    },
    #[error("`{origin}`: hard link `{entry}` points at `{target}`, which is not in the tree")]
    DanglingHardlink {
        origin: String,
        entry: String,
        target: String,
    },
    #[error("`{origin}`: entry `{entry}` is not valid UTF-8")]
    NotUtf8 { origin: String, entry: String },
}
