//! `gpuimg lock PROFILE`: resolve and write `<profile>.lock.json` beside the profile.
//! With an apt base it also resolves the package set (indexes fetched and verified).

use std::path::PathBuf;

use super::resolve::outln;
use crate::cache::Cache;
use crate::catalog::Catalog;
use crate::cli::{CliError, Global, Progress};
use crate::lock::{self, Lock};
use crate::profile::Base;
use crate::resolve::ResolveError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile.
    pub profile: PathBuf,
    /// Cache directory (default $GPUIMG_CACHE or the XDG cache dir).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Resolve packages from cached indexes alone.
    #[arg(long)]
    pub offline: bool,
    /// Catalog overlay files (added after the config directory's catalog.d).
    #[arg(long = "catalog", value_name = "FILE")]
    pub catalog: Vec<PathBuf>,
}

pub fn exec(args: Args, global: Global) -> Result<u8, CliError> {
    let profile = crate::profile::load(&args.profile)?;
    let catalog = Catalog::load(&args.catalog)?;
    let resolution = match crate::resolve::resolve(&profile, &catalog) {
        Ok(r) => r,
        Err(ResolveError::Incompatible(e)) => {
            outln!("no: {e}");
            return Ok(1);
        }
        Err(e) => return Err(CliError::bad_input(&e)),
    };
    let path = lock::lock_path(&profile);
    let mut new = Lock::new(&profile, resolution);
    if let Base::Apt(spec) = &profile.base {
        let cache_root = args.cache.clone().unwrap_or_else(Cache::default_root);
        let mut progress = Progress::new(global.quiet);
        let debs = crate::sources::apt::resolve(
            spec,
            &profile.platform,
            &profile.dir,
            &crate::build::apt_options(&cache_root, args.offline),
            &mut progress,
        )?;
        new.set_debs(debs);
    }
    lock::write(&path, &new)?;
    if !global.quiet {
        outln!("wrote {}", path.display());
    }
    Ok(0)
}
