//! `gpuimg build PROFILE [-o TARGET] [--tag T] [--compression gzip|zstd] [--json]`.

use std::path::PathBuf;

use serde_json::json;

use crate::build::{self, BuildOptions};
use crate::cache::Cache;
use crate::cli::{CliError, Global, Progress};
use crate::export::Target;
use crate::layer::Compression;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile (YAML).
    pub profile: PathBuf,
    /// Output: DIR, oci:DIR or oci-archive:FILE (default out/<name>).
    #[arg(short, long)]
    pub output: Option<String>,
    /// Tag recorded as org.opencontainers.image.ref.name (default `latest`).
    #[arg(long, default_value = "latest")]
    pub tag: String,
    /// Layer compression.
    #[arg(long, default_value = "gzip")]
    pub compression: Compression,
    /// Cache directory (default $GPUIMG_CACHE or the XDG cache dir).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}

/// SOURCE_DATE_EPOCH, default 0.
pub fn source_date_epoch() -> Result<u64, CliError> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Err(_) => Ok(0),
        Ok(s) if s.is_empty() => Ok(0),
        Ok(s) => s.trim().parse().map_err(|_| {
            CliError::msg(
                2,
                format!("SOURCE_DATE_EPOCH `{s}` is not a whole number of seconds"),
            )
        }),
    }
}

pub fn exec(args: Args, global: Global) -> Result<u8, CliError> {
    let epoch = source_date_epoch()?;
    let profile = crate::profile::load(&args.profile)?;
    let target = match &args.output {
        Some(o) => Target::parse(o),
        None => Target::Layout(PathBuf::from("out").join(&profile.name)),
    };
    let opts = BuildOptions {
        target,
        tag: args.tag.clone(),
        compression: args.compression,
        epoch,
        cache_root: args.cache.clone().unwrap_or_else(Cache::default_root),
    };
    let mut progress = Progress::new(global.quiet || args.json);
    let out = build::build(&profile, &opts, &mut progress)?;
    if args.json {
        let layers: Vec<_> = out
            .layers
            .iter()
            .map(|l| {
                json!({
                    "component": l.component,
                    "digest": l.blob.digest,
                    "size": l.blob.size,
                    "media_type": l.blob.compression.media_type(),
                    "diff_id": l.blob.diff_id,
                    "uncompressed_size": l.blob.uncompressed_size,
                })
            })
            .collect();
        let v = json!({
            "manifest_digest": out.manifest_digest,
            "config_digest": out.config_digest,
            "layers": layers,
            "output": out.output,
            "tag": out.tag,
            "cached_layers": out.cached_layers,
        });
        crate::cli::print_stdout(&format!("{v}\n"));
    } else if !global.quiet {
        eprintln!(
            "built {} ({} layers) → {}:{}",
            out.manifest_digest,
            out.layers.len(),
            out.output,
            out.tag
        );
    }
    Ok(0)
}
