//! `gpuimg push IMAGE registry:HOST[:PORT]/REPO[:TAG] [--sbom [PLATFORM=]FILE]… [--ca FILE]
//! [--plain-http] [--verify] [--verbose] [--json]`: put an image gpuimg (or any tool) wrote as a
//! layout or oci-archive into a registry, exactly as `build -o registry:…` pushes a fresh one:
//! the manifest's own bytes, so the digest is the same; with `--sbom`, that SPDX document
//! attached as its referrer. A tag that names an image index pushes the index and every
//! manifest it lists (`registry::push_index`); each `--sbom PLATFORM=FILE` goes to the manifest
//! of that platform. Refuses an SBOM it cannot place (a platform the index does not list, or
//! lists twice) before anything is sent.

use std::path::PathBuf;

use super::RegistryArgs;
use crate::cli::{print_stdout, CliError, Progress, Settings};
use gpuimg_build::inspect::{Image, Stored, StoredIndex, Tagged};
use gpuimg_oci::reference::{ImageRef, RegistryRef, Tag, Transport};
use gpuimg_oci::registry::{self, Blob, BlobSource, IndexEntry, IndexImage};
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
    /// Attach this SPDX JSON document to the pushed image as its referrer; for an image index,
    /// PLATFORM=FILE attaches it to that platform's manifest (repeatable)
    #[arg(long, value_name = "[PLATFORM=]FILE")]
    pub sbom: Vec<PathBuf>,
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
    let tagged = gpuimg_build::inspect::stored_tagged(&img, src.tag.as_deref())?;
    let image_tag = match &tagged {
        Tagged::Image(s) => s.tag.clone(),
        Tagged::Index(i) => i.tag.clone(),
    };
    let tag_text = dest
        .tag
        .clone()
        .or(image_tag)
        .unwrap_or_else(|| "latest".into());
    let tag = Tag::parse(&tag_text).map_err(|e| {
        CliError::msg(
            2,
            format!("the tag `{}` is not valid: {e}", tag_text.escape_debug()),
        )
    })?;
    // Every SBOM read and placed before the registry is asked anything.
    let what = match &tagged {
        Tagged::Image(stored) => What::Image(push_image(stored), one_sbom(&args.sbom)?),
        Tagged::Index(index) => What::Index(push_index(index, &args.sbom)?),
    };
    let conn = args.registry.connection(settings)?;
    let cache = Cache::open(&settings.cache_root(args.cache.as_deref()))?;
    let mut progress = Progress::new(settings.quiet, args.json);
    let pushed = match &what {
        What::Image(image, sbom) => registry::push(
            &dest,
            tag.as_str(),
            image,
            sbom.as_deref(),
            &conn,
            &cache,
            &mut progress,
        )?,
        What::Index(index) => {
            registry::push_index(&dest, tag.as_str(), index, &conn, &cache, &mut progress)?
        }
    };
    drop(progress);
    if args.json {
        let v = serde_json::json!({
            "manifest_digest": pushed.digest,
            "push": pushed,
        });
        print_stdout(&format!("{v}\n"));
    } else if !settings.quiet {
        for m in &pushed.manifests {
            eprintln!("pushed {} ({})", m.digest, m.platform);
        }
        eprintln!(
            "pushed {}{} → {} ({} blobs uploaded, {} already there, {} mounted{})",
            pushed.digest,
            if pushed.manifests.is_empty() {
                ""
            } else {
                " (index)"
            },
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

/// What is pushed: one image and its SBOM, or an index.
enum What {
    Image(registry::Image, Option<Vec<u8>>),
    Index(IndexImage),
}

/// The registry's view of a stored image: its manifest and where each blob's bytes lie.
fn push_image(stored: &Stored) -> registry::Image {
    registry::Image {
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
    }
}

/// The one `--sbom` of a single image, read.
fn one_sbom(given: &[PathBuf]) -> Result<Option<Vec<u8>>, CliError> {
    match given {
        [] => Ok(None),
        [p] => Ok(Some(read_sbom(p)?)),
        _ => Err(CliError::msg(
            2,
            format!(
                "`--sbom` is given {} times; a single image takes one SBOM",
                given.len()
            ),
        )),
    }
}

/// The index with each manifest's SBOM: every `--sbom` must be `PLATFORM=FILE` naming a
/// platform the index lists exactly once, each platform at most once.
fn push_index(index: &StoredIndex, given: &[PathBuf]) -> Result<IndexImage, CliError> {
    let platforms: Vec<&str> = index
        .manifests
        .iter()
        .map(|m| m.platform.as_str())
        .collect();
    let mut sboms: Vec<Option<Vec<u8>>> = vec![None; platforms.len()];
    for g in given {
        use std::os::unix::ffi::OsStrExt;
        let text = g.to_string_lossy();
        // Split on the argument's own bytes, so the file keeps any name it has.
        let raw = g.as_os_str().as_bytes();
        let split = raw.iter().position(|&b| b == b'=').and_then(|at| {
            let platform = std::str::from_utf8(&raw[..at]).ok()?;
            Some((
                platform,
                PathBuf::from(std::ffi::OsStr::from_bytes(&raw[at + 1..])),
            ))
        });
        let Some((platform, path)) = split else {
            return Err(CliError::msg(
                2,
                format!(
                    "`--sbom {}`: the image is an index of {}; name the platform as `--sbom PLATFORM=FILE`",
                    text.escape_debug(),
                    platforms.join(", ")
                ),
            ));
        };
        let at: Vec<usize> = (0..platforms.len())
            .filter(|&i| platforms[i] == platform)
            .collect();
        let i = match at[..] {
            [i] => i,
            [] => {
                return Err(CliError::msg(
                    2,
                    format!(
                        "`--sbom {}`: the index has no manifest for `{}`; its platforms: {}",
                        text.escape_debug(),
                        platform.escape_debug(),
                        platforms.join(", ")
                    ),
                ))
            }
            _ => {
                return Err(CliError::msg(
                    2,
                    format!(
                        "`--sbom {}`: the index lists {} manifests for `{}`, so the SBOM's subject is not one",
                        text.escape_debug(),
                        at.len(),
                        platform.escape_debug()
                    ),
                ))
            }
        };
        if sboms[i].is_some() {
            return Err(CliError::msg(
                2,
                format!("`--sbom` names `{}` twice", platform.escape_debug()),
            ));
        }
        sboms[i] = Some(read_sbom(&path)?);
    }
    Ok(IndexImage {
        index: index.index.clone(),
        media_type: index.media_type.clone(),
        manifests: index
            .manifests
            .iter()
            .zip(sboms)
            .map(|(m, sbom)| IndexEntry {
                image: push_image(&m.stored),
                sbom,
                platform: m.platform.clone(),
            })
            .collect(),
    })
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
