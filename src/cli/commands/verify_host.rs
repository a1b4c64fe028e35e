//! `gpuimg verify-host PROFILE|EXPECT.json`: run the self-test's checks directly on this host.
//!
//! Builds the expectation from the profile's `host`, `stack` and `selftest` sections (no image,
//! no resolver: catalog-derived facts such as peak bandwidth are absent), or reads an
//! expectation file, then runs the same probes and checks as `gpuimg-selftest`.

use std::path::Path;

use crate::cli::{CliError, Global};
use crate::expect::{Expectation, HostFacts};
use crate::profile::{CompatMode, Profile, SelftestLevel};

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
}

pub fn exec(args: Args, global: Global) -> Result<u8, CliError> {
    let expect = expectation(&args.profile)?;
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

fn expectation(path: &Path) -> Result<Expectation, CliError> {
    let name = path.to_string_lossy();
    if name.ends_with(".lock.json") {
        return Err(CliError::msg(
            2,
            format!("`{name}` is a lock file; it carries no host facts yet"),
        )
        .with_hint("pass the profile the lock was written for"));
    }
    if name.ends_with(".json") {
        return Ok(Expectation::load(path)?);
    }
    let profile = crate::profile::load(path)?;
    let e = Expectation::new(host_facts(&profile), &profile.selftest);
    e.validate()?;
    Ok(e)
}

/// Host facts straight from the profile (what the resolver would refine).
pub fn host_facts(p: &Profile) -> HostFacts {
    let (mut gpus, mut ccs) = (Vec::new(), Vec::new());
    for g in &p.host.gpus {
        let g = g.value.trim().to_string();
        let is_cc = g.contains('.') && g.chars().all(|c| c.is_ascii_digit() || c == '.');
        if is_cc {
            ccs.push(g);
        } else {
            gpus.push(g);
        }
    }
    // Driver floor for CUDA: strict needs the image's CUDA itself; minor needs the same major
    // (CUDA minor-version compatibility); forward relies on cuda-compat, so no floor.
    let cuda = p.stack.cuda.as_ref().map(|c| c.value.trim().to_string());
    let cuda_floor = cuda
        .filter(|c| c.chars().all(|ch| ch.is_ascii_digit() || ch == '.') && !c.is_empty())
        .and_then(|c| match p.compat {
            CompatMode::Strict => Some(c),
            CompatMode::Minor => c.split('.').next().map(|m| format!("{m}.0")),
            CompatMode::Forward => None,
        });
    HostFacts {
        image: Some(p.name.clone()),
        driver_range: p.host.driver.as_ref().map(|d| d.value.clone()),
        kernel_range: p.host.kernel.as_ref().map(|k| k.value.clone()),
        module: p.host.kernel_module,
        cuda_driver_floor: cuda_floor,
        gpus,
        compute_capabilities: ccs,
        nvidia_require: p
            .config
            .env
            .iter()
            .filter(|(k, _)| {
                k.starts_with("NVIDIA_REQUIRE_")
                    || *k == "NVIDIA_DISABLE_REQUIRE"
                    || *k == "CUDA_VERSION"
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ..HostFacts::default()
    }
}
