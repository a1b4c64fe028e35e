//! Staging: temporary files and directories held by a live build, and reclaim of dead ones.
//!
//! A staging entry is named `<stem>.gpuimg-tmp.<hex>` and holds an exclusive `flock` on
//! itself (the file, or the directory's own descriptor) for as long as its [`Staged`] lives.
//! Anything matching the pattern that nobody holds locked is stale — a build was killed — and
//! [`reclaim`] removes it. Locks, not PIDs: CI runners share caches across PID namespaces.
//! Must never remove an entry whose lock is held, nor follow symlinks while removing.
//!
//! Test hook (debug builds only; compiled out of release builds): with
//! `GPUIMG_TEST_STOP_BEFORE_PERSIST=<stem>` set, the process stops itself (`SIGSTOP`) the first
//! time a staging entry of that stem is about to take its place ([`Staged::persist`],
//! [`Staged::exchange`]): complete, locked, still staging. A test kills it there, or lets it go
//! on (`SIGCONT`) after running another build beside it, where otherwise it could only poll
//! and hope to catch the moment. Unset, it costs one environment lookup per entry put in place.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;

/// What separates a staging entry's stem from its random suffix.
pub const MARK: &str = ".gpuimg-tmp.";

/// One staging file or directory, locked while this value lives and removed on drop unless
/// [`Staged::persist`] moved it into place.
#[derive(Debug)]
pub struct Staged {
    path: PathBuf,
    /// The entry itself, opened: the descriptor the lock is held on.
    fd: File,
    armed: bool,
}

impl Staged {
    /// A new empty directory `<parent>/<stem>.gpuimg-tmp.<hex>` with exactly `mode` (whatever
    /// the umask), locked.
    pub fn dir(parent: &Path, stem: &str, mode: u32) -> io::Result<Staged> {
        Staged::create(parent, stem, true, mode)
    }

    /// A new empty file `<parent>/<stem>.gpuimg-tmp.<hex>` with exactly `mode`, locked and
    /// open for writing.
    pub fn file(parent: &Path, stem: &str, mode: u32) -> io::Result<Staged> {
        Staged::create(parent, stem, false, mode)
    }

    fn create(parent: &Path, stem: &str, dir: bool, mode: u32) -> io::Result<Staged> {
        for _ in 0..32 {
            let path = parent.join(format!("{stem}{MARK}{}", random_hex()));
            let fd = if dir {
                match std::fs::create_dir(&path) {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    r => r.map_err(|e| with_path(e, &path))?,
                }
                open_entry(&path).map_err(|e| with_path(e, &path))?
            } else {
                match std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(mode & 0o777)
                    .custom_flags(libc_nofollow())
                    .open(&path)
                {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    r => r.map_err(|e| with_path(e, &path))?,
                }
            };
            // Between creating and locking, a reclaim may have taken the entry for stale and
            // removed it: then it is no longer ours, and we start over under a new name.
            match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) if same_entry(&fd, &path) => {}
                Ok(()) | Err(rustix::io::Errno::WOULDBLOCK) => continue,
                Err(e) => {
                    // No locks on this file system: staging cannot be told live from stale.
                    let _ = remove_entry(&path);
                    return Err(with_path(e.into(), &path));
                }
            }
            fd.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(|e| with_path(e, &path))?;
            return Ok(Staged {
                path,
                fd,
                armed: true,
            });
        }
        Err(io::Error::other(format!(
            "Failed to create a staging entry in `{}`: every name tried was taken",
            parent.display()
        )))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file (for a staging file: write through it).
    pub fn file_handle(&self) -> &File {
        &self.fd
    }

    /// Move the entry to `dest` (replacing a file there) and keep it. Errors do not name the
    /// paths: the caller knows which it was asked for.
    pub fn persist(mut self, dest: &Path) -> io::Result<()> {
        self.stop_point();
        std::fs::rename(&self.path, dest)?;
        self.armed = false;
        Ok(())
    }

    /// Exchange the entry with `dest`, which must exist: `dest` becomes the staged content and
    /// this staging path holds what `dest` was, removed when this value drops. Fails with
    /// `EINVAL`/`ENOSYS` where the file system cannot exchange.
    pub fn exchange(&self, dest: &Path) -> io::Result<()> {
        self.stop_point();
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &self.path,
            rustix::fs::CWD,
            dest,
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .map_err(io::Error::from)
    }

    /// The test hook of the module doc: stop here, once per process, if asked to for this
    /// entry's stem.
    fn stop_point(&self) {
        #[cfg(debug_assertions)]
        {
            use std::sync::atomic::{AtomicBool, Ordering};
            static STOPPED: AtomicBool = AtomicBool::new(false);
            let Some(want) = std::env::var_os("GPUIMG_TEST_STOP_BEFORE_PERSIST") else {
                return;
            };
            let name = self.path.file_name().unwrap_or_default().to_string_lossy();
            let stem = name.split(MARK).next().unwrap_or_default();
            if want.to_str() == Some(stem) && !STOPPED.swap(true, Ordering::SeqCst) {
                // SAFETY: raise(3) has no memory effects; the process continues on SIGCONT.
                unsafe { libc::raise(libc::SIGSTOP) };
            }
        }
    }

    /// Ask the file system to place this directory's subdirectories as it places top-level
    /// ones (ext4's `chattr +T`), each in a block group of its own choosing rather than packed
    /// beside the parent. Where thousands of inodes were just freed (a previous build's
    /// scratch, removed), ext4 without a journal steps over every recently freed inode of the
    /// group on each allocation: a quarter of a millisecond per file here. Best effort: a file
    /// system without the flag keeps its own placement.
    pub fn spread_subdirs(&self) {
        use rustix::fs::{ioctl_getflags, ioctl_setflags, IFlags};
        if let Ok(flags) = ioctl_getflags(&self.fd) {
            let _ = ioctl_setflags(&self.fd, flags | IFlags::TOPDIR);
        }
    }

    /// A new empty directory `<stem>.<hex>` in this one, named anew each time: ext4 picks a
    /// top-level directory's block group from a hash of its name, so after
    /// [`Staged::spread_subdirs`] a fresh name is a fresh group.
    pub fn new_subdir(&self, stem: &str) -> io::Result<PathBuf> {
        fresh_subdir(&self.path, stem)
    }

    /// Remove the entry now, reporting failure (drop does the same silently).
    pub fn remove(mut self) -> io::Result<()> {
        self.armed = false;
        remove_entry(&self.path)
    }
}

impl std::os::fd::AsFd for Staged {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Write for Staged {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&self.fd).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        (&self.fd).flush()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.armed {
            // Still locked here: no reclaim can race the removal.
            let _ = remove_entry(&self.path);
        }
    }
}

/// Remove every stale staging entry in `dir`: those named `<stem>.gpuimg-tmp.<hex>` (any
/// stem when `stem` is `None`) that no live process holds locked. Best effort: returns how
/// many entries were removed and never fails the caller.
pub fn reclaim(dir: &Path, stem: Option<&str>) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !is_staging_name(name, stem) {
            continue;
        }
        if reclaim_one(&e.path()) {
            removed += 1;
        }
    }
    removed
}

/// Remove leftovers of gpuimg versions before staging locks: `build-XXXXXX` scratch
/// directories in the cache's tmp directory, which nothing creates any more.
pub fn reclaim_legacy_scratch(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("build-")) else {
            continue;
        };
        let legacy = rest.len() == 6 && rest.bytes().all(|b| b.is_ascii_alphanumeric());
        if legacy && e.file_type().is_ok_and(|t| t.is_dir()) && reclaim_one(&e.path()) {
            removed += 1;
        }
    }
    removed
}

/// `<stem>.gpuimg-tmp.<hex>`, with `<stem>` exactly `stem` when given.
pub fn is_staging_name(name: &str, stem: Option<&str>) -> bool {
    let Some(at) = name.rfind(MARK) else {
        return false;
    };
    let (head, suffix) = (&name[..at], &name[at + MARK.len()..]);
    let hex = !suffix.is_empty()
        && suffix.len() <= 32
        && suffix
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    hex && stem.is_none_or(|s| s == head)
}

/// Take the entry's lock; when free, the entry is stale and is removed. A locked entry, one
/// that changed under us, or anything but a plain file or directory is left alone.
fn reclaim_one(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    let dir = meta.is_dir();
    if !(dir || meta.is_file()) {
        return false;
    }
    let Ok(fd) = open_entry(path) else {
        return false;
    };
    if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err() {
        return false; // A live build holds it.
    }
    if !same_entry(&fd, path) {
        return false;
    }
    remove_entry(path).is_ok()
}

/// Open a file or directory for locking, without following a symlink or blocking on a FIFO.
fn open_entry(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_nofollow() | rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
}

fn libc_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// Whether `path` still names the file `fd` has open.
fn same_entry(fd: &File, path: &Path) -> bool {
    match (fd.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Remove what is at `path` now (after an exchange it may not be what was staged), never
/// following a symlink.
fn remove_entry(path: &Path) -> io::Result<()> {
    let dir = match std::fs::symlink_metadata(path) {
        Ok(m) => m.is_dir(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(with_path(e, path)),
    };
    let r = if dir {
        remove_tree(path)
    } else {
        std::fs::remove_file(path)
    };
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r.map_err(|e| with_path(e, path)),
    }
}

/// Remove the directory `path` and everything under it, never following a symlink, on
/// several threads (see [`remove_tree`]).
pub fn remove_dir(path: &Path) -> io::Result<()> {
    remove_tree(path).map_err(|e| with_path(e, path))
}

/// Threads that remove one directory tree at most. Removing a directory waits on the file
/// system (milliseconds each on some virtual disks with online discard), not on the CPU, so a
/// tree of a few thousand directories goes many times faster removed in parallel.
const REMOVERS: usize = 16;

/// Remove the directory `path` and everything under it, never following a symlink: every
/// entry is reached from its parent's descriptor (`openat` with `O_NOFOLLOW`), and sibling
/// subtrees are removed on up to [`REMOVERS`] threads. Keeps going past a failure; returns the
/// first.
fn remove_tree(path: &Path) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let busy = std::sync::atomic::AtomicUsize::new(1);
    let r = remove_contents(&fd, &busy);
    drop(fd);
    r.and(std::fs::remove_dir(path))
}

/// Remove everything inside the directory `dir`.
fn remove_contents(
    dir: &std::os::fd::OwnedFd,
    busy: &std::sync::atomic::AtomicUsize,
) -> io::Result<()> {
    use rustix::fs::{AtFlags, FileType};
    use std::sync::atomic::Ordering::SeqCst;
    let mut first: Option<io::Error> = None;
    let mut keep = |r: io::Result<()>| match r {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            first.get_or_insert(e);
        }
        _ => {}
    };
    let mut subdirs = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
            _ => false,
        };
        if is_dir {
            subdirs.push(name.to_owned());
        } else {
            keep(rustix::fs::unlinkat(dir, name, AtFlags::empty()).map_err(io::Error::from));
        }
    }
    let results: Vec<io::Result<()>> = std::thread::scope(|s| {
        let mut done = Vec::new();
        let mut running = Vec::new();
        for name in &subdirs {
            if busy.fetch_add(1, SeqCst) < REMOVERS {
                running.push(s.spawn(move || {
                    let r = remove_subdir(dir, name, busy);
                    busy.fetch_sub(1, SeqCst);
                    r
                }));
            } else {
                busy.fetch_sub(1, SeqCst);
                done.push(remove_subdir(dir, name, busy));
            }
        }
        for h in running {
            done.push(
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a remover thread panicked"))),
            );
        }
        done
    });
    for r in results {
        keep(r);
    }
    first.map_or(Ok(()), Err)
}

/// Remove the directory `name` in `parent` and everything under it.
fn remove_subdir(
    parent: &std::os::fd::OwnedFd,
    name: &std::ffi::CStr,
    busy: &std::sync::atomic::AtomicUsize,
) -> io::Result<()> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    let fd = rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let r = remove_contents(&fd, busy);
    drop(fd);
    r.and(rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR).map_err(io::Error::from))
}

fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("`{}`: {e}", path.display()))
}

/// A new empty directory `<stem>.<hex>` in `parent`, named anew each time (see
/// [`Staged::new_subdir`]: under a directory with ext4's top-directory flag, a fresh name is a
/// fresh block group, away from the inodes an earlier build just freed).
pub fn fresh_subdir(parent: &Path, stem: &str) -> io::Result<PathBuf> {
    for _ in 0..32 {
        let path = parent.join(format!("{stem}.{}", random_hex()));
        match std::fs::create_dir(&path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            r => return r.map(|()| path).map_err(|e| with_path(e, parent)),
        }
    }
    Err(io::Error::other(format!(
        "Failed to create a directory in `{}`: every name tried was taken",
        parent.display()
    )))
}

/// 64 random bits as 16 hex digits (std's per-process random hash keys plus a counter).
fn random_hex() -> String {
    use std::hash::{BuildHasher, RandomState};
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let h = RandomState::new().hash_one((n, t, std::process::id()));
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_names() {
        assert!(is_staging_name(".x.gpuimg-tmp.0123abcd", Some(".x")));
        assert!(is_staging_name(".x.gpuimg-tmp.4242", Some(".x")));
        assert!(is_staging_name("blob.gpuimg-tmp.00ff", None));
        assert!(!is_staging_name(".x.gpuimg-tmp.0123", Some(".y")));
        assert!(!is_staging_name(".x.gpuimg-tmp.", None));
        assert!(!is_staging_name(".x.gpuimg-tmp.xyz", None));
        assert!(!is_staging_name(".x.gpuimg-tmp.ABCD", None));
        assert!(!is_staging_name("x", None));
    }

    #[test]
    fn live_entries_survive_and_dead_ones_go() {
        let t = tempfile::tempdir().unwrap();
        let live_dir = Staged::dir(t.path(), "build", 0o700).unwrap();
        std::fs::write(live_dir.path().join("f"), "x").unwrap();
        let mut live_file = Staged::file(t.path(), "blob", 0o644).unwrap();
        live_file.write_all(b"partial").unwrap();
        // Dead ones: what a killed process leaves (no lock held).
        let dead_dir = t.path().join("build.gpuimg-tmp.00000000000000aa");
        std::fs::create_dir_all(dead_dir.join("sub/deeper")).unwrap();
        let dead_file = t.path().join("blob.gpuimg-tmp.00000000000000bb");
        std::fs::write(&dead_file, "x").unwrap();
        let unrelated = t.path().join("keep.me");
        std::fs::write(&unrelated, "x").unwrap();
        let legacy = t.path().join("build-Ab12Cd");
        std::fs::create_dir(&legacy).unwrap();

        assert_eq!(reclaim(t.path(), None), 2);
        assert_eq!(reclaim_legacy_scratch(t.path()), 1);
        assert!(live_dir.path().join("f").is_file());
        assert!(live_file.path().is_file());
        assert!(!dead_dir.exists() && !dead_file.exists() && !legacy.exists());
        assert!(unrelated.is_file());

        let (d, f) = (
            live_dir.path().to_path_buf(),
            live_file.path().to_path_buf(),
        );
        drop(live_dir);
        drop(live_file);
        assert!(!d.exists() && !f.exists());
    }

    #[test]
    fn a_symlink_with_a_staging_name_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("f"), "x").unwrap();
        std::os::unix::fs::symlink(&victim, t.path().join("a.gpuimg-tmp.01")).unwrap();
        assert_eq!(reclaim(t.path(), None), 0);
        assert!(victim.join("f").is_file());
    }

    #[test]
    fn a_wide_deep_tree_goes_in_parallel_and_links_in_it_are_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("f"), "x").unwrap();
        let d = Staged::dir(t.path(), "build", 0o700).unwrap();
        let root = d.path().to_path_buf();
        for i in 0..40 {
            let deep = root.join(format!("d{i}/a/b/c"));
            std::fs::create_dir_all(&deep).unwrap();
            std::fs::write(deep.join("file"), "x").unwrap();
            std::os::unix::fs::symlink(&outside, root.join(format!("d{i}/a/link"))).unwrap();
            std::os::unix::fs::symlink("../../..", deep.join("up")).unwrap();
        }
        remove_tree(&root).unwrap();
        assert!(!root.exists());
        assert!(outside.join("f").is_file(), "a link was followed");
        drop(d);
    }

    #[test]
    fn spread_subdirs_sets_the_top_directory_flag_where_the_file_system_has_one() {
        use rustix::fs::{ioctl_getflags, IFlags};
        let t = tempfile::tempdir().unwrap();
        let d = Staged::dir(t.path(), "build", 0o700).unwrap();
        d.spread_subdirs();
        match ioctl_getflags(&d.fd) {
            Ok(flags) => assert!(flags.contains(IFlags::TOPDIR), "{flags:?}"),
            // No inode flags here (tmpfs, overlayfs): nothing to set, nothing changed.
            Err(e) => assert!(
                matches!(
                    e,
                    rustix::io::Errno::NOTTY
                        | rustix::io::Errno::OPNOTSUPP
                        | rustix::io::Errno::INVAL
                ),
                "{e}"
            ),
        }
        let a = d.new_subdir("root").unwrap();
        let b = d.new_subdir("root").unwrap();
        assert!(a.is_dir() && b.is_dir() && a != b);
        assert!(a.starts_with(d.path()));
    }

    #[test]
    fn persist_keeps_and_modes_are_exact() {
        let t = tempfile::tempdir().unwrap();
        let mut f = Staged::file(t.path(), "blob", 0o644).unwrap();
        f.write_all(b"data").unwrap();
        let dest = t.path().join("done");
        f.persist(&dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"data");
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644);
        let d = Staged::dir(t.path(), "x", 0o755).unwrap();
        let mode = std::fs::metadata(d.path()).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755);
    }
}
