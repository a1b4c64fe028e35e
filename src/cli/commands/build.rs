//! `gpuimg build PROFILE [-o TARGET] [--tag T] [--force] [--compression gzip|zstd]
//! [--max-size SIZE] [--sbom FILE] [--json]`.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{CatalogArgs, RegistryArgs};
use crate::cli::{CliError, Progress, Settings};
use gpuimg_build::driver::{BuildOptions, Output};
use gpuimg_build::ops::{self, build::BuildRequest, settle::Settle};
use gpuimg_oci::export::Target;
use gpuimg_oci::layer::Compression;
use gpuimg_oci::reference::{ImageRef, RegistryRef, Tag};
use gpuimg_store::byte_size::ByteSize;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile (YAML).
    pub profile: PathBuf,
    /// Output: DIR, oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:TAG], or a
    /// registry: registry:HOST[:PORT]/REPO[:TAG] (also docker://…) (default out/<name>).
    #[arg(short, long, value_name = "TARGET")]
    pub output: Option<String>,
    /// Tag recorded as org.opencontainers.image.ref.name (default: the TAG of `-o`, else
    /// `latest`): `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
    #[arg(long)]
    pub tag: Option<String>,
    /// Replace whatever is at the output path; without it only an empty directory or a
    /// previous build of the same tag is replaced.
    #[arg(long)]
    pub force: bool,
    /// Layer compression.
    #[arg(long, value_enum, default_value_t = CompressionArg::Gzip)]
    pub compression: CompressionArg,
    /// Cache directory (default $GPUIMG_CACHE, else $XDG_CACHE_HOME/gpuimg, else
    /// ~/.cache/gpuimg).
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
    /// The gpuimg-selftest binary to bake in (default: the profile's `selftest.binary`, else the
    /// one beside this gpuimg).
    #[arg(long, value_name = "FILE")]
    pub selftest_binary: Option<PathBuf>,
    /// Fail (exit 1, nothing written) when the image — manifest, config and compressed
    /// layers — is larger than SIZE (e.g. 500MB, 2GiB; decimal and binary units).
    #[arg(long, value_name = "SIZE")]
    pub max_size: Option<ByteSize>,
    /// Also write the image's SBOM (SPDX 2.3 JSON, the same document as the image's
    /// /usr/share/gpuimg/sbom.spdx.json) to FILE; replaces only a regular file.
    #[arg(long, value_name = "FILE")]
    pub sbom: Option<PathBuf>,
    /// How many layer jobs run at once (default: the CPUs). Each layer's compression uses
    /// every CPU in any case; more jobs overlap installing and downloading with it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: Option<u16>,
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Only this one of the profile's platforms (`platforms:`): its image, not an index.
    #[arg(long, value_name = "OS/ARCH", value_parser = super::parse_platform)]
    pub platform: Option<gpuimg_oci::image::Platform>,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Where `-o` points: a file or directory, or a registry.
enum OutputArg {
    Disk(ImageRef),
    Registry(RegistryRef),
}

impl OutputArg {
    fn parse(o: &str) -> Result<OutputArg, CliError> {
        let bad = |e: gpuimg_oci::reference::ReferenceError| {
            CliError::msg(
                2,
                format!("`-o` `{}` is not a valid output: {e}", o.escape_debug()),
            )
        };
        if RegistryRef::is_registry(o) {
            return RegistryRef::parse(o).map(OutputArg::Registry).map_err(bad);
        }
        ImageRef::parse(o).map(OutputArg::Disk).map_err(bad)
    }

    fn tag(&self) -> Option<&str> {
        match self {
            OutputArg::Disk(r) => r.tag.as_deref(),
            OutputArg::Registry(r) => r.tag.as_deref(),
        }
    }
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

pub fn exec(args: Args, settings: &Settings) -> Result<u8, CliError> {
    let epoch = settings.source_date_epoch()?;
    gpuimg_store::confined::force_userspace_resolver(settings.userspace_resolver());
    let output = match &args.output {
        Some(o) => Some(OutputArg::parse(o)?),
        None => None,
    };
    let tag = pick_tag(
        args.tag.as_deref(),
        output.as_ref().and_then(OutputArg::tag),
    )?;
    let conn = match &output {
        Some(OutputArg::Registry(_)) => Some(args.registry.connection(settings)?),
        _ => {
            args.registry.refuse_without_registry()?;
            None
        }
    };
    let profile = settings.load_profile(&args.profile)?;
    let target = match (output, conn) {
        (Some(OutputArg::Registry(dest)), Some(conn)) => Output::Registry {
            dest,
            conn: Box::new(conn),
        },
        (Some(OutputArg::Disk(o)), _) => Output::Disk(Target::of(&o)),
        (Some(OutputArg::Registry(_)), None) | (None, _) => Output::Disk(Target::Layout(
            PathBuf::from("out").join(profile.name.as_path()),
        )),
    };
    if let (Output::Disk(t), Some(sbom)) = (&target, &args.sbom) {
        side_file_apart("--sbom", sbom, t)?;
    }
    if matches!(&target, Output::Disk(t) if t.needs_gzip())
        && args.compression == CompressionArg::Zstd
    {
        return Err(CliError::msg(
            2,
            "`--compression zstd` cannot go into a docker-archive: older docker cannot load zstd layers; use `--compression gzip` (the default) or `-o oci-archive:FILE`",
        ));
    }
    let catalog = args.catalog.load(settings)?;
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
            cache_root: settings.cache_root(args.cache.as_deref()),
            offline: args.offline,
            trust: settings.trust(),
            max_size: args.max_size,
            sbom: args.sbom.clone(),
            jobs: args.jobs.map_or_else(
                || std::thread::available_parallelism().map_or(1, |n| n.get()),
                usize::from,
            ),
        },
        python: settings.python(),
        platform: args.platform.clone(),
    };
    let mut progress = Progress::new(settings.quiet, args.json);
    let profile = settings.host_from(
        profile,
        &catalog,
        &req.options.cache_root,
        args.offline,
        &mut progress,
    )?;
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
            "image_size": out.image_size.0,
            "packages": out.packages.len(),
            "wheels": out.wheels.len(),
            "sbom": args.sbom.as_ref().map(|p| p.display().to_string()),
            "push": out.pushed,
            "peak_memory": peak_memory(),
        });
        let mut v = v;
        if !out.platforms.is_empty() {
            v["index_digest"] = json!(out.manifest_digest);
            v["platforms"] = json!(out.platforms);
            v["shared_layers"] = json!(out.shared_layers);
        }
        crate::cli::print_stdout(&format!("{v}\n"));
    } else if let Some(p) = out.pushed.as_ref().filter(|_| !settings.quiet) {
        eprintln!(
            "pushed {} ({} layers) → {} ({} blobs uploaded, {} already there, {} mounted)",
            p.digest,
            out.layers.len(),
            p.reference,
            p.blobs_uploaded,
            p.blobs_existing,
            p.blobs_mounted
        );
    } else if !settings.quiet && !out.platforms.is_empty() {
        for p in &out.platforms {
            eprintln!(
                "{:>12} {} ({} layers) {}",
                p.platform,
                p.manifest_digest,
                p.layers,
                ByteSize(p.image_size)
            );
        }
        eprintln!(
            "built index {} ({} platforms, {} layers shared) → {}:{}",
            out.manifest_digest,
            out.platforms.len(),
            out.shared_layers,
            out.output,
            out.tag
        );
    } else if !settings.quiet {
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

/// The build's peak resident memory in bytes (`/proc/self/status` `VmHWM`), for `--json`: CI
/// can hold a build to a memory budget.
fn peak_memory() -> Option<u64> {
    // `VmHWM`, this process's own peak resident set: `getrusage`'s `ru_maxrss` carries the
    // peak of whatever ran before `exec` (a large parent's, copied at `fork`), so it can report
    // a launcher's memory instead of the build's.
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The tag: `--tag`, else the `:TAG` of `-o`, else `latest`; both given must agree.
fn pick_tag(flag: Option<&str>, from_output: Option<&str>) -> Result<Tag, CliError> {
    let (text, source) = match (flag, from_output) {
        (Some(f), Some(o)) if f != o => {
            return Err(CliError::msg(
                2,
                format!(
                    "`--tag` `{}` and the tag `{}` of `-o` disagree",
                    f.escape_debug(),
                    o.escape_debug()
                ),
            ))
        }
        (Some(f), _) => (f, "`--tag`"),
        (None, Some(o)) => (o, "the tag of `-o`"),
        (None, None) => return Ok(Tag::default()),
    };
    Tag::parse(text).map_err(|e| {
        CliError::msg(
            2,
            format!("{source} `{}` is not a valid tag: {e}", text.escape_debug()),
        )
    })
}

/// Refuse a side file (`--sbom`) that is the output itself or lies inside the output layout's
/// own structure: writing it would destroy what the build just wrote. Paths are compared as
/// the file system resolves them (symlinks of the existing part followed).
fn side_file_apart(flag: &str, side: &Path, target: &Target) -> Result<(), CliError> {
    let (s, t) = (resolved(side), resolved(target.path()));
    let clash = match target {
        Target::Layout(_) => s.starts_with(&t),
        Target::Archive(_) | Target::DockerArchive(_) => s == t,
    };
    if clash {
        return Err(CliError::msg(
            2,
            format!(
                "`{flag}` `{}` would be written over the output `{}`; name a file outside it",
                side.display(),
                target.display()
            ),
        ));
    }
    Ok(())
}

/// `p` absolute, its longest existing prefix resolved by the file system, the rest appended
/// (`..` of the rest taken lexically).
fn resolved(p: &Path) -> PathBuf {
    use std::path::Component;
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let parts: Vec<Component> = abs.components().collect();
    for i in (1..=parts.len()).rev() {
        let Ok(mut out) = std::fs::canonicalize(parts[..i].iter().collect::<PathBuf>()) else {
            continue;
        };
        for c in &parts[i..] {
            match c {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                c => out.push(c),
            }
        }
        return out;
    }
    abs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> ImageRef {
        ImageRef::parse(s).unwrap()
    }

    #[test]
    fn the_tag_comes_from_the_flag_then_the_output() {
        let pick = |f: Option<&str>, o: Option<&str>| {
            let o = o.map(r);
            pick_tag(f, o.as_ref().and_then(|o| o.tag.as_deref())).map(|t| t.to_string())
        };
        assert_eq!(pick(None, None).ok().as_deref(), Some("latest"));
        assert_eq!(pick(None, Some("oci:out")).ok().as_deref(), Some("latest"));
        assert_eq!(pick(Some("v1"), None).ok().as_deref(), Some("v1"));
        assert_eq!(pick(None, Some("oci:out:v2")).ok().as_deref(), Some("v2"));
        assert_eq!(
            pick(Some("v2"), Some("oci:o:v2")).ok().as_deref(),
            Some("v2")
        );
        let e = pick(Some("v1"), Some("oci-archive:o.tar:v2")).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.message.contains("disagree"), "{}", e.message);
        let e = pick(None, Some("oci:out:bad..tag")).unwrap_err();
        assert!(
            e.message.starts_with("the tag of `-o` `bad..tag`"),
            "{}",
            e.message
        );
        let e = pick(Some("bad tag!"), None).unwrap_err();
        assert!(e.message.starts_with("`--tag` `bad tag!`"), "{}", e.message);
    }
}
