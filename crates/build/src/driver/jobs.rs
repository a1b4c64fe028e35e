//! The work of one job of the schedule (`schedule.rs`), on a thread of its own: the apt
//! install cut into its layers, one wheel component's layer, or one of the other layers
//! (base, `files:`, self-test, expectation, SBOM). Each returns what it wrote and the facts it
//! produced; none of them decides what a layer holds (the plan did) or when it runs (the
//! schedule does).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use super::schedule::Ctx;
use super::{apt, generated, machines, python, BuildError};
use crate::passes::{self, PassContext};
use crate::plan::Inputs;
use crate::sbom::SBOM_PATH;
use crate::sources::files::Files;
use crate::sources::rootfs::Rootfs;
use crate::sources::wheel_facts;
use crate::sources::Source;
use gpuimg_assemble::{DataSource, Tree};
use gpuimg_expect::DEFAULT_PATH;
use gpuimg_fetch::observe::Observer;
use gpuimg_oci::layer::{self, LayerBlob};
use gpuimg_pypi::FetchedWheel;
use gpuimg_wheel::WheelLibrary;

/// One layer a job wrote (or found by its tree's key).
pub(super) struct Written {
    /// The plan's index of the layer.
    pub index: usize,
    pub blob: LayerBlob,
    /// Whether the tree's key found it in the cache.
    pub cached: bool,
    /// Its tree, where it must be checked against the layers below it (which may not exist
    /// yet when it is written).
    pub check: Option<Tree>,
    /// What strip removed from it without protecting the loader's libraries (their list was
    /// not known yet): the schedule checks that none of them is one.
    pub unprotected: Option<BTreeSet<String>>,
}

/// What a job hands back.
#[derive(Default)]
pub(super) struct Done {
    pub written: Vec<Written>,
    /// The libraries of the wheels it installed, by wheel name, where the plan lacked them.
    pub libraries: BTreeMap<String, Vec<WheelLibrary>>,
    /// Their METADATA headers for the SBOM, likewise.
    pub headers: BTreeMap<String, Vec<(String, String)>>,
}

/// The apt install, cut into the layers `indices` (the apt layers not in the cache; the
/// components of the others are `cached`).
pub(super) fn apt_layers(
    ctx: &Ctx<'_>,
    loader: apt::AptLoader<'_>,
    indices: &[usize],
    cached: &BTreeSet<String>,
    obs: &mut dyn Observer,
) -> Result<Done, BuildError> {
    let plan = ctx.plan;
    let install = plan.apt.as_ref().ok_or(BuildError::Internal(
        "an apt layer was planned without its install",
    ))?;
    // The apt package components not in the cache are written while unpacking.
    let stream: BTreeSet<String> = indices
        .iter()
        .filter_map(|i| plan.layers.get(*i))
        .filter(|lp| matches!(lp.inputs, Inputs::Debs { .. }))
        .map(|lp| lp.component.clone())
        .collect();
    let first = indices
        .first()
        .and_then(|i| plan.layers.get(*i))
        .ok_or(BuildError::Internal("an apt job without layers"))?;
    // The install writes its package layers while it unpacks, holding decoded packages: with
    // the wheels' libraries known it runs as one layer write (no wheel layer is written beside
    // it); begun early, it must not hold the writes the wheel jobs it waits for make.
    let known = matches!(loader, apt::AptLoader::Known(_));
    let held = if known {
        Some(
            ctx.writing
                .lock()
                .map_err(|_| BuildError::Internal("a layer write panicked"))?,
        )
    } else {
        None
    };
    let mut made = apt::install_and_split(
        install,
        loader,
        &plan.strip_rules_for(first),
        &plan.image.platform,
        ctx.opts,
        ctx.scratch,
        cached,
        &stream,
        ctx.cache,
        obs,
    )?;
    let mut done = Done::default();
    for &i in indices {
        let lp = plan
            .layers
            .get(i)
            .ok_or(BuildError::Internal("an apt layer out of the plan"))?;
        let component = lp.component.as_str();
        let applied = made.applied.remove(component).unwrap_or_default();
        let (mut blob, cached) = match made.written.remove(component) {
            Some(blob) => (blob, false),
            None => {
                // Stripped with the whole install; a component that received nothing is an
                // empty layer (the plan promised it).
                let tree = made.trees.remove(component).unwrap_or_else(|| {
                    Tree::new(format!("`the apt packages` layer `{component}`"))
                });
                let (blob, cached) = match &held {
                    Some(_) => layer::write_layer(
                        component,
                        &tree,
                        ctx.opts.layer_options(),
                        ctx.cache,
                        obs,
                    )?,
                    None => write(ctx, component, &tree, obs)?,
                };
                machines::remember(ctx.cache, component, &blob, &tree)?;
                (blob, cached)
            }
        };
        applied.add_sizes(&mut blob.sizes);
        done.written.push(Written {
            index: i,
            blob,
            cached,
            check: None,
            unprotected: None,
        });
    }
    // The split's trees add up to the install: a tree for a component the plan has no layer
    // for would lose files (trees of reused layers are left over, as they should be).
    let planned = |c: &str| plan.layers.iter().any(|l| l.component == c);
    if let Some((c, _)) = made
        .trees
        .iter()
        .find(|(c, t)| !t.is_empty() && !planned(c))
    {
        return Err(BuildError::Unplanned(c.clone()));
    }
    Ok(done)
}

/// What a wheel job is asked to do.
pub(super) struct WheelJob<'a> {
    pub index: usize,
    /// The layer's wheels, fetched, in the plan's order of its names.
    pub files: Vec<FetchedWheel>,
    /// Write the layer (else it is in the cache and only its wheels' facts are wanted).
    pub write: bool,
    /// The loader's libraries, when known: strip leaves them.
    pub protect: Option<&'a HashSet<String>>,
    /// Produce the wheels' libraries and METADATA headers.
    pub facts: bool,
}

/// One wheel component's layer: its wheels installed, stripped, pruned and written; with
/// `facts`, their libraries taken as the layer is written.
pub(super) fn wheel_layer<'s, 'e>(
    ctx: &'e Ctx<'e>,
    job: &WheelJob<'_>,
    scope: &'s std::thread::Scope<'s, 'e>,
    obs: &mut dyn Observer,
) -> Result<Done, BuildError> {
    let plan = ctx.plan;
    let lp = plan
        .layers
        .get(job.index)
        .ok_or(BuildError::Internal("a wheel layer out of the plan"))?;
    let install = plan.python.as_ref().ok_or(BuildError::Internal(
        "a python-packages layer was planned without its wheels",
    ))?;
    let Inputs::Wheels { names } = &lp.inputs else {
        return Err(BuildError::Internal(
            "a wheel job for another kind of layer",
        ));
    };
    let wheels: Vec<&crate::lock::LockedWheel> = install
        .wheels
        .iter()
        .filter(|w| names.contains(&w.name))
        .collect();
    let mut done = Done::default();
    let mut taps = gpuimg_wheel::Taps::new();
    if job.write {
        let component = lp.component.as_str();
        let (mut tree, layer_taps) = python::install(
            install,
            &job.files,
            component,
            ctx.opts,
            ctx.scratch.path(),
            job.facts,
            obs,
        )?;
        taps = layer_taps;
        let none = HashSet::new();
        let applied = passes::apply(
            &mut tree,
            &lp.passes,
            &PassContext {
                rules: &plan.strip_rules_for(lp),
                protect: job.protect.unwrap_or(&none),
                cache: ctx.cache,
                what: &format!("the `{component}` wheels"),
            },
            obs,
        )?;
        let (mut blob, cached) = write(ctx, component, &tree, obs)?;
        machines::remember(ctx.cache, component, &blob, &tree)?;
        // Unlinking thousands of files waits on the file system for seconds; the next job
        // need not wait for it (the scope joins it before the build ends).
        let scratch = ctx.scratch.path();
        let owned = component.to_string();
        scope.spawn(move || python::discard(scratch, &owned));
        applied.add_sizes(&mut blob.sizes);
        done.written.push(Written {
            index: job.index,
            blob,
            cached,
            check: Some(tree),
            unprotected: job.protect.is_none().then_some(applied.stripped.removed),
        });
    }
    if job.facts {
        done.libraries =
            wheel_facts::taken_libraries(&wheels, &job.files, &install.python, &taps, ctx.cache)
                .map_err(BuildError::from)?;
        let mut recorded = wheel_facts::recorded_headers(ctx.cache, wheels.iter().copied());
        for (w, f) in wheels.iter().zip(&job.files) {
            let headers = match recorded.remove(&w.name) {
                Some(h) => h,
                None => {
                    let (h, failed) = wheel_facts::read_headers(ctx.cache, w, &f.path);
                    if let Some(warning) = failed {
                        obs.warn(&warning);
                    }
                    h
                }
            };
            done.headers.insert(w.name.clone(), headers);
        }
    }
    Ok(done)
}

/// One of the other layers: the base's rootfs, `files:`, the self-test, its expectation, the
/// SBOM (`sbom`, the derived document).
pub(super) fn other_layer(
    ctx: &Ctx<'_>,
    index: usize,
    sbom: Option<&[u8]>,
    obs: &mut dyn Observer,
) -> Result<Done, BuildError> {
    let plan = ctx.plan;
    let lp = plan
        .layers
        .get(index)
        .ok_or(BuildError::Internal("a layer out of the plan"))?;
    let component = lp.component.as_str();
    let mut applied = passes::Applied::default();
    let mut check = false;
    let tree = match &lp.inputs {
        Inputs::Rootfs {
            path,
            allow_special,
        } => {
            let mut tree = Rootfs {
                path: path.clone(),
                allow_special: *allow_special,
            }
            .tree(ctx.scratch.path(), obs)?;
            for w in tree.warnings() {
                obs.warn(&w);
            }
            applied = passes::apply(
                &mut tree,
                &lp.passes,
                &PassContext {
                    rules: &plan.strip_rules_for(lp),
                    protect: &HashSet::new(),
                    cache: ctx.cache,
                    what: "the base",
                },
                obs,
            )?;
            tree
        }
        Inputs::Files(files) => {
            let tree = Files {
                entries: files.clone(),
            }
            .tree(ctx.scratch.path(), obs)?;
            for w in tree.warnings() {
                obs.warn(&w);
            }
            check = true;
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
        Inputs::Sbom => {
            let json = sbom.ok_or(BuildError::Internal(
                "the SBOM layer ran before its document was derived",
            ))?;
            generated::file_tree(
                "sbom",
                SBOM_PATH,
                DataSource::Bytes(Arc::new(json.to_vec())),
                json.len() as u64,
                0o644,
            )
        }
        Inputs::Debs { .. } | Inputs::AptMetadata | Inputs::Wheels { .. } => {
            return Err(BuildError::Internal(
                "an apt or wheel layer was given to the job of another kind",
            ))
        }
    };
    let (mut blob, cached) = write(ctx, component, &tree, obs)?;
    machines::remember(ctx.cache, component, &blob, &tree)?;
    applied.add_sizes(&mut blob.sizes);
    Ok(Done {
        written: vec![Written {
            index,
            blob,
            cached,
            check: check.then_some(tree),
            unprotected: None,
        }],
        ..Done::default()
    })
}

/// Write `tree` as the layer `component`, one layer at a time (each layer's compressor uses
/// every CPU already; two at once would only hold two sets of buffers).
fn write(
    ctx: &Ctx<'_>,
    component: &str,
    tree: &Tree,
    obs: &mut dyn Observer,
) -> Result<(LayerBlob, bool), BuildError> {
    let _one = ctx
        .writing
        .lock()
        .map_err(|_| BuildError::Internal("a layer write panicked"))?;
    Ok(layer::write_layer(
        component,
        tree,
        ctx.opts.layer_options(),
        ctx.cache,
        obs,
    )?)
}
