//! `gpuimg lock PROFILE`: resolve and write `<profile>.lock.json` beside the profile.
//! Keeps the packages of an existing lock that is still fresh (another stage fills them).

use std::path::PathBuf;

use super::resolve::outln;
use crate::catalog::Catalog;
use crate::cli::{CliError, Global};
use crate::lock::{self, Lock};
use crate::resolve::ResolveError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile.
    pub profile: PathBuf,
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
    if path.exists() {
        if let Ok(old) = lock::read(&path) {
            if lock::check_fresh(&profile, &old).is_ok() {
                new.packages = old.packages;
            }
        }
    }
    lock::write(&path, &new)?;
    if !global.quiet {
        outln!("wrote {}", path.display());
    }
    Ok(0)
}
