//! `gpuimg verify-host PROFILE|LOCK|EXPECT.json`: run the self-test's checks on this host.
//!
//! Which expectation: `ops::verify` (a profile resolved now, a lock's recorded resolution, or
//! an expectation file as it is). A node image's expectation (its `node` section) runs the
//! self-test's host checks (`gpuimg_selftest::run_host`) instead of the GPU checks.

use super::CatalogArgs;
use crate::cli::{CliError, Settings};
use gpuimg_build::profile::SelftestLevel;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile, or an expectation file (`expect.json`).
    pub profile: std::path::PathBuf,
    /// How much to check (default: the profile's `selftest.level`).
    #[arg(long, value_enum)]
    pub level: Option<LevelArg>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub catalog: CatalogArgs,
}

/// The accepted values of `--level`, mapped to [`SelftestLevel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LevelArg {
    /// Versions, health and a kernel on every GPU.
    Quick,
    /// Everything `quick` checks, plus bandwidth.
    Full,
}

pub fn exec(args: Args, settings: &Settings) -> Result<u8, CliError> {
    let (cache_root, trust, python) = (
        settings.cache_root(None),
        settings.trust(),
        settings.python(),
    );
    let reach = gpuimg_build::ops::known::Reach {
        cache_root: &cache_root,
        offline: false,
        trust: &trust,
        python: &python,
    };
    let expect = gpuimg_build::ops::verify::expectation(
        &args.profile,
        &settings.profile_env(),
        || args.catalog.load(settings),
        reach,
        &mut gpuimg_fetch::observe::Silent,
    )
    .map_err(CliError::from_ops)?;
    let level = match args.level {
        Some(LevelArg::Full) => SelftestLevel::Full,
        Some(LevelArg::Quick) => SelftestLevel::Quick,
        None => expect.level,
    };
    // A node image's expectation: the host checks, from this machine's files.
    let report = match &expect.node {
        Some(node) => gpuimg_selftest::run_host(node, std::path::Path::new("/")),
        None => gpuimg_selftest::run(&expect, level, &gpuimg_selftest::process_env()),
    };
    if let Some(path) = &args.report {
        fs_err::write(path, report.to_json())?;
    }
    if args.json {
        print!("{}", report.to_json());
    } else if !settings.quiet || report.verdict != gpuimg_selftest::Verdict::Pass {
        print!("{}", report.to_text());
    }
    Ok(report.verdict.exit_code())
}
