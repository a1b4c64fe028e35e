//! The host side of a pick: the admissible driver and kernel ranges and the kernel-module
//! flavour, as intersections of requirements that each carry the facts they rest on.
//!
//! A GPU whose first driver is `unknown` is never read as "any driver": `compat: strict` admits
//! only the releases known to drive it (none known: "no"), `minor` and `forward` warn when the
//! answer reaches below them. A range wholly below a GPU's first open-module listing is the
//! proprietary module's.
//!
//! When the driver range becomes empty, the conflict names the requirement that emptied it and
//! the earlier one it collides with. Pure: reads the catalog, the request and the pick only.

use crate::catalog::{BranchKind, Catalog, DriverBranch, DriverFloor, Gpu, ModuleFlavour};
use crate::profile::{CompatMode, KernelModule};
use gpuimg_expect::version::{Version, VersionSet};

use super::fact::{Conflict, Fact};
use super::pick::Pick;
use super::request::{cc_sources, GpuTarget, Request};

/// What the host must provide for a pick.
#[derive(Debug, Clone)]
pub(super) struct HostRange {
    pub driver: VersionSet,
    pub kernel: VersionSet,
    pub module: KernelModule,
    /// Older long-term branches usable through the image's cuda-compat (compat: forward).
    pub forward_branches: Vec<u64>,
}

struct Req {
    set: VersionSet,
    facts: Vec<Fact>,
}

fn branch_set(cat: &Catalog, b: &DriverBranch) -> VersionSet {
    let lo = Version::from_fields(&[b.branch]);
    match cat.next_branch(b) {
        Some(n) => VersionSet::range(Some((lo, true)), Some((Version::from_fields(&[n]), false))),
        None => VersionSet::at_least(&lo),
    }
}

fn branches_where(cat: &Catalog, keep: impl Fn(&DriverBranch) -> bool) -> VersionSet {
    cat.drivers
        .iter()
        .filter(|b| keep(b))
        .fold(VersionSet::empty(), |acc, b| acc.union(&branch_set(cat, b)))
}

/// "R555..R620" for the branches that fail `keep`.
fn excluded_names(cat: &Catalog, keep: impl Fn(&DriverBranch) -> bool) -> (String, Vec<String>) {
    let ex: Vec<&DriverBranch> = cat.drivers.iter().filter(|b| !keep(b)).collect();
    let mut sources: Vec<String> = ex.iter().flat_map(|b| b.source.iter().cloned()).collect();
    sources.sort();
    sources.dedup();
    let names = match (ex.first(), ex.last()) {
        (Some(a), Some(b)) if a.branch == b.branch => format!("R{}", a.branch),
        (Some(a), Some(b)) => format!("R{}..R{}", a.branch, b.branch),
        _ => String::new(),
    };
    (names, sources)
}

/// For a GPU whose first driver no source gives: the fact saying so, and the lowest release
/// the catalog knows to drive it (the first open-module release listing it, or its last branch).
fn unknown_floor(gpu: &Gpu) -> (Fact, Option<Version>) {
    let open = gpu.open_min_driver.as_ref().map(|v| {
        (
            v.clone(),
            format!("{v}, the first open kernel module that lists it"),
        )
    });
    let last = gpu
        .last_branch
        .map(|b| (Version::from_fields(&[b]), format!("R{b}, its last branch")));
    let known = match (open, last) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    };
    let text = match &known {
        Some((_, what)) => format!(
            "{}'s first driver is not known; the first release known to drive it is {what}",
            gpu.name
        ),
        None => format!("{}'s first driver is not known", gpu.name),
    };
    let fact = Fact::new(text, &cc_sources(gpu)).unverified_if(true);
    (fact, known.map(|(v, _)| v))
}

fn gpu_fact(g: &GpuTarget) -> Fact {
    match g {
        GpuTarget::Named(gpu) => Fact::new(
            format!("{} is compute capability {}", gpu.name, gpu.cc),
            &cc_sources(gpu),
        )
        .unverified_if(gpu.unverified.iter().any(|u| u == "cc")),
        GpuTarget::Cc(v) => Fact::profile(format!("host.gpus lists compute capability {v}")),
    }
}

/// The module flavours every listed GPU can use, within the profile's `kernel_module`.
pub(super) fn module_flavours(req: &Request) -> Result<Vec<ModuleFlavour>, Conflict> {
    let mut allowed = match req.kernel_module {
        KernelModule::Open => vec![ModuleFlavour::Open],
        KernelModule::Proprietary => vec![ModuleFlavour::Proprietary],
        KernelModule::Any => vec![ModuleFlavour::Open, ModuleFlavour::Proprietary],
    };
    let mut facts = vec![];
    if req.kernel_module != KernelModule::Any {
        facts.push(Fact::profile(format!(
            "host.kernel_module is {}",
            allowed[0].as_str()
        )));
    }
    for g in &req.gpus {
        if let Some(gpu) = g.gpu() {
            let before = allowed.len();
            allowed.retain(|f| gpu.modules.contains(f));
            let flav: Vec<&str> = gpu.modules.iter().map(|m| m.as_str()).collect();
            let f = Fact::new(
                format!(
                    "{} is driven by the {} kernel module only",
                    gpu.name,
                    flav.join("/")
                ),
                &cc_sources(gpu),
            )
            .unverified_if(gpu.unverified.iter().any(|u| u == "modules"));
            if allowed.len() < before || gpu.modules.len() == 1 {
                facts.push(f);
            }
            if allowed.is_empty() {
                return Err(Conflict::new(
                    facts,
                    "no kernel-module flavour drives every listed GPU",
                ));
            }
        }
    }
    Ok(allowed)
}

/// The host range for `pick`, or the conflict that empties it. Unverified facts relied on go to `relied`.
pub(super) fn host_range(
    cat: &Catalog,
    req: &Request,
    pick: &Pick,
    relied: &mut Vec<Fact>,
) -> Result<HostRange, Conflict> {
    super::platform::gpus_fit(req)?;
    let flavours = module_flavours(req)?;
    let open_only = flavours == [ModuleFlavour::Open];
    let mut reqs: Vec<Req> = Vec::new();
    // Once anything about the host is asked, only branches the catalog knows are admissible.
    let asks =
        !req.gpus.is_empty() || req.driver.is_some() || req.kernel.is_some() || pick.cuda.is_some();
    if let (true, Some(first)) = (asks, cat.drivers.first()) {
        reqs.push(Req {
            set: VersionSet::at_least(&Version::from_fields(&[first.branch])),
            facts: vec![Fact::new(
                format!(
                    "the catalog knows driver branches from R{} on",
                    first.branch
                ),
                &first.source,
            )],
        });
    }
    if let Some(d) = &req.driver {
        reqs.push(Req {
            set: d.to_set(),
            facts: vec![Fact::profile(format!("host.driver is `{d}`"))],
        });
    }
    // GPUs: first driver, open-module listing, last branch, branches that drive their compute capability.
    let mut unknown_floors: Vec<(Fact, Option<Version>)> = Vec::new();
    for g in &req.gpus {
        if let Some(gpu) = g.gpu() {
            match gpu.min_driver.as_ref().and_then(DriverFloor::known) {
                Some(m) => reqs.push(Req {
                    set: VersionSet::at_least(m),
                    facts: vec![Fact::new(
                        format!("{} needs driver >= {m}", gpu.name),
                        &cc_sources(gpu),
                    )],
                }),
                // Unknown: strict admits only releases known to drive it; minor and forward
                // warn below when the answer reaches under them.
                None => {
                    let (fact, known) = unknown_floor(gpu);
                    let facts = vec![fact.clone(), Fact::profile("compat is strict")];
                    match (req.compat, known) {
                        (CompatMode::Strict, Some(k)) => reqs.push(Req {
                            set: VersionSet::at_least(&k),
                            facts,
                        }),
                        (CompatMode::Strict, None) => {
                            return Err(Conflict::new(
                                facts,
                                format!("compat: strict cannot be met on {}", gpu.name),
                            ))
                        }
                        (_, known) => unknown_floors.push((fact, known)),
                    }
                }
            }
            if let (true, Some(m)) = (open_only, &gpu.open_min_driver) {
                let unv = gpu.unverified.iter().any(|u| u == "open_min_driver");
                let f = Fact::new(
                    format!(
                        "{} is first listed by the open kernel module in {m}",
                        gpu.name
                    ),
                    &cc_sources(gpu),
                )
                .unverified_if(unv);
                if unv {
                    relied.push(f.clone());
                }
                reqs.push(Req {
                    set: VersionSet::at_least(m),
                    facts: vec![f],
                });
            }
            if let Some(last) = gpu.last_branch {
                let set = VersionSet::below(&Version::from_fields(&[last + 1]));
                reqs.push(Req {
                    set,
                    facts: vec![Fact::new(
                        format!("{}'s last driver branch is R{last}", gpu.name),
                        &cc_sources(gpu),
                    )],
                });
            }
        }
        let cc = g.cc();
        if cat.drivers.iter().any(|b| &b.min_cc > cc) {
            let (names, sources) = excluded_names(cat, |b| &b.min_cc <= cc);
            let min = cat
                .drivers
                .iter()
                .filter(|b| &b.min_cc > cc)
                .map(|b| &b.min_cc)
                .min();
            let text = format!(
                "driver branches {names} drive only compute capability >= {}",
                min.map(|v| v.to_string()).unwrap_or_default()
            );
            reqs.push(Req {
                set: branches_where(cat, |b| &b.min_cc <= cc),
                facts: vec![Fact::new(text, &sources), gpu_fact(g)],
            });
        }
    }
    // Kernel: branches whose minimum kernel the profile's kernel range can meet.
    if let Some(k) = &req.kernel {
        let ks = k.to_set();
        let fits = |b: &DriverBranch| {
            b.min_kernel
                .as_ref()
                .is_none_or(|m| ks.overlaps(&VersionSet::at_least(m)))
        };
        if cat.drivers.iter().any(|b| !fits(b)) {
            let (names, sources) = excluded_names(cat, fits);
            let need = cat
                .drivers
                .iter()
                .filter(|b| !fits(b))
                .filter_map(|b| b.min_kernel.as_ref())
                .min();
            let text = format!(
                "driver branches {names} need Linux >= {}",
                need.map(|v| v.to_string()).unwrap_or_default()
            );
            reqs.push(Req {
                set: branches_where(cat, fits),
                facts: vec![
                    Fact::new(text, &sources),
                    Fact::profile(format!("host.kernel is `{k}`")),
                ],
            });
        }
    }
    // CUDA: the driver floor by compat mode.
    let mut forward_branches = Vec::new();
    if let Some(t) = pick.cuda {
        let fam = cat.family(t.version.major());
        match req.compat {
            CompatMode::Strict => match &t.driver {
                Some(d) => reqs.push(Req {
                    set: VersionSet::at_least(d),
                    facts: vec![Fact::new(
                        format!("CUDA {} needs driver >= {d}", t.version),
                        &t.source,
                    )],
                }),
                None => {
                    return Err(Conflict::new(
                        vec![
                            Fact::new(
                                format!("CUDA {}'s own driver minimum is not known", t.version),
                                &t.source,
                            )
                            .unverified_if(true),
                            Fact::profile("compat is strict"),
                        ],
                        format!("compat: strict cannot be met by CUDA {}", t.version),
                    ))
                }
            },
            CompatMode::Minor | CompatMode::Forward => {
                if let Some(f) = fam {
                    let mut set = VersionSet::at_least(&f.minor_compat_driver);
                    let mut facts = vec![Fact::new(
                        format!(
                            "CUDA {}.x runs on drivers >= {} by minor-version compatibility",
                            f.major, f.minor_compat_driver
                        ),
                        &f.source,
                    )];
                    if req.compat == CompatMode::Forward {
                        let dc = !req.gpus.is_empty()
                            && req
                                .gpus
                                .iter()
                                .all(|g| g.gpu().is_some_and(|x| x.datacenter));
                        let floor_branch = f.minor_compat_driver.major();
                        let lts: Vec<&DriverBranch> = cat
                            .drivers
                            .iter()
                            .filter(|b| b.kind == Some(BranchKind::Ltsb) && b.branch < floor_branch)
                            .collect();
                        if dc && !lts.is_empty() {
                            for b in &lts {
                                let lo = Version::from_fields(&[b.branch]);
                                set = set.union(&VersionSet::range(
                                    Some((lo, true)),
                                    Some((Version::from_fields(&[b.branch + 1]), false)),
                                ));
                                forward_branches.push(b.branch);
                            }
                            let names: Vec<String> =
                                lts.iter().map(|b| format!("R{}", b.branch)).collect();
                            facts.push(Fact::new(
                                format!("forward compatibility (cuda-compat in the image) also runs it on long-term branches {} of data-center GPUs", names.join(", ")),
                                &["nv-compat-forward".to_string(), "nv-dc-drivers-620".to_string()],
                            ));
                        }
                    }
                    reqs.push(Req { set, facts });
                }
            }
        }
        if req.compat == CompatMode::Minor && t.driver.is_none() {
            relied.push(
                Fact::new(
                    format!("CUDA {}'s own driver minimum is not known", t.version),
                    &t.source,
                )
                .unverified_if(true),
            );
        }
    }
    if let Some(c) = &pick.cudnn {
        if let Some(b) = c.build {
            if let Some(d) = &b.driver {
                reqs.push(Req {
                    set: VersionSet::at_least(d),
                    facts: vec![Fact::new(
                        format!(
                            "cuDNN {} ({}) needs driver >= {d}",
                            c.record.version,
                            b.label.as_deref().unwrap_or("build")
                        ),
                        &b.source,
                    )],
                });
            }
        }
    }
    if let Some((r, v)) = pick.jax {
        reqs.push(Req {
            set: v.driver.to_set(),
            facts: vec![Fact::new(
                format!("jax {} ({}) needs driver `{}`", r.version, v.name, v.driver),
                &v.source,
            )],
        });
    }

    // Intersect; on the first empty result, name the requirement that collides.
    let mut driver = VersionSet::all();
    for (i, r) in reqs.iter().enumerate() {
        let next = driver.intersect(&r.set);
        if next.is_empty() {
            let partner = reqs[..i].iter().find(|p| !p.set.overlaps(&r.set));
            let mut facts: Vec<Fact> = match partner {
                Some(p) => p.facts.clone(),
                None => reqs[..i].iter().flat_map(|p| p.facts.clone()).collect(),
            };
            facts.extend(r.facts.iter().cloned());
            return Err(Conflict::new(
                facts,
                "no driver version satisfies all of these",
            ));
        }
        driver = next;
    }

    // A GPU whose first driver is unknown, in an answer reaching below the releases known to drive it.
    for (fact, known) in unknown_floors {
        if known.is_none_or(|k| driver.min().is_none_or(|lo| lo < &k)) {
            relied.push(fact);
        }
    }

    // Kernel: the lowest minimum among the branches still admissible.
    let min_kernel = cat
        .drivers
        .iter()
        .filter(|b| branch_set(cat, b).overlaps(&driver))
        .filter_map(|b| b.min_kernel.as_ref())
        .min();
    let mut kernel = req
        .kernel
        .as_ref()
        .map_or(VersionSet::all(), |k| k.to_set());
    if let Some(m) = min_kernel {
        kernel = kernel.intersect(&VersionSet::at_least(m));
    }
    for b in cat
        .drivers
        .iter()
        .filter(|b| req.kernel.is_some() && branch_set(cat, b).overlaps(&driver))
    {
        if b.min_kernel.is_none() || b.unverified.iter().any(|u| u == "kernel") {
            relied.push(
                Fact::new(
                    format!("the minimum Linux kernel of R{} is not published", b.branch),
                    &b.source,
                )
                .unverified_if(true),
            );
        }
    }
    // The open module lists a GPU from its `open_min_driver` on: a range wholly below it is
    // driven by the proprietary module only.
    let mut flavours = flavours;
    for gpu in req.gpus.iter().filter_map(GpuTarget::gpu) {
        if let (true, Some(m)) = (flavours.len() > 1, &gpu.open_min_driver) {
            if !driver.overlaps(&VersionSet::at_least(m)) {
                flavours.retain(|f| *f != ModuleFlavour::Open);
            }
        }
    }
    let module = match flavours.as_slice() {
        [ModuleFlavour::Open] => KernelModule::Open,
        [ModuleFlavour::Proprietary] => KernelModule::Proprietary,
        _ => KernelModule::Any,
    };
    Ok(HostRange {
        driver,
        kernel,
        module,
        forward_branches,
    })
}
