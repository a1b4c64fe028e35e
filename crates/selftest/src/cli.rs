//! The `gpuimg-selftest` command line: flags, expectation loading, output, exit code, hand-off.
//!
//! This binary's CLI layer (the only selftest file that knows clap and exit codes).
//! Output goes to stdout, or to stderr when a command is wrapped (stdout is the workload's).
//! Exit codes: 0 pass, 1 a check failed, 2 bad input or usage (or the report could not be
//! written), 3 internal error, 4 no GPU or no driver — so a script can tell a host without a
//! GPU from a misspelled expectation file. `--host` runs the host checks of a node image's
//! expectation instead (same report, same codes; never 4: it makes no GPU call).

use gpuimg_entry::error_line::chain;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use super::Verdict;
use gpuimg_expect::{Expectation, OnFailure, SelftestLevel, DEFAULT_PATH};

#[derive(Debug, Parser)]
#[command(
    name = "gpuimg-selftest",
    version,
    about = "Check that this host's kernel, NVIDIA driver, CUDA and GPUs match what the image was built for"
)]
struct Args {
    /// The expectation file (default /etc/gpuimg/expect.json; absent = health checks only).
    #[arg(long, value_name = "FILE")]
    expect: Option<PathBuf>,
    /// quick: versions, health and a kernel on every GPU; full: adds bandwidth.
    #[arg(long, value_parser = ["quick", "full"])]
    level: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Check what a node needs at boot against the expectation's `node` section, from the
    /// node's files: running kernel, module files' vermagic, module and library versions, GSP
    /// firmware, module flavour, signer. No GPU call.
    #[arg(long, conflicts_with_all = ["level", "command"])]
    host: bool,
    /// With --host: read the node's files (and its default expectation) under DIR (default /).
    #[arg(long, value_name = "DIR", requires = "host")]
    root: Option<PathBuf>,
    /// The command to exec after a pass (or after a failure with `on-failure: warn`).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// Run the self-test as the `gpuimg-selftest` binary.
pub fn main() -> ExitCode {
    let args = match gpuimg_entry::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    if args.host {
        return host(&args);
    }
    let expect = match load_expectation(args.expect.as_deref()) {
        Ok(e) => e,
        Err(msg) => {
            eprintln!("error: {msg}");
            return ExitCode::from(2);
        }
    };
    let level = match args.level.as_deref() {
        Some("full") => SelftestLevel::Full,
        Some(_) => SelftestLevel::Quick,
        None => expect.level,
    };
    let report = super::run(&expect, level, &super::process_env());
    let wraps = !args.command.is_empty();
    let mut code = report.verdict.exit_code();
    if let Some(path) = &args.report {
        if let Err(e) = fs_err::write(path, report.to_json()) {
            eprintln!("error: {}", chain(&e));
            code = code.max(2);
        }
    }
    let text = if args.json {
        report.to_json()
    } else if report.verdict == Verdict::NoGpu {
        String::new()
    } else {
        report.to_text()
    };
    if report.verdict == Verdict::NoGpu {
        let why = report.message.as_deref().unwrap_or("No NVIDIA GPU");
        eprintln!("gpuimg-selftest: {why}");
    }
    if wraps {
        let _ = std::io::stderr().write_all(text.as_bytes());
    } else {
        // A closed stdout (`| head`) is not an error.
        let _ = std::io::stdout().write_all(text.as_bytes());
    }
    if !wraps {
        return ExitCode::from(code);
    }
    let go = report.verdict == Verdict::Pass || expect.on_failure == OnFailure::Warn;
    if !go {
        eprintln!(
            "gpuimg-selftest: not starting `{}` (self-test {}; on-failure: abort)",
            args.command[0].to_string_lossy(),
            report.verdict.as_str()
        );
        return ExitCode::from(code);
    }
    if report.verdict != Verdict::Pass {
        eprintln!(
            "gpuimg-selftest: warning: self-test {}; starting the command anyway (on-failure: warn)",
            report.verdict.as_str()
        );
    }
    let err = super::exec(&args.command);
    eprintln!("error: {}", chain(&err));
    ExitCode::from(err.code)
}

/// `--host`: the host checks of the expectation's `node` section, on the node under `--root`.
fn host(args: &Args) -> ExitCode {
    let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    let path = args
        .expect
        .clone()
        .unwrap_or_else(|| root.join(DEFAULT_PATH.trim_start_matches('/')));
    let node = match Expectation::load(&path) {
        Ok(Expectation { node: Some(n), .. }) => n,
        Ok(_) => {
            eprintln!(
                "error: `{}` has no `node` section: --host checks a node image's expectation",
                path.display()
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {}", chain(&e));
            return ExitCode::from(2);
        }
    };
    let report = super::run_host(&node, &root);
    let mut code = report.verdict.exit_code();
    if let Some(path) = &args.report {
        if let Err(e) = fs_err::write(path, report.to_json()) {
            eprintln!("error: {}", chain(&e));
            code = code.max(2);
        }
    }
    let text = if args.json {
        report.to_json()
    } else {
        report.to_text()
    };
    // A closed stdout (`| head`) is not an error.
    let _ = std::io::stdout().write_all(text.as_bytes());
    ExitCode::from(code)
}

/// The expectation to check against: an explicit file must exist and be valid; the default
/// path may be absent (then only health and functional checks run).
pub fn load_expectation(explicit: Option<&Path>) -> Result<Expectation, String> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let p = PathBuf::from(DEFAULT_PATH);
            if !p.exists() {
                return Ok(Expectation::default());
            }
            p
        }
    };
    Expectation::load(&path).map_err(|e| chain(&e))
}
