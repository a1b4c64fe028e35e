//! The build driver: executes a [`Plan`] for one loaded profile and platform ([`make`]), and
//! writes what one or several plans made ([`deliver`]: one image, or one per platform under an
//! image index).
//!
//! For each planned layer: a layer whose key is known and cached is reused as it is;
//! otherwise its inputs are assembled into a tree (the apt layers share one install, see
//! `apt.rs`; the wheels are fetched and installed, `python.rs`), passed through its tree
//! passes (`passes::apply`: strip, device-code pruning, debug sections), and written
//! (`layer`); then the image config and manifest (`image`)
//! and the output (`export`). Decides nothing itself: what each layer holds, its key and the
//! image config additions all come from the plan (the one rule it applies, which component
//! a path of the shared apt install goes to, is `apt.rs`'s, fixed by the plan's package
//! assignment); it only sequences stage entry points. It adds what the passes removed to
//! each layer's size record, and checks before anything is exported that every ELF file the image
//! would run or load is for its platform's machine (`machines.rs`), and `--max-size`. The jobs
//! run in one loop (`schedule.rs`); what depends on the wheels' libraries waits for the jobs
//! that produce those facts. One layer is written at a time: each compressor uses every CPU.

use std::path::PathBuf;

mod apt;
mod gate;
mod generated;
mod jobs;
mod machines;
mod python;
mod schedule;
mod stream;

pub use apt::apt_options;

use crate::lock::{LockedPackage, LockedWheel};
use crate::plan::{Inputs, Plan};
use gpuimg_assemble::Tree;
use gpuimg_fetch::observe::Observer;
use gpuimg_oci::export::{self, Replace, Target};
use gpuimg_oci::image::{self, ImageLayer, ImageSpec};
use gpuimg_oci::layer::{self, Compression, LayerOptions};
use gpuimg_oci::reference::{RegistryRef, Tag};
use gpuimg_oci::registry::{self, Pushed};
use gpuimg_pypi::PythonRequest;
use gpuimg_store::byte_size::ByteSize;
use gpuimg_store::cache::Cache;
use gpuimg_store::digest::Digest;
use gpuimg_store::staging::{self, Staged};

/// Where the built image goes.
#[derive(Debug, Clone)]
pub enum Output {
    /// A layout, oci-archive or docker-archive on disk (`export`).
    Disk(Target),
    /// A registry (`registry`), reached and authenticated as `conn` says.
    Registry {
        dest: RegistryRef,
        conn: Box<registry::Connection>,
    },
}

impl Output {
    /// How the output is named in messages and `--json` (`oci:DIR`, `registry:HOST/REPO`).
    pub fn display(&self) -> String {
        match self {
            Output::Disk(t) => t.display(),
            Output::Registry { dest, .. } => format!("registry:{}/{}", dest.registry, dest.repo),
        }
    }
}

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub target: Output,
    pub tag: Tag,
    /// Replace whatever is at the target (`--force`), not only a previous image of this tag.
    pub force: bool,
    pub compression: Compression,
    /// SOURCE_DATE_EPOCH.
    pub epoch: u64,
    pub cache_root: PathBuf,
    /// Use caches only; fail naming what is missing.
    pub offline: bool,
    /// The certificate authorities downloads trust (the system store plus `SSL_CERT_*`).
    pub trust: gpuimg_fetch::Trust,
    /// Fail, writing nothing, when the image (manifest, config and layer blobs) is larger.
    pub max_size: Option<ByteSize>,
    /// Also write the image's SBOM here (`--sbom FILE`).
    pub sbom: Option<PathBuf>,
    /// How many layer jobs run at once (`--jobs`, at least 1).
    pub jobs: usize,
}

impl BuildOptions {
    pub fn layer_options(&self) -> LayerOptions {
        LayerOptions {
            compression: self.compression,
            epoch: self.epoch,
        }
    }
}

/// What a build produced.
#[derive(Debug, Clone)]
pub struct BuildOutcome {
    pub manifest_digest: Digest,
    pub config_digest: Digest,
    pub layers: Vec<ImageLayer>,
    /// How many layers came from the cache without compressing.
    pub cached_layers: usize,
    /// The manifest, config and layer blobs: what `--max-size` limits.
    pub image_size: ByteSize,
    pub output: String,
    pub tag: Tag,
    /// The apt packages in the base (empty for other bases).
    pub packages: Vec<LockedPackage>,
    /// The Python wheels installed (empty without `python:`).
    pub wheels: Vec<LockedWheel>,
    /// What the push did, for a registry output.
    pub pushed: Option<Pushed>,
    /// An image index's platforms, in order (empty for one platform's image, whose digest is
    /// `manifest_digest`; for an index that is the index's digest).
    pub platforms: Vec<PlatformOutcome>,
    /// Layer blobs two or more platforms share (written and pushed once).
    pub shared_layers: usize,
}

/// One platform's manifest of an image index.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlatformOutcome {
    pub platform: String,
    pub manifest_digest: Digest,
    /// Its manifest, config and layer blobs, in bytes.
    pub image_size: u64,
    pub layers: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Passes(#[from] crate::passes::PassError),
    #[error("Failed to open the cache at `{path}`: {source}")]
    Cache {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Assemble(#[from] gpuimg_assemble::AssembleError),
    #[error(transparent)]
    Layer(#[from] layer::LayerError),
    #[error(transparent)]
    Image(#[from] image::ImageError),
    #[error(transparent)]
    Export(#[from] export::ExportError),
    #[error(transparent)]
    Registry(#[from] registry::RegistryError),
    #[error(transparent)]
    Apt(#[from] gpuimg_apt::AptError),
    #[error(transparent)]
    Split(#[from] crate::plan::split::SplitError),
    #[error(transparent)]
    Pypi(#[from] gpuimg_pypi::PypiError),
    #[error(transparent)]
    Wheel(#[from] gpuimg_wheel::WheelError),
    #[error(transparent)]
    Library(Box<crate::plan::libraries::LibraryError>),
    /// What the facts the jobs produced make of the plan (a driver library among the wheels,
    /// two providers of one library).
    #[error(transparent)]
    Plan(Box<crate::plan::PlanError>),
    /// A plan that breaks its own rules: a bug in gpuimg.
    #[error("Internal error: {0}")]
    Internal(&'static str),
    /// The split produced a tree for a component the plan has no layer for: a bug.
    #[error("Internal error: the apt install has entries for component `{0}`, which the plan has no layer for")]
    Unplanned(String),
    /// The image is over `--max-size`: an answer of "no", nothing written.
    #[error(
        "The image is {size} ({} bytes: manifest, config and layers), over the size limit of \
         {limit} ({} bytes); nothing was written",
        .size.0,
        .limit.0
    )]
    TooLarge { size: ByteSize, limit: ByteSize },
    #[error("Failed to read the self-test binary `{path}`: {source}")]
    SelftestRead {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Failed to read the ELF files of layer `{layer}`: {source}")]
    Machines {
        layer: String,
        #[source]
        source: std::io::Error,
    },
    /// An ELF file the image would run or load is for another machine: bad input, nothing
    /// written.
    #[error(
        "`{path}` is {} {machine} ELF file, but the image's platform is `{platform}`{}: the image \
         would run or load it and could not; give it built for `{platform}` (the package, \
         wheel, `files:` entry or base it comes from), or keep data for other processors \
         outside `PATH`, the loader's directories and the Python packages; nothing was written",
        machines::article(.machine),
        machines::also(*.others)
    )]
    ForeignMachine {
        path: String,
        machine: String,
        platform: String,
        /// How many more such files there are.
        others: usize,
    },
}

impl BuildError {
    /// 1 for an answer of "no" (over `--max-size`; the Python packages' "no"), 3 for a broken
    /// internal rule, 2 for everything else; a wrapped error keeps its own code.
    pub fn exit_code(&self) -> u8 {
        match self {
            BuildError::TooLarge { .. } => 1,
            BuildError::Internal(_) | BuildError::Unplanned(_) => 3,
            BuildError::Wheel(e) => e.exit_code(),
            BuildError::Pypi(e) => e.exit_code(),
            BuildError::Plan(e) => e.exit_code(),
            BuildError::Passes(e) => e.exit_code(),
            _ => 2,
        }
    }
}

impl From<crate::sources::wheel_facts::FactsError> for BuildError {
    fn from(e: crate::sources::wheel_facts::FactsError) -> Self {
        match e {
            crate::sources::wheel_facts::FactsError::Pypi(e) => BuildError::Pypi(e),
            crate::sources::wheel_facts::FactsError::Wheel(e) => BuildError::Wheel(e),
        }
    }
}

impl From<crate::plan::PlanError> for BuildError {
    fn from(e: crate::plan::PlanError) -> Self {
        BuildError::Plan(Box::new(e))
    }
}

impl From<crate::plan::libraries::LibraryError> for BuildError {
    fn from(e: crate::plan::libraries::LibraryError) -> Self {
        BuildError::Library(Box::new(e))
    }
}

/// One platform's image, made and checked ([`make`]), not yet written anywhere.
#[derive(Debug, Clone)]
pub struct Made {
    pub platform: image::Platform,
    json: image::ImageJson,
    layers: Vec<ImageLayer>,
    sbom: Vec<u8>,
    reused: usize,
    size: ByteSize,
    packages: Vec<LockedPackage>,
    wheels: Vec<LockedWheel>,
}

fn replace_of(opts: &BuildOptions) -> Replace<'_> {
    if opts.force {
        Replace::Force
    } else {
        Replace::IfOurs(&opts.tag)
    }
}

/// Check, before anything is built, that the output (and `--sbom`'s file) may be written, and
/// can hold `images` images (an index: not a docker-archive).
pub fn check_output(opts: &BuildOptions, images: usize) -> Result<(), BuildError> {
    if let Output::Disk(t) = &opts.target {
        if images > 1 && matches!(t, Target::DockerArchive(_)) {
            return Err(export::ExportError::IndexInDockerArchive.into());
        }
        export::check_target(t, replace_of(opts))?;
    }
    if let Some(p) = &opts.sbom {
        export::check_file_target(p)?;
    }
    Ok(())
}

/// Make `plan`'s image: its layers (from the cache or written), its config and manifest, every
/// ELF file it would run or load checked against its platform's machine. `python` says where
/// the plan's wheels come from (the profile's indexes, for wheels not in the cache).
pub fn make(
    plan: &Plan,
    opts: &BuildOptions,
    python: Option<&PythonRequest>,
    obs: &mut dyn Observer,
) -> Result<Made, BuildError> {
    let cache = open_cache(opts)?;
    // Staging of killed builds (scratch directories, partial blobs) is reclaimed here; live
    // builds hold locks on theirs and keep them.
    staging::reclaim(&cache.tmp_dir(), None);
    staging::reclaim_legacy_scratch(&cache.tmp_dir());
    let scratch =
        Staged::dir(&cache.tmp_dir(), "build", 0o700).map_err(|source| BuildError::Cache {
            path: cache.tmp_dir().display().to_string(),
            source,
        })?;
    // The roots unpacked under it get block groups of their own (thousands of files each).
    scratch.spread_subdirs();
    let ctx = schedule::Ctx {
        plan,
        opts,
        python,
        cache: &cache,
        scratch: &scratch,
        writing: std::sync::Mutex::new(()),
    };
    let ran = schedule::run(&ctx, obs)?;
    finish(plan, opts, &cache, ran, obs)
}

fn open_cache(opts: &BuildOptions) -> Result<Cache, BuildError> {
    Cache::open(&opts.cache_root).map_err(|source| BuildError::Cache {
        path: opts.cache_root.display().to_string(),
        source,
    })
}

/// The image config and manifest of the written layers, checked (machines, the blobs intact).
fn finish(
    plan: &Plan,
    opts: &BuildOptions,
    cache: &Cache,
    ran: schedule::Ran,
    obs: &mut dyn Observer,
) -> Result<Made, BuildError> {
    let schedule::Ran {
        layers,
        reused,
        derived,
    } = ran;
    report_reused(&reused, plan, obs);
    let spec = ImageSpec {
        name: &plan.image.name,
        tag: &opts.tag,
        platform: &plan.image.platform,
        config: &plan.image.config,
        extra_env: plan.image.env.clone(),
        annotations: plan.image.annotations.clone(),
        entrypoint: plan.image.entrypoint.clone(),
        epoch: opts.epoch,
    };
    let json = image::build_image(&spec, &layers)?;
    // Every ELF file the image would run or load is for its platform's machine.
    let loader_dirs = if plan.apt.is_some() {
        derived.loader.dirs.as_slice()
    } else {
        &[]
    };
    machines::check(
        cache,
        &layers,
        &json.config.1,
        &plan.image.platform,
        loader_dirs,
    )?;
    let size = ByteSize(
        json.manifest.1.len() as u64
            + json.config.1.len() as u64
            + layers.iter().map(|l| l.blob.size).sum::<u64>(),
    );
    Ok(Made {
        platform: plan.image.platform.clone(),
        json,
        layers,
        sbom: derived.sbom,
        reused: reused.len(),
        size,
        packages: plan
            .apt
            .as_ref()
            .map(|a| a.packages.clone())
            .unwrap_or_default(),
        wheels: plan
            .python
            .as_ref()
            .map(|p| p.wheels.clone())
            .unwrap_or_default(),
    })
}

/// Write `made` to the output: one image as it is, several (one per platform, in order) under
/// one image index. Checks `--max-size` (every distinct blob, the index too) and that each
/// cache blob is still what was checked, first.
pub fn deliver(
    made: Vec<Made>,
    opts: &BuildOptions,
    obs: &mut dyn Observer,
) -> Result<BuildOutcome, BuildError> {
    let cache = open_cache(opts)?;
    let replace = replace_of(opts);
    let index = match made.as_slice() {
        [_] => None,
        _ => {
            let images: Vec<_> = made.iter().map(|m| (&m.json, &m.platform)).collect();
            Some(image::build_index(&opts.tag, &images)?)
        }
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut size = index.as_ref().map_or(0, |i| i.index.1.len() as u64);
    for m in &made {
        size += m.json.manifest.1.len() as u64 + m.json.config.1.len() as u64;
        for l in &m.layers {
            if seen.insert(l.blob.digest) {
                size += l.blob.size;
            }
        }
    }
    let size = ByteSize(size);
    if let Some(limit) = opts.max_size.filter(|limit| size > *limit) {
        return Err(BuildError::TooLarge { size, limit });
    }
    // The cache's blobs are linked into the output: each must still be what was checked.
    for m in &made {
        for l in &m.layers {
            layer::ensure_intact(&cache, &l.blob)?;
        }
    }
    let pushed = match (&opts.target, &index) {
        (Output::Disk(t), None) => {
            export::export(t, replace, &made[0].json, &made[0].layers, &cache)?;
            None
        }
        (Output::Disk(t), Some(index)) => {
            let images: Vec<_> = made
                .iter()
                .map(|m| (&m.json, m.layers.as_slice()))
                .collect();
            export::export_index(t, replace, index, &images, &cache)?;
            None
        }
        (Output::Registry { dest, conn }, None) => {
            let m = &made[0];
            let image = push_image(&m.json, &m.layers, &cache);
            Some(registry::push(
                dest,
                &opts.tag,
                &image,
                Some(&m.sbom),
                conn,
                &cache,
                obs,
            )?)
        }
        (Output::Registry { dest, conn }, Some(index)) => {
            let manifests = made
                .iter()
                .map(|m| registry::IndexEntry {
                    image: push_image(&m.json, &m.layers, &cache),
                    sbom: Some(m.sbom.clone()),
                    platform: m.platform.to_string(),
                })
                .collect();
            let image = registry::IndexImage {
                index: index.index.1.clone(),
                media_type: image::INDEX_MEDIA_TYPE.to_string(),
                manifests,
            };
            Some(registry::push_index(
                dest, &opts.tag, &image, conn, &cache, obs,
            )?)
        }
    };
    if let (Some(p), [m]) = (&opts.sbom, made.as_slice()) {
        export::write_file(p, &m.sbom)?;
    }
    for m in &made {
        for l in &m.layers {
            // Linking (and unlinking the replaced output's links) moved the blobs' ctime. A
            // stamp only saves a re-hash next time, so failing to write one is no error.
            let _ = cache.restamp_linked(&l.blob.digest);
        }
    }
    let platforms: Vec<PlatformOutcome> = made
        .iter()
        .map(|m| PlatformOutcome {
            platform: m.platform.to_string(),
            manifest_digest: m.json.manifest.0,
            image_size: m.size.0,
            layers: m.layers.len(),
        })
        .collect();
    let shared_layers = {
        let mut count = std::collections::BTreeMap::new();
        for m in &made {
            for l in &m.layers {
                *count.entry(l.blob.digest).or_insert(0usize) += 1;
            }
        }
        count.values().filter(|n| **n > 1).count()
    };
    let first = &made[0];
    Ok(BuildOutcome {
        manifest_digest: index.as_ref().map_or(first.json.manifest.0, |i| i.index.0),
        config_digest: first.json.config.0,
        cached_layers: made.iter().map(|m| m.reused).sum(),
        image_size: size,
        layers: made.iter().flat_map(|m| m.layers.iter().cloned()).collect(),
        output: opts.target.display(),
        tag: opts.tag.clone(),
        packages: made
            .iter()
            .flat_map(|m| m.packages.iter().cloned())
            .collect(),
        wheels: made.iter().flat_map(|m| m.wheels.iter().cloned()).collect(),
        pushed,
        platforms: if index.is_some() { platforms } else { vec![] },
        shared_layers,
    })
}

/// The image as the registry stage takes it: the manifest's bytes, the config from memory and
/// the layers from the cache.
fn push_image(json: &image::ImageJson, layers: &[ImageLayer], cache: &Cache) -> registry::Image {
    let mut blobs = vec![registry::Blob {
        digest: json.config.0,
        size: json.config.1.len() as u64,
        source: registry::BlobSource::Bytes(json.config.1.clone()),
    }];
    let mut labels = vec!["config".to_string()];
    for l in layers {
        blobs.push(registry::Blob {
            digest: l.blob.digest,
            size: l.blob.size,
            source: registry::BlobSource::File {
                path: cache.blob_path(&l.blob.digest),
                offset: 0,
            },
        });
        labels.push(l.component.clone());
    }
    registry::Image {
        manifest: json.manifest.1.clone(),
        media_type: image::MANIFEST_MEDIA_TYPE.to_string(),
        blobs,
        labels,
    }
}

/// A layer's tree must not put an entry under a file or symlink of the layers below it (their
/// non-directories, later layers over earlier ones).
pub(super) fn check_over_lower(
    cache: &Cache,
    layers: &[ImageLayer],
    tree: &Tree,
) -> Result<(), BuildError> {
    if layers.is_empty() {
        return Ok(());
    }
    let mut lower = gpuimg_assemble::shape::NonDirs::new();
    for l in layers {
        let listing =
            layer::listing::load(cache, &l.blob).map_err(|source| layer::LayerError::Write {
                component: format!("{} listing", l.component),
                source,
            })?;
        lower.extend(listing);
    }
    gpuimg_assemble::shape::check_over(&lower, "base", tree)?;
    Ok(())
}

/// Whether `lp` is one of the apt install's layers.
pub(super) fn is_apt(lp: &crate::plan::LayerJob) -> bool {
    matches!(lp.inputs, Inputs::Debs { .. } | Inputs::AptMetadata)
}

/// One line per reused layer; the apt layers together in one.
fn report_reused(reused: &[(String, Digest, bool)], plan: &Plan, obs: &mut dyn Observer) {
    let apt: Vec<&str> = reused
        .iter()
        .filter(|(_, _, a)| *a)
        .map(|(c, _, _)| c.as_str())
        .collect();
    if !apt.is_empty() {
        let n = plan.apt.as_ref().map_or(0, |a| a.packages.len());
        obs.message(&format!(
            "{:>12} unchanged ({n} packages), reused {}",
            "apt",
            apt.join(", ")
        ));
    }
    for (c, d, _) in reused.iter().filter(|(_, _, a)| !*a) {
        obs.message(&format!("{c:>12} unchanged, reused {}", &d.hex()[..12]));
    }
}
