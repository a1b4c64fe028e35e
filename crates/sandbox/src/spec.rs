//! What a sandboxed run is given ([`Spec`] and its parts) and what it gives back ([`Ran`]),
//! and the checks a spec passes before anything is prepared (absolute, plain paths inside; a
//! command named by an absolute path; no NUL anywhere). Plain data: must never touch the file
//! system or start anything.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::error::SandboxError;

/// The id outside that root inside the sandbox is mapped to (`nobody`'s), and the id the
/// command runs as where no user namespace can be made. Scratch and output directories are
/// owned by it.
pub const SANDBOX_ID: u32 = 65534;

/// One sandboxed command and everything it may see.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The root file system (a directory of the host), mounted read-only as `/`. Every path
    /// inside the sandbox this spec names (binds, scratch, output, `/proc`, `/dev`) must be a
    /// directory there already (a file, for a file bind): the root is never written to.
    pub root: PathBuf,
    /// Host paths made visible read-only inside.
    pub binds: Vec<Bind>,
    /// Writable, size-bounded directories (tmpfs), each empty or a copy of a host directory.
    pub scratch: Vec<Scratch>,
    /// The one directory whose contents come back to the host (after success only).
    pub output: Output,
    /// The working directory inside (a fixed build path such as `/build`).
    pub workdir: PathBuf,
    /// The command: `argv[0]` is an absolute path inside the sandbox (no search).
    pub argv: Vec<OsString>,
    /// The whole environment of the command: nothing is inherited from gpuimg's.
    pub env: Vec<(OsString, OsString)>,
    /// Wall-clock limit from the start of the sandbox: past it every process of it is killed.
    pub time_limit: Duration,
    /// Where the command's stdout and stderr go, and their bounds.
    pub log: Log,
}

/// A host path (a directory or a file) seen read-only at `inside`.
#[derive(Debug, Clone)]
pub struct Bind {
    pub host: PathBuf,
    pub inside: PathBuf,
}

/// A writable tmpfs at `inside` of at most `max_bytes`, empty, or holding a copy of the host
/// directory `seed` (the copy counts against the bound; the seed itself is never written).
/// A tmpfs lives in the host's memory (and swap): the bound is what it may take of it.
#[derive(Debug, Clone)]
pub struct Scratch {
    pub inside: PathBuf,
    pub max_bytes: u64,
    pub seed: Option<PathBuf>,
}

/// The output: a tmpfs at `inside` of at most `max_bytes`, copied to `host` (which must not
/// exist yet) only when the command succeeded. Regular files, directories and symbolic links
/// come back (permissions at most 0755, owned by gpuimg's user); anything else is refused.
#[derive(Debug, Clone)]
pub struct Output {
    pub host: PathBuf,
    pub inside: PathBuf,
    pub max_bytes: u64,
}

/// The log file: stdout and stderr together, at most `max_bytes` written to `path` (then one
/// line saying it was cut); the last `tail_lines` lines are kept whatever the bound.
#[derive(Debug, Clone)]
pub struct Log {
    pub path: PathBuf,
    pub max_bytes: u64,
    pub tail_lines: usize,
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it.
    Signaled(i32),
}

/// A run that succeeded.
#[derive(Debug, Clone)]
pub struct Ran {
    /// `Status::Exited(0)`.
    pub status: Status,
    /// The log's last lines (at most `Log::tail_lines`).
    pub log_tail: Vec<String>,
    /// Everything the command wrote to stdout and stderr, in bytes (also past the bound).
    pub log_bytes: u64,
    /// Whether the log file was cut at its bound.
    pub log_cut: bool,
    /// Whether root inside was a user namespace's (mapped to [`SANDBOX_ID`]); `false` where
    /// the kernel refused one and the command ran as [`SANDBOX_ID`] itself.
    pub user_namespace: bool,
}

impl Spec {
    /// The checks that need no file system: every inside path absolute and plain, the command
    /// absolute, limits above zero, no NUL and no `=` in a variable's name.
    pub(crate) fn check(&self) -> Result<(), SandboxError> {
        let inside = self
            .binds
            .iter()
            .map(|b| ("a bind's path inside", &b.inside))
            .chain(self.scratch.iter().map(|s| ("a scratch path", &s.inside)))
            .chain([
                ("the output's path inside", &self.output.inside),
                ("the working directory", &self.workdir),
            ]);
        let mut seen = std::collections::BTreeSet::new();
        for (what, p) in inside {
            plain_inside(what, p)?;
            if what != "the working directory" && !seen.insert(p) {
                return Err(SandboxError::Spec {
                    what,
                    value: p.display().to_string(),
                    why: "two mounts at one path",
                });
            }
        }
        for (what, p) in [("the root", &self.root), ("the output", &self.output.host)]
            .into_iter()
            .chain(self.binds.iter().map(|b| ("a bind", &b.host)))
            .chain(
                self.scratch
                    .iter()
                    .filter_map(|s| s.seed.as_ref().map(|p| ("a scratch seed", p))),
            )
        {
            if !p.is_absolute() {
                return Err(SandboxError::Spec {
                    what,
                    value: p.display().to_string(),
                    why: "a host path must be absolute",
                });
            }
        }
        let Some(program) = self.argv.first() else {
            return Err(SandboxError::Spec {
                what: "the command",
                value: String::new(),
                why: "argv is empty",
            });
        };
        if !Path::new(program).is_absolute() {
            return Err(SandboxError::Spec {
                what: "the command",
                value: Path::new(program).display().to_string(),
                why: "argv[0] must be an absolute path inside the sandbox (nothing is searched)",
            });
        }
        for (k, _) in &self.env {
            if k.is_empty() || k.as_bytes().contains(&b'=') {
                return Err(SandboxError::Spec {
                    what: "an environment variable's name",
                    value: k.to_string_lossy().into_owned(),
                    why: "a name is not empty and holds no `=`",
                });
            }
        }
        let zero = [
            ("the output's bound", self.output.max_bytes == 0),
            ("the time limit", self.time_limit.is_zero()),
        ]
        .into_iter()
        .chain(
            self.scratch
                .iter()
                .map(|s| ("a scratch's bound", s.max_bytes == 0)),
        );
        for (what, is_zero) in zero {
            if is_zero {
                return Err(SandboxError::Spec {
                    what,
                    value: "0".into(),
                    why: "a bound must be above zero",
                });
            }
        }
        Ok(())
    }
}

/// An inside path: absolute, no `.` or `..`, not `/` itself, not under `/proc` or `/dev`.
fn plain_inside(what: &'static str, p: &Path) -> Result<(), SandboxError> {
    let bad = |why| SandboxError::Spec {
        what,
        value: p.display().to_string(),
        why,
    };
    if !p.is_absolute() {
        return Err(bad("a path inside the sandbox must be absolute"));
    }
    let mut parts = 0;
    for c in p.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(_) => parts += 1,
            _ => return Err(bad("a path inside the sandbox holds no `.` or `..`")),
        }
    }
    if parts == 0 && what != "the working directory" {
        return Err(bad("nothing is mounted over the root"));
    }
    if p.starts_with("/proc") || p.starts_with("/dev") {
        return Err(bad("`/proc` and `/dev` are the sandbox's own"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            root: "/r".into(),
            binds: vec![],
            scratch: vec![],
            output: Output {
                host: "/o".into(),
                inside: "/out".into(),
                max_bytes: 1,
            },
            workdir: "/build".into(),
            argv: vec!["/bin/sh".into()],
            env: vec![],
            time_limit: Duration::from_secs(1),
            log: Log {
                path: "/l".into(),
                max_bytes: 1,
                tail_lines: 1,
            },
        }
    }

    #[test]
    fn a_plain_spec_passes() {
        assert!(spec().check().is_ok());
    }

    #[test]
    fn climbing_relative_and_reserved_inside_paths_are_refused() {
        for p in ["/out/../etc", "out", "/", "/proc/x", "/dev"] {
            let mut s = spec();
            s.output.inside = p.into();
            let e = s.check().unwrap_err().to_string();
            assert!(e.contains(p), "{p}: {e}");
        }
    }

    #[test]
    fn a_searched_command_an_odd_variable_and_a_zero_bound_are_refused() {
        let mut s = spec();
        s.argv = vec!["make".into()];
        assert!(s.check().unwrap_err().to_string().contains("argv[0]"));
        let mut s = spec();
        s.env = vec![("A=B".into(), "c".into())];
        assert!(s.check().unwrap_err().to_string().contains("A=B"));
        let mut s = spec();
        s.time_limit = Duration::ZERO;
        assert!(s.check().unwrap_err().to_string().contains("time limit"));
    }
}
