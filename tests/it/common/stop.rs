//! Builds stopped at a chosen point, so that a test acts there and nowhere else: the binaries'
//! debug-build hook `GPUIMG_TEST_STOP_BEFORE_PERSIST=<stem>` (see `gpuimg_store::staging`) makes a
//! build stop itself (`SIGSTOP`) before its first staging entry of that stem takes its place.
//! [`spawn_stopped`] returns once the child is stopped there (`waitpid` with `WUNTRACED`: no
//! polling); the test then kills it, or runs something beside it and [`resume`]s it.

use std::process::{Child, Command};

/// Start `cmd` and return once it has stopped before putting its first `stem` staging entry
/// in place (`"blob"`: a layer blob written in full to the cache's `tmp/`, not yet named; the
/// output's stem, such as `.img.tar`: the finished output, not yet in place).
pub fn spawn_stopped(cmd: &mut Command, stem: &str) -> Child {
    let mut child = cmd
        .env("GPUIMG_TEST_STOP_BEFORE_PERSIST", stem)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let r = loop {
        // SAFETY: waitpid writes only `status`.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        if r != -1 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break r;
        }
    };
    assert_eq!(r, pid, "waitpid: {}", std::io::Error::last_os_error());
    if !libc::WIFSTOPPED(status) {
        // It was reaped: std's `Child` must not wait for it again.
        let _ = child.stdin.take();
        panic!("{cmd:?} ended (wait status {status:#x}) before it reached its `{stem}` stop point");
    }
    child
}

/// Let a stopped child go on (`SIGCONT`).
pub fn resume(child: &Child) {
    // SAFETY: kill(2) sends a signal to our own child.
    let r = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGCONT) };
    assert_eq!(r, 0, "SIGCONT: {}", std::io::Error::last_os_error());
}
