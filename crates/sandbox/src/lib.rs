//! `gpuimg-sandbox`: the one place package code ever runs (a kernel module's `make`). Its one
//! public entry is [`run`]: a command from a [`Spec`] started as pid 1's only child in fresh
//! mount, pid, network, IPC, UTS and cgroup namespaces, its root inside mapped to an unprivileged id
//! outside by a user namespace of its own (where the kernel refuses one, an unprivileged id with
//! no capabilities, said in [`Ran::user_namespace`]), the given root file system read-only with
//! nothing of the host but the named read-only binds, size-bounded scratch and output
//! directories (tmpfs), a minimal `/dev`, a `/proc` of its own, no network interface but a
//! loopback that is down, `no_new_privs`, no capabilities, exactly the given environment, a
//! wall-clock limit after which every process of it is killed, and a bounded log. The output
//! reaches the host only after the command succeeded.
//!
//! How (the sequence bubblewrap, `unshare(1)` and crun follow, written here for gpuimg's needs):
//! the parent clones each host directory as a detached read-only mount (`open_tree`) and makes
//! each tmpfs detached (`fsmount`), seeding a scratch copy there; the clone (`clone(2)` with the
//! new namespaces) makes `/` private, puts the root clone on its own path, `pivot_root`s into
//! it, detaches the host's root, mounts `/proc` and `/dev`, moves every other mount into place,
//! then enters a user namespace the parent maps, drops every capability and forks the command.
//!
//! Needs root (gpuimg runs as root on CI hosts) and Linux 5.12 (the mount API). Must never run a
//! program outside the namespaces, never let a byte of the host be written but the output's
//! copy (after success), and never leave a process of the sandbox alive when [`run`] returns.

mod child;
mod error;
mod log;
mod prepare;
mod spec;
mod supervise;
mod syscalls;
mod tree_copy;

pub use error::{LogTail, SandboxError, Step};
pub use spec::{Bind, Log, Output, Ran, Scratch, Spec, Status, SANDBOX_ID};

/// Run `spec`'s command in the sandbox: `Ok` only when it exited 0 within the time limit, its
/// output then moved to `spec.output.host`; any other end is an error carrying the log's last
/// lines. Every process of the sandbox is dead when this returns.
pub fn run(spec: &Spec) -> Result<Ran, SandboxError> {
    supervise::run(spec)
}
