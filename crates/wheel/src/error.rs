//! Errors of the wheel installer: every one names the wheel and, where there is one, the path
//! inside it, so a refused wheel is identified without reading a log.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    #[error("Failed to read wheel `{wheel}`")]
    Read {
        wheel: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Wheel `{wheel}` is not a valid zip archive")]
    Zip {
        wheel: String,
        #[source]
        source: gpuimg_pypi::zipdir::ZipDirError,
    },
    #[error("Wheel file name `{wheel}` is not valid: {why}")]
    FileName { wheel: String, why: String },
    #[error("Wheel `{wheel}` is for `{found}`, but it was pinned as `{expected}`")]
    NotThePin {
        wheel: String,
        found: String,
        expected: String,
    },
    #[error("Wheel `{wheel}` holds `{path}`, which {why}; refusing to install it")]
    UnsafePath {
        wheel: String,
        path: String,
        why: &'static str,
    },
    #[error(
        "Wheel `{wheel}` has {count} entries in its zip directory, over the cap of {cap}; refusing to install it"
    )]
    TooManyEntries {
        wheel: String,
        count: u64,
        cap: usize,
    },
    #[error(
        "Wheel `{wheel}`: `{path}` unpacks to {size} bytes, over the cap of {cap} bytes per file"
    )]
    EntryTooLarge {
        wheel: String,
        path: String,
        size: u64,
        cap: u64,
    },
    #[error("Wheel `{wheel}` unpacks to more than {cap} bytes; refusing to install it")]
    TooLarge { wheel: String, cap: u64 },
    #[error("The wheels unpack to more than {cap} bytes together; refusing to install them")]
    SetTooLarge { cap: u64 },
    #[error("Wheel `{wheel}`: `{path}` unpacks to {actual} bytes, but the zip says {declared}")]
    SizeMismatch {
        wheel: String,
        path: String,
        declared: u64,
        actual: u64,
    },
    #[error(
        "Wheel `{wheel}`: `{path}` is compressed with `{method}`; wheels use stored or deflate"
    )]
    Compression {
        wheel: String,
        path: String,
        method: String,
    },
    #[error("Wheel `{wheel}`: `{path}` does not match the CRC-32 its zip directory gives")]
    Crc { wheel: String, path: String },
    #[error("Wheel `{wheel}`: `{path}` is encrypted")]
    Encrypted { wheel: String, path: String },
    #[error("Wheel `{wheel}`: `{path}` appears twice in the archive")]
    Duplicate { wheel: String, path: String },
    #[error("Wheel `{wheel}` has no `.dist-info` directory for `{name}`")]
    NoDistInfo { wheel: String, name: String },
    #[error("Wheel `{wheel}` has two `.dist-info` directories for its project: `{first}` and `{second}`")]
    TwoDistInfos {
        wheel: String,
        first: String,
        second: String,
    },
    #[error("Wheel `{wheel}`: its {field} is `{found}`, but it was pinned as version `{expected}`; refusing to install it")]
    NotThePinnedVersion {
        wheel: String,
        field: &'static str,
        found: String,
        expected: String,
    },
    #[error("Wheel `{wheel}`: `{first}` and `{second}` both install `/{path}`")]
    SamePath {
        wheel: String,
        first: String,
        second: String,
        path: String,
    },
    #[error("Wheel `{wheel}`: its METADATA `Requires-Dist` names {declared}, but the resolution took {resolved} as its dependencies; refusing to install it")]
    NotTheResolvedRequires {
        wheel: String,
        /// `` `a`, `b` `` or `nothing`.
        declared: String,
        /// `` `a`, `b` `` or `nothing`, with what was not declared or not taken marked.
        resolved: String,
    },
    #[error("Wheel `{wheel}`: `{path}` is not valid: {why}")]
    Metadata {
        wheel: String,
        path: String,
        why: String,
    },
    #[error("Wheel `{wheel}` has `Wheel-Version: {version}`; this gpuimg installs wheels of version 1.x")]
    WheelVersion { wheel: String, version: String },
    #[error("Wheel `{wheel}`: `{path}` is not listed in its RECORD")]
    NotInRecord { wheel: String, path: String },
    #[error("Wheel `{wheel}`: `{path}` hashes to `{actual}`, but its RECORD says `{expected}`")]
    RecordHash {
        wheel: String,
        path: String,
        expected: String,
        actual: String,
    },
    #[error("Wheel `{wheel}`: `{path}` is {actual} bytes, but its RECORD says {expected}")]
    RecordSize {
        wheel: String,
        path: String,
        expected: u64,
        actual: u64,
    },
    #[error("Wheel `{wheel}`: entry point `{name}` in `{group}` is not valid: {why}")]
    EntryPoint {
        wheel: String,
        group: String,
        name: String,
        why: String,
    },
    #[error(
        "Wheels `{first}` and `{second}` both install `/{path}` (as a file and as a directory)"
    )]
    Clash {
        first: String,
        second: String,
        path: String,
    },
    #[error("`{name}` is pinned twice (`{first}` and `{second}`)")]
    TwoPins {
        name: String,
        first: String,
        second: String,
    },
    #[error("The image's Python paths are not usable: {0}")]
    Scheme(String),
    #[error("Failed to write `{path}` while installing wheels")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`python.compile: true` needs a host interpreter with the bytecode of the image's Python {version}{magic}, named `python{version}` or `python3` on the `PATH`; found none{tried}")]
    NoHostPython {
        version: String,
        /// ` (magic number N)` when known.
        magic: String,
        /// `` (tried `a`, `b`)`` or empty.
        tried: String,
    },
    #[error("gpuimg does not know the bytecode magic number of Python {version}, so it cannot compile `.pyc` files for it (set `python.compile: false`)")]
    UnknownMagic { version: String },
    #[error("Compiling `.pyc` files with `{interpreter}` failed: {why}")]
    Compile { interpreter: String, why: String },
    #[error("`{path}` cannot be kept true after stripping: {why}")]
    RecordAfterStrip { path: String, why: String },
    #[error(transparent)]
    Shape(gpuimg_assemble::AssembleError),
    /// A broken rule of the installer itself: a bug in gpuimg.
    #[error("Internal error in the wheel installer: {0}")]
    Internal(&'static str),
}

impl WheelError {
    /// 3 for a broken rule of the installer, 2 for everything else (bad input, I/O).
    pub fn exit_code(&self) -> u8 {
        match self {
            WheelError::Internal(_) => 3,
            _ => 2,
        }
    }
}
