//! `gpuimg-entry`: what both binaries' `main` shares: the panic guard (`guarded`: a panic
//! prints one line, exit 3), the clap parse with gpuimg's exit codes (`parse_args`: help/version
//! 0, bad usage 2), the test suite's panic trigger, and `error_line` (an error as one line).
//! Depends on clap alone, so the self-test can use it without linking the builder; must never
//! know either binary's commands or errors.

pub mod error_line;

use std::process::ExitCode;

/// Run `f`; a panic prints one line (`error_line::panic_line`) and exits 3, never a trace.
pub fn guarded(
    who: &'static str,
    f: impl FnOnce() -> ExitCode + std::panic::UnwindSafe,
) -> ExitCode {
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("{}", crate::error_line::panic_line(who, info));
    }));
    std::panic::catch_unwind(|| {
        debug_panic_trigger();
        f()
    })
    .unwrap_or(ExitCode::from(3))
}

/// Parse the command line; on `--help`/`--version` print and exit 0, on bad usage print clap's
/// message and exit 2.
pub fn parse_args<T: clap::Parser>() -> Result<T, ExitCode> {
    T::try_parse().map_err(|e| {
        use clap::error::ErrorKind;
        let code = match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
            _ => 2,
        };
        let _ = e.print();
        ExitCode::from(code)
    })
}

/// Debug builds only (the test suite's): `GPUIMG_DEBUG_PANIC=1` panics at once, so the tests
/// can see what a panic looks like from outside. Release builds ignore it.
fn debug_panic_trigger() {
    if cfg!(debug_assertions) && std::env::var_os("GPUIMG_DEBUG_PANIC").is_some_and(|v| v == "1") {
        panic!("GPUIMG_DEBUG_PANIC is set");
    }
}
