//! Stage-independent command logic, one module per command: what `build`, `lock` and
//! `verify-host` do between the CLI's parsing and its printing.
//!
//! `settle` is the one place that decides where a command's resolution comes from: resolve
//! the profile against the catalog once, with what it depends on gathered first (`known`:
//! the base's Python, what the index installs for the framework), or read the lock
//! (`--locked`, a `.lock.json` argument), or say no (an incompatible stack is [`OpsError::Incompatible`], never printed here). Every
//! command gets its outcome or an [`OpsError`], whose [`OpsError::exit_code`] is the CLI's
//! exit code. Must never print or know about clap: progress and warnings go to the
//! `Observer` it is given.

pub mod build;
pub mod cuda_minor;
pub mod host_from;
pub mod host_read;
pub mod known;
pub mod lock;
pub mod node;
pub mod node_contents;
pub mod node_image;
pub mod node_module;
pub mod node_root;
pub mod node_signing;
pub mod platforms;
pub mod python_packages;
pub mod settle;
pub mod stack;
pub mod verify;

use crate::catalog::CatalogError;
use crate::driver::BuildError;
use crate::lock::LockError;
use crate::plan::PlanError;
use crate::profile::ProfileError;
use crate::resolve::ResolveError;
use crate::sources::image_interpreter::BasePythonError;
use gpuimg_apt::AptError;
use gpuimg_expect::ExpectError;
use gpuimg_pypi::PypiError;
use gpuimg_wheel::WheelError;

/// Why a command produced no outcome.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// No compatible combination: an answer of "no", with the explanation.
    #[error("no compatible combination: {0}")]
    Incompatible(String),
    #[error("`--locked` given but there is no lock at `{path}`")]
    NoLock { path: String, profile: String },
    #[error("no profile beside the lock `{lock}` (`{stem}.yaml`)")]
    NoProfileBesideLock { lock: String, stem: String },
    #[error("The self-test binary for `{platform}` was not found at `{path}`{how}")]
    SelftestMissing {
        path: String,
        platform: String,
        /// How to get one, where gpuimg's sources say (`: build it with …`), else empty.
        how: String,
    },
    #[error("The self-test binary `{path}` is {machine} and cannot start on `{platform}`: the image would not start; give one built for `{platform}` with `selftest.binary`{how}, or set `selftest: {{enabled: false}}`")]
    SelftestMachine {
        path: String,
        machine: String,
        platform: String,
        /// How to get one, where gpuimg's sources say (`, built by …`), else empty.
        how: String,
    },
    #[error("Failed to read the self-test binary `{path}`: {source}")]
    SelftestRead {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Resolve(ResolveError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Apt(#[from] AptError),
    #[error(transparent)]
    Expect(#[from] ExpectError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Build(Box<BuildError>),
    #[error(transparent)]
    Pypi(#[from] PypiError),
    #[error(transparent)]
    BasePython(#[from] BasePythonError),
    #[error(transparent)]
    Wheel(#[from] WheelError),
    #[error("Python packages need the base's package list to know its interpreter, and {base} has no dpkg database (`/var/lib/dpkg/status`)")]
    NoBasePackages { base: String },
    #[error("`--platform {platform}`: the profile `{profile}` builds {has}; pick one of those")]
    UnknownPlatform {
        platform: String,
        profile: String,
        has: String,
    },
    #[error("`--sbom FILE` writes one SBOM, and this profile builds {has}: each platform's image carries its own (and each pushed manifest its referrer); pick one platform with `--platform` to write it to a file")]
    SbomFileOfIndex { has: String },
    #[error("`--export pylock` writes one platform's Python packages, and this profile builds {has}: pick one with `--platform`")]
    PylockOfIndex { has: String },
    #[error("`--selftest-binary` names one binary, and this profile builds {has}: give one per platform with `selftest.binary: {{linux/amd64: …, linux/arm64: …}}`, or pick one platform with `--platform`")]
    SelftestFlagOfIndex { has: String },
    #[error("`gpuimg {command}` of a host profile (`kind: host`): locking a node is not supported yet; `gpuimg resolve {profile}` says what it installs, and `gpuimg build` builds it")]
    HostNotYet {
        command: &'static str,
        profile: String,
    },
    #[error(transparent)]
    Module(Box<node_module::ModuleError>),
    #[error("The NVIDIA module source `{package}` has no `dkms.conf`: the kernels it builds for are unknown")]
    NoDkmsConf { package: String },
    #[error("`--export pylock`: the profile has no `python:` packages to export")]
    NothingToExport,
    #[error("Failed to read the rootfs `{path}`")]
    RootfsRead {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Failed to open the cache at `{path}`")]
    CacheOpen {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<crate::sources::wheel_facts::FactsError> for OpsError {
    fn from(e: crate::sources::wheel_facts::FactsError) -> Self {
        match e {
            crate::sources::wheel_facts::FactsError::Pypi(e) => OpsError::Pypi(e),
            crate::sources::wheel_facts::FactsError::Wheel(e) => OpsError::Wheel(e),
        }
    }
}

impl From<BuildError> for OpsError {
    fn from(e: BuildError) -> Self {
        OpsError::Build(Box::new(e))
    }
}

impl From<ResolveError> for OpsError {
    fn from(e: ResolveError) -> Self {
        match e {
            ResolveError::Incompatible(x) => OpsError::Incompatible(x.to_string()),
            e => OpsError::Resolve(e),
        }
    }
}

impl OpsError {
    /// 1 for an answer of "no" (an incompatible stack, an image over `--max-size`), 3 for a
    /// broken internal rule, 2 for everything else (bad input, usage, I/O). The code is the
    /// wrapped error's own (`WheelError::exit_code`, `BuildError::exit_code`, …): an error exits
    /// the same whichever wrapper it travelled through.
    pub fn exit_code(&self) -> u8 {
        match self {
            OpsError::Incompatible(_) => 1,
            OpsError::Pypi(e) => e.exit_code(),
            OpsError::Plan(e) => e.exit_code(),
            OpsError::Build(e) => e.exit_code(),
            OpsError::Wheel(e) => e.exit_code(),
            _ => 2,
        }
    }

    /// What to do about it, when there is one obvious next step.
    pub fn hint(&self) -> Option<String> {
        match self {
            OpsError::NoLock { profile, .. } => Some(format!("run `gpuimg lock {profile}` first")),
            OpsError::SelftestMissing { how, .. } if how.is_empty() => Some(
                "build it with `cargo build --bins`, or set `selftest.binary`, or `selftest.enabled: false`"
                    .into(),
            ),
            OpsError::NoBasePackages { .. } => Some(
                "use an apt base (`base.apt` with `python3`), or a rootfs that carries its dpkg database"
                    .into(),
            ),
            _ => None,
        }
    }
}

/// An apt error, placed at the profile entry it is about where there is one (`file:line:column`):
/// a package no repository has at its `base.apt.packages` entry, a suite the repository (or
/// the host's apt sources) does not have at the `suite:` that names it.
pub(crate) fn apt_error_at(profile: &crate::profile::Profile, e: AptError) -> OpsError {
    let crate::profile::Base::Apt(spec) = &profile.base else {
        return OpsError::Apt(e);
    };
    let same_url = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    let at: Option<(&crate::profile::Located<String>, &str)> = match &e {
        AptError::UnknownPackage { name, .. } => spec
            .packages
            .iter()
            .find(|p| &p.value == name)
            .map(|p| (p, "base.apt.packages")),
        AptError::NoHostSources { suite, .. } => {
            (&spec.suite.value == suite).then_some((&spec.suite, "base.apt.suite"))
        }
        AptError::UnknownSuite { suite, url, .. } => {
            let main = &spec.suite.value == suite
                && (spec.mirror.value == "host" || same_url(&spec.mirror.value, url));
            if main {
                Some((&spec.suite, "base.apt.suite"))
            } else {
                spec.repositories
                    .iter()
                    .map(|r| &r.value)
                    .find(|r| &r.suite.value == suite && same_url(&r.url.value, url))
                    .map(|r| (&r.suite, "base.apt.repositories.suite"))
            }
        }
        _ => None,
    };
    match at {
        Some((at, key)) => OpsError::Profile(ProfileError::Invalid {
            file: profile.file.clone(),
            line: at.line,
            column: at.column,
            key: key.into(),
            message: e.to_string(),
        }),
        None => OpsError::Apt(e),
    }
}

#[cfg(test)]
mod exit_code_tests {
    use super::*;
    use gpuimg_pypi::PypiError;

    /// Issue 35, item 4: an error's code is decided by what it is, never by the wrapper it
    /// travelled through (`OpsError::Wheel(WheelError::Internal)` exited 2, the build path's
    /// `OpsError::Build(BuildError::Wheel(…))` 3; a Python "no" inside the build exited 2).
    #[test]
    fn an_error_exits_the_same_through_every_wrapper() {
        let internal = || WheelError::Internal("rule");
        assert_eq!(OpsError::Wheel(internal()).exit_code(), 3);
        assert_eq!(OpsError::from(BuildError::Wheel(internal())).exit_code(), 3);
        let no = || PypiError::NoSolution {
            explanation: "x".into(),
        };
        assert_eq!(OpsError::Pypi(no()).exit_code(), 1);
        assert_eq!(OpsError::from(BuildError::Pypi(no())).exit_code(), 1);
        assert_eq!(
            OpsError::from(PlanError::DeviceCodeWithoutGpus).exit_code(),
            2
        );
        assert_eq!(OpsError::from(PlanError::Facts("x")).exit_code(), 3);
    }
}
