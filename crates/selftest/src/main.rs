//! `gpuimg-selftest`: the boot-time GPU self-test baked into every image (thin main).
//!
//! Everything lives in the library (`gpuimg_selftest::main`); this file only installs the panic
//! backstop: a panic prints one line and exits 3, never a stack trace.

use std::process::ExitCode;

fn main() -> ExitCode {
    gpuimg_entry::guarded("gpuimg-selftest", gpuimg_selftest::main)
}
