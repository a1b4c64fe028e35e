//! Property test: for random profiles, every answer the resolver gives satisfies every
//! constraint when checked by an independent checker written here (point by point, not with
//! interval sets), and when it says "no", brute force over the catalog finds nothing either.

use gpuimg_build::catalog::{
    Catalog, CudaRelease, DriverFloor, Gpu, ModuleFlavour, PytorchRelease, PytorchVariant,
};
use gpuimg_build::profile::{CompatMode, KernelModule};
use gpuimg_build::resolve::{resolve_request, Component, GpuTarget, Request, ResolveError};
use gpuimg_expect::version::{Constraint, Version};
use proptest::prelude::*;
use std::sync::OnceLock;

fn catalog() -> &'static Catalog {
    static C: OnceLock<Catalog> = OnceLock::new();
    C.get_or_init(|| Catalog::embedded().expect("embedded catalog"))
}

fn v(s: &str) -> Version {
    s.parse().unwrap()
}

const DRIVERS: &[&str] = &[
    ">=550",
    "<580",
    ">=590",
    "570",
    ">=535,<545",
    "<=525.60.13",
    "<560",
];
const KERNELS: &[&str] = &["<4", ">=5.15", ">=6", "<3"];

struct Choice<'c> {
    pytorch: Option<(&'c PytorchRelease, &'c PytorchVariant)>,
    cuda: Option<&'c CudaRelease>,
    python: Option<Version>,
}

/// Same-major SASS with a lower or equal minor, or PTX at or below the device.
fn runs(sms: &[Version], ptx: Option<&Version>, cc: &Version) -> bool {
    sms.iter()
        .any(|s| s.fields()[0] == cc.fields()[0] && s.field(1) <= cc.field(1))
        || ptx.is_some_and(|p| p <= cc)
}

fn gpus_of(req: &Request) -> Vec<&Gpu> {
    req.gpus.iter().filter_map(|g| g.gpu()).collect()
}

/// The driver floor the cuDNN build needs, or None when no build fits (outer None: no cuDNN).
fn cudnn_floor(c: &Catalog, req: &Request, ch: &Choice) -> Result<Option<Version>, ()> {
    let Some(pin) = ch.pytorch.and_then(|(_, v)| v.cudnn.as_ref()) else {
        return Ok(None);
    };
    let t = ch.cuda.ok_or(())?;
    let rec = c
        .cudnn
        .iter()
        .filter(|r| {
            let rf = r.version.fields();
            rf.len() <= pin.fields().len() && rf.iter().enumerate().all(|(i, x)| pin.field(i) == *x)
        })
        .max_by_key(|r| r.version.fields().len())
        .ok_or(())?;
    for b in &rec.builds {
        let cuda_ok = b.cuda.iter().any(|p| {
            p.fields()
                .iter()
                .enumerate()
                .all(|(i, x)| t.version.field(i) == *x)
        });
        let cc_ok = req
            .gpus
            .iter()
            .all(|g| b.cc.as_ref().is_none_or(|l| runs(l, None, g.cc())));
        if cuda_ok && cc_ok {
            return Ok(Some(b.driver.clone().unwrap_or_else(|| v("0"))));
        }
    }
    Err(())
}

/// Everything but the driver: versions, wheels, compute capabilities, pins, module flavour.
fn stack_ok(c: &Catalog, req: &Request, ch: &Choice) -> bool {
    let want = |comp: Component, x: &Version| req.stack.get(&comp).is_none_or(|k| k.matches(x));
    if let Some((r, var)) = ch.pytorch {
        if !want(Component::Pytorch, &r.version) {
            return false;
        }
        let Some(t) = ch.cuda else { return false };
        if t.version.truncate(var.cuda.fields().len()) != var.cuda {
            return false;
        }
        if !ch.python.as_ref().is_some_and(|p| r.python.contains(p)) {
            return false;
        }
        if req
            .gpus
            .iter()
            .any(|g| !runs(&var.sm, var.ptx.as_ref(), g.cc()))
        {
            return false;
        }
        if let Some(pin) = &var.nccl {
            let Some(n) = c.nccl.iter().find(|n| &n.version == pin) else {
                return false;
            };
            if !n.cuda.contains(&t.version.fields()[0])
                || req
                    .gpus
                    .iter()
                    .any(|g| n.cc_max.as_ref().is_some_and(|m| g.cc() > m))
            {
                return false;
            }
        }
        if cudnn_floor(c, req, ch).is_err() {
            return false;
        }
    }
    if let Some(t) = ch.cuda {
        if !want(Component::Cuda, &t.version) {
            return false;
        }
        for g in &req.gpus {
            let cc = g.cc();
            if cc < &t.sm_min || cc > &t.sm_max {
                return false;
            }
            let Some(s) = c.compute_capabilities.iter().find(|s| &s.cc == cc) else {
                return false;
            };
            let mm = Version::from_fields(&[t.version.field(0), t.version.field(1)]);
            if s.first_cuda.as_ref().is_some_and(|f| &mm < f)
                || s.last_cuda.as_ref().is_some_and(|l| &mm > l)
            {
                return false;
            }
        }
    }
    if let Some(p) = &ch.python {
        if !want(Component::Python, p) {
            return false;
        }
    }
    !flavours(req).is_empty()
}

fn flavours(req: &Request) -> Vec<ModuleFlavour> {
    [ModuleFlavour::Open, ModuleFlavour::Proprietary]
        .into_iter()
        .filter(|f| match req.kernel_module {
            KernelModule::Open => *f == ModuleFlavour::Open,
            KernelModule::Proprietary => *f == ModuleFlavour::Proprietary,
            KernelModule::Any => true,
        })
        .filter(|f| gpus_of(req).iter().all(|g| g.modules.contains(f)))
        .collect()
}

/// The lowest release the catalog says drives `g`: its first open-module listing or its last branch.
fn first_known_driver(g: &Gpu) -> Option<Version> {
    let last = g.last_branch.map(|b| Version::from_fields(&[b]));
    g.open_min_driver.iter().cloned().chain(last).min()
}

/// One driver version `d`, checked rule by rule.
fn driver_ok(c: &Catalog, req: &Request, ch: &Choice, d: &Version) -> bool {
    if req.driver.as_ref().is_some_and(|k| !k.matches(d)) {
        return false;
    }
    let major = d.fields()[0];
    let branch = c.drivers.iter().rev().find(|b| b.branch <= major);
    if !req.gpus.is_empty() || req.kernel.is_some() || req.driver.is_some() || ch.cuda.is_some() {
        let Some(b) = branch else { return false };
        if req.gpus.iter().any(|g| &b.min_cc > g.cc()) {
            return false;
        }
        if let (Some(k), Some(mk)) = (&req.kernel, &b.min_kernel) {
            let points = [
                "3.0", "3.10", "3.9", "4.0", "4.15", "5.15", "6", "6.1", "100",
            ];
            if !points
                .iter()
                .map(|p| v(p))
                .any(|p| k.matches(&p) && &p >= mk)
            {
                return false;
            }
        }
    }
    let open_only = flavours(req) == [ModuleFlavour::Open];
    for g in gpus_of(req) {
        let floor = g.min_driver.as_ref().and_then(DriverFloor::known);
        if floor.is_some_and(|m| d < m) || g.last_branch.is_some_and(|l| major > l) {
            return false;
        }
        // First driver unknown: strict admits only the releases known to drive it.
        if floor.is_none()
            && req.compat == CompatMode::Strict
            && first_known_driver(g).is_none_or(|k| d < &k)
        {
            return false;
        }
        if open_only && g.open_min_driver.as_ref().is_some_and(|m| d < m) {
            return false;
        }
    }
    if let Ok(Some(f)) = cudnn_floor(c, req, ch) {
        if d < &f {
            return false;
        }
    }
    if let Some(t) = ch.cuda {
        let fam = c
            .cuda_families
            .iter()
            .find(|f| f.major == t.version.fields()[0]);
        let ok = match req.compat {
            CompatMode::Strict => t.driver.as_ref().is_some_and(|m| d >= m),
            CompatMode::Minor => fam.is_some_and(|f| d >= &f.minor_compat_driver),
            CompatMode::Forward => fam.is_some_and(|f| {
                d >= &f.minor_compat_driver
                    || (!req.gpus.is_empty()
                        && gpus_of(req).len() == req.gpus.len()
                        && gpus_of(req).iter().all(|g| g.datacenter)
                        && c.drivers.iter().any(|b| {
                            b.kind == Some(gpuimg_build::catalog::BranchKind::Ltsb)
                                && b.branch == major
                                && b.branch < f.minor_compat_driver.fields()[0]
                        }))
            }),
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Driver versions worth testing: every version the catalog or the profile mentions, and just above it.
fn driver_points(c: &Catalog) -> Vec<Version> {
    let mut pts: Vec<Version> = Vec::new();
    for b in &c.drivers {
        pts.push(Version::from_fields(&[b.branch]));
        pts.extend(b.first_release.iter().cloned());
        pts.extend(b.last_release.iter().cloned());
    }
    pts.extend(c.cuda.iter().filter_map(|t| t.driver.clone()));
    pts.extend(
        c.cuda_families
            .iter()
            .map(|f| f.minor_compat_driver.clone()),
    );
    for g in &c.gpus {
        pts.extend(g.min_driver.as_ref().and_then(DriverFloor::known).cloned());
        pts.extend(g.open_min_driver.iter().cloned());
    }
    for r in &c.cudnn {
        pts.extend(r.builds.iter().filter_map(|b| b.driver.clone()));
    }
    for s in [
        "550",
        "580",
        "590",
        "570",
        "535",
        "545",
        "525.60.13",
        "560",
        "999",
    ] {
        pts.push(v(s));
    }
    let above: Vec<Version> = pts.iter().map(|p| v(&format!("{p}.1"))).collect();
    pts.extend(above);
    pts
}

fn any_driver(c: &Catalog, req: &Request, ch: &Choice) -> bool {
    driver_points(c).iter().any(|d| driver_ok(c, req, ch, d))
}

/// Brute force: every combination the catalog allows for the listed components.
fn brute_force(c: &Catalog, req: &Request) -> bool {
    let has = |comp| req.stack.contains_key(&comp);
    let torch: Vec<Option<(&PytorchRelease, &PytorchVariant)>> = if has(Component::Pytorch) {
        c.pytorch
            .iter()
            .flat_map(|r| r.variants.iter().map(move |v| Some((r, v))))
            .collect()
    } else {
        vec![None]
    };
    let cudas: Vec<Option<&CudaRelease>> = if has(Component::Pytorch) || has(Component::Cuda) {
        c.cuda.iter().map(Some).collect()
    } else {
        vec![None]
    };
    let pys: Vec<Option<Version>> = if has(Component::Pytorch) || has(Component::Python) {
        c.python.iter().map(|p| Some(p.version.clone())).collect()
    } else {
        vec![None]
    };
    for p in &torch {
        for t in &cudas {
            for py in &pys {
                let ch = Choice {
                    pytorch: *p,
                    cuda: *t,
                    python: py.clone(),
                };
                if stack_ok(c, req, &ch) && any_driver(c, req, &ch) {
                    return true;
                }
            }
        }
    }
    false
}

fn arb_request() -> impl Strategy<Value = Request> {
    let c = catalog();
    let n_gpu = c.gpus.len();
    (
        prop::collection::vec(0..n_gpu, 0..3),
        prop::option::of(0..DRIVERS.len()),
        prop::option::of(0..KERNELS.len()),
        0..3usize,
        0..3usize,
        prop::option::of(0..c.cuda.len() + 2),
        prop::option::of(0..c.pytorch.len() + 1),
        prop::option::of(0..c.python.len()),
    )
        .prop_map(|(gpus, drv, ker, module, compat, cuda, torch, py)| {
            let c = catalog();
            let mut req = Request {
                gpus: gpus
                    .iter()
                    .map(|i| GpuTarget::Named(Box::new(c.gpus[*i].clone())))
                    .collect(),
                driver: drv.map(|i| DRIVERS[i].parse().unwrap()),
                kernel: ker.map(|i| KERNELS[i].parse().unwrap()),
                kernel_module: [
                    KernelModule::Any,
                    KernelModule::Open,
                    KernelModule::Proprietary,
                ][module],
                compat: [CompatMode::Minor, CompatMode::Strict, CompatMode::Forward][compat],
                ..Request::default()
            };
            if let Some(i) = cuda {
                let k = match c.cuda.get(i) {
                    Some(t) => Constraint::from_prefix(&t.version.truncate(2)),
                    None if i == c.cuda.len() => "12".parse().unwrap(),
                    None => "13".parse().unwrap(),
                };
                req.stack.insert(Component::Cuda, k);
            }
            if let Some(i) = torch {
                let k = match c.pytorch.get(i) {
                    Some(r) => Constraint::from_prefix(&r.version.truncate(2)),
                    None => Constraint::any(),
                };
                req.stack.insert(Component::Pytorch, k);
            }
            if let Some(i) = py {
                req.stack.insert(
                    Component::Python,
                    Constraint::from_prefix(&c.python[i].version),
                );
            }
            req
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    #[test]
    fn answers_check_out_and_no_means_no(req in arb_request()) {
        let c = catalog();
        match resolve_request(&req, c) {
            Ok(res) => {
                let pytorch = res.version(Component::Pytorch).map(|pv| {
                    let r = c.pytorch.iter().find(|r| &r.version == pv).expect("resolved pytorch is in the catalog");
                    let var = res.variants.get(&Component::Pytorch).expect("pytorch variant recorded");
                    (r, r.variants.iter().find(|x| &x.name == var).expect("variant is in the catalog"))
                });
                let ch = Choice {
                    pytorch,
                    cuda: res.version(Component::Cuda).map(|cv| c.cuda.iter().find(|t| &t.version == cv).expect("cuda in catalog")),
                    python: res.version(Component::Python).cloned(),
                };
                prop_assert!(stack_ok(c, &req, &ch), "resolver answer fails the checker: {:?}", res.components);
                if let Some((_, var)) = ch.pytorch {
                    prop_assert_eq!(res.version(Component::Cudnn), var.cudnn.as_ref());
                    prop_assert_eq!(res.version(Component::Nccl), var.nccl.as_ref());
                }
                // The driver range holds exactly the admissible points.
                for d in driver_points(c) {
                    let inside = res.host.driver.contains(&d);
                    let ok = driver_ok(c, &req, &ch, &d);
                    prop_assert_eq!(inside, ok, "driver {} (range {}) for {:?}", d, res.host.driver, res.components);
                }
                // A range wholly below a GPU's first open-module listing is the proprietary module's.
                let inside: Vec<Version> = driver_points(c).into_iter().filter(|d| res.host.driver.contains(d)).collect();
                for g in gpus_of(&req) {
                    if let Some(m) = &g.open_min_driver {
                        if !inside.is_empty() && inside.iter().all(|d| d < m) {
                            prop_assert_eq!(res.host.kernel_module, KernelModule::Proprietary, "{} below {} in {}", g.name, m, res.host.driver);
                        }
                    }
                }
                // Minor and forward: a GPU whose first driver is unknown, in a range reaching
                // below the releases known to drive it, is said to be unknown.
                for g in gpus_of(&req) {
                    if req.compat == CompatMode::Strict || g.min_driver.as_ref().and_then(DriverFloor::known).is_some() {
                        continue;
                    }
                    let below = match first_known_driver(g) {
                        Some(k) => driver_points(c).iter().any(|d| d < &k && res.host.driver.contains(d)),
                        None => true,
                    };
                    let said = res.warnings.iter().any(|w| w.contains(&format!("{}'s first driver is not known", g.name)));
                    prop_assert!(!below || said, "no warning for {} in {}: {:?}", g.name, res.host.driver, res.warnings);
                }
            }
            Err(ResolveError::Incompatible(e)) => {
                prop_assert!(!brute_force(c, &req), "resolver said no, brute force found a combination:\n{}", e);
            }
            Err(other) => prop_assert!(false, "unexpected error: {}", other),
        }
    }
}
