//! Exit codes that a script relies on and that no other test reaches: a panic in either binary
//! is one line on stderr and exit 3 (never 101 and a backtrace), whatever the command.

use crate::common;

use std::process::Command;

fn panics_cleanly(mut cmd: Command, who: &str) {
    let out = cmd
        .env("GPUIMG_DEBUG_PANIC", "1")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap_or_else(|e| panic!("{who}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{who}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{who}: {stderr}");
    // Whole, but for where in the source it panicked (the file and line move with the code).
    let at = stderr
        .rfind(" (at ")
        .unwrap_or_else(|| panic!("no place: {stderr}"));
    assert!(stderr.trim_end().ends_with(')'), "{stderr}");
    assert_eq!(
        format!("{} (at [SOURCE])", &stderr[..at]),
        format!("error: internal error in {who} (please report it): GPUIMG_DEBUG_PANIC is set (at [SOURCE])"),
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_panic_is_one_line_and_exit_3_in_both_binaries() {
    let sb = common::Sandbox::new();
    for args in [
        &["build", "x.yaml"][..],
        &["resolve", "--json", "x.yaml"],
        &["--help"],
    ] {
        let mut c = sb.gpuimg();
        c.args(args);
        panics_cleanly(c, "gpuimg");
    }
    let mut c = sb.selftest();
    c.arg("--json");
    panics_cleanly(c, "gpuimg-selftest");
    // Without the trigger, the same commands answer normally (bad input: 2).
    let out = common::run(sb.gpuimg().args(["build", "/nonexistent/x.yaml"]));
    assert_eq!(out.status.code(), Some(2));
}
