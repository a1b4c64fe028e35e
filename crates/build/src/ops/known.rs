//! What a resolution depends on besides the profile and the catalog, gathered before it runs,
//! so that `resolve`, `lock` and `build` resolve once, the same way, and nothing refines the
//! answer afterwards.
//!
//! The order is forced by what depends on what. The stack's apt roots (`providers: {cuda:
//! apt}`) depend on the resolution, so they cannot decide the base's Python: 1. the base's own
//! packages decide it — `base.apt.packages` resolved without the stack's roots (those are CUDA
//! libraries, which bring no interpreter; the full set is checked against it after), or a
//! rootfs's dpkg database; its default `python3` is the image's interpreter. 2. With `python:`
//! and `stack.pytorch`, the configured indexes are asked what `torch==X` installs for that
//! interpreter, for every catalog release (their pages only; with `--offline`, the cached
//! ones). 3. One resolution, with the base's Python pinned (`[base]`, unless `stack.python`
//! pins it) and a variant the index does not install ruled out (`[index]`): a "no" cites the
//! true source, and no hint asks the profile to change what it does not state. 4. With
//! `python:`, the wheels for it ([`wheels`]), checked against the resolution
//! (`stack::check_installed` only confirms what the index said). `resolve`, `lock`, `build`
//! and `verify-host` all go through these steps, so they give the same answer. Not gathered
//! before the resolution yet: the CUDA minor the component wheels need when `stack.cuda`
//! leaves it open, which only the Python resolution knows; [`wheels`] still resolves again
//! for it (`cuda_minor::settle_needed`, from [`Known::request`]), before any command uses the
//! answer (issue 35, item 1, open).
//! Must never refine a resolution after it ran, nor print (it reports through the observer).

use std::collections::BTreeMap;
use std::path::Path;

use super::OpsError;
use crate::catalog::Catalog;
use crate::lock::{LockedPackage, LockedWheel};
use crate::profile::{Base, Profile};
use crate::resolve::{Component, Installs, Origin, Request, Resolution, ResolveError};
use crate::sources::image_interpreter::{self, BasePython};
use crate::sources::rootfs::{self, DPKG_STATUS};
use gpuimg_expect::version::{Constraint, Version};
use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::Trust;
use gpuimg_pypi::{self as pypi, PythonRequest};
use gpuimg_store::cache::Cache;

use super::python_packages::{self as python, PythonHost};

/// The variant of a framework wheel that carries no CUDA for the image (its NVIDIA
/// requirements are marked for other platforms).
pub const CPU_ONLY: &str = "cpu";

/// Bytes of a rootfs's dpkg status file read.
const MAX_STATUS_BYTES: u64 = 64 << 20;

/// What the host offers the gathering: the cache (apt indexes, index pages), whether to stay
/// offline (cached pages and indexes only), the TLS trust and the Python index settings.
#[derive(Debug, Clone, Copy)]
pub struct Reach<'a> {
    pub cache_root: &'a Path,
    pub offline: bool,
    pub trust: &'a Trust,
    pub python: &'a PythonHost,
}

/// The facts a resolution is made with.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// The base's own packages as (name, Debian version); `None` when not needed (no Python in
    /// the stack) or there is no list (no base, a rootfs without a dpkg database).
    pub base_packages: Option<Vec<(String, String)>>,
    /// For an apt base: the package set of `base.apt.packages` alone, which is the image's
    /// when the stack adds no apt roots.
    pub base_debs: Option<Vec<LockedPackage>>,
    /// The base's default Python, pinned when `stack.python` is not.
    pub base_python: Option<BasePython>,
    /// What the configured indexes install for `torch==X`.
    pub installs: Option<Installs>,
}

/// The frameworks whose resolution takes a Python.
fn has_framework(profile: &Profile) -> bool {
    let s = &profile.stack;
    s.pytorch.is_some() || s.jax.is_some() || s.tensorflow.is_some()
}

/// Gather what the resolution of `profile` depends on (see the module's order).
pub fn gather(
    profile: &Profile,
    catalog: &Catalog,
    reach: Reach<'_>,
    obs: &mut dyn Observer,
) -> Result<Known, OpsError> {
    let mut known = Known::default();
    // The base's packages decide the resolution where it takes a Python (a framework), where
    // `stack.python` must be one the base installs, and the interpreter `python:` installs for.
    if !has_framework(profile) && profile.stack.python.is_none() && profile.python.is_none() {
        return Ok(known);
    }
    if let Base::Apt(spec) = &profile.base {
        super::stack::check_base_packages(profile, spec)?;
        let aopts = crate::driver::apt_options(reach.cache_root, reach.offline, reach.trust);
        let debs = gpuimg_apt::resolve(
            &crate::plan::source_specs::apt_packages(spec, &profile.dir),
            &crate::plan::source_specs::architecture(&profile.platform).debian(),
            &aopts,
            obs,
        )
        .map_err(|e| super::apt_error_at(profile, e))?;
        known.base_debs = Some(debs);
    }
    known.base_packages = base_packages(profile, known.base_debs.as_deref())?;
    if let Some(packages) = &known.base_packages {
        known.base_python = image_interpreter::default_python(packages)?;
    }
    if profile.python.is_some() && profile.stack.pytorch.is_some() {
        known.installs = installs(profile, catalog, &known, reach)?;
    }
    Ok(known)
}

/// What the configured indexes install for `torch==X` of each catalog release, for the
/// image's interpreter: the base's Python `stack.python` admits (the newest such), else its
/// default. `None` when the base has no such Python (the check after the resolution names
/// that), and an error when it has no package list at all (`python:` needs one).
fn installs(
    profile: &Profile,
    catalog: &Catalog,
    known: &Known,
    reach: Reach<'_>,
) -> Result<Option<Installs>, OpsError> {
    let Some(packages) = known.base_packages.as_deref() else {
        return Err(OpsError::NoBasePackages {
            base: match &profile.base {
                Base::Rootfs { path, .. } => format!("the rootfs `{}`", path.display()),
                _ => "a profile without a base".into(),
            },
        });
    };
    let want = match &profile.stack.python {
        None => None,
        Some(pin) => {
            let Ok(pin) = pin.value.parse::<Constraint>() else {
                return Ok(None);
            };
            let admitted = image_interpreter::base_pythons(packages)?
                .into_keys()
                .rev()
                .find(|(a, b)| pin.matches(&Version::from_fields(&[u64::from(*a), u64::from(*b)])));
            match admitted {
                Some(v) => Some(v),
                None => return Ok(None),
            }
        }
    };
    let python = image_interpreter::image_python(
        packages,
        &crate::plan::source_specs::architecture(&profile.platform),
        want,
    )?;
    let Some(spec) = crate::plan::source_specs::python_request(profile) else {
        return Ok(None);
    };
    let request = PythonRequest::new(&spec, &reach.python.settings)?;
    let cache = Cache::open(reach.cache_root).map_err(|source| OpsError::CacheOpen {
        path: reach.cache_root.display().to_string(),
        source,
    })?;
    const PACKAGE: &str = "torch";
    let served = pypi::installs(&request, &python, &cache, reach.offline, PACKAGE)?;
    // The releases the profile's pin admits (all without one): only their wheels' metadata is
    // read.
    let pin = profile
        .stack
        .pytorch
        .as_ref()
        .and_then(|p| p.value.parse::<Constraint>().ok());
    let pinned = |v: &Version| pin.as_ref().is_none_or(|c| c.matches(v));
    let mut by_version = BTreeMap::new();
    for release in &catalog.pytorch {
        let found = served.iter().find(|(public, _)| {
            public
                .parse::<Version>()
                .is_ok_and(|v| v == release.version)
        });
        let variant = match found {
            None => None,
            Some((_, Some(local))) => Some(local.clone()),
            // A plain `torch==X` is the variant the catalog records as the default index's
            // (one it does not record is left unconstrained), unless its wheel for this image
            // leaves out the NVIDIA packages it lists for others (read from its metadata): then
            // it carries no CUDA here (`cpu`).
            Some((public, None)) => match catalog.default_pytorch_variant(&release.version) {
                Some(v) if v.starts_with("cu") && pinned(&release.version) => {
                    let reqs = pypi::requirements_for(
                        &request,
                        &python,
                        &cache,
                        reach.offline,
                        PACKAGE,
                        public,
                    )?;
                    let nvidia = |names: &std::collections::BTreeSet<String>| {
                        names.iter().any(|n| n.starts_with("nvidia-"))
                    };
                    match reqs {
                        Some(r) if nvidia(&r.all) && !nvidia(&r.applying) => Some(CPU_ONLY.into()),
                        _ => Some(v.to_string()),
                    }
                }
                Some(v) => Some(v.to_string()),
                None => continue,
            },
        };
        by_version.insert(release.version.clone(), variant);
    }
    Ok(Some(Installs {
        by_version,
        package: PACKAGE.into(),
        target: format!(
            "Python {}.{} ({})",
            python.version.0, python.version.1, python.machine
        ),
        source: "index".into(),
    }))
}

impl Known {
    /// The request of `profile` with these facts as constraints, each citing its origin.
    pub fn request(&self, profile: &Profile, catalog: &Catalog) -> Result<Request, ResolveError> {
        let mut req = Request::from_profile(profile, catalog)?;
        // Only where the resolution takes a Python anyway (a framework), and the profile does
        // not state it (then the check after the resolution has the say).
        if let (true, None, Some(base)) = (
            has_framework(profile),
            &profile.stack.python,
            &self.base_python,
        ) {
            let (a, b) = base.version;
            req.pin(
                Component::Python,
                Constraint::from_prefix(&Version::from_fields(&[u64::from(a), u64::from(b)])),
                Origin {
                    text: format!("the base installs Python {a}.{b} (`{}`)", base.package),
                    source: "base".into(),
                },
            );
        }
        if let Some(i) = &self.installs {
            req.installs.insert(Component::Pytorch, i.clone());
        }
        Ok(req)
    }

    /// The facts the resolution of `profile` took, as the lines a command says.
    pub fn said(&self, profile: &Profile, resolution: &Resolution) -> Vec<String> {
        let mut out = Vec::new();
        if let (None, Some(base), Some(_)) = (
            &profile.stack.python,
            &self.base_python,
            resolution.version(Component::Python),
        ) {
            out.push(format!(
                "the base installs Python {}.{} (`{}`): the stack is resolved for it",
                base.version.0, base.version.1, base.package
            ));
        }
        if let (Some(i), Some(v), Some(variant)) = (
            &self.installs,
            resolution.version(Component::Pytorch),
            resolution.variants.get(&Component::Pytorch),
        ) {
            out.push(format!(
                "the index installs {} {v} ({variant}) for {}: the stack is resolved for it",
                i.package, i.target
            ));
        }
        out
    }
}

/// The one resolution of `profile` with `known`'s facts, and the check that a `stack.python`
/// the profile pins is one the base installs.
pub fn resolve(
    profile: &Profile,
    catalog: &Catalog,
    known: &Known,
) -> Result<Resolution, OpsError> {
    let req = known.request(profile, catalog)?;
    let r = crate::resolve::resolve_request(&req, catalog)?;
    check_stack_python(Some(&r), known.base_packages.as_deref())?;
    Ok(r)
}

/// The wheels `python:` installs for `resolution` (the stack's pins made requirements, for the
/// base's interpreter), checked against it: a CUDA library pin the framework contradicts
/// (`stack::check_agreement`) and the framework variant (`stack::check_installed`, which only
/// confirms what the index said). Returns the resolution the image states: with `stack.cuda`
/// leaving the minor open, the one for the minor the wheels need
/// (`cuda_minor::settle_needed`, the refinement left). `None` without `python:`.
pub fn wheels(
    profile: &Profile,
    catalog: &Catalog,
    known: &Known,
    resolution: Resolution,
    reach: Reach<'_>,
    obs: &mut dyn Observer,
) -> Result<(Resolution, Option<Vec<LockedWheel>>), OpsError> {
    let Some(request) = python::request(profile, reach.python, Some((&resolution, catalog)))?
    else {
        return Ok((resolution, None));
    };
    let packages = known.base_packages.as_deref();
    let image = python::image_python(profile, Some(&resolution), packages)?;
    let wheels = python::wheels(&request, &image, None, reach.cache_root, reach.offline, obs)?;
    super::stack::check_agreement(profile, &wheels)?;
    super::stack::check_installed(profile, catalog, &resolution, &wheels)?;
    let made_with = known.request(profile, catalog)?;
    let stated =
        super::cuda_minor::settle_needed(profile, catalog, &made_with, &resolution, &wheels, obs)?
            .unwrap_or(resolution);
    Ok((stated, Some(wheels)))
}

/// The base's installed packages as (name, Debian version): the apt set, or the dpkg
/// database of a rootfs; `None` for a rootfs without one (or no base).
pub fn base_packages(
    profile: &Profile,
    debs: Option<&[LockedPackage]>,
) -> Result<Option<Vec<(String, String)>>, OpsError> {
    match &profile.base {
        Base::Apt(_) => Ok(debs.map(|d| {
            d.iter()
                .map(|p| (p.name.clone(), p.version.clone()))
                .collect()
        })),
        Base::Rootfs { path, .. } => {
            let status =
                rootfs::read_file(path, DPKG_STATUS, MAX_STATUS_BYTES).map_err(|source| {
                    OpsError::RootfsRead {
                        path: path.display().to_string(),
                        source,
                    }
                })?;
            Ok(status.map(|s| gpuimg_apt::installed_packages(&String::from_utf8_lossy(&s))))
        }
        Base::None => Ok(None),
    }
}

/// `stack.python` (resolved) must be a Python the base installs: otherwise the answer is no,
/// naming what the base has. Without a package list to read (a rootfs with no dpkg database),
/// there is nothing to check. Where the base's Python was pinned before the resolution, this
/// only confirms it.
pub fn check_stack_python(
    resolution: Option<&Resolution>,
    packages: Option<&[(String, String)]>,
) -> Result<(), OpsError> {
    let (Some(want), Some(packages)) = (
        resolution.and_then(|r| r.version(Component::Python)),
        packages,
    ) else {
        return Ok(());
    };
    let want_mm = (want.field(0), want.field(1));
    let all = image_interpreter::base_pythons(packages).map_err(OpsError::BasePython)?;
    if all
        .keys()
        .any(|(a, b)| (u64::from(*a), u64::from(*b)) == want_mm)
    {
        return Ok(());
    }
    let has = match image_interpreter::default_python(packages).map_err(OpsError::BasePython)? {
        Some(p) => format!("Python {}.{} (`{}`)", p.version.0, p.version.1, p.package),
        None if all.is_empty() => "no Python".to_string(),
        None => all
            .values()
            .map(|p| format!("Python {}.{} (`{}`)", p.version.0, p.version.1, p.package))
            .collect::<Vec<_>>()
            .join(", "),
    };
    Err(OpsError::Incompatible(format!(
        "`stack.python` asks for Python {}.{}, but the base installs {has}",
        want_mm.0, want_mm.1
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(text: &str) -> Profile {
        crate::profile::parse(
            &format!("name: x\n{text}"),
            "p.yaml",
            Path::new("/nonexistent"),
            &|_| None,
        )
        .unwrap()
    }

    /// `torch 2.14.1` installs `variant` (`None`: the index serves no 2.14.1 wheel).
    fn installs(variant: Option<&str>) -> Installs {
        Installs {
            by_version: [("2.14.1".parse().unwrap(), variant.map(str::to_string))].into(),
            package: "torch".into(),
            target: "Python 3.11 (x86_64)".into(),
            source: "index".into(),
        }
    }

    /// Issue 35, item 1: what the index installs is a constraint of the one resolution, cited
    /// as `[index]`, with a verified hint to an index serving what the profile resolves to.
    #[test]
    fn a_variant_the_index_does_not_install_is_ruled_out_citing_the_index() {
        let c = Catalog::embedded().unwrap();
        let p = profile(
            "host:\n  gpus: [H100]\n  driver: \"<550\"\nstack:\n  pytorch: \"2.14\"\n  python: \"3.11\"\n",
        );
        let variant = |k: &Known| {
            resolve(&p, &c, k)
                .map(|r| r.variants[&Component::Pytorch].clone())
                .map_err(|e| e.to_string())
        };
        // Nothing asked: the catalog's choice for a driver below 550.
        assert_eq!(variant(&Known::default()).unwrap(), "cu126");
        let served = |v: Option<&str>| Known {
            installs: Some(installs(v)),
            ..Known::default()
        };
        assert_eq!(variant(&served(Some("cu126"))).unwrap(), "cu126");
        let e = variant(&served(Some("cu130"))).unwrap_err();
        assert!(
            e.contains("the index installs torch 2.14.1 (cu130), built for CUDA 13.0 [index]"),
            "{e}"
        );
        assert!(
            e.contains("an index that serves torch 2.14.1 (cu126) would work"),
            "{e}"
        );
        assert!(!e.contains("stack.cuda"), "{e}");
        let e = variant(&served(None)).unwrap_err();
        assert!(
            e.contains("the index serves no torch 2.14.1 wheel for Python 3.11 (x86_64) [index]"),
            "{e}"
        );
    }

    /// The base's Python is pinned before the resolution where a framework takes one and
    /// `stack.python` does not say, citing `[base]` (never offered for change).
    #[test]
    fn the_bases_python_is_pinned_unless_the_profile_pins_one() {
        let c = Catalog::embedded().unwrap();
        let known = Known {
            base_python: Some(BasePython {
                version: (3, 11),
                full_version: "3.11.2".into(),
                package: "python3.11-minimal 3.11.2-6+deb12u6".into(),
                stdlib: true,
            }),
            ..Known::default()
        };
        let p = profile("host:\n  gpus: [H200]\nstack:\n  pytorch: \"2.15\"\n");
        let req = known.request(&p, &c).unwrap();
        assert!(req.stack.contains_key(&Component::Python));
        assert!(!req.profile_states(Component::Python));
        assert_eq!(req.origins[&Component::Python].source, "base");
        let r = resolve(&p, &c, &known).unwrap();
        assert_eq!(
            r.version(Component::Python)
                .map(|v| v.truncate(2).to_string()),
            Some("3.11".to_string())
        );
        assert!(known.said(&p, &r)[0].starts_with("the base installs Python 3.11"));
        // Pinned by the profile: its own pin, checked against the base after.
        let pinned = profile("stack:\n  pytorch: \"2.15\"\n  python: \"3.12\"\n");
        let req = known.request(&pinned, &c).unwrap();
        assert!(req.profile_states(Component::Python));
        // No framework: no Python in the resolution, none pinned.
        let cuda = profile("stack:\n  cuda: \"12.4\"\n");
        assert!(!known
            .request(&cuda, &c)
            .unwrap()
            .stack
            .contains_key(&Component::Python));
    }
}
