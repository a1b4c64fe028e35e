//! The build's one loop: runs the plan's layer jobs in dependency order, several at once.
//!
//! A layer whose key is known and cached is taken as it is. The wheels of the layers not in
//! the cache are fetched on a thread of their own, all at once, and each wheel layer's job
//! starts as soon as its wheels have arrived, while the others still download. A job that
//! needs [`Need::Derived`] (the apt install, which writes `ld.so.cache`; the SBOM) waits until
//! every wheel's libraries and METADATA are known — from the plan, or from the wheel jobs
//! that took them as they wrote their layers — and [`crate::plan::Late::complete`] has
//! derived what depends on them. At most `--jobs` jobs run at once; each reports to an
//! observer of its own, told when it ends. After the last job: every written tree is checked
//! against the layers below it, and each written layer is recorded under its key.
//! Decides nothing about what a layer holds: that is the plan's, and the jobs' (`jobs.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::mpsc;

use super::apt::AptLoader;
use super::gate::Gate;
use super::jobs::{self, Done, WheelJob};
use super::{check_over_lower, is_apt, BuildError, BuildOptions};
use crate::plan::{Derived, Inputs, Need, Plan};
use gpuimg_fetch::observe::{Observer, Recorded};
use gpuimg_oci::image::ImageLayer;
use gpuimg_oci::layer::{self, LayerBlob};
use gpuimg_pypi::{self as pypi, PythonRequest};
use gpuimg_pypi::{FetchedWheel, PinnedWheel};
use gpuimg_store::cache::Cache;
use gpuimg_store::digest::Digest;
use gpuimg_store::staging::Staged;

/// From how many job slots on the apt install begins beside the wheel jobs: its decoding
/// holds packages in memory (`gpuimg_apt` decode window), and on two CPUs, beside a wheel
/// layer being written and the next being installed, it took the cold PyTorch build from
/// about 180 MB to 270 MB for no gain in time (BENCHMARKS.md).
const EARLY_APT_JOBS: usize = 3;

/// What every job reads.
pub(super) struct Ctx<'a> {
    pub plan: &'a Plan,
    pub opts: &'a BuildOptions,
    pub python: Option<&'a PythonRequest>,
    pub cache: &'a Cache,
    pub scratch: &'a Staged,
    /// Held while a layer is written: one at a time (`jobs.rs`).
    pub writing: std::sync::Mutex<()>,
}

/// What the loop made: the image's layers in order, the ones reused (component, digest,
/// whether an apt layer), and the derived facts.
pub(super) struct Ran {
    pub layers: Vec<ImageLayer>,
    pub reused: Vec<(String, Digest, bool)>,
    pub derived: Derived,
}

/// A unit of work of the loop.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Job {
    /// The apt install: every apt layer not in the cache.
    Apt,
    /// A wheel layer (written, or only its wheels' facts taken).
    Wheels(usize),
    /// Any other layer.
    Other(usize),
}

enum Event {
    Arrived(usize, FetchedWheel),
    Fetched(Result<(), BuildError>, Recorded),
    Done(Job, Result<Done, BuildError>, Recorded),
}

/// Run every job of `ctx.plan`.
pub(super) fn run(ctx: &Ctx<'_>, obs: &mut dyn Observer) -> Result<Ran, BuildError> {
    let plan = ctx.plan;
    let n = plan.layers.len();
    // Set once: from the plan, or when the wheel jobs have produced every fact.
    let derived: std::sync::OnceLock<Derived> = std::sync::OnceLock::new();
    if let Some(d) = &plan.derived {
        let _ = derived.set(d.clone());
    }
    let mut layers: Vec<Option<(LayerBlob, bool)>> = (0..n).map(|_| None).collect();
    // Every layer's cached blob where its key is known, looked up once.
    let mut found: Vec<Option<LayerBlob>> = plan
        .layers
        .iter()
        .map(|lp| {
            lp.key
                .as_ref()
                .and_then(|k| layer::lookup(ctx.cache, k, obs))
        })
        .collect();
    let wheels = plan
        .python
        .as_ref()
        .map_or(&[][..], |p| p.wheels.as_slice());
    let mut libraries = plan
        .python
        .as_ref()
        .map(|p| p.libraries.clone())
        .unwrap_or_default();
    let mut headers = plan.late.headers().clone();
    let facts_known =
        |w: &str, l: &BTreeMap<_, _>, h: &BTreeMap<_, _>| l.contains_key(w) && h.contains_key(w);
    // The jobs still to start, and the wheels each wheel job waits for.
    let mut waiting: BTreeSet<Job> = BTreeSet::new();
    let mut wants: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut fetch: Vec<usize> = Vec::new();
    for (i, lp) in plan.layers.iter().enumerate() {
        match &lp.inputs {
            Inputs::Debs { .. } | Inputs::AptMetadata => {
                waiting.insert(Job::Apt);
            }
            Inputs::Wheels { names } => {
                let mine: Vec<usize> = (0..wheels.len())
                    .filter(|w| names.contains(&wheels[*w].name))
                    .collect();
                let need_facts = lp.produces.contains(&Need::Derived)
                    && mine
                        .iter()
                        .any(|w| !facts_known(&wheels[*w].name, &libraries, &headers));
                if found[i].is_some() && !need_facts {
                    continue;
                }
                fetch.extend(&mine);
                wants.insert(i, mine);
                waiting.insert(Job::Wheels(i));
            }
            _ if found[i].is_some() => {}
            _ => {
                waiting.insert(Job::Other(i));
            }
        }
    }
    for (i, f) in found.iter_mut().enumerate() {
        if let Some(blob) = f.take() {
            if !is_apt(&plan.layers[i]) {
                layers[i] = Some((blob, true));
            } else {
                *f = Some(blob);
            }
        }
    }
    // The biggest wheel first: its layer, the longest job, starts while the others download.
    fetch.sort_by_key(|w| std::cmp::Reverse(wheels[*w].size));
    let mut arrived: HashMap<usize, FetchedWheel> = HashMap::new();
    let mut fetching = !fetch.is_empty();
    // The apt install may begin before the wheels' libraries are known, with room for it:
    // it waits for them only to write `ld.so.cache` (`gate.rs`).
    let gate = std::sync::Arc::new(Gate::default());
    let mut apt_running = false;
    // Trees to check against the layers below them, and what strip removed unprotected.
    let mut checks: BTreeMap<usize, gpuimg_assemble::Tree> = BTreeMap::new();
    let mut unprotected: Vec<BTreeSet<String>> = Vec::new();
    let jobs = ctx.opts.jobs.max(1);
    std::thread::scope(|s| -> Result<(), BuildError> {
        let r = (|| -> Result<(), BuildError> {
            let (tx, rx) = mpsc::channel::<Event>();
            if fetching {
                let request = ctx.python.ok_or(BuildError::Internal(
                    "a python-packages layer was planned without its request",
                ))?;
                let pins: Vec<PinnedWheel> = fetch
                    .iter()
                    .map(|w| PinnedWheel::from(&wheels[*w]))
                    .collect();
                let tx = tx.clone();
                let order = fetch.clone();
                let (cache, offline) = (ctx.cache, ctx.opts.offline);
                s.spawn(move || {
                    let mut rec = Recorded::default();
                    let each = |i: usize, f: FetchedWheel| {
                        if let Some(w) = order.get(i) {
                            let _ = tx.send(Event::Arrived(*w, f));
                        }
                    };
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        pypi::fetch_each(&pins, request, cache, &mut rec, offline, &each)
                    }));
                    let r = match r {
                        Ok(r) => r.map(|_| ()).map_err(BuildError::from),
                        Err(_) => Err(BuildError::Internal("the wheel downloads panicked")),
                    };
                    let _ = tx.send(Event::Fetched(r, rec));
                });
            }
            let mut running = 0usize;
            loop {
                if derived.get().is_none()
                    && wheels
                        .iter()
                        .all(|w| facts_known(&w.name, &libraries, &headers))
                {
                    let d = plan.late.complete(&libraries, &headers)?;
                    check_unprotected(&unprotected, &d)?;
                    unprotected.clear();
                    for (i, lp) in plan.layers.iter().enumerate() {
                        let key = match lp.inputs {
                            Inputs::AptMetadata => d.metadata_key,
                            Inputs::Sbom => Some(d.sbom_key),
                            _ => None,
                        };
                        if let Some(blob) = key.and_then(|k| layer::lookup(ctx.cache, &k, obs)) {
                            if matches!(lp.inputs, Inputs::Sbom) {
                                waiting.remove(&Job::Other(i));
                                layers[i] = Some((blob, true));
                            } else {
                                found[i] = Some(blob);
                            }
                        }
                    }
                    gate.set(std::sync::Arc::new(d.loader.clone()));
                    let _ = derived.set(d);
                }
                let ready: Vec<Job> = waiting
                    .iter()
                    .copied()
                    .filter(|j| match j {
                        Job::Apt => derived.get().is_some() || jobs >= EARLY_APT_JOBS,
                        Job::Wheels(i) => wants
                            .get(i)
                            .is_some_and(|ws| ws.iter().all(|w| arrived.contains_key(w))),
                        Job::Other(i) => {
                            !plan.layers[*i].needs.contains(&Need::Derived)
                                || derived.get().is_some()
                        }
                    })
                    .collect();
                for job in ready {
                    // An apt install begun early mostly waits: it leaves its slot to the wheels.
                    if running - usize::from(apt_running) >= jobs {
                        break;
                    }
                    waiting.remove(&job);
                    let tx = tx.clone();
                    let spawned = match job {
                        Job::Apt => {
                            let apt: Vec<usize> = (0..n)
                                .filter(|i| is_apt(&plan.layers[*i]) && found[*i].is_none())
                                .collect();
                            for i in (0..n).filter(|i| is_apt(&plan.layers[*i])) {
                                if let Some(blob) = found[i].take() {
                                    layers[i] = Some((blob, true));
                                }
                            }
                            if apt.is_empty() {
                                continue;
                            }
                            let cached: BTreeSet<String> = (0..n)
                                .filter(|i| is_apt(&plan.layers[*i]) && layers[*i].is_some())
                                .map(|i| plan.layers[i].component.clone())
                                .collect();
                            let loader = match derived.get() {
                                Some(d) => AptLoader::Known(&d.loader),
                                None => AptLoader::Later(&gate),
                            };
                            apt_running = true;
                            s.spawn(move || {
                                let mut rec = Recorded::default();
                                let r = guarded(|| {
                                    jobs::apt_layers(ctx, loader, &apt, &cached, &mut rec)
                                });
                                let _ = tx.send(Event::Done(job, r, rec));
                            })
                        }
                        Job::Wheels(i) => {
                            let files: Vec<FetchedWheel> = wants
                                .get(&i)
                                .map(|ws| {
                                    ws.iter().filter_map(|w| arrived.get(w).cloned()).collect()
                                })
                                .unwrap_or_default();
                            let protect: Option<HashSet<String>> = derived
                                .get()
                                .map(|d| d.loader.found.iter().map(|(p, _)| p.clone()).collect());
                            let write = layers[i].is_none();
                            let facts = plan.layers[i].produces.contains(&Need::Derived);
                            s.spawn(move || {
                                let mut rec = Recorded::default();
                                let job_spec = WheelJob {
                                    index: i,
                                    files,
                                    write,
                                    protect: protect.as_ref(),
                                    facts,
                                };
                                let r = guarded(|| jobs::wheel_layer(ctx, &job_spec, s, &mut rec));
                                let _ = tx.send(Event::Done(job, r, rec));
                            })
                        }
                        Job::Other(i) => {
                            let sbom = derived.get().map(|d| d.sbom.clone());
                            s.spawn(move || {
                                let mut rec = Recorded::default();
                                let r = guarded(|| {
                                    jobs::other_layer(ctx, i, sbom.as_deref(), &mut rec)
                                });
                                let _ = tx.send(Event::Done(job, r, rec));
                            })
                        }
                    };
                    drop(spawned);
                    running += 1;
                }
                if waiting.is_empty() && running == 0 && !fetching {
                    break;
                }
                let producing = waiting.iter().any(|j| matches!(j, Job::Wheels(_)))
                    || running > usize::from(apt_running)
                    || fetching;
                if (running == 0 && !fetching && !waiting.is_empty())
                    || (derived.get().is_none() && !producing)
                {
                    return Err(BuildError::Internal(
                        "the build's jobs wait for facts no job produces",
                    ));
                }
                let event = rx
                    .recv()
                    .map_err(|_| BuildError::Internal("the build's jobs stopped reporting"))?;
                match event {
                    Event::Arrived(w, f) => {
                        arrived.insert(w, f);
                    }
                    Event::Fetched(r, rec) => {
                        rec.replay(obs);
                        r?;
                        fetching = false;
                    }
                    Event::Done(job, r, rec) => {
                        running -= 1;
                        if job == Job::Apt {
                            apt_running = false;
                        }
                        rec.replay(obs);
                        let done = r?;
                        libraries.extend(done.libraries);
                        headers.extend(done.headers);
                        for w in done.written {
                            if let Some(t) = w.check {
                                checks.insert(w.index, t);
                            }
                            if let Some(u) = w.unprotected {
                                match derived.get() {
                                    Some(d) => check_unprotected(&[u], d)?,
                                    None => unprotected.push(u),
                                }
                            }
                            if let Some(slot) = layers.get_mut(w.index) {
                                *slot = Some((w.blob, w.cached));
                            }
                        }
                    }
                }
            }
            Ok(())
        })();
        if r.is_err() {
            // Wake an apt install waiting for the wheels' libraries: the build stopped.
            gate.stop();
        }
        r
    })?;
    let derived = derived.into_inner().ok_or(BuildError::Internal(
        "the build ended before its derived facts were known",
    ))?;
    let mut image = Vec::with_capacity(n);
    let mut reused = Vec::new();
    for (i, (lp, l)) in plan.layers.iter().zip(layers).enumerate() {
        let (blob, cached) = l.ok_or(BuildError::Internal("a planned layer was never written"))?;
        // Written this build: checked against the layers below it, which all exist now.
        if let Some(tree) = checks.get(&i) {
            check_over_lower(ctx.cache, &image, tree)?;
        }
        if cached {
            reused.push((lp.component.clone(), blob.digest, is_apt(lp)));
        } else {
            let key = match lp.inputs {
                Inputs::AptMetadata => derived.metadata_key,
                Inputs::Sbom => Some(derived.sbom_key),
                _ => lp.key,
            };
            if let Some(k) = key {
                layer::remember(ctx.cache, &k, &blob)?;
            }
        }
        image.push(ImageLayer {
            component: lp.component.clone(),
            blob,
        });
    }
    Ok(Ran {
        layers: image,
        reused,
        derived,
    })
}

/// A job's work, with a panic turned into an internal error (the loop waits for every job's
/// report).
fn guarded(f: impl FnOnce() -> Result<Done, BuildError>) -> Result<Done, BuildError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or(Err(BuildError::Internal("a build job panicked")))
}

/// A wheel layer written before the loader's libraries were known must not have lost one of
/// them to strip (the loader leaves out what strip removes, so this holds by construction:
/// a failure is a bug).
fn check_unprotected(removed: &[BTreeSet<String>], d: &Derived) -> Result<(), BuildError> {
    let hit = removed
        .iter()
        .any(|r| d.loader.found.iter().any(|(p, _)| r.contains(p)));
    if hit {
        return Err(BuildError::Internal(
            "strip removed a library the loader indexes from a wheel layer",
        ));
    }
    Ok(())
}
