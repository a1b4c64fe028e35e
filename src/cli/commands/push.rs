//! `gpuimg push IMAGE registry:HOST[:PORT]/REPO[:TAG] [--sbom FILE] [--ca FILE] [--plain-http]
//! [--verify] [--verbose] [--json]`: put an image gpuimg (or any tool) wrote as a layout or oci-archive into a
//! registry, exactly as `build -o registry:…` pushes a fresh one: the manifest's own bytes, so
//! the digest is the same; with `--sbom`, that SPDX document attached as its referrer.

use std::path::PathBuf;

use super::RegistryArgs;
use crate::cli::{print_stdout, CliError, Progress, Settings};
use gpuimg_build::inspect::Image;
use gpuimg_oci::reference::{ImageRef, RegistryRef, Tag, Transport};
use gpuimg_oci::registry::{self, Blob, BlobSource};
use gpuimg_store::cache::Cache;

/// The most bytes an SBOM given with `--sbom` may have.
const MAX_SBOM: u64 = 256 << 20;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image: DIR, oci:DIR[:TAG] or oci-archive:FILE[:TAG].
    pub image: String,
    /// Where to: registry:HOST[:PORT]/REPO[:TAG] or docker://HOST[:PORT]/REPO[:TAG] (the tag
    /// defaults to the image's).
    pub destination: String,
    /// Attach this SPDX JSON document to the pushed image as its referrer.
    #[arg(long, value_name = "FILE")]
    pub sbom: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Cache directory (mount hints are kept there; default as for `build`).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn exec(args: Args, settings: &Settings) -> Result<u8, CliError> {
    let src = ImageRef::parse(&args.image).map_err(|e| {
        CliError::msg(
            2,
            format!(
                "`{}` is not a valid image reference: {e}",
                args.image.escape_debug()
            ),
        )
    })?;
    let dest = RegistryRef::parse(&args.destination).map_err(|e| {
        CliError::msg(
            2,
            format!(
                "`{}` is not a registry destination: {e}",
                args.destination.escape_debug()
            ),
        )
    })?;
    let img =
        match src.transport {
            Transport::Layout => Image::layout(&src.path)?,
            Transport::Archive => Image::archive(&src.path)?,
            Transport::DockerArchive => return Err(CliError::msg(
                2,
                "`push` reads `oci:DIR` and `oci-archive:FILE`; a docker-archive is an output only",
            )),
        };
    let stored = gpuimg_build::inspect::stored(&img, src.tag.as_deref())?;
    let tag_text = dest
        .tag
        .clone()
        .or(stored.tag.clone())
        .unwrap_or_else(|| "latest".into());
    let tag = Tag::parse(&tag_text).map_err(|e| {
        CliError::msg(
            2,
            format!("the tag `{}` is not valid: {e}", tag_text.escape_debug()),
        )
    })?;
    let sbom = match &args.sbom {
        Some(p) => Some(read_sbom(p)?),
        None => None,
    };
    let conn = args.registry.connection(settings)?;
    let cache = Cache::open(&settings.cache_root(args.cache.as_deref()))?;
    let image = registry::Image {
        manifest: stored.manifest.clone(),
        media_type: stored.media_type.clone(),
        labels: stored.blobs.iter().map(|b| b.label.clone()).collect(),
        blobs: stored
            .blobs
            .iter()
            .map(|b| Blob {
                digest: b.digest,
                size: b.size,
                source: BlobSource::File {
                    path: b.file.clone(),
                    offset: b.offset,
                },
            })
            .collect(),
    };
    let mut progress = Progress::new(settings.quiet, args.json);
    let pushed = registry::push(
        &dest,
        tag.as_str(),
        &image,
        sbom.as_deref(),
        &conn,
        &cache,
        &mut progress,
    )?;
    drop(progress);
    if args.json {
        let v = serde_json::json!({
            "manifest_digest": pushed.digest,
            "push": pushed,
        });
        print_stdout(&format!("{v}\n"));
    } else if !settings.quiet {
        eprintln!(
            "pushed {} → {} ({} blobs uploaded, {} already there, {} mounted{})",
            pushed.digest,
            pushed.reference,
            pushed.blobs_uploaded,
            pushed.blobs_existing,
            pushed.blobs_mounted,
            if args.registry.verify {
                format!(", {} read back and checked", pushed.blobs_verified)
            } else {
                String::new()
            }
        );
    }
    Ok(0)
}

fn read_sbom(p: &std::path::Path) -> Result<Vec<u8>, CliError> {
    use std::io::Read;
    let bad = |why: String| CliError::msg(2, format!("`--sbom` `{}`: {why}", p.display()));
    let f = std::fs::File::open(p).map_err(|e| bad(e.to_string()))?;
    let mut bytes = Vec::new();
    f.take(MAX_SBOM + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(e.to_string()))?;
    if bytes.len() as u64 > MAX_SBOM {
        return Err(bad(format!("it is larger than {MAX_SBOM} bytes")));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("it is not JSON: {e}")))?;
    if v.get("spdxVersion").and_then(|s| s.as_str()).is_none() {
        return Err(bad(
            "it is not an SPDX JSON document (no `spdxVersion`)".into()
        ));
    }
    Ok(bytes)
}
