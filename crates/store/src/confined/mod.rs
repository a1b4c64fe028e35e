//! Root-confined file-system access: every read and write under a staging root goes through a
//! [`Root`], which resolves paths exactly as a container would see them (absolute and climbing
//! symlinks resolve inside the root), via `openat2(RESOLVE_IN_ROOT)` or, where the kernel lacks
//! it, a userspace walk that gives the same answers (`resolve.rs`).
//!
//! Writers never follow the last component (a symlink there is replaced, never written
//! through); readers follow it, inside the root. [`force_userspace_resolver`] makes every root
//! use the userspace walk (for tests; the CLI's settings phase calls it for
//! `GPUIMG_RESOLVER=userspace`: this module never reads the environment). Must never touch
//! anything outside the root.

mod resolve;

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{
    fchmod, fchown, fstat, linkat, mkdirat, openat, readlinkat, statat, symlinkat, unlinkat,
    AtFlags, Dir, FileType, Gid, Mode, OFlags, Uid,
};

pub use resolve::Resolver;

/// What an entry under the root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// `lstat`/`stat` data of one entry.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    pub kind: Kind,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// Device and inode: which file this is.
    pub dev: u64,
    pub ino: u64,
}

/// Named unlike `Path`'s methods, so that a plain path query never reads like a confined one.
impl Meta {
    pub fn is_directory(&self) -> bool {
        self.kind == Kind::Dir
    }
    pub fn is_regular(&self) -> bool {
        self.kind == Kind::File
    }
    pub fn is_link(&self) -> bool {
        self.kind == Kind::Symlink
    }
}

fn meta(st: &rustix::fs::Stat) -> Meta {
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    };
    Meta {
        kind,
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        size: st.st_size as u64,
        dev: st.st_dev,
        ino: st.st_ino,
    }
}

fn not_found(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

/// Set by [`force_userspace_resolver`]: every [`Root::open`] from then on resolves in
/// userspace.
static FORCE_USERSPACE: AtomicBool = AtomicBool::new(false);

/// Make every later [`Root::open`] use the userspace resolver even where `openat2` works (for
/// tests: the CLI's settings phase calls it for `GPUIMG_RESOLVER=userspace`).
pub fn force_userspace_resolver(yes: bool) {
    FORCE_USERSPACE.store(yes, Ordering::Relaxed);
}

/// A directory all of whose paths resolve inside it.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    path: PathBuf,
    resolver: Resolver,
    /// While recording: the paths given to `write`, `create_new` and `symlink`.
    log: std::cell::RefCell<Option<Vec<PathBuf>>>,
}

impl Root {
    /// Open the root at `path` with the best resolver this kernel has (the userspace one when
    /// [`force_userspace_resolver`] asked for it).
    pub fn open(path: &Path) -> io::Result<Root> {
        let dir = open_root(path)?;
        let forced = FORCE_USERSPACE.load(Ordering::Relaxed);
        let resolver = if !forced && resolve::kernel_supported(dir.as_fd()) {
            Resolver::Kernel
        } else {
            Resolver::Userspace
        };
        Ok(Root {
            dir,
            path: path.to_path_buf(),
            resolver,
            log: Default::default(),
        })
    }

    /// Open the root with a given resolver (`Kernel` fails where `openat2` is missing).
    pub fn with_resolver(path: &Path, resolver: Resolver) -> io::Result<Root> {
        let dir = open_root(path)?;
        if resolver == Resolver::Kernel && !resolve::kernel_supported(dir.as_fd()) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "openat2 with RESOLVE_IN_ROOT is not available",
            ));
        }
        Ok(Root {
            dir,
            path: path.to_path_buf(),
            resolver,
            log: Default::default(),
        })
    }

    /// The host path of the root (for messages and for handing the finished tree on).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn resolver(&self) -> Resolver {
        self.resolver
    }

    /// Start recording the paths of files and links created from now on.
    pub fn record_writes(&self) {
        *self.log.borrow_mut() = Some(Vec::new());
    }

    /// Stop recording; the paths created since [`Root::record_writes`], as given.
    pub fn take_writes(&self) -> Vec<PathBuf> {
        self.log.borrow_mut().take().unwrap_or_default()
    }

    fn logged(&self, p: &Path) {
        if let Some(l) = self.log.borrow_mut().as_mut() {
            l.push(p.to_path_buf());
        }
    }

    /// The directory holding `p`'s last component, and that component.
    fn parent(&self, p: &Path) -> io::Result<(OwnedFd, OsString)> {
        match resolve::parent(self.resolver, self.dir.as_fd(), p)? {
            (dir, Some(name)) => Ok((dir, name)),
            (_, None) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}` names a directory, not an entry", p.display()),
            )),
        }
    }

    fn open_follow(&self, p: &Path, flags: OFlags) -> io::Result<OwnedFd> {
        resolve::open_follow(self.resolver, self.dir.as_fd(), p, flags)
    }

    /// Where `p` really is inside the root (parents resolved through symlinks, the last
    /// component as given), relative to the root: `/lib/x` is `usr/lib/x` under merged-/usr.
    pub fn real_path(&self, p: &Path) -> io::Result<PathBuf> {
        resolve::real_path(self.dir.as_fd(), p)
    }

    /// `lstat`: the entry itself (a symlink is reported as one); `None` when absent (also
    /// when a parent is missing or not a directory).
    pub fn symlink_metadata(&self, p: &Path) -> io::Result<Option<Meta>> {
        let (dir, name) = match self.parent(p) {
            Ok(x) => x,
            Err(e) if not_found(&e) || e.raw_os_error() == Some(libc_enotdir()) => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                return self.metadata(p);
            }
            Err(e) => return Err(e),
        };
        match statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(meta(&st))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// `stat`: what `p` resolves to inside the root; `None` when absent or dangling.
    pub fn metadata(&self, p: &Path) -> io::Result<Option<Meta>> {
        match self.open_follow(p, OFlags::PATH) {
            Ok(fd) => Ok(Some(meta(&fstat(&fd)?))),
            Err(e) if not_found(&e) || e.raw_os_error() == Some(libc_enotdir()) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Is there an entry (of any kind, dangling symlinks included) at `p`?
    pub fn exists(&self, p: &Path) -> bool {
        matches!(self.symlink_metadata(p), Ok(Some(_)))
    }

    /// A symlink's target, as stored.
    pub fn read_link(&self, p: &Path) -> io::Result<PathBuf> {
        let (dir, name) = self.parent(p)?;
        let t = readlinkat(&dir, name.as_os_str(), Vec::new())?;
        Ok(PathBuf::from(OsStr::from_bytes(t.as_bytes())))
    }

    /// Open a regular file for reading, following symlinks inside the root. Anything that is
    /// not a regular file (a FIFO, a device) is refused without blocking.
    pub fn open_file(&self, p: &Path) -> io::Result<File> {
        let fd = self.open_follow(p, OFlags::RDONLY | OFlags::NONBLOCK)?;
        let st = fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}` is not a regular file", p.display()),
            ));
        }
        Ok(File::from(fd))
    }

    /// Read a whole regular file of at most `cap` bytes.
    pub fn read(&self, p: &Path, cap: u64) -> io::Result<Vec<u8>> {
        let f = self.open_file(p)?;
        let mut out = Vec::new();
        f.take(cap + 1).read_to_end(&mut out)?;
        if out.len() as u64 > cap {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("`{}` is larger than {cap} bytes", p.display()),
            ));
        }
        Ok(out)
    }

    /// The names in a directory (following symlinks to it inside the root), sorted, each
    /// with what it is (not followed).
    pub fn read_dir(&self, p: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        let fd = self.open_follow(p, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let mut out = Vec::new();
        for e in Dir::read_from(&fd)? {
            let e = e?;
            let name = e.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name).to_os_string();
            let st = statat(&fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)?;
            out.push((name, meta(&st).kind));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Create one directory (its parent must exist). An existing entry is an error.
    pub fn create_dir(&self, p: &Path, mode: u32) -> io::Result<()> {
        let (dir, name) = self.parent(p)?;
        mkdirat(&dir, name.as_os_str(), Mode::from_raw_mode(mode))?;
        Ok(())
    }

    /// `mkdir -p` inside the root: existing directories (and symlinks to directories inside
    /// the root) are kept; missing ones are created 0755.
    pub fn create_dir_all(&self, p: &Path) -> io::Result<()> {
        let mut cur = PathBuf::new();
        for c in p.components() {
            if let std::path::Component::Normal(s) = c {
                cur.push(s);
                match self.metadata(&cur)? {
                    Some(m) if m.is_directory() => continue,
                    Some(_) => {
                        return Err(io::Error::new(
                            io::ErrorKind::AlreadyExists,
                            format!("`/{}` is in the way of a directory", cur.display()),
                        ))
                    }
                    None => match self.create_dir(&cur, 0o755) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(e),
                    },
                }
            }
        }
        Ok(())
    }

    /// Create a new regular file (never through a symlink; an existing entry is an error).
    pub fn create_new(&self, p: &Path, mode: u32) -> io::Result<File> {
        self.logged(p);
        let (dir, name) = self.parent(p)?;
        let fd = openat(
            &dir,
            name.as_os_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )?;
        Ok(File::from(fd))
    }

    /// Write `data` to `p`, replacing a file or symlink there (never writing through it).
    pub fn write(&self, p: &Path, data: &[u8], mode: u32) -> io::Result<()> {
        self.remove_non_dir(p)?;
        let mut f = self.create_new(p, mode)?;
        f.write_all(data)?;
        fchmod(&f, Mode::from_raw_mode(mode))?;
        Ok(())
    }

    /// Remove a non-directory entry at `p` if there is one.
    pub fn remove_non_dir(&self, p: &Path) -> io::Result<()> {
        match self.symlink_metadata(p)? {
            None => Ok(()),
            Some(m) if m.is_directory() => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("a directory is in the way at `/{}`", rel(p).display()),
            )),
            Some(_) => self.remove_file(p),
        }
    }

    /// Remove one non-directory entry.
    pub fn remove_file(&self, p: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(p)?;
        unlinkat(&dir, name.as_os_str(), AtFlags::empty())?;
        Ok(())
    }

    /// Create a symlink at `p` holding `target` verbatim.
    pub fn symlink(&self, target: &Path, p: &Path) -> io::Result<()> {
        self.logged(p);
        let (dir, name) = self.parent(p)?;
        symlinkat(target, &dir, name.as_os_str())?;
        Ok(())
    }

    /// Hard-link the entry at `existing` (not followed) as `new`.
    pub fn hard_link(&self, existing: &Path, new: &Path) -> io::Result<()> {
        let (sdir, sname) = self.parent(existing)?;
        let (ddir, dname) = self.parent(new)?;
        linkat(
            &sdir,
            sname.as_os_str(),
            &ddir,
            dname.as_os_str(),
            AtFlags::empty(),
        )?;
        Ok(())
    }

    /// Set the owner of the entry itself (a symlink's own owner, never its target's). An id of
    /// `u32::MAX` is an error: to chown it means "leave unchanged", it is no owner.
    pub fn set_owner(&self, p: &Path, uid: u32, gid: u32) -> io::Result<()> {
        let (uid, gid) = owner(uid, gid)?;
        let (dir, name) = self.parent(p)?;
        rustix::fs::chownat(
            &dir,
            name.as_os_str(),
            Some(uid),
            Some(gid),
            AtFlags::SYMLINK_NOFOLLOW,
        )?;
        Ok(())
    }

    /// Set the permission bits of a file or directory (a symlink at `p` is an error).
    pub fn set_mode(&self, p: &Path, mode: u32) -> io::Result<()> {
        let (dir, name) = self.parent(p)?;
        let fd = openat(
            &dir,
            name.as_os_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        fchmod(&fd, Mode::from_raw_mode(mode))?;
        Ok(())
    }

    /// Set an extended attribute on the file or directory at `p` (not through a symlink).
    pub fn set_xattr(&self, p: &Path, name: &str, value: &[u8]) -> io::Result<()> {
        let (dir, last) = self.parent(p)?;
        let fd = openat(
            &dir,
            last.as_os_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        rustix::fs::fsetxattr(&fd, name, value, rustix::fs::XattrFlags::empty())?;
        Ok(())
    }

    /// Which file `f` is: its (device, inode), as [`Meta`]'s `dev` and `ino`.
    pub fn file_id(f: &File) -> io::Result<(u64, u64)> {
        let st = fstat(f)?;
        Ok((st.st_dev, st.st_ino))
    }

    /// Set owner then mode (in that order: `chown` clears set-id bits) on an open file.
    pub fn set_owner_mode_fd(f: &File, uid: u32, gid: u32, mode: u32) -> io::Result<()> {
        let (uid, gid) = owner(uid, gid)?;
        fchown(f, Some(uid), Some(gid))?;
        fchmod(f, Mode::from_raw_mode(mode))?;
        Ok(())
    }

    /// Remove everything inside the root, leaving the root itself (best effort).
    pub fn clear(&self) {
        let Ok(names) = self.read_dir(Path::new("")) else {
            return;
        };
        for (name, kind) in names {
            let p = Path::new(&name);
            if kind == Kind::Dir {
                self.remove_tree(p);
            } else {
                let _ = self.remove_file(p);
            }
        }
    }

    fn remove_tree(&self, p: &Path) {
        // `p` is a real directory found by lstat, so reading it follows no link.
        if let Ok(names) = self.read_dir(p) {
            for (name, kind) in names {
                let child = p.join(&name);
                if kind == Kind::Dir {
                    self.remove_tree(&child);
                } else {
                    let _ = self.remove_file(&child);
                }
            }
        }
        if let Ok((dir, name)) = self.parent(p) {
            let _ = unlinkat(&dir, name.as_os_str(), AtFlags::REMOVEDIR);
        }
    }
}

/// `p` without a leading `/`, for messages.
fn rel(p: &Path) -> &Path {
    p.strip_prefix("/").unwrap_or(p)
}

fn libc_enotdir() -> i32 {
    rustix::io::Errno::NOTDIR.raw_os_error()
}

fn open_root(path: &Path) -> io::Result<OwnedFd> {
    let fd = rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        io::Error::new(
            io::Error::from(e).kind(),
            format!("`{}`: {e}", path.display()),
        )
    })?;
    Ok(fd)
}

/// `uid`, `gid` as chown takes them; 4294967295 (`-1`) is an error: to chown it means "leave
/// unchanged", it is no owner (and rustix refuses to build it).
fn owner(uid: u32, gid: u32) -> io::Result<(Uid, Gid)> {
    if uid == u32::MAX || gid == u32::MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("owner {uid}:{gid}: 4294967295 (-1) is not a user or group id"),
        ));
    }
    Ok((Uid::from_raw(uid), Gid::from_raw(gid)))
}

#[cfg(test)]
mod tests;
