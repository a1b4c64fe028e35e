//! The command line: clap types, settings, output rendering and exit codes.
//!
//! The only place of `gpuimg` that knows about clap types, terminals and progress bars (the
//! self-test has its own `selftest::cli`; `entry` parses for both); it maps errors to their
//! exit codes, which the error types choose (`OpsError::exit_code`). Each command
//! lives in `commands/<name>.rs` as a short `exec` calling stage APIs; `settings.rs` reads the
//! environment once and merges it with the flags (its module doc has the precedence table).
//! `-q` is the same in every command: on success nothing is printed but `--json` output; an
//! answer of "no" (exit 1) still says why, and errors are always printed.
//! Exit codes: 0 ok, 1 an answer of "no" (incompatible stack, a failed check), 2 bad input,
//! usage or I/O failure, 3 internal error (a panic too: one line, never a stack trace), and for
//! `verify-host` 4 = no GPU or no driver.

mod commands;
mod progress;
mod report;
pub mod settings;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

pub use progress::Progress;
pub use report::CliError;
pub use settings::{Env, Settings};

#[derive(Debug, Parser)]
#[command(
    name = "gpuimg",
    version,
    about = "Minimal, reproducible OCI images for GPU machines"
)]
struct Cli {
    /// On success print only --json output (a "no" answer and errors still print).
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build an OCI image from a profile.
    Build(commands::build::Args),
    /// Show an image's tag, digest, config and layers (of an image index: each platform's).
    Inspect(commands::inspect::Args),
    /// Push an image on disk (a layout or an oci-archive) to a registry.
    Push(commands::push::Args),
    /// Resolve the profile's stack against the catalog.
    Resolve(commands::resolve::Args),
    /// Write the lock file beside the profile.
    Lock(commands::lock::Args),
    /// Query the compatibility catalog.
    #[command(subcommand)]
    Catalog(commands::catalog::Command),
    /// Run the self-test checks for a profile or lock directly on this host.
    VerifyHost(commands::verify_host::Args),
    /// Check the cache in full (`verify`) or remove unreferenced blobs and, by policy, downloads
    /// (`prune`).
    #[command(subcommand)]
    Cache(commands::cache::Command),
    /// List or prune the device code (cubins, PTX) in a CUDA shared object.
    #[command(subcommand)]
    DeviceCode(commands::device_code::Command),
    /// Print a shell completion script on stdout.
    ///
    /// For example: `gpuimg completions bash > /etc/bash_completion.d/gpuimg`.
    Completions(commands::completions::Args),
}

/// Run `gpuimg`: a panic prints one line and exits 3 (internal error), never a stack trace.
pub fn main() -> ExitCode {
    gpuimg_entry::guarded("gpuimg", run)
}

fn run() -> ExitCode {
    let cli = match gpuimg_entry::parse_args::<Cli>() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let s = &Settings::new(cli.quiet, Env::from_process());
    let result = match cli.command {
        Command::Build(a) => commands::build::exec(a, s),
        Command::Inspect(a) => commands::inspect::exec(a, s),
        Command::Push(a) => commands::push::exec(a, s),
        Command::Resolve(a) => commands::resolve::exec(a, s),
        Command::Lock(a) => commands::lock::exec(a, s),
        Command::Catalog(c) => commands::catalog::exec(c, s),
        Command::VerifyHost(a) => commands::verify_host::exec(a, s),
        Command::DeviceCode(c) => commands::device_code::exec(c, s),
        Command::Cache(c) => commands::cache::exec(c, s),
        Command::Completions(a) => commands::completions::exec(a, Cli::command(), s),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            e.render();
            ExitCode::from(e.code)
        }
    }
}

/// A command's text result on stdout, unless `-q` (a closed pipe is not an error).
pub fn print_result(settings: &Settings, s: &str) {
    if !settings.quiet {
        print_stdout(s);
    }
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
pub fn print_stdout(s: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}
