//! `gpuimg lock PROFILE`: resolve and write `<profile>.lock.json` beside the profile.
//! With an apt base it also resolves the package set (indexes fetched and verified).
//! `--json` prints `{"lock": PATH, "artifacts": N, "components": {...}, "inputs_digest": D}`.

use std::path::PathBuf;

use serde_json::json;

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
    /// Print one JSON object: the lock's path, its artifact count, the resolved components
    /// and the digest of the profile keys it was made from.
    #[arg(long)]
    pub json: bool,
}

pub fn exec(args: Args, global: Global) -> Result<u8, CliError> {
    let profile = crate::profile::load(&args.profile)?;
    let catalog = args.catalog.load()?;
    let cache_root = args.cache.clone().unwrap_or_else(Cache::default_root);
    let mut progress = Progress::new(global.quiet || args.json);
    let locked =
        crate::ops::lock::lock(&profile, &catalog, &cache_root, args.offline, &mut progress)
            .map_err(CliError::from_ops)?;
    if args.json {
        outln!("{}", crate::lock::canonical_json(&summary(&locked)));
    } else if !global.quiet {
        outln!("wrote {}", locked.path.display());
    }
    Ok(0)
}

/// What `lock --json` prints.
fn summary(locked: &crate::ops::lock::Locked) -> serde_json::Value {
    let lock = &locked.lock;
    let components: serde_json::Map<String, serde_json::Value> = lock
        .resolution
        .iter()
        .flat_map(|r| r.components.iter())
        .map(|(c, v)| (c.to_string(), json!(v.to_string())))
        .collect();
    json!({
        "lock": locked.path.display().to_string(),
        "artifacts": lock.artifacts.len(),
        "components": components,
        "inputs_digest": lock.inputs.as_ref().map(|i| i.digest.to_string()),
    })
}
