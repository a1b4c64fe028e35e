//! Stage `resolve`: pick the newest compatible exact versions for the profile's `stack`, and the
//! host ranges (driver, kernel, module flavour) they need, intersected with the `host` pins.
//!
//! Owns the search (`search.rs`), the facts it checks (`checks.rs`, `host.rs`, `platform.rs`),
//! explanations of "no" with sources and the nearest working change, and the `Resolution`
//! handed on.
//! Architecture Invariant: no I/O; reads the `Catalog` and the `Profile` only.

mod checks;
mod error;
mod explain;
mod fact;
mod host;
pub mod host_check;
pub mod node;
pub mod node_rules;
mod pick;
mod platform;
mod request;
mod resolution;
mod search;

use std::collections::BTreeMap;

use crate::catalog::Catalog;
use crate::profile::{CompatMode, KernelModule, Profile};
use gpuimg_expect::version::{Constraint, Version};

pub use error::ResolveError;
pub use explain::{Explanation, Reason};
pub use fact::{Conflict, Fact};
pub use request::{lookup_gpu, Component, GpuTarget, Installs, Origin, Request};
pub use resolution::{HostRequirements, Resolution, ResolvedGpu};

use checks::Ctx;
use search::{Outcome, Search};

/// Resolve a profile against the catalog.
pub fn resolve(profile: &Profile, catalog: &Catalog) -> Result<Resolution, ResolveError> {
    let req = Request::from_profile(profile, catalog)?;
    resolve_request(&req, catalog)
}

/// Resolve an already parsed request (used by `catalog why`, tests and benchmarks).
pub fn resolve_request(req: &Request, catalog: &Catalog) -> Result<Resolution, ResolveError> {
    match attempt(req, catalog) {
        Ok(r) => Ok(r),
        Err(mut e) => {
            e.suggestions = suggest(req, catalog);
            Err(ResolveError::Incompatible(Box::new(e)))
        }
    }
}

/// Like [`resolve_request`], without searching for the nearest working change on "no".
pub fn decide(req: &Request, catalog: &Catalog) -> Result<Resolution, ResolveError> {
    attempt(req, catalog).map_err(|e| ResolveError::Incompatible(Box::new(e)))
}

fn attempt(req: &Request, catalog: &Catalog) -> Result<Resolution, Explanation> {
    let search = Search {
        ctx: Ctx { cat: catalog, req },
    };
    match search.run() {
        Outcome::Found(found) => Ok(build(req, catalog, *found)),
        Outcome::NotFound(fails) => Err(Explanation::new(summary(req), fails)),
    }
}

fn summary(req: &Request) -> String {
    let mut parts: Vec<String> = req
        .stack
        .iter()
        .map(|(c, k)| req.stack_label(*c, k))
        .collect();
    if !req.gpus.is_empty() {
        let names: Vec<String> = req.gpus.iter().map(GpuTarget::label).collect();
        parts.push(format!("GPUs {}", names.join(", ")));
    }
    if let Some(d) = &req.driver {
        parts.push(format!("driver `{d}`"));
    }
    if let Some(k) = &req.kernel {
        parts.push(format!("kernel `{k}`"));
    }
    // The platform matters (and is named) only where a listed GPU comes with one CPU.
    let cpu_bound = req
        .gpus
        .iter()
        .any(|g| g.gpu().is_some_and(|g| g.cpu.is_some()));
    if let (true, Some(p)) = (cpu_bound, &req.platform) {
        parts.push(format!("platform `{p}`"));
    }
    format!("nothing in the catalog satisfies {}", parts.join(" with "))
}

fn build(req: &Request, catalog: &Catalog, found: search::Found) -> Resolution {
    let p = &found.pick;
    let mut components = BTreeMap::new();
    let mut variants = BTreeMap::new();
    if let Some((r, v)) = p.pytorch {
        components.insert(Component::Pytorch, r.version.clone());
        variants.insert(Component::Pytorch, v.name.clone());
    }
    if let Some(r) = p.tensorflow {
        components.insert(Component::Tensorflow, r.version.clone());
    }
    if let Some((r, v)) = p.jax {
        components.insert(Component::Jax, r.version.clone());
        variants.insert(Component::Jax, v.name.clone());
    }
    if let Some(t) = p.cuda {
        components.insert(Component::Cuda, t.version.clone());
    }
    if let Some(c) = p.cudnn {
        components.insert(Component::Cudnn, c.version.clone());
    }
    if let Some(n) = p.nccl {
        components.insert(Component::Nccl, n.version.clone());
    }
    if let Some(x) = p.python {
        components.insert(Component::Python, x.version.clone());
    }

    let cuda_driver_floor = p.cuda.map(|t| match req.compat {
        CompatMode::Strict => t.version.truncate(2),
        CompatMode::Minor | CompatMode::Forward => Version::from_fields(&[t.version.major(), 0]),
    });
    let compute_capabilities = if !req.gpus.is_empty() {
        let mut v: Vec<Version> = req.gpus.iter().map(|g| g.cc().clone()).collect();
        v.sort();
        v.dedup();
        v
    } else if p.cuda.is_some() {
        stack_ccs(req, catalog, p)
    } else {
        vec![]
    };

    let mut warnings = Vec::new();
    if let (CompatMode::Minor, Some(t)) = (req.compat, p.cuda) {
        if let (Some(own), Some(low)) = (&t.driver, found.host.driver.min()) {
            if low < own {
                warnings.push(format!(
                    "With a driver below {own} (CUDA {}'s own minimum [{}]), CUDA {} runs by minor-version compatibility: device code must be SASS for the GPU (no PTX JIT), and APIs newer than the driver return cudaErrorCallRequiresNewerDriver [nv-compat-minor]",
                    t.version,
                    t.source.first().map(String::as_str).unwrap_or(""),
                    t.version
                ));
            }
        }
    }
    if !found.host.forward_branches.is_empty() {
        let b: Vec<String> = found
            .host
            .forward_branches
            .iter()
            .map(|b| format!("R{b}"))
            .collect();
        warnings.push(format!(
            "On {} drivers the image relies on forward compatibility (cuda-compat); it works on data-center GPUs only [nv-compat-forward]",
            b.join(", ")
        ));
    }
    let mut relied = found.relied.clone();
    relied.sort();
    relied.dedup();
    for f in relied {
        warnings.push(format!(
            "Unverified fact decides part of this answer: {}",
            f.render()
        ));
    }

    let gpus = req
        .gpus
        .iter()
        .map(|g| match g {
            GpuTarget::Named(x) => ResolvedGpu {
                name: x.name.clone(),
                compute_capability: x.cc.clone(),
                arch: Some(x.arch.clone()),
                peak_bandwidth_gbps: x.bandwidth_gbps,
            },
            GpuTarget::Cc(v) => ResolvedGpu {
                name: v.to_string(),
                compute_capability: v.clone(),
                arch: None,
                peak_bandwidth_gbps: None,
            },
        })
        .collect();
    Resolution {
        components,
        variants,
        host: HostRequirements {
            driver: found.host.driver,
            kernel: found.host.kernel,
            kernel_module: found.host.module,
            gpus,
            forward_compat_branches: found.host.forward_branches,
        },
        compat: req.compat,
        cuda_driver_floor,
        compute_capabilities,
        warnings,
    }
}

/// Every compute capability in the catalog that the picked stack runs on.
fn stack_ccs(req: &Request, catalog: &Catalog, p: &search_pick::Pick) -> Vec<Version> {
    catalog
        .compute_capabilities
        .iter()
        .filter(|s| {
            let one = Request {
                gpus: vec![GpuTarget::Cc(s.cc.clone())],
                ..req.clone()
            };
            let ctx = Ctx {
                cat: catalog,
                req: &one,
            };
            let mut pick = *p;
            let mut scratch = Vec::new();
            ctx.pytorch(&pick, &mut scratch).is_ok()
                && ctx.jax(&pick).is_ok()
                && ctx.cuda(&pick, &mut scratch).is_ok()
                && ctx.cudnn(&mut pick, &mut scratch).is_ok()
                && ctx.nccl(&pick, &mut scratch).is_ok()
        })
        .map(|s| s.cc.clone())
        .collect()
}

use pick as search_pick;

/// Single changes to the profile that resolve, nearest first. Each is checked as stated: the
/// request with exactly the printed value resolves (a hint that does not work is never
/// printed). Constraints the profile does not state (a fact the packages pinned: see
/// [`Request::origins`]) are never offered for change.
fn suggest(req: &Request, catalog: &Catalog) -> Vec<String> {
    let mut out = Vec::new();
    let works = |r: &Request| attempt(r, catalog).is_ok();
    for p in platform::alternatives(req) {
        let r = Request {
            platform: Some(p.clone()),
            ..req.clone()
        };
        if works(&r) {
            out.push(format!("`platform: {p}` would work"));
        }
    }
    let with_stack = |comp: Component, c: Constraint| {
        let mut r = req.clone();
        r.stack.insert(comp, c);
        r
    };
    for (comp, k) in &req.stack {
        if k.is_any() || !req.profile_states(*comp) {
            continue;
        }
        let Ok(res) = attempt(&with_stack(*comp, Constraint::any()), catalog) else {
            continue;
        };
        let Some(v) = res.version(*comp) else {
            continue;
        };
        let pin = if *comp == Component::Python {
            v.clone()
        } else {
            v.truncate(2)
        };
        let stated = pin.to_string().parse::<Constraint>().ok();
        if stated.is_some_and(|c| works(&with_stack(*comp, c))) {
            out.push(format!(
                "`stack.{comp}: \"{pin}\"` would work (resolves {comp} {v})"
            ));
        }
    }
    if req.compat != CompatMode::Forward {
        let mut r = req.clone();
        r.compat = if req.compat == CompatMode::Strict {
            CompatMode::Minor
        } else {
            CompatMode::Forward
        };
        if works(&r) {
            let m = if r.compat == CompatMode::Minor {
                "minor"
            } else {
                "forward"
            };
            out.push(format!("`compat: {m}` would work"));
        }
    }
    // A host range: the range the request resolves to without the pin, stated as the pin.
    let host_hint = |key: &str, unpinned: Request, set: fn(&mut Request, Constraint)| {
        let res = attempt(&unpinned, catalog).ok()?;
        let range = match key {
            "driver" => res.host.driver,
            _ => res.host.kernel,
        };
        let c: Constraint = range.to_string().parse().ok()?;
        let mut r = req.clone();
        set(&mut r, c);
        works(&r).then(|| format!("`host.{key}: \"{range}\"` would work"))
    };
    // A node's host facts (`host.from`) are changed in the node, not here: no hint for them.
    let own_host = !req.host_from_node;
    if own_host && req.driver.is_some() {
        let r = Request {
            driver: None,
            ..req.clone()
        };
        out.extend(host_hint("driver", r, |r, c| r.driver = Some(c)));
    }
    if own_host && req.kernel.is_some() {
        let r = Request {
            kernel: None,
            ..req.clone()
        };
        out.extend(host_hint("kernel", r, |r, c| r.kernel = Some(c)));
    }
    if own_host && req.kernel_module != KernelModule::Any {
        let r = Request {
            kernel_module: KernelModule::Any,
            ..req.clone()
        };
        if works(&r) {
            out.push("`host.kernel_module: any` would work".to_string());
        }
    }
    if own_host && req.gpus.len() > 1 {
        for (i, g) in req.gpus.iter().enumerate() {
            let mut r = req.clone();
            r.gpus.remove(i);
            if works(&r) {
                out.push(format!(
                    "leaving `{}` out of host.gpus would work",
                    g.label()
                ));
            }
        }
    }
    // What the index installs is no key of the profile: the change is an index that serves
    // the variant the request resolves to without it.
    if let Some(i) = req.installs.get(&Component::Pytorch) {
        let r = Request {
            installs: BTreeMap::new(),
            ..req.clone()
        };
        if let Ok(res) = attempt(&r, catalog) {
            if let (Some(v), Some(variant)) = (
                res.version(Component::Pytorch),
                res.variants.get(&Component::Pytorch),
            ) {
                out.insert(0, format!(
                    "an index that serves {} {v} ({variant}) would work: add it to `python.extra-indexes` (searched before `index`)",
                    i.package
                ));
            }
        }
    }
    out.truncate(4);
    out
}
