//! The build driver: runs the stages in order for one loaded profile.
//!
//! `profile → assemble → strip → layer → image → export`; each component (base, files,
//! self-test) becomes its own layer so that identical components share a digest across
//! images. Owns no format knowledge itself; it only sequences stage entry points.

use std::path::PathBuf;

mod apt_base;
mod apt_layers;
mod observer;
mod rootfs_base;
mod selftest_layer;

pub use apt_base::apt_options;
pub use observer::{Observer, Silent};
pub use selftest_layer::expectation;

use crate::assemble::{self, Input, Tree};
use crate::cache::Cache;
use crate::digest::Digest;
use crate::export::{self, Replace, Target};
use crate::image::{self, ImageLayer, ImageSpec};
use crate::layer::{self, Compression, LayerOptions};
use crate::lock::LockedPackage;
use crate::profile::{Base, Profile};
use crate::reference::Tag;
use crate::resolve::Resolution;
use crate::staging::{self, Staged};

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub target: Target,
    pub tag: Tag,
    /// Replace whatever is at the target (`--force`), not only a previous image of this tag.
    pub force: bool,
    pub compression: Compression,
    /// SOURCE_DATE_EPOCH.
    pub epoch: u64,
    pub cache_root: PathBuf,
    /// The resolved stack (from `resolve`, or from the lock with `--locked`).
    pub resolution: Option<Resolution>,
    /// The `gpuimg-selftest` binary to bake in (default: the profile's `selftest.binary`, else
    /// beside the running `gpuimg`).
    pub selftest_binary: Option<PathBuf>,
    /// With `--locked`: exactly these packages for an apt base.
    pub locked_packages: Option<Vec<LockedPackage>>,
    /// Use caches only; fail naming what is missing.
    pub offline: bool,
}

/// What a build produced.
#[derive(Debug, Clone)]
pub struct BuildOutcome {
    pub manifest_digest: Digest,
    pub config_digest: Digest,
    pub layers: Vec<ImageLayer>,
    /// How many layers came from the cache without compressing.
    pub cached_layers: usize,
    pub output: String,
    pub tag: Tag,
    /// The apt packages in the base (empty for other bases).
    pub packages: Vec<LockedPackage>,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("Failed to open the cache at `{path}`: {source}")]
    Cache {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Assemble(#[from] assemble::AssembleError),
    #[error(transparent)]
    Layer(#[from] layer::LayerError),
    #[error(transparent)]
    Image(#[from] image::ImageError),
    #[error(transparent)]
    Export(#[from] export::ExportError),
    #[error(transparent)]
    Apt(#[from] crate::sources::apt::AptError),
    #[error(transparent)]
    Selftest(#[from] selftest_layer::SelftestLayerError),
    #[error(transparent)]
    Split(#[from] crate::plan::split::SplitError),
}

/// Build the image for `profile`.
pub fn build(
    profile: &Profile,
    opts: &BuildOptions,
    obs: &mut dyn Observer,
) -> Result<BuildOutcome, BuildError> {
    let replace = if opts.force {
        Replace::Force
    } else {
        Replace::IfOurs(&opts.tag)
    };
    export::check_target(&opts.target, replace)?;
    let cache = Cache::open(&opts.cache_root).map_err(|source| BuildError::Cache {
        path: opts.cache_root.display().to_string(),
        source,
    })?;
    // Staging of killed builds (scratch directories, partial blobs) is reclaimed here; live
    // builds hold locks on theirs and keep them.
    staging::reclaim(&cache.tmp_dir(), None);
    staging::reclaim_legacy_scratch(&cache.tmp_dir());
    let scratch =
        Staged::dir(&cache.tmp_dir(), "build", 0o700).map_err(|source| BuildError::Cache {
            path: cache.tmp_dir().display().to_string(),
            source,
        })?;

    let lopts = LayerOptions {
        compression: opts.compression,
        epoch: opts.epoch,
    };
    let mut layers = Vec::new();
    let mut cached_layers = 0;
    let mut packages = Vec::new();
    let mut components: Vec<(String, Tree)> = Vec::new();
    match &profile.base {
        Base::None => {}
        Base::Rootfs {
            path,
            allow_special_files,
        } => {
            let (blob, cached) = rootfs_base::rootfs_base_layer(
                path,
                *allow_special_files,
                profile,
                lopts,
                &cache,
                scratch.path(),
                obs,
            )?;
            if cached {
                cached_layers += 1;
                obs.message(&format!(
                    "{:>12} unchanged, reused {}",
                    "base",
                    &blob.digest.hex()[..12]
                ));
            }
            layers.push(ImageLayer {
                component: "base".into(),
                blob,
            });
        }
        Base::Apt(spec) => {
            let (parts, pkgs) =
                apt_layers::apt_layers(spec, profile, opts, lopts, &cache, scratch.path(), obs)?;
            let reused: Vec<&str> = parts
                .iter()
                .filter(|p| p.cached)
                .map(|p| p.component.as_str())
                .collect();
            if !reused.is_empty() {
                cached_layers += reused.len();
                obs.message(&format!(
                    "{:>12} unchanged ({} packages), reused {}",
                    "apt",
                    pkgs.len(),
                    reused.join(", ")
                ));
            }
            packages = pkgs;
            for p in parts {
                layers.push(ImageLayer {
                    component: p.component,
                    blob: p.blob,
                });
            }
        }
    }
    if !profile.files.is_empty() {
        let tree = assemble::assemble(&Input::Files(&profile.files), scratch.path())?;
        for w in tree.warnings() {
            obs.warn(&w);
        }
        // Everything below `files` (the base's layers): its non-directories, later layers
        // over earlier ones.
        let mut lower = assemble::shape::NonDirs::new();
        for l in &layers {
            let listing = layer::listing::load(&cache, &l.blob).map_err(|source| {
                layer::LayerError::Write {
                    component: format!("{} listing", l.component),
                    source,
                }
            })?;
            lower.extend(listing);
        }
        if !layers.is_empty() {
            assemble::shape::check_over(&lower, "base", &tree)?;
        }
        components.push(("files".into(), tree));
    }

    let extra_env = opts
        .resolution
        .as_ref()
        .map(Resolution::image_env)
        .unwrap_or_default();
    let mut annotations = opts
        .resolution
        .as_ref()
        .map(Resolution::image_annotations)
        .unwrap_or_default();
    let mut entrypoint = None;
    let wants_selftest =
        profile.selftest.enabled && opts.resolution.as_ref().is_some_and(|r| !r.is_empty());
    if wants_selftest {
        let st = selftest_layer::selftest_components(profile, opts)?;
        annotations.insert(
            selftest_layer::ANN_SELFTEST_SHA256.into(),
            st.binary_sha256.to_string(),
        );
        entrypoint = Some(crate::expect::wrap_entrypoint(
            profile.config.entrypoint.as_deref().unwrap_or(&[]),
        ));
        components.push(("selftest".into(), st.binary_tree));
        components.push(("expect".into(), st.expect_tree));
    }

    for (component, tree) in &components {
        let (blob, cached) = layer::write_layer(component, tree, lopts, &cache, obs)?;
        if cached {
            cached_layers += 1;
            obs.message(&format!(
                "{component:>12} unchanged, reused {}",
                &blob.digest.hex()[..12]
            ));
        }
        layers.push(ImageLayer {
            component: component.clone(),
            blob,
        });
    }

    let spec = ImageSpec {
        name: &profile.name,
        tag: &opts.tag,
        platform: &profile.platform,
        config: &profile.config,
        extra_env,
        annotations,
        entrypoint,
        epoch: opts.epoch,
    };
    let json = image::build_image(&spec, &layers)?;
    // The cache's blobs are linked into the output: each must still be what was checked.
    for l in &layers {
        layer::ensure_intact(&cache, &l.blob)?;
    }
    export::export(&opts.target, replace, &json, &layers, &cache)?;
    for l in &layers {
        // Linking (and unlinking the replaced output's links) moved the blobs' ctime. A stamp
        // only saves a re-hash next time, so failing to write one is no error.
        let _ = cache.restamp_linked(&l.blob.digest);
    }
    Ok(BuildOutcome {
        manifest_digest: json.manifest.0,
        config_digest: json.config.0,
        layers,
        cached_layers,
        output: opts.target.display(),
        tag: opts.tag.clone(),
        packages,
    })
}
