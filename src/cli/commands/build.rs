//! `gpuimg build PROFILE [-o TARGET] [--tag T] [--force] [--compression gzip|zstd] [--json]`.

use std::path::PathBuf;

use serde_json::json;

use super::CatalogArgs;
use crate::cache::Cache;
use crate::cli::{CliError, Global, Progress};
use crate::driver::BuildOptions;
use crate::export::Target;
use crate::layer::Compression;
use crate::ops::{self, build::BuildRequest, settle::Settle};
use crate::reference::Tag;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile (YAML).
    pub profile: PathBuf,
    /// Output: DIR, oci:DIR or oci-archive:FILE (default out/<name>).
    #[arg(short, long, value_name = "TARGET")]
    pub output: Option<String>,
    /// Tag recorded as org.opencontainers.image.ref.name (default `latest`):
    /// `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
    #[arg(long, default_value = "latest")]
    pub tag: String,
    /// Replace whatever is at the output path; without it only an empty directory or a
    /// previous build of the same tag is replaced.
    #[arg(long)]
    pub force: bool,
    /// Layer compression.
    #[arg(long, value_enum, default_value_t = CompressionArg::Gzip)]
    pub compression: CompressionArg,
    /// Cache directory (default $GPUIMG_CACHE or the XDG cache dir).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Build exactly what the lock beside the profile records; refuse a stale lock.
    #[arg(long)]
    pub locked: bool,
    /// Build from the cache alone; fail naming what is missing.
    #[arg(long)]
    pub offline: bool,
    #[command(flatten)]
    pub catalog: CatalogArgs,
    /// The gpuimg-selftest binary to bake in (default: beside this gpuimg).
    #[arg(long, value_name = "FILE")]
    pub selftest_binary: Option<PathBuf>,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The accepted values of `--compression`, mapped to [`Compression`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompressionArg {
    /// Read by every OCI runtime.
    Gzip,
    /// Smaller and faster to unpack; the runtime must read zstd layers.
    Zstd,
}

impl From<CompressionArg> for Compression {
    fn from(c: CompressionArg) -> Self {
        match c {
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Zstd => Compression::Zstd,
        }
    }
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
    let tag = Tag::parse(&args.tag).map_err(|e| {
        CliError::msg(
            2,
            format!(
                "`--tag` `{}` is not a valid tag: {e}",
                args.tag.escape_debug()
            ),
        )
    })?;
    let profile = crate::profile::load(&args.profile)?;
    let target = match &args.output {
        Some(o) => Target::parse(o),
        None => Target::Layout(PathBuf::from("out").join(profile.name.as_path())),
    };
    let catalog = args.catalog.load()?;
    let req = BuildRequest {
        from: if args.locked {
            Settle::Locked
        } else {
            Settle::Resolve
        },
        selftest_binary: args.selftest_binary.clone(),
        options: BuildOptions {
            target,
            tag,
            force: args.force,
            compression: args.compression.into(),
            epoch,
            cache_root: args.cache.clone().unwrap_or_else(Cache::default_root),
            offline: args.offline,
        },
    };
    let mut progress = Progress::new(global.quiet || args.json);
    let out =
        ops::build::build(&profile, &catalog, &req, &mut progress).map_err(CliError::from_ops)?;
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
            "tag": out.tag.as_str(),
            "cached_layers": out.cached_layers,
            "packages": out.packages.len(),
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
