//! Path resolution inside a root, two ways with one answer: the kernel's `openat2` with
//! `RESOLVE_IN_ROOT`, and a userspace walk (one component at a time, `O_NOFOLLOW`) for kernels
//! without it. Absolute symlinks restart at the root, `..` at the root stays there, as in a
//! container. Must never hand out a descriptor for anything outside the root.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{openat, openat2, readlinkat, statat, AtFlags, FileType, Mode, OFlags};
use rustix::fs::{ResolveFlags, Stat};

/// Which resolver a [`super::Root`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2(RESOLVE_IN_ROOT)` (Linux ≥ 5.6).
    Kernel,
    /// Component by component with `O_NOFOLLOW`, where `openat2` is missing.
    Userspace,
}

/// Symlinks followed in one resolution before giving up (the kernel's limit is 40).
const MAX_HOPS: usize = 40;

/// Does this kernel (and seccomp policy) allow `openat2` with `RESOLVE_IN_ROOT`?
pub fn kernel_supported(dir: BorrowedFd<'_>) -> bool {
    openat2(
        dir,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
    .is_ok()
}

/// The components of `p` that matter: `""` and `.` dropped, `/` ignored (every path is
/// relative to the root).
fn parts(p: &Path) -> Vec<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn dup(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    fd.try_clone_to_owned()
}

fn dir_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC
}

/// Resolve every component of `p` but the last inside `root`; return the directory that holds
/// the last component and its name (`None` when `p` names a directory reached through `..`
/// or the root itself). The last component itself is never followed.
pub fn parent(
    resolver: Resolver,
    root: BorrowedFd<'_>,
    p: &Path,
) -> io::Result<(OwnedFd, Option<OsString>)> {
    let mut comps = parts(p);
    let last = match comps.last() {
        Some(l) if l != ".." => comps.pop(),
        _ => None,
    };
    let dir = match resolver {
        Resolver::Kernel => kernel_open(root, &join(&comps), dir_flags())?,
        Resolver::Userspace => walk_dir(root, comps)?,
    };
    Ok((dir, last))
}

/// Open `p` with `flags`, following every symlink (the last one too) inside `root`.
pub fn open_follow(
    resolver: Resolver,
    root: BorrowedFd<'_>,
    p: &Path,
    flags: OFlags,
) -> io::Result<OwnedFd> {
    match resolver {
        Resolver::Kernel => kernel_open(root, &join(&parts(p)), flags),
        Resolver::Userspace => {
            let (dir, last) = walk_final(root, parts(p))?;
            match last {
                None => openat(&dir, ".", flags | OFlags::CLOEXEC, Mode::empty())
                    .map_err(io::Error::from),
                Some(name) => openat(
                    &dir,
                    name.as_os_str(),
                    flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(io::Error::from),
            }
        }
    }
}

/// Where `p` really is inside the root: every component but the last resolved through the
/// root's symlinks (as the kernel would), the last kept as given. Relative to the root, no
/// leading `/`; empty for the root itself. (`/lib/x` under merged-/usr is `usr/lib/x`.)
pub fn real_path(root: BorrowedFd<'_>, p: &Path) -> io::Result<std::path::PathBuf> {
    let mut comps = parts(p);
    let last = match comps.last() {
        Some(l) if l != ".." => comps.pop(),
        _ => None,
    };
    let mut w = Walk::new(root, comps);
    while let Some(c) = w.next_component() {
        w.step(&c, false)?;
    }
    let mut out: std::path::PathBuf = w.names.iter().collect();
    if let Some(l) = last {
        out.push(l);
    }
    Ok(out)
}

fn join(comps: &[OsString]) -> OsString {
    if comps.is_empty() {
        return OsString::from(".");
    }
    let mut out = Vec::new();
    for (i, c) in comps.iter().enumerate() {
        if i > 0 {
            out.push(b'/');
        }
        out.extend_from_slice(c.as_bytes());
    }
    OsString::from(OsStr::from_bytes(&out))
}

fn kernel_open(root: BorrowedFd<'_>, rel: &OsStr, flags: OFlags) -> io::Result<OwnedFd> {
    let how = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
    let mut tries = 0;
    loop {
        match openat2(root, rel, flags | OFlags::CLOEXEC, Mode::empty(), how) {
            // EAGAIN: a rename raced the lookup; the kernel asks to retry.
            Err(rustix::io::Errno::AGAIN) if tries < 16 => tries += 1,
            r => return r.map_err(io::Error::from),
        }
    }
}

/// Walk `comps` as directories from the root, following symlinks inside it.
fn walk_dir(root: BorrowedFd<'_>, comps: Vec<OsString>) -> io::Result<OwnedFd> {
    let mut w = Walk::new(root, comps);
    while let Some(c) = w.next_component() {
        w.step(&c, false)?;
    }
    w.into_current()
}

/// Walk `comps`, following a symlink in the last position too; returns the directory holding
/// the final non-symlink name (absent or not), or `None` as the name when the walk ends on a
/// directory reached through `..` or the root.
fn walk_final(
    root: BorrowedFd<'_>,
    comps: Vec<OsString>,
) -> io::Result<(OwnedFd, Option<OsString>)> {
    let mut w = Walk::new(root, comps);
    while let Some(c) = w.next_component() {
        if let Some(name) = w.step(&c, true)? {
            return Ok((w.into_current()?, Some(name)));
        }
    }
    Ok((w.into_current()?, None))
}

struct Walk<'a> {
    root: BorrowedFd<'a>,
    /// Directories below the root, innermost last; empty = at the root.
    stack: Vec<OwnedFd>,
    /// The names of `stack`'s directories: the walk's position as a path inside the root.
    names: Vec<OsString>,
    /// Components still to walk, next last.
    pending: Vec<OsString>,
    hops: usize,
}

impl<'a> Walk<'a> {
    fn new(root: BorrowedFd<'a>, comps: Vec<OsString>) -> Self {
        Walk {
            root,
            stack: Vec::new(),
            names: Vec::new(),
            pending: comps.into_iter().rev().collect(),
            hops: 0,
        }
    }

    fn next_component(&mut self) -> Option<OsString> {
        self.pending.pop()
    }

    fn current(&self) -> BorrowedFd<'_> {
        self.stack.last().map_or(self.root, |f| f.as_fd())
    }

    fn into_current(self) -> io::Result<OwnedFd> {
        match self.stack.last() {
            Some(f) => dup(f.as_fd()),
            None => dup(self.root),
        }
    }

    /// Take one component. With `final_name`, a last component that is not a directory (or
    /// does not exist) is returned instead of entered.
    fn step(&mut self, c: &OsStr, final_name: bool) -> io::Result<Option<OsString>> {
        if c == ".." {
            self.stack.pop();
            self.names.pop();
            return Ok(None);
        }
        let is_last = self.pending.is_empty();
        let st: Stat = match statat(self.current(), c, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) if is_last && final_name => {
                return Ok(Some(c.to_os_string()))
            }
            Err(e) => return Err(e.into()),
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => {
                self.hops += 1;
                if self.hops > MAX_HOPS {
                    return Err(rustix::io::Errno::LOOP.into());
                }
                let target = readlinkat(self.current(), c, Vec::new())?;
                let target = OsStr::from_bytes(target.as_bytes()).to_os_string();
                if target.as_bytes().starts_with(b"/") {
                    self.stack.clear();
                    self.names.clear();
                }
                let mut t = parts(Path::new(&target));
                while let Some(x) = t.pop() {
                    self.pending.push(x);
                }
                Ok(None)
            }
            FileType::Directory if !(is_last && final_name) => {
                let fd = openat(
                    self.current(),
                    c,
                    dir_flags() | OFlags::NOFOLLOW,
                    Mode::empty(),
                )?;
                self.stack.push(fd);
                self.names.push(c.to_os_string());
                Ok(None)
            }
            _ if is_last && final_name => Ok(Some(c.to_os_string())),
            _ => Err(rustix::io::Errno::NOTDIR.into()),
        }
    }
}
