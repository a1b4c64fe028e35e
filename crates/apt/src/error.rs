//! Errors from the apt client: one line each, naming the repository, package or path.

use std::path::PathBuf;

use gpuimg_fetch::FetchError;

#[derive(Debug, thiserror::Error)]
pub enum AptError {
    #[error("Failed to read `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{}` line {line}: {message}", path.display())]
    InvalidSources {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error(
        "The host's apt sources (`{dir}`) have no `deb` entry for suite `{suite}`{}",
        suites_meant(near)
    )]
    NoHostSources {
        dir: String,
        suite: String,
        near: Vec<String>,
    },
    /// The repository has neither `InRelease` nor `Release` under `dists/<suite>/`.
    #[error(
        "Repository `{url}` has no suite `{suite}` (no `dists/{suite}/InRelease` or `Release`){}",
        suites_meant(near)
    )]
    UnknownSuite {
        suite: String,
        url: String,
        near: Vec<String>,
    },
    #[error("Keyring `{}` holds no usable OpenPGP public key: {message}", path.display())]
    InvalidKeyring { path: PathBuf, message: String },
    #[error("No keyring to verify `{url}`: give `keyring:` or configure trusted keys on the host")]
    NoKeyring { url: String },
    #[error("Repository `{url}` is not signed (no `InRelease`, no `Release.gpg`); set `trusted: true` to accept it unverified")]
    Unsigned { url: String },
    #[error("Signature of `{url}` does not verify against {keyring}")]
    BadSignature { url: String, keyring: String },
    #[error("Repository `{url}` has no `Release` file")]
    NoRelease { url: String },
    #[error("Invalid release file `{url}`: {message}")]
    InvalidRelease { url: String, message: String },
    #[error("Release `{url}` lists no package index for `{component}` on `{arch}`")]
    NoIndex {
        url: String,
        component: String,
        arch: String,
    },
    #[error("Invalid package index `{url}`: {message}")]
    InvalidIndex { url: String, message: String },
    #[error(
        "Package `{name}` is not in any configured repository{}",
        did_you_mean(near)
    )]
    UnknownPackage { name: String, near: Vec<String> },
    #[error("`{text}` is not a package to install ({message}): write `name`, `name=version`, `name (>= version)` or `a | b`")]
    InvalidRoot { text: String, message: String },
    #[error("Cannot install `{root}`: {chain}")]
    Unsatisfiable { root: String, chain: String },
    #[error("Invalid package `{package}`: {message}")]
    InvalidDeb { package: String, message: String },
    #[error("Package `{package}` contains `{path}`, which escapes the image root")]
    UnsafePath { package: String, path: String },
    #[error("Failed to unpack `{package}` at `{}`", path.display())]
    Unpack {
        package: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Failed to {action} `{path}` in the image root")]
    Staged {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// What a build does with each unpacked package (`install_replaying`'s consumer) failed.
    #[error("Failed to take `{package}` from the image root")]
    Consumer {
        package: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Install destination `{}` is not an empty directory", path.display())]
    DestNotEmpty { path: PathBuf },
    #[error(transparent)]
    Fetch(#[from] FetchError),
}

impl AptError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> AptError {
        let path = path.into();
        move |source| AptError::Io { path, source }
    }

    /// An operation on `path` (an image path) inside the staging root failed.
    pub(crate) fn staged(
        action: &'static str,
        path: impl std::fmt::Display,
    ) -> impl FnOnce(std::io::Error) -> AptError {
        let path = path.to_string();
        let path = if path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        };
        move |source| AptError::Staged {
            action,
            path,
            source,
        }
    }
}

/// ` (did you mean `a` or `b`?)` for the nearest names, or nothing.
fn did_you_mean(near: &[String]) -> String {
    match near {
        [] => String::new(),
        [one] => format!(" (did you mean `{one}`?)"),
        many => format!(
            " (did you mean {}?)",
            many.iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    }
}

/// ` (did you mean `a`? from Debian's suite names and the host's apt sources)`, or nothing.
fn suites_meant(near: &[String]) -> String {
    match did_you_mean(near).strip_suffix(')') {
        Some(s) => format!("{s} from {})", crate::suites::KNOWN_SUITES),
        None => String::new(),
    }
}
