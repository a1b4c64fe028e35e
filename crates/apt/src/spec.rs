//! What an apt base asks for, as plain values the plan converts the profile's `base.apt` into:
//! the package roots ([`PackagesSpec`]) and the repositories they come from ([`Mirror`],
//! [`RepoSpec`]), keyrings already resolved to paths.
//!
//! Plain data only: must never read a file or the host's configuration (`repo.rs` turns these
//! into repositories).

use std::path::PathBuf;

/// The main mirror: the build host's apt sources, or one URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mirror {
    /// `mirror: host`: the host's `sources.list` entries for the suite.
    Host,
    Url(String),
}

impl std::fmt::Display for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mirror::Host => f.write_str("host"),
            Mirror::Url(u) => f.write_str(u),
        }
    }
}

/// One further repository beside the main mirror (a vendor's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoSpec {
    pub url: String,
    /// A suite name, or a flat repository path ending in `/`.
    pub suite: String,
    /// Empty: `main` for a suite, none for a flat repository.
    pub components: Vec<String>,
    /// The keyring that must sign it (default: the host's trusted keyrings).
    pub keyring: Option<PathBuf>,
    /// Signatures are not checked (a warning on every build).
    pub trusted: bool,
}

/// The package roots to resolve and where from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackagesSpec {
    pub mirror: Mirror,
    pub suite: String,
    pub components: Vec<String>,
    /// The main mirror's keyring (default: the host's trusted keyrings).
    pub keyring: Option<PathBuf>,
    /// The main mirror's signatures are not checked.
    pub trusted: bool,
    /// Also install the `Priority: required` / `Essential: yes` set.
    pub essential: bool,
    /// The root relations, as written (`libc6`, `python3 | python3-minimal`).
    pub packages: Vec<String>,
    pub repositories: Vec<RepoSpec>,
    /// The root is a booted system (a node): the install also makes the system users and
    /// groups, enables units and leaves node-specific state empty, as the skipped maintainer
    /// scripts would (`system.rs`). `false` (a container) changes no byte.
    pub system: bool,
}
