//! `gpuimg verify-host PROFILE|LOCK|EXPECT.json`: run the self-test's checks on this host.
//!
//! A profile is resolved against the catalog, a lock gives its recorded resolution; either way
//! the expectation is exactly the one an image built from it carries
//! (`build::expectation`). An expectation file is used as it is.

use std::path::{Path, PathBuf};

use crate::catalog::Catalog;
use crate::cli::{CliError, Global};
use crate::expect::Expectation;
use crate::lock;
use crate::profile::SelftestLevel;
use crate::resolve::ResolveError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile, or an expectation file (`expect.json`).
    pub profile: std::path::PathBuf,
    /// quick or full (default: the profile's `selftest.level`).
    #[arg(long, value_parser = ["quick", "full"])]
    pub level: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<std::path::PathBuf>,
    /// Catalog overlay files (added after the config directory's catalog.d).
    #[arg(long = "catalog", value_name = "FILE")]
    pub catalog: Vec<PathBuf>,
}

pub fn exec(args: Args, global: Global) -> Result<u8, CliError> {
    let expect = expectation(&args.profile, &args.catalog)?;
    let level = match args.level.as_deref() {
        Some("full") => SelftestLevel::Full,
        Some(_) => SelftestLevel::Quick,
        None => expect.level,
    };
    let report = crate::selftest::run(&expect, level, &crate::selftest::process_env());
    if let Some(path) = &args.report {
        fs_err::write(path, report.to_json())?;
    }
    if args.json {
        print!("{}", report.to_json());
    } else if !global.quiet || report.verdict != crate::selftest::Verdict::Pass {
        print!("{}", report.to_text());
    }
    Ok(report.verdict.exit_code())
}

fn expectation(path: &Path, overlays: &[PathBuf]) -> Result<Expectation, CliError> {
    let name = path.to_string_lossy();
    if let Some(stem) = name.strip_suffix(".lock.json") {
        // A lock: its resolution, with the selftest settings of the profile beside it.
        let lock = lock::read(path)?;
        let profile = ["yaml", "yml"]
            .iter()
            .map(|ext| PathBuf::from(format!("{stem}.{ext}")))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                CliError::msg(
                    2,
                    format!("No profile beside the lock `{name}` (`{stem}.yaml`)"),
                )
            })?;
        let profile = crate::profile::load(&profile)?;
        lock::check_fresh(&profile, &lock)?;
        let e = crate::build::expectation(&profile, lock.resolution.as_ref());
        e.validate()?;
        return Ok(e);
    }
    if name.ends_with(".json") {
        return Ok(Expectation::load(path)?);
    }
    let profile = crate::profile::load(path)?;
    let catalog = Catalog::load(overlays)?;
    let resolution = match crate::resolve::resolve(&profile, &catalog) {
        Ok(r) => r,
        Err(ResolveError::Incompatible(e)) => {
            return Err(CliError::msg(1, format!("no compatible combination: {e}")));
        }
        Err(e) => return Err(CliError::bad_input(&e)),
    };
    let e = crate::build::expectation(&profile, Some(&resolution));
    e.validate()?;
    Ok(e)
}
