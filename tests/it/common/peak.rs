//! A child process's own peak memory, as the kernel kept it: `wait4` returns the child's
//! rusage, whose `ru_maxrss` is the most resident memory it had (KiB), exact however short the
//! peak, with no sampling (these machines have cgroup v1 only: no per-test memory controller).
//!
//! One catch, which this module exists for: Linux carries `ru_maxrss` across `execve` (the
//! process's maximum starts at the resident size of the image it replaced), so a command
//! started from the test binary, itself hundreds of MB, would report the test binary's size.
//! [`run_with_peak`] therefore starts the command from a small spawner (`python3`) that forks
//! it: a forked process starts with a fresh maximum and the spawner's few MB, and what the
//! spawner's `wait4` returns is the command's own peak (its `ru_maxrss`, and the
//! `peak_memory` a `gpuimg build --json` reports of itself, alike).

use std::process::{Command, Output};

use super::cmd::{require, run, wrap};

/// Fork, optionally limit the child's data segment, exec it, and write its `ru_maxrss` (KiB)
/// to the file named first; exit as it did (128 + N for signal N).
const SPAWNER: &str = r#"
import os, resource, sys
out, limit, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
pid = os.fork()
if pid == 0:
    try:
        if limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(out, "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
"#;

/// Run `cmd` (its program, arguments, environment and directory) as the child of a small
/// spawner; return its output and its own peak resident memory in KiB. With `data_limit`, its
/// data segment (`RLIMIT_DATA`, the heap and private mappings) is capped at that many bytes,
/// so that a run whose memory is not bounded fails instead of taking the machine's.
pub fn run_with_peak(cmd: &Command, data_limit: Option<u64>) -> (Output, u64) {
    require("python3");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let peak_file = dir.path().join("peak");
    let limit = data_limit.unwrap_or(0).to_string();
    let peak_arg = peak_file.display().to_string();
    let out = run(&mut wrap(
        &["python3", "-c", SPAWNER, &peak_arg, &limit],
        cmd,
    ));
    let peak = std::fs::read_to_string(&peak_file)
        .unwrap_or_else(|e| panic!("the spawner wrote no peak ({e}): {out:?}"));
    let peak = peak
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the spawner wrote `{peak}`"));
    (out, peak)
}
