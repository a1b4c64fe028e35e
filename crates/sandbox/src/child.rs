//! The sandbox's side of the clone: the init (pid 1 of the new pid namespace) puts the root in
//! place (`pivot_root`), mounts `/proc` and `/dev`, moves every prepared mount to its path
//! inside, names the host, enters the user namespace the parent maps (or takes
//! [`SANDBOX_ID`] where none can be made), drops every capability, sets `no_new_privs`, forks
//! the command and reaps every process until the command ends, then reports its wait status
//! and exits, which kills whatever is left of the sandbox.
//!
//! This runs in the clone of a multi-threaded process: it must never allocate, take a lock or
//! return; it only makes system calls on what [`crate::prepare`] made, and reports a failure as
//! one fixed-size [`Record`] (step, index, errno) on the report pipe.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, RawFd};

use libc::{c_char, c_int, c_long, c_void};

use crate::error::Step;
use crate::prepare::{Prepared, DEVICES};
use crate::spec::SANDBOX_ID;
use crate::syscalls;

/// What the init reports on the report pipe.
pub const TAG_FAILED: u32 = 1;
pub const TAG_STATUS: u32 = 2;

/// One report: a failed step (`step`, `index`, `value` = errno) or the command's wait status
/// (`value`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Record {
    pub tag: u32,
    pub step: u32,
    pub index: u32,
    pub value: i32,
}

/// The parent's answer once it wrote the user namespace's maps, or could not.
pub const MAPPED: u8 = b'm';
pub const NOT_MAPPED: u8 = b'f';
/// The init's message: in a new user namespace (to be mapped), or none could be made.
pub const UNSHARED: u8 = b'u';
pub const NO_USERNS: u8 = b'n';

/// The descriptors the child uses besides the prepared mounts.
pub struct ChildFds {
    pub report: RawFd,
    pub sync: RawFd,
    pub log: RawFd,
}

/// The command's `argv` and `envp`, NUL-pointer terminated, made before the clone.
pub struct ExecArgs<'a> {
    pub argv: &'a [*const c_char],
    pub envp: &'a [*const c_char],
}

/// The `/dev` entries that are symbolic links into `/proc`.
const DEV_LINKS: [(&CStr, &CStr); 4] = [
    (c"/proc/self/fd", c"/dev/fd"),
    (c"/proc/self/fd/0", c"/dev/stdin"),
    (c"/proc/self/fd/1", c"/dev/stdout"),
    (c"/proc/self/fd/2", c"/dev/stderr"),
];

fn errno() -> i32 {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

fn send(fd: RawFd, r: Record) {
    // SAFETY: a plain struct of 16 bytes, written whole (below PIPE_BUF: atomic).
    unsafe {
        libc::write(
            fd,
            &r as *const Record as *const c_void,
            std::mem::size_of::<Record>(),
        );
    }
}

fn fail_with(fd: RawFd, step: Step, index: usize, err: i32, code: c_int) -> ! {
    send(
        fd,
        Record {
            tag: TAG_FAILED,
            step: step as u32,
            index: index as u32,
            value: err,
        },
    );
    // SAFETY: ends this process without running anything of the parent's.
    unsafe { libc::_exit(code) }
}

/// The sandbox's init. Never returns.
///
/// # Safety
/// Called only in the clone made by `syscalls::clone_with`, with the parent's prepared values.
pub unsafe fn init(p: &Prepared, fds: &ChildFds, exec: &ExecArgs<'_>) -> ! {
    let report = fds.report;
    let must = |r: c_long, step: Step, index: usize| {
        if r < 0 {
            fail_with(report, step, index, errno(), 126);
        }
    };
    // Dies with the parent's thread that cloned it; set again below, after the changes of
    // credentials that clear it.
    must(
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) as c_long,
        Step::PrivateMounts,
        1,
    );
    let null = std::ptr::null::<c_char>();
    must(
        libc::mount(
            null,
            c"/".as_ptr(),
            null,
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) as c_long,
        Step::PrivateMounts,
        0,
    );
    // The root's clone goes over its own host path, then becomes `/`; the host's root, stacked
    // over it by `pivot_root(".", ".")`, is detached.
    must(
        syscalls::move_mount(p.root.as_raw_fd(), &p.root_path),
        Step::PlaceRoot,
        0,
    );
    must(
        libc::fchdir(p.root.as_raw_fd()) as c_long,
        Step::PlaceRoot,
        0,
    );
    must(syscalls::pivot_root_here(), Step::PivotRoot, 0);
    must(
        libc::umount2(c".".as_ptr(), libc::MNT_DETACH) as c_long,
        Step::PivotRoot,
        0,
    );
    must(libc::chdir(c"/".as_ptr()) as c_long, Step::PivotRoot, 0);
    must(
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) as c_long,
        Step::MountProc,
        0,
    );
    make_dev(p, report);
    for (i, m) in p.mounts.iter().enumerate() {
        must(
            syscalls::move_mount(m.fd.as_raw_fd(), &m.inside),
            Step::MountInside,
            i,
        );
    }
    let host = c"sandbox";
    must(
        libc::sethostname(host.as_ptr(), host.to_bytes().len()) as c_long,
        Step::Hostname,
        0,
    );
    // Nothing of the parent's stays open here: not the prepared mounts (all in place now), nor
    // what the parent's other threads had open when it cloned (another sandbox's pipes).
    must(
        close_all_but([fds.report, fds.sync, fds.log]),
        Step::DropPrivileges,
        5,
    );
    enter_user_namespace(fds);
    // Dies with its parent's thread (set after the last change of credentials, which clears it).
    must(
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) as c_long,
        Step::DropPrivileges,
        0,
    );
    libc::close(fds.sync);
    let pid = syscalls::fork_raw();
    must(pid, Step::Fork, 0);
    if pid == 0 {
        command(p, fds, exec);
    }
    libc::close(fds.log);
    reap(pid as libc::pid_t, report)
}

/// A small read-only tmpfs at `/dev` holding the host's devices (bound) and links into `/proc`.
unsafe fn make_dev(p: &Prepared, report: RawFd) {
    let must = |r: c_long, index: usize| {
        if r < 0 {
            fail_with(report, Step::MountDev, index, errno(), 126);
        }
    };
    let whole = DEVICES.len();
    must(
        libc::mount(
            c"tmpfs".as_ptr(),
            c"/dev".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"size=65536,nr_inodes=64,mode=0755".as_ptr() as *const c_void,
        ) as c_long,
        whole,
    );
    for (i, (fd, path)) in p.devices.iter().enumerate() {
        let f = libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o666 as libc::c_uint,
        );
        must(f as c_long, i);
        libc::close(f);
        must(syscalls::move_mount(fd.as_raw_fd(), path), i);
    }
    for (target, link) in DEV_LINKS {
        must(
            libc::symlink(target.as_ptr(), link.as_ptr()) as c_long,
            whole,
        );
    }
    must(
        libc::mount(
            std::ptr::null(),
            c"/dev".as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
            std::ptr::null(),
        ) as c_long,
        whole,
    );
}

/// Root inside a new user namespace the parent maps to [`SANDBOX_ID`]; where the kernel makes
/// none, [`SANDBOX_ID`] itself. Either way no capability is left, in any set, and
/// `no_new_privs` is set.
unsafe fn enter_user_namespace(fds: &ChildFds) {
    let report = fds.report;
    let must = |r: c_long, step: Step, index: usize| {
        if r < 0 {
            fail_with(report, step, index, errno(), 126);
        }
    };
    // No supplementary group of gpuimg's (root's) survives.
    must(syscalls::drop_groups(), Step::UserNamespace, 0);
    let userns = libc::unshare(libc::CLONE_NEWUSER) == 0;
    let msg = if userns { UNSHARED } else { NO_USERNS };
    must(
        libc::write(fds.sync, &msg as *const u8 as *const c_void, 1) as c_long,
        Step::UserNamespace,
        1,
    );
    if userns {
        let mut answer = 0u8;
        let n = libc::read(fds.sync, &mut answer as *mut u8 as *mut c_void, 1);
        if n != 1 || answer != MAPPED {
            fail_with(report, Step::UserNamespace, 2, libc::EPERM, 126);
        }
        must(syscalls::set_ids(0), Step::UserNamespace, 3);
        drop_bounding_set(report);
    } else {
        // The bounding set first, while CAP_SETPCAP is still held.
        drop_bounding_set(report);
        must(syscalls::set_ids(SANDBOX_ID), Step::UserNamespace, 4);
    }
    must(syscalls::capset_none(), Step::DropPrivileges, 1);
    must(
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) as c_long,
        Step::DropPrivileges,
        2,
    );
    must(
        libc::prctl(
            libc::PR_SET_NO_NEW_PRIVS,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) as c_long,
        Step::DropPrivileges,
        3,
    );
}

/// Close every descriptor from 3 on but `keep`.
fn close_all_but(mut keep: [RawFd; 3]) -> c_long {
    keep.sort_unstable();
    let mut first: libc::c_uint = 3;
    for k in keep {
        if k < 0 || (k as libc::c_uint) < first {
            continue;
        }
        if k as libc::c_uint > first {
            // SAFETY: plain integers.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    first,
                    k as libc::c_uint - 1,
                    0 as libc::c_uint,
                )
            };
            if r < 0 {
                return r;
            }
        }
        first = k as libc::c_uint + 1;
    }
    // SAFETY: plain integers.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        )
    }
}

/// Every capability out of the bounding set, so that no `execve` (as root inside) regains one.
unsafe fn drop_bounding_set(report: RawFd) {
    for cap in 0..64 {
        if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong) < 0 && errno() != libc::EINVAL {
            fail_with(report, Step::DropPrivileges, 4, errno(), 126);
        }
    }
}

/// The command's process: default signals, the working directory, stdio, `execve`.
unsafe fn command(p: &Prepared, fds: &ChildFds, exec: &ExecArgs<'_>) -> ! {
    let report = fds.report;
    let must = |r: c_long, step: Step| {
        if r < 0 {
            fail_with(report, step, 0, errno(), 127);
        }
    };
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    for sig in 1..=libc::SIGRTMAX() {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    must(libc::chdir(p.workdir.as_ptr()) as c_long, Step::Workdir);
    let stdin = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
    must(stdin as c_long, Step::Stdio);
    must(libc::dup2(stdin, 0) as c_long, Step::Stdio);
    must(libc::dup2(fds.log, 1) as c_long, Step::Stdio);
    must(libc::dup2(fds.log, 2) as c_long, Step::Stdio);
    must(syscalls::cloexec_from(3), Step::Stdio);
    libc::execve(exec.argv[0], exec.argv.as_ptr(), exec.envp.as_ptr());
    fail_with(report, Step::Exec, 0, errno(), 127)
}

/// Reap every process until the command (`pid`) ends, report its wait status, and exit: the
/// kernel then kills every other process of the namespace.
unsafe fn reap(pid: libc::pid_t, report: RawFd) -> ! {
    loop {
        let mut status: c_int = 0;
        let r = libc::waitpid(-1, &mut status, 0);
        if r == pid {
            send(
                report,
                Record {
                    tag: TAG_STATUS,
                    step: 0,
                    index: 0,
                    value: status,
                },
            );
            libc::_exit(0);
        }
        if r < 0 && errno() != libc::EINTR {
            libc::_exit(125);
        }
    }
}
