//! `gpuimg lock PROFILE`: resolve and write `<profile>.lock.json` beside the profile.
//! With an apt base it also resolves the package set (indexes fetched and verified).
//! `--export pylock` also writes the Python packages as a PEP 751 `pylock.toml` beside it.
//! `--json` prints `{"lock": PATH, "artifacts": N, "components": {...}, "inputs_digest": D}`
//! (and `"exported": PATH` with `--export`).

use std::path::PathBuf;

use serde_json::json;

use super::resolve::outln;
use super::CatalogArgs;
use crate::cli::{CliError, Progress, Settings};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile.
    pub profile: PathBuf,
    /// Cache directory (default $GPUIMG_CACHE, else $XDG_CACHE_HOME/gpuimg, else
    /// ~/.cache/gpuimg).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Resolve packages from cached indexes alone.
    #[arg(long)]
    pub offline: bool,
    #[command(flatten)]
    pub catalog: CatalogArgs,
    /// Also write the lock in another format beside the profile: `pylock` writes the Python
    /// packages as a PEP 751 `pylock.toml`, each wheel with its URL on the index configured now.
    #[arg(long, value_name = "FORMAT")]
    pub export: Option<ExportFormat>,
    /// Only this one of the profile's platforms (`platforms:`).
    #[arg(long, value_name = "OS/ARCH", value_parser = super::parse_platform)]
    pub platform: Option<gpuimg_oci::image::Platform>,
    /// Print one JSON object: the lock's path, its artifact count, the resolved components
    /// and the digest of the profile keys it was made from.
    #[arg(long)]
    pub json: bool,
}

/// The formats `--export` writes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExportFormat {
    /// PEP 751 `pylock.toml`.
    Pylock,
}

pub fn exec(args: Args, settings: &Settings) -> Result<u8, CliError> {
    let profile = settings.load_profile(&args.profile)?;
    let catalog = args.catalog.load(settings)?;
    let cache_root = settings.cache_root(args.cache.as_deref());
    let mut progress = Progress::new(settings.quiet, args.json);
    let profile =
        settings.host_from(profile, &catalog, &cache_root, args.offline, &mut progress)?;
    let locked = gpuimg_build::ops::lock::lock(
        &profile,
        args.platform.as_ref(),
        &catalog,
        &cache_root,
        args.offline,
        &settings.trust(),
        &settings.python(),
        args.export
            .map(|ExportFormat::Pylock| gpuimg_build::ops::lock::Export::Pylock),
        &mut progress,
    )
    .map_err(CliError::from_ops)?;
    if args.json {
        outln!("{}", gpuimg_build::lock::canonical_json(&summary(&locked)));
    } else if !settings.quiet {
        outln!("wrote {}", locked.path.display());
        if let Some(p) = &locked.exported {
            outln!("wrote {}", p.display());
        }
    }
    Ok(0)
}

/// What `lock --json` prints.
fn summary(locked: &gpuimg_build::ops::lock::Locked) -> serde_json::Value {
    let lock = &locked.lock;
    let components: serde_json::Map<String, serde_json::Value> = lock
        .resolution
        .iter()
        .flat_map(|r| r.components.iter())
        .map(|(c, v)| (c.to_string(), json!(v.to_string())))
        .collect();
    let mut out = json!({
        "lock": locked.path.display().to_string(),
        "artifacts": lock.artifacts.len() + lock.platforms.values().map(|p| p.artifacts.len()).sum::<usize>(),
        "components": components,
        "inputs_digest": lock.inputs.as_ref().map(|i| i.digest.to_string()),
    });
    if !lock.platforms.is_empty() {
        let parts: serde_json::Map<String, serde_json::Value> = lock
            .platforms
            .iter()
            .map(|(p, l)| {
                let components: serde_json::Map<String, serde_json::Value> = l
                    .resolution
                    .iter()
                    .flat_map(|r| r.components.iter())
                    .map(|(c, v)| (c.to_string(), json!(v.to_string())))
                    .collect();
                (
                    p.clone(),
                    json!({"artifacts": l.artifacts.len(), "components": components}),
                )
            })
            .collect();
        out["platforms"] = json!(parts);
    }
    if let Some(p) = &locked.exported {
        out["exported"] = json!(p.display().to_string());
    }
    out
}
