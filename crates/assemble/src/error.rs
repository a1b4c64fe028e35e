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
    #[error("`{origin}`: hard link `{entry}` points at `{target}`, which {why}")]
    DanglingHardlink {
        origin: String,
        entry: String,
        target: String,
        why: String,
    },
    #[error("`{origin}`: `{entry}` needs `{parent}` to be a directory, but `{parent}` is a {kind} in the same source")]
    NotADirectory {
        origin: String,
        entry: String,
        parent: String,
        kind: &'static str,
    },
    #[error("`{origin}`: `{entry}` lies under `{link}`, a symlink in the same source (writing through a symlink is refused)")]
    ThroughSymlink {
        origin: String,
        entry: String,
        link: String,
    },
    #[error("`{origin}`: `/{entry}` cannot go over the {lower}: there `/{parent}` is {what}")]
    UnderLowerFile {
        origin: String,
        entry: String,
        lower: String,
        parent: String,
        what: String,
    },
    #[error("`{origin}`: `{entry}` appears twice, once as a directory and once as a {kind}")]
    DirAndFile {
        origin: String,
        entry: String,
        kind: &'static str,
    },
    #[error("`{origin}`: `{entry}` is too long ({what})")]
    TooLong {
        origin: String,
        entry: String,
        what: String,
    },
    #[error("`{origin}`: `{entry}` has {what} {value}, which does not fit 32 bits (it is never truncated)")]
    IdTooLarge {
        origin: String,
        entry: String,
        what: &'static str,
        value: u64,
    },
    #[error("`{origin}`: entry `{entry}` is not valid UTF-8")]
    NotUtf8 { origin: String, entry: String },
}

impl AssembleError {
    /// The same error naming `origin` instead of the path it was found under.
    pub fn with_origin(self, label: &str) -> AssembleError {
        use AssembleError::*;
        let mut e = self;
        match &mut e {
            Escapes { origin, .. }
            | Special { origin, .. }
            | Unsupported { origin, .. }
            | DanglingHardlink { origin, .. }
            | NotADirectory { origin, .. }
            | UnderLowerFile { origin, .. }
            | ThroughSymlink { origin, .. }
            | DirAndFile { origin, .. }
            | TooLong { origin, .. }
            | IdTooLarge { origin, .. }
            | NotUtf8 { origin, .. } => *origin = label.to_string(),
            Io(_) | Tar { .. } | SpecialSource { .. } => {}
        }
        e
    }
}
