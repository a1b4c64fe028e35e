//! The system calls the sandbox needs that `libc` does not wrap (the mount API, `pivot_root`,
//! `capset`, `clone` with namespaces and a pidfd), each a thin function over
//! `libc::syscall`, and the constants they take. The parent's wrappers return `io::Result`; the
//! ones the cloned child calls return the raw result and never allocate (the child of a
//! multi-threaded parent may only make system calls). Must never decide anything.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use libc::{c_int, c_long, c_uint};

const OPEN_TREE_CLONE: c_uint = 1;
const FSOPEN_CLOEXEC: c_uint = 1;
const FSCONFIG_SET_STRING: c_uint = 1;
const FSCONFIG_CMD_CREATE: c_uint = 6;
const FSMOUNT_CLOEXEC: c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: c_uint = 4;
const CLONE_PIDFD: u64 = 0x1000;

/// Mount attributes (`MOUNT_ATTR_*`).
pub const ATTR_RDONLY: u64 = 0x1;
pub const ATTR_NOSUID: u64 = 0x2;
pub const ATTR_NODEV: u64 = 0x4;
pub const ATTR_NOEXEC: u64 = 0x8;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn fd_result(r: c_long) -> io::Result<OwnedFd> {
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

fn unit_result(r: c_long) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A detached clone of the mount at `path` (only that mount's tree below `path`: no submount
/// comes with it), close-on-exec.
pub fn open_tree_clone(path: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path and plain flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            (OPEN_TREE_CLONE | libc::O_CLOEXEC as c_uint) as c_uint,
        )
    };
    fd_result(r)
}

/// Set `attrs` on the detached mount `fd`.
pub fn set_attrs(fd: BorrowedFd<'_>, attrs: u64) -> io::Result<()> {
    let a = MountAttr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: an empty path relative to a valid descriptor and a struct of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as c_uint,
            &a as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    unit_result(r)
}

/// A new detached tmpfs with `options` (`size`, `mode`, `uid`, ...) and mount `attrs`.
pub fn tmpfs(options: &[(&CStr, &CStr)], attrs: u64) -> io::Result<OwnedFd> {
    // SAFETY: NUL-terminated strings; each descriptor is checked before use.
    let fs =
        fd_result(unsafe { libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC) })?;
    for (k, v) in options {
        unit_result(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                k.as_ptr(),
                v.as_ptr(),
                0 as c_int,
            )
        })?;
    }
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_char>(),
            0 as c_int,
        )
    })?;
    fd_result(unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            attrs as c_uint,
        )
    })
}

/// `clone(2)` like `fork` (the child runs on a copy of the stack) with `namespaces` (`CLONE_NEW*`)
/// and a pidfd for the child: `Ok(None)` in the child, `Ok(Some((pid, pidfd)))` in the parent.
///
/// # Safety
/// The child of a multi-threaded process: it may only make system calls until it `execve`s or
/// `_exit`s (no allocation, no lock).
pub unsafe fn clone_with(namespaces: c_int) -> io::Result<Option<(libc::pid_t, OwnedFd)>> {
    let mut pidfd: c_int = -1;
    let flags = namespaces as u64 | CLONE_PIDFD | libc::SIGCHLD as u64;
    let r = libc::syscall(
        libc::SYS_clone,
        flags,
        0usize,
        &mut pidfd as *mut c_int,
        0usize,
        0usize,
    );
    match r {
        r if r < 0 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some((pid as libc::pid_t, OwnedFd::from_raw_fd(pidfd)))),
    }
}

/// `fork` as a bare `clone(SIGCHLD)`, for the cloned child (no `atfork` handler runs, so no
/// lock a parent's thread held is taken). Returns the raw result.
pub fn fork_raw() -> c_long {
    // SAFETY: a plain clone; the caller is the single-threaded sandbox init.
    unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::SIGCHLD as u64,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    }
}

/// Send `signal` to the process behind `pidfd`.
pub fn pidfd_kill(pidfd: BorrowedFd<'_>, signal: c_int) -> io::Result<()> {
    // SAFETY: a valid descriptor; no siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0 as c_uint,
        )
    };
    unit_result(r)
}

/// Attach the detached mount `fd` at `target` (raw result; for the child).
pub fn move_mount(fd: RawFd, target: &CStr) -> c_long {
    // SAFETY: NUL-terminated strings.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    }
}

/// `pivot_root(".", ".")`: the working directory becomes the root, the old root stacked over
/// it, to be detached (raw result; for the child).
pub fn pivot_root_here() -> c_long {
    // SAFETY: NUL-terminated strings.
    unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) }
}

/// Drop every supplementary group (raw result; for the child). Bare system calls, not glibc's
/// `setgroups`, `setresgid` and `setresuid`: those apply the change to every thread glibc
/// knows of, and in the clone of a multi-threaded process glibc still lists the parent's
/// threads (it waits on their lock, or for their answer, forever).
pub fn drop_groups() -> c_long {
    // SAFETY: no list.
    unsafe { libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) }
}

/// Set the real, effective and saved gid, then uid, to `id` (raw result; for the child; see
/// [`drop_groups`]).
pub fn set_ids(id: u32) -> c_long {
    // SAFETY: plain integers.
    let r = unsafe { libc::syscall(libc::SYS_setresgid, id, id, id) };
    if r < 0 {
        return r;
    }
    // SAFETY: plain integers.
    unsafe { libc::syscall(libc::SYS_setresuid, id, id, id) }
}

/// Clear every capability set of the calling thread (raw result; for the child).
pub fn capset_none() -> c_long {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: c_int,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const V3: u32 = 0x2008_0522;
    let h = Header {
        version: V3,
        pid: 0,
    };
    let d = [
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // SAFETY: a version-3 header and its two data words.
    unsafe { libc::syscall(libc::SYS_capset, &h as *const Header, d.as_ptr()) }
}

/// Mark every descriptor from `first` on close-on-exec (raw result; for the child).
pub fn cloexec_from(first: c_uint) -> c_long {
    // SAFETY: plain integers.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    }
}
