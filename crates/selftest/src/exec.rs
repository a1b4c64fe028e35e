//! The hand-off: replace this process with the wrapped command (`-- COMMAND ...`).
//!
//! `exec` keeps the PID, so signals sent to the container's PID 1 reach the workload and its
//! exit status is the container's. Returns only when the exec itself failed.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Why the command could not be started, with the shell's exit code for it (127, 126).
#[derive(Debug, thiserror::Error)]
#[error("Failed to run `{program}`")]
pub struct ExecError {
    pub program: String,
    pub code: u8,
    #[source]
    pub source: std::io::Error,
}

/// Replace the current process with `argv` (looked up in `PATH`). Returns only on failure.
pub fn exec(argv: &[OsString]) -> ExecError {
    let Some((program, args)) = argv.split_first() else {
        return ExecError {
            program: String::new(),
            code: 2,
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command"),
        };
    };
    let source = Command::new(program).args(args).exec();
    let code = if source.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    ExecError {
        program: program.to_string_lossy().into_owned(),
        code,
        source,
    }
}
