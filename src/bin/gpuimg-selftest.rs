//! `gpuimg-selftest`: the boot-time GPU self-test baked into every image (thin main).
//!
//! Everything lives in `gpuimg::selftest`; this file only installs the panic backstop:
//! a panic prints one line and exits 3, never a stack trace.

use std::process::ExitCode;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!(
            "{}",
            gpuimg::error_line::panic_line("gpuimg-selftest", info)
        );
    }));
    std::panic::catch_unwind(gpuimg::selftest::main).unwrap_or(ExitCode::from(3))
}
