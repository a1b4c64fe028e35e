//! The command line: clap types, settings, output rendering and exit codes.
//!
//! The only place that knows about clap, terminals, progress bars and exit codes. Each command
//! lives in `commands/<name>.rs` as a short `exec` calling stage APIs.
//! Exit codes: 0 ok, 1 an answer of "no" (incompatible stack, a failed check), 2 bad input,
//! usage or I/O failure, 3 internal error (a panic too: one line, never a stack trace), and for
//! `verify-host` 4 = no GPU or no driver.

mod commands;
mod progress;
mod report;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

pub use progress::Progress;
pub use report::CliError;

#[derive(Debug, Parser)]
#[command(
    name = "gpuimg",
    version,
    about = "Minimal, reproducible OCI images for GPU machines"
)]
struct Cli {
    /// Print nothing but errors (and --json output).
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build an OCI image from a profile.
    Build(commands::build::Args),
    /// Show an image's tag, digest, config and layers.
    Inspect(commands::inspect::Args),
    /// Resolve the profile's stack against the catalog.
    Resolve(commands::resolve::Args),
    /// Write the lock file beside the profile.
    Lock(commands::lock::Args),
    /// Query the compatibility catalog.
    #[command(subcommand)]
    Catalog(commands::catalog::Command),
    /// Run the self-test checks for a profile or lock directly on this host.
    VerifyHost(commands::verify_host::Args),
    /// Check the cache in full (`verify`) or remove unreferenced blobs (`prune`).
    #[command(subcommand)]
    Cache(commands::cache::Command),
    /// Print a shell completion script on stdout.
    ///
    /// For example: `gpuimg completions bash > /etc/bash_completion.d/gpuimg`.
    Completions(commands::completions::Args),
}

/// Global settings every command sees.
#[derive(Debug, Clone, Copy)]
pub struct Global {
    pub quiet: bool,
}

/// Run `gpuimg`: a panic prints one line and exits 3 (internal error), never a stack trace.
pub fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("{}", crate::error_line::panic_line("gpuimg", info));
    }));
    std::panic::catch_unwind(run).unwrap_or(ExitCode::from(3))
}

fn run() -> ExitCode {
    debug_panic_trigger();
    let cli = match parse_args::<Cli>() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let global = Global { quiet: cli.quiet };
    let result = match cli.command {
        Command::Build(a) => commands::build::exec(a, global),
        Command::Inspect(a) => commands::inspect::exec(a, global),
        Command::Resolve(a) => commands::resolve::exec(a, global),
        Command::Lock(a) => commands::lock::exec(a, global),
        Command::Catalog(c) => commands::catalog::exec(c, global),
        Command::VerifyHost(a) => commands::verify_host::exec(a, global),
        Command::Cache(c) => commands::cache::exec(c, global),
        Command::Completions(a) => commands::completions::exec(a, Cli::command(), global),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            e.render();
            ExitCode::from(e.code)
        }
    }
}

/// Debug builds only (the test suite's): `GPUIMG_DEBUG_PANIC=1` panics at once, so the tests
/// can see what a panic looks like from outside. Release builds ignore it.
pub fn debug_panic_trigger() {
    if cfg!(debug_assertions) && std::env::var_os("GPUIMG_DEBUG_PANIC").is_some_and(|v| v == "1") {
        panic!("GPUIMG_DEBUG_PANIC is set");
    }
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
pub fn print_stdout(s: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

/// Parse the command line; on `--help`/`--version` print and exit 0, on bad usage print clap's
/// message and exit 2. Shared by both binaries.
pub fn parse_args<T: Parser>() -> Result<T, ExitCode> {
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
