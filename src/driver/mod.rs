//! The build driver: executes a [`Plan`] for one loaded profile.
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
//! would run or load is for its platform's machine (`machines.rs`), and `--max-size`. A cold
//! build may write its wheel layers first, from a plan still without some wheels' libraries
//! ([`prewrite_wheels`], `prewrite.rs`): those layers' writing takes the libraries' facts, and
//! the complete plan's [`execute`] takes each such layer only where it is the one it would
//! write.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

mod apt;
mod generated;
mod machines;
mod prewrite;
mod python;
mod stream;

pub use apt::apt_options;
pub use prewrite::Prewritten;

use crate::assemble::{self, DataSource, Tree};
use crate::byte_size::ByteSize;
use crate::cache::Cache;
use crate::digest::Digest;
use crate::expect::DEFAULT_PATH;
use crate::export::{self, Replace, Target};
use crate::image::{self, ImageLayer, ImageSpec};
use crate::layer::{self, Compression, LayerOptions};
use crate::lock::{LockedPackage, LockedWheel};
use crate::observe::{Observer, Recorded};
use crate::passes::{self, PassContext, TreePass};
use crate::plan::{Inputs, Plan};
use crate::profile::Profile;
use crate::reference::{RegistryRef, Tag};
use crate::registry::{self, Pushed};
use crate::sbom::SBOM_PATH;
use crate::sources::files::Files;
use crate::sources::pypi::PythonRequest;
use crate::sources::rootfs::Rootfs;
use crate::sources::wheel;
use crate::sources::Source;
use crate::staging::{self, Staged};

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
    pub trust: crate::fetch::Trust,
    /// Fail, writing nothing, when the image (manifest, config and layer blobs) is larger.
    pub max_size: Option<ByteSize>,
    /// Also write the image's SBOM here (`--sbom FILE`).
    pub sbom: Option<PathBuf>,
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
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Passes(#[from] passes::PassError),
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
    Registry(#[from] registry::RegistryError),
    #[error(transparent)]
    Apt(#[from] crate::sources::apt::AptError),
    #[error(transparent)]
    Split(#[from] crate::plan::split::SplitError),
    #[error(transparent)]
    Pypi(#[from] crate::sources::pypi::PypiError),
    #[error(transparent)]
    Wheel(#[from] crate::sources::wheel::WheelError),
    #[error(transparent)]
    Library(Box<crate::plan::libraries::LibraryError>),
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
            BuildError::Passes(e) => e.exit_code(),
            _ => 2,
        }
    }
}

impl From<crate::plan::libraries::LibraryError> for BuildError {
    fn from(e: crate::plan::libraries::LibraryError) -> Self {
        BuildError::Library(Box::new(e))
    }
}

/// Execute `plan` for `profile`: write its image to the target. `python` says where the
/// plan's wheels come from (the profile's indexes, for wheels not in the cache).
pub fn execute(
    plan: &Plan,
    profile: &Profile,
    opts: &BuildOptions,
    python: Option<&PythonRequest>,
    prewritten: Option<&Prewritten>,
    obs: &mut dyn Observer,
) -> Result<BuildOutcome, BuildError> {
    run(plan, profile, opts, python, Pass::Image(prewritten), obs)?.ok_or(BuildError::Internal(
        "the image pass of a build ended without an image",
    ))
}

/// Write the wheel layers of `plan` that are not cached, before the rest of the build is
/// planned: `plan` was made without the libraries of some wheels (`PythonInstall::
/// libraries_complete`), which their layers' writing takes (`Prewritten::taps`). The layers
/// are stripped without protecting any library and are not recorded under their keys: the
/// complete plan's [`execute`] takes each one whose key it plans too and which its own
/// protected libraries would have left as it is, else writes it again.
pub fn prewrite_wheels(
    plan: &Plan,
    profile: &Profile,
    opts: &BuildOptions,
    python: Option<&PythonRequest>,
    obs: &mut dyn Observer,
) -> Result<Prewritten, BuildError> {
    let mut out = Prewritten::default();
    run(plan, profile, opts, python, Pass::Wheels(&mut out), obs)?;
    Ok(out)
}

/// What one run over a plan's layers does.
enum Pass<'a> {
    /// Every layer, then the image and its output; the wheel layers written before the plan
    /// was complete are taken from here.
    Image(Option<&'a Prewritten>),
    /// The wheel layers only, into here (see [`prewrite_wheels`]).
    Wheels(&'a mut Prewritten),
}

fn run(
    plan: &Plan,
    profile: &Profile,
    opts: &BuildOptions,
    python: Option<&PythonRequest>,
    mut pass: Pass<'_>,
    obs: &mut dyn Observer,
) -> Result<Option<BuildOutcome>, BuildError> {
    let wheels_only = matches!(pass, Pass::Wheels(_));
    let replace = if opts.force {
        Replace::Force
    } else {
        Replace::IfOurs(&opts.tag)
    };
    if let Output::Disk(t) = &opts.target {
        export::check_target(t, replace)?;
    }
    if let Some(p) = &opts.sbom {
        export::check_file_target(p)?;
    }
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
    // The roots unpacked under it get block groups of their own (thousands of files each).
    scratch.spread_subdirs();
    let lopts = opts.layer_options();

    let mut layers: Vec<ImageLayer> = Vec::new();
    // (component, digest, whether it is an apt layer)
    let mut reused: Vec<(String, Digest, bool)> = Vec::new();
    // The libraries' taps of the wheel layers written (kept by the wheels pass).
    let mut taps = wheel::Taps::new();
    // Every planned layer's cached blob, looked up once: the apt install needs to know which
    // components it must write in full.
    let mut found: Vec<Option<layer::LayerBlob>> = plan
        .layers
        .iter()
        .map(|lp| {
            let wanted = !wheels_only || matches!(lp.inputs, Inputs::Wheels { .. });
            lp.key
                .as_ref()
                .filter(|_| wanted)
                .and_then(|k| layer::lookup(&cache, k, obs))
        })
        .collect();
    // The wheels' libraries `ld.so.cache` indexes stay.
    let protect: HashSet<String> = plan
        .apt
        .iter()
        .flat_map(|a| a.loader.found.iter().map(|(p, _)| p.clone()))
        .collect();
    // The wheel layers written before the plan was complete, where this plan takes them.
    let pre: Vec<Option<&prewrite::PrewrittenLayer>> = plan
        .layers
        .iter()
        .zip(&found)
        .map(|(lp, f)| match (&pass, &lp.inputs, &lp.key, f) {
            (Pass::Image(Some(p)), Inputs::Wheels { .. }, Some(k), None) => p.take(k, &protect),
            _ => None,
        })
        .collect();
    // (The apt layers' only: a wheel layer may bear the name of an apt component.)
    let cached: BTreeSet<String> = plan
        .layers
        .iter()
        .zip(&found)
        .filter(|(lp, f)| {
            f.is_some() && matches!(lp.inputs, Inputs::Debs { .. } | Inputs::AptMetadata)
        })
        .map(|(lp, _)| lp.component.clone())
        .collect();
    // The apt package components not in the cache are written while unpacking.
    let stream: BTreeSet<String> = plan
        .layers
        .iter()
        .filter(|lp| matches!(lp.inputs, Inputs::Debs { .. }) && !cached.contains(&lp.component))
        .map(|lp| lp.component.clone())
        .collect();
    // The apt layers, made on the first apt layer not in the cache.
    let mut apt_layers: Option<apt::AptLayers> = None;
    // The wheel layers not in the cache are installed on a thread of their own, one ahead of
    // the layer being written (unzipping the next overlaps compressing this one); what that
    // thread reports is told in order when its tree is taken.
    let ahead: Vec<(&str, &[String])> = plan
        .layers
        .iter()
        .zip(&found)
        .zip(&pre)
        .filter_map(|((lp, f), p)| match (&lp.inputs, f, p) {
            (Inputs::Wheels { names }, None, None) => {
                Some((lp.component.as_str(), names.as_slice()))
            }
            _ => None,
        })
        .collect();
    std::thread::scope(|s| -> Result<(), BuildError> {
        let (ahead_tx, ahead_rx) =
            std::sync::mpsc::sync_channel::<(Result<(Tree, wheel::Taps), BuildError>, Recorded)>(0);
        if !ahead.is_empty() {
            let (cache, scratch) = (&cache, scratch.path());
            s.spawn(move || {
                for (component, names) in ahead {
                    let mut rec = Recorded::default();
                    let installed = match plan.python.as_ref() {
                        Some(install) => python::install(
                            install,
                            names,
                            component,
                            python,
                            opts,
                            cache,
                            scratch,
                            wheels_only,
                            &mut rec,
                        ),
                        None => Err(BuildError::Internal(
                            "a python-packages layer was planned without its wheels",
                        )),
                    };
                    let failed = installed.is_err();
                    if ahead_tx.send((installed, rec)).is_err() || failed {
                        return;
                    }
                }
            });
        }
        for ((lp, found), pre) in plan.layers.iter().zip(found.iter_mut()).zip(&pre) {
            let component = lp.component.as_str();
            if wheels_only && !matches!(lp.inputs, Inputs::Wheels { .. }) {
                continue;
            }
            if let Some(p) = pre {
                // Written this build, before the plan was complete: checked as it would
                // have been then.
                check_over_lower(&cache, &layers, &p.tree)?;
                machines::remember(&cache, component, &p.blob, &p.tree)?;
                if let Some(k) = &lp.key {
                    layer::remember(&cache, k, &p.blob)?;
                }
                layers.push(ImageLayer {
                    component: lp.component.clone(),
                    blob: p.blob.clone(),
                });
                continue;
            }
            if let Some(blob) = found.take() {
                reused.push((lp.component.clone(), blob.digest, is_apt(lp)));
                layers.push(ImageLayer {
                    component: lp.component.clone(),
                    blob,
                });
                continue;
            }
            // What the tree passes removed from this layer's input, for its sizes.
            let mut applied = passes::Applied::default();
            let tree = match &lp.inputs {
                Inputs::Rootfs {
                    path,
                    allow_special,
                } => {
                    let mut tree = Rootfs {
                        path: path.clone(),
                        allow_special: *allow_special,
                    }
                    .tree(scratch.path())?;
                    for w in tree.warnings() {
                        obs.warn(&w);
                    }
                    applied = passes::apply(
                        &mut tree,
                        &[TreePass::Strip(lp.strip.clone())],
                        &PassContext {
                            rules: &plan.strip_rules_for(lp),
                            protect: &HashSet::new(),
                            cache: &cache,
                            what: "the base",
                        },
                        obs,
                    )?;
                    tree
                }
                Inputs::Debs { .. } | Inputs::AptMetadata => {
                    let made = match &mut apt_layers {
                        Some(t) => t,
                        None => {
                            let install = plan.apt.as_ref().ok_or(BuildError::Internal(
                                "an apt layer was planned without its install",
                            ))?;
                            apt_layers.insert(apt::install_and_split(
                                install,
                                &plan.strip_rules_for(lp),
                                profile,
                                opts,
                                &scratch,
                                &cached,
                                &stream,
                                &cache,
                                obs,
                            )?)
                        }
                    };
                    applied = made.applied.remove(component).unwrap_or_default();
                    if let Some(mut blob) = made.written.remove(component) {
                        applied.add_sizes(&mut blob.sizes);
                        if let Some(k) = &lp.key {
                            layer::remember(&cache, k, &blob)?;
                        }
                        layers.push(ImageLayer {
                            component: lp.component.clone(),
                            blob,
                        });
                        continue;
                    }
                    // Stripped with the whole install; a component that received nothing is an
                    // empty layer (the plan promised it).
                    made.trees.remove(component).unwrap_or_else(|| {
                        Tree::new(format!("`the apt packages` layer `{component}`"))
                    })
                }
                Inputs::Wheels { .. } => {
                    let (installed, recorded) = ahead_rx
                        .recv()
                        .map_err(|_| BuildError::Internal("the wheel installs stopped early"))?;
                    recorded.replay(obs);
                    let (mut tree, layer_taps) = installed?;
                    taps.extend(layer_taps);
                    // A prewritten layer protects nothing (see `prewrite_wheels`).
                    let none = HashSet::new();
                    applied = passes::apply(
                        &mut tree,
                        &TreePass::for_wheels(&lp.strip, &plan.device_code_gpus),
                        &PassContext {
                            rules: &plan.strip_rules_for(lp),
                            protect: if wheels_only { &none } else { &protect },
                            cache: &cache,
                            what: &format!("the `{component}` wheels"),
                        },
                        obs,
                    )?;
                    if !wheels_only {
                        check_over_lower(&cache, &layers, &tree)?;
                    }
                    tree
                }
                Inputs::Files(files) => {
                    let tree = Files {
                        entries: files.clone(),
                    }
                    .tree(scratch.path())?;
                    for w in tree.warnings() {
                        obs.warn(&w);
                    }
                    check_over_lower(&cache, &layers, &tree)?;
                    tree
                }
                Inputs::Selftest { binary } => generated::selftest_tree(binary)?,
                Inputs::Expect { json } => generated::file_tree(
                    "expect",
                    DEFAULT_PATH,
                    DataSource::Bytes(Arc::new(json.clone().into_bytes())),
                    json.len() as u64,
                    0o644,
                ),
                Inputs::Sbom { json } => generated::file_tree(
                    "sbom",
                    SBOM_PATH,
                    DataSource::Bytes(Arc::new(json.clone())),
                    json.len() as u64,
                    0o644,
                ),
            };
            let (mut blob, cached) = layer::write_layer(component, &tree, lopts, &cache, obs)?;
            machines::remember(&cache, component, &blob, &tree)?;
            if matches!(lp.inputs, Inputs::Wheels { .. }) {
                // Unlinking thousands of files waits on the file system for seconds; the next
                // layer need not wait for it (the scope joins it before the build ends).
                let scratch = scratch.path();
                s.spawn(move || python::discard(scratch, component));
            }
            applied.add_sizes(&mut blob.sizes);
            if let Pass::Wheels(out) = &mut pass {
                if let Some(k) = &lp.key {
                    out.add(k, &blob, tree, applied.stripped.removed);
                }
                continue;
            }
            if let Some(k) = &lp.key {
                layer::remember(&cache, k, &blob)?;
            }
            if cached {
                reused.push((lp.component.clone(), blob.digest, is_apt(lp)));
            }
            layers.push(ImageLayer {
                component: lp.component.clone(),
                blob,
            });
        }
        Ok(())
    })?;
    if let Pass::Wheels(out) = &mut pass {
        out.taps.extend(taps);
        return Ok(None);
    }
    // The split's trees add up to the install: a tree for a component the plan has no layer
    // for would lose files (trees of reused layers are left over, as they should be).
    if let Some(left) = apt_layers {
        let planned = |c: &str| plan.layers.iter().any(|l| l.component == c);
        if let Some((c, _)) = left
            .trees
            .iter()
            .find(|(c, t)| !t.is_empty() && !planned(c))
        {
            return Err(BuildError::Unplanned(c.clone()));
        }
    }
    report_reused(&reused, plan, obs);

    let spec = ImageSpec {
        name: &profile.name,
        tag: &opts.tag,
        platform: &profile.platform,
        config: &profile.config,
        extra_env: plan.image.env.clone(),
        annotations: plan.image.annotations.clone(),
        entrypoint: plan.image.entrypoint.clone(),
        epoch: opts.epoch,
    };
    let json = image::build_image(&spec, &layers)?;
    // Every ELF file the image would run or load is for its platform's machine.
    machines::check(&cache, &layers, &json.config.1, &profile.platform, plan)?;
    let size = ByteSize(
        json.manifest.1.len() as u64
            + json.config.1.len() as u64
            + layers.iter().map(|l| l.blob.size).sum::<u64>(),
    );
    if let Some(limit) = opts.max_size.filter(|limit| size > *limit) {
        return Err(BuildError::TooLarge { size, limit });
    }
    // The cache's blobs are linked into the output: each must still be what was checked.
    for l in &layers {
        layer::ensure_intact(&cache, &l.blob)?;
    }
    let pushed = match &opts.target {
        Output::Disk(t) => {
            export::export(t, replace, &json, &layers, &cache)?;
            None
        }
        Output::Registry { dest, conn } => {
            let image = push_image(&json, &layers, &cache);
            Some(registry::push(
                dest,
                &opts.tag,
                &image,
                Some(&plan.sbom),
                conn,
                &cache,
                obs,
            )?)
        }
    };
    if let Some(p) = &opts.sbom {
        export::write_file(p, &plan.sbom)?;
    }
    for l in &layers {
        // Linking (and unlinking the replaced output's links) moved the blobs' ctime. A stamp
        // only saves a re-hash next time, so failing to write one is no error.
        let _ = cache.restamp_linked(&l.blob.digest);
    }
    Ok(Some(BuildOutcome {
        manifest_digest: json.manifest.0,
        config_digest: json.config.0,
        cached_layers: reused.len(),
        image_size: size,
        layers,
        output: opts.target.display(),
        tag: opts.tag.clone(),
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
        pushed,
    }))
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
fn check_over_lower(cache: &Cache, layers: &[ImageLayer], tree: &Tree) -> Result<(), BuildError> {
    if layers.is_empty() {
        return Ok(());
    }
    let mut lower = assemble::shape::NonDirs::new();
    for l in layers {
        let listing =
            layer::listing::load(cache, &l.blob).map_err(|source| layer::LayerError::Write {
                component: format!("{} listing", l.component),
                source,
            })?;
        lower.extend(listing);
    }
    assemble::shape::check_over(&lower, "base", tree)?;
    Ok(())
}

/// Whether `lp` is one of the apt install's layers.
fn is_apt(lp: &crate::plan::LayerPlan) -> bool {
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
