//! `gpuimg lock PROFILE`: resolve and write `<profile>.lock.json` beside the profile.
//! With an apt base it also resolves the package set (indexes fetched and verified).

use std::path::PathBuf;

use super::resolve::outln;
use super::CatalogArgs;
use crate::cache::Cache;
use crate::cli::{CliError, Global, Progress};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile.
    pub profile: PathBuf,
    /// Cache directory (default $GPUIMG_CACHE or the XDG cache dir).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Resolve packages from cached indexes alone.
    #[arg(long)]
    pub offline: bool,
    #[command(flatten)]
    pub catalog: CatalogArgs,
}

pub fn exec(args: Args, global: Global) -> Result<u8, CliError> {
    let profile = crate::profile::load(&args.profile)?;
    let catalog = args.catalog.load()?;
    let cache_root = args.cache.clone().unwrap_or_else(Cache::default_root);
    let mut progress = Progress::new(global.quiet);
    let locked =
        crate::ops::lock::lock(&profile, &catalog, &cache_root, args.offline, &mut progress)
            .map_err(CliError::from_ops)?;
    if !global.quiet {
        outln!("wrote {}", locked.path.display());
    }
    Ok(0)
}
