//! The parent's half of the setup, before the clone: every host path the sandbox sees opened
//! here as a detached read-only mount (`open_tree`, its own tree only, no submount), every
//! scratch and the output made a detached tmpfs owned by [`SANDBOX_ID`] (a scratch's seed copied
//! in), and every string the child needs made a C string, so that the child only moves
//! descriptors into place. Must never mount anything in the host's namespace, and never write
//! to a host path.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::SandboxError;
use crate::spec::{Spec, SANDBOX_ID};
use crate::syscalls::{self, ATTR_NODEV, ATTR_NOEXEC, ATTR_NOSUID, ATTR_RDONLY};
use crate::tree_copy;

/// The devices of the sandbox's `/dev`, bound from the host's.
pub const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// One mount the child moves into place at `inside`.
pub struct Mount {
    pub fd: OwnedFd,
    pub inside: CString,
    pub inside_path: PathBuf,
}

/// Everything the child needs, made before the clone.
pub struct Prepared {
    /// The root file system's read-only clone and its host path (where the child attaches it
    /// before `pivot_root`).
    pub root: OwnedFd,
    pub root_path: CString,
    /// Each of [`DEVICES`]: the host device's clone and its path inside.
    pub devices: Vec<(OwnedFd, CString)>,
    /// Binds, scratch and output, parents before children.
    pub mounts: Vec<Mount>,
    /// Which of `mounts` is the output.
    pub output: usize,
    pub workdir: CString,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
}

impl Prepared {
    /// The output's tmpfs (the parent keeps it to read the output back).
    pub fn output_fd(&self) -> &OwnedFd {
        &self.mounts[self.output].fd
    }
}

fn c_path(what: &'static str, p: &Path) -> Result<CString, SandboxError> {
    c_string(what, p.as_os_str())
}

fn c_string(what: &'static str, s: &OsStr) -> Result<CString, SandboxError> {
    CString::new(s.as_bytes()).map_err(|_| SandboxError::Spec {
        what,
        value: s.to_string_lossy().into_owned(),
        why: "it holds a NUL byte",
    })
}

/// A read-only (or, for devices, `nosuid,noexec`) detached clone of the host path `p`.
fn clone_of(what: &'static str, p: &Path, attrs: u64) -> Result<OwnedFd, SandboxError> {
    let prepare = |source| SandboxError::Prepare {
        what,
        path: p.to_path_buf(),
        source,
    };
    let fd = syscalls::open_tree_clone(&c_path(what, p)?).map_err(prepare)?;
    syscalls::set_attrs(fd.as_fd(), attrs).map_err(prepare)?;
    Ok(fd)
}

/// A detached tmpfs of at most `max_bytes`, its root owned by [`SANDBOX_ID`].
fn bounded_tmpfs(inside: &Path, max_bytes: u64) -> Result<OwnedFd, SandboxError> {
    let size = CString::new(max_bytes.to_string()).unwrap_or_default();
    // Inodes cost memory the size bound does not count: one per 4 KiB allowed, and a floor.
    let inodes = CString::new((max_bytes / 4096 + 4096).to_string()).unwrap_or_default();
    let id = CString::new(SANDBOX_ID.to_string()).unwrap_or_default();
    let options: [(&std::ffi::CStr, &std::ffi::CStr); 5] = [
        (c"size", &size),
        (c"nr_inodes", &inodes),
        (c"mode", c"0755"),
        (c"uid", &id),
        (c"gid", &id),
    ];
    syscalls::tmpfs(&options, ATTR_NOSUID | ATTR_NODEV).map_err(|source| SandboxError::Prepare {
        what: "a tmpfs for",
        path: inside.to_path_buf(),
        source,
    })
}

/// The parent's half of the setup for `spec` (already checked).
pub fn prepare(spec: &Spec) -> Result<Prepared, SandboxError> {
    let locked = ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV;
    let root = clone_of("the root file system", &spec.root, locked)?;
    let mut devices = Vec::new();
    for d in DEVICES {
        let host = Path::new("/dev").join(d);
        let fd = clone_of("a device", &host, ATTR_NOSUID | ATTR_NOEXEC)?;
        devices.push((fd, c_path("a device", &host)?));
    }
    let mut mounts = Vec::new();
    for b in &spec.binds {
        mounts.push(Mount {
            fd: clone_of("a bind", &b.host, locked)?,
            inside: c_path("a bind's path inside", &b.inside)?,
            inside_path: b.inside.clone(),
        });
    }
    for s in &spec.scratch {
        let fd = bounded_tmpfs(&s.inside, s.max_bytes)?;
        if let Some(seed) = &s.seed {
            let dest = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
            tree_copy::copy_in(seed, &dest, SANDBOX_ID).map_err(|source| SandboxError::Seed {
                seed: seed.clone(),
                source,
            })?;
        }
        mounts.push(Mount {
            fd,
            inside: c_path("a scratch path", &s.inside)?,
            inside_path: s.inside.clone(),
        });
    }
    mounts.push(Mount {
        fd: bounded_tmpfs(&spec.output.inside, spec.output.max_bytes)?,
        inside: c_path("the output's path inside", &spec.output.inside)?,
        inside_path: spec.output.inside.clone(),
    });
    // Parents before children: a mount inside another goes on top of it. Stable, so among
    // equals the spec's order holds.
    mounts.sort_by_key(|m| m.inside_path.components().count());
    let output = mounts
        .iter()
        .position(|m| m.inside_path == spec.output.inside)
        .unwrap_or(mounts.len() - 1);
    let argv = spec
        .argv
        .iter()
        .map(|a| c_string("an argument", a))
        .collect::<Result<Vec<_>, _>>()?;
    let env = spec
        .env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            c_string("an environment variable", &kv)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Prepared {
        root,
        root_path: c_path("the root file system", &spec.root)?,
        devices,
        mounts,
        output,
        workdir: c_path("the working directory", &spec.workdir)?,
        argv,
        env,
    })
}
