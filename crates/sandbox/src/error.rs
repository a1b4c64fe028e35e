//! The sandbox's errors ([`SandboxError`], rendered once by the caller), the steps of the
//! sandbox's setup a failure names ([`Step`]), and the log's last lines as an error shows them
//! ([`LogTail`]). Must never hold anything but data.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// The log's last lines, shown one per line under the error's message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogTail(pub Vec<String>);

impl fmt::Display for LogTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, " (the log is empty)");
        }
        write!(f, "; the log's last lines:")?;
        for l in &self.0 {
            write!(f, "\n  | {l}")?;
        }
        Ok(())
    }
}

/// A step of the sandbox's setup, as a failure inside names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    /// Making the host's mounts private to the sandbox.
    PrivateMounts = 1,
    /// Putting the root file system's read-only clone in place.
    PlaceRoot = 2,
    /// `pivot_root` into it and detaching the host's root.
    PivotRoot = 3,
    /// Mounting the sandbox's own `/proc`.
    MountProc = 4,
    /// Making `/dev` and its devices.
    MountDev = 5,
    /// Mounting a bind, scratch or the output at its path inside.
    MountInside = 6,
    /// Naming the host (UTS namespace).
    Hostname = 7,
    /// Entering the user namespace and taking its root.
    UserNamespace = 8,
    /// Dropping capabilities and setting `no_new_privs`.
    DropPrivileges = 9,
    /// Starting the command's process.
    Fork = 10,
    /// Changing to the working directory.
    Workdir = 11,
    /// Connecting stdin, stdout and stderr.
    Stdio = 12,
    /// `execve` of the command.
    Exec = 13,
}

impl Step {
    pub(crate) fn from_code(code: u32) -> Option<Step> {
        use Step::*;
        [
            PrivateMounts,
            PlaceRoot,
            PivotRoot,
            MountProc,
            MountDev,
            MountInside,
            Hostname,
            UserNamespace,
            DropPrivileges,
            Fork,
            Workdir,
            Stdio,
            Exec,
        ]
        .into_iter()
        .find(|s| *s as u32 == code)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::PrivateMounts => "making the mounts private",
            Step::PlaceRoot => "placing the read-only root",
            Step::PivotRoot => "pivot_root into the root",
            Step::MountProc => "mounting /proc",
            Step::MountDev => "making /dev",
            Step::MountInside => "mounting",
            Step::Hostname => "setting the host name",
            Step::UserNamespace => "entering the user namespace",
            Step::DropPrivileges => "dropping privileges",
            Step::Fork => "starting the command's process",
            Step::Workdir => "entering the working directory",
            Step::Stdio => "connecting stdin, stdout and stderr",
            Step::Exec => "starting the command",
        })
    }
}

/// Why a sandboxed run did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox's spec: {what} `{value}`: {why}")]
    Spec {
        what: &'static str,
        value: String,
        why: &'static str,
    },
    #[error("the sandbox needs root (gpuimg runs as root to build a kernel module); running as uid {uid}")]
    NotRoot { uid: u32 },
    #[error("the sandbox's output `{}` exists already: it must be a new path", path.display())]
    OutputExists { path: PathBuf },
    #[error("preparing the sandbox: {what} `{}`", path.display())]
    Prepare {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("copying the scratch seed `{}` into the sandbox", seed.display())]
    Seed {
        seed: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("starting the sandbox (clone with new namespaces)")]
    Clone(#[source] io::Error),
    #[error("mapping the sandbox's user namespace")]
    Mapping(#[source] io::Error),
    #[error("setting up the sandbox: {step}{}", path.as_ref().map(|p| format!(" `{}`", p.display())).unwrap_or_default())]
    Setup {
        step: Step,
        path: Option<PathBuf>,
        #[source]
        source: io::Error,
    },
    #[error("the sandbox's log `{}`", path.display())]
    Log {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("watching the sandbox")]
    Watch(#[source] io::Error),
    #[error("the sandboxed command `{command}` exited with code {code}{}{tail}", if *output_full { " (its output reached its bound)" } else { "" })]
    Exited {
        command: String,
        code: i32,
        output_full: bool,
        tail: LogTail,
    },
    #[error("the sandboxed command `{command}` was killed by signal {signal}{tail}")]
    Signaled {
        command: String,
        signal: i32,
        tail: LogTail,
    },
    #[error("the sandboxed command `{command}` ran past its limit of {}s and was killed with every process of the sandbox{tail}", limit.as_secs_f64())]
    TimedOut {
        command: String,
        limit: Duration,
        tail: LogTail,
    },
    #[error("the sandbox ended without saying how the command ended{tail}")]
    NoStatus { tail: LogTail },
    #[error("the sandbox's output holds `{}`, {kind}: only files, directories and symbolic links come back", path.display())]
    OutputEntry { path: PathBuf, kind: &'static str },
    #[error("the sandbox's output files add up to more than its bound of {max} bytes at `{}` (a sparse file)", path.display())]
    OutputTooLarge { path: PathBuf, max: u64 },
    #[error("the sandbox's output is deeper than {max} directories at `{}`", path.display())]
    OutputDepth { path: PathBuf, max: usize },
    #[error("copying the sandbox's output to `{}`", path.display())]
    Output {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}
