//! A child process's peak memory as the kernel kept it: `wait4` returns the child's rusage,
//! whose `ru_maxrss` is the most resident memory it ever had (KiB), exact however short the
//! peak, with no sampling (these machines have cgroup v1 only; no per-test memory controller).

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};

/// Wait for `child` to end (it is reaped here: do not wait for it again) and return its exit
/// status and its peak resident memory in KiB.
pub fn wait_with_peak(child: Child) -> (ExitStatus, u64) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 writes only `status` and `usage`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "wait4: {e}");
    }
    drop(child);
    (ExitStatus::from_raw(status), usage.ru_maxrss as u64)
}
