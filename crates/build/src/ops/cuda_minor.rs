//! One CUDA minor per image, or said out loud. With `stack.cuda` pinned to one minor
//! (`"12.8"`; `"12"` or `">=12.4"` leave the minor open), NVIDIA's CUDA component wheels are
//! held to the versions the toolkit releases of that minor pin (`catalog/cuda-components.yaml`,
//! from NVIDIA's `cuda-toolkit` metapackage: cuBLAS 13.1.0.3 belongs to CUDA 13.0.2) as
//! constraints of the Python resolution: they narrow a package only when something requires
//! it, and a requirement no wheel of that minor meets is a "no" naming it, its requirer and
//! the pin. With the minor open, the highest minor the resolved component wheels belong to
//! (not the newest the catalog knows) is what the image needs from the driver: the stack is
//! resolved again for it ([`refine`], citing the packages) and says so, so the
//! lock, `CUDA_VERSION` and `NVIDIA_REQUIRE_CUDA` state it.
//! Must never hold a wheel the catalog does not name, nor invent a version mapping.

use super::OpsError;
use crate::catalog::Catalog;
use crate::lock::LockedWheel;
use crate::profile::Profile;
use crate::resolve::{Component, Origin, Resolution};
use gpuimg_expect::version::{Constraint, Version};
use gpuimg_fetch::observe::Observer;
use gpuimg_pypi::PythonRequest;

/// The resolved CUDA version when `stack.cuda` pins one minor: of the catalog's releases of
/// the resolved major, the pin admits those of one minor only (`"12.8"`, `"=12.8.1"`; not
/// `"12"` or `">=12.4"`, which leave the minor to the packages).
pub fn pinned_minor<'r>(
    profile: &Profile,
    resolution: &'r Resolution,
    catalog: &Catalog,
) -> Option<&'r Version> {
    let at = profile.stack.cuda.as_ref()?;
    let v = resolution.version(Component::Cuda)?;
    let pin = at.value.parse::<Constraint>().ok()?;
    let mut minors = catalog
        .cuda
        .iter()
        .filter(|r| r.version.field(0) == v.field(0) && pin.matches(&r.version))
        .map(|r| r.version.field(1));
    let first = minors.next()?;
    minors.all(|m| m == first).then_some(v)
}

/// The constraints (text, origin) a `stack.cuda` pinned to one minor ([`pinned_minor`]) puts
/// on the component wheels of its major; none without such a pin or a record for the major.
pub fn constraints(
    profile: &Profile,
    resolution: &Resolution,
    catalog: &Catalog,
) -> Vec<(String, String)> {
    let (Some(at), Some(v)) = (
        &profile.stack.cuda,
        pinned_minor(profile, resolution, catalog),
    ) else {
        return Vec::new();
    };
    let Some(c) = catalog.cuda_constraints(v) else {
        return Vec::new();
    };
    let origin = format!(
        "{}:{}:{} (`stack.cuda: \"{}\"` resolved to {v}: one CUDA minor per image; catalog/cuda-components.yaml [{}])",
        profile.file,
        at.line,
        at.column,
        at.value,
        c.sources.join(", ")
    );
    c.constraints
        .into_iter()
        .map(|t| (t, origin.clone()))
        .collect()
}

/// Add the [`constraints`] to `request`.
pub fn add_to(
    request: &mut PythonRequest,
    profile: &Profile,
    resolution: &Resolution,
    catalog: &Catalog,
) -> Result<(), OpsError> {
    for (text, origin) in constraints(profile, resolution, catalog) {
        request.add_constraint(&text, origin)?;
    }
    Ok(())
}

/// The highest CUDA major.minor of `major` the component wheels among `wheels` belong to
/// ([`Catalog::cuda_minor_of`]), with the wheel that carries it (the first such, by name).
pub fn needed<'w>(
    catalog: &Catalog,
    wheels: &'w [LockedWheel],
    major: u64,
) -> Option<(Version, &'w LockedWheel)> {
    let mut best: Option<(Version, &LockedWheel)> = None;
    for w in wheels {
        let Ok(v) = w.version.parse::<Version>() else {
            continue;
        };
        let Some(mm) = catalog.cuda_minor_of(&w.name, &v, major) else {
            continue;
        };
        if best.as_ref().is_none_or(|(b, _)| mm > *b) {
            best = Some((mm, w));
        }
    }
    best
}

/// The resolution again, when `stack.cuda` leaves the minor open (unpinned, or `"12"`) and
/// the highest minor the resolved toolkit-versioned wheels of the resolved CUDA major carry is
/// another than the resolution took (the newest the catalog knows, or a framework variant's):
/// that minor is what the image needs from the driver. `None` when they agree, when no such
/// wheel is installed, or when `stack.cuda` pins one minor (its constraints hold the wheels to
/// it). A minor the open pin does not admit is a "no" naming both. The base's Python the
/// resolution took stays.
pub fn settle_needed(
    profile: &Profile,
    catalog: &Catalog,
    made_with: &crate::resolve::Request,
    resolution: &Resolution,
    wheels: &[LockedWheel],
    obs: &mut dyn Observer,
) -> Result<Option<Resolution>, OpsError> {
    if pinned_minor(profile, resolution, catalog).is_some() {
        return Ok(None);
    }
    let Some(took) = resolution.version(Component::Cuda) else {
        return Ok(None);
    };
    let Some((need, w)) = needed(catalog, wheels, took.field(0)) else {
        return Ok(None);
    };
    if need == took.truncate(2) {
        return Ok(None);
    }
    let by = if w.required_by.is_empty() {
        String::new()
    } else {
        format!(", required by {}", w.required_by.join(", "))
    };
    let carried = format!("`{} {}`{by}", w.name, w.version);
    let at = profile.stack.cuda.as_ref();
    if let Some(at) = at {
        let admits = at.value.parse::<Constraint>().is_ok_and(|pin| {
            catalog
                .cuda
                .iter()
                .any(|r| r.version.truncate(2) == need && pin.matches(&r.version))
        });
        if !admits {
            return Err(OpsError::Incompatible(format!(
                "`stack.cuda: \"{}\"` ({}:{}:{}) admits no CUDA {need} release, but the Python packages need CUDA {need} ({carried})",
                at.value, profile.file, at.line, at.column
            )));
        }
    }
    let without = match at {
        Some(at) => format!("for `stack.cuda: \"{}\"`", at.value),
        None => "without `stack.cuda`".to_string(),
    };
    let why = format!(
        "the Python packages need CUDA {need} ({carried}), not the {} the stack resolved to {without}",
        took.truncate(2)
    );
    let said = format!("{why}: resolved again for CUDA {need}");
    let python = resolution.version(Component::Python).map(|p| p.truncate(2));
    let pin = |req: &mut crate::resolve::Request| {
        req.pin(
            Component::Cuda,
            Constraint::from_prefix(&need),
            Origin {
                text: format!("the Python packages need CUDA {need} ({carried})"),
                source: "index".into(),
            },
        );
        if let (false, Some(p)) = (req.stack.contains_key(&Component::Python), python) {
            req.pin(
                Component::Python,
                Constraint::from_prefix(&p),
                Origin {
                    text: format!("the image's Python is {p}"),
                    source: "resolution".into(),
                },
            );
        }
    };
    refine(made_with, catalog, resolution, pin, &said, obs)
        .map(Some)
        .map_err(|e| OpsError::Incompatible(format!("{why}, and resolved again for it: {e}")))
}

/// The resolution made again from the request it was made with (`made_with`: the profile's
/// with the facts of `ops::known`) with `pin` applied, each pinned constraint citing its
/// [`crate::resolve::Origin`]; says `said` and the new resolution's warnings that `first` did
/// not give. The one refinement left after the resolution (issue 35, item 1: the wheels' CUDA
/// minor is not yet known before it).
fn refine(
    made_with: &crate::resolve::Request,
    catalog: &Catalog,
    first: &Resolution,
    pin: impl FnOnce(&mut crate::resolve::Request),
    said: &str,
    obs: &mut dyn Observer,
) -> Result<Resolution, crate::resolve::ResolveError> {
    let mut req = made_with.clone();
    pin(&mut req);
    let r = crate::resolve::resolve_request(&req, catalog)?;
    obs.message(said);
    for w in r.warnings.iter().filter(|w| !first.warnings.contains(w)) {
        obs.warn(w);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wheel(name: &str, version: &str) -> LockedWheel {
        LockedWheel {
            name: name.into(),
            version: version.into(),
            filename: format!("{name}-{version}-py3-none-any.whl"),
            sha256: gpuimg_store::digest::Digest::of(name.as_bytes()),
            size: 1,
            index: "host".into(),
            requested: false,
            required_by: vec!["nvidia-cudnn-cu12 9.10.2.21".into()],
        }
    }

    #[test]
    fn the_highest_toolkit_minor_is_what_the_wheels_need() {
        let c = Catalog::embedded().unwrap();
        let wheels = [
            wheel("nvidia-cuda-runtime-cu12", "12.8.90"),
            wheel("nvidia-cublas-cu12", "12.9.1.4"),
            // Numbered on its own: 11.3.3.83 is CUDA 12.8's.
            wheel("nvidia-cufft-cu12", "11.3.3.83"),
            wheel("nvidia-cublas", "13.0.0.19"),
        ];
        let (v, w) = needed(&c, &wheels, 12).unwrap();
        assert_eq!(v.to_string(), "12.9");
        assert_eq!(w.name, "nvidia-cublas-cu12");
        assert!(needed(&c, &wheels, 11).is_none());
    }

    /// An H200 profile with `stack.cuda: CUDA`, and its resolution.
    fn resolved(c: &Catalog, cuda: &str) -> (Profile, Resolution) {
        let p = crate::profile::parse(
            &format!("name: x\nhost: {{gpus: [H200]}}\nstack: {{cuda: \"{cuda}\"}}\n"),
            "p.yaml",
            std::path::Path::new("/x"),
            &|_| None,
        )
        .unwrap();
        let r = crate::resolve::resolve(&p, c).unwrap();
        (p, r)
    }

    #[test]
    fn an_open_pin_follows_the_wheels_within_itself() {
        let c = Catalog::embedded().unwrap();
        let settle = |cuda: &str, cublas: &str| {
            let wheels = [wheel("nvidia-cublas-cu12", cublas)];
            let (p, r) = resolved(&c, cuda);
            let req = crate::resolve::Request::from_profile(&p, &c).unwrap();
            settle_needed(
                &p,
                &c,
                &req,
                &r,
                &wheels,
                &mut gpuimg_fetch::observe::Silent,
            )
            .map(|r| r.and_then(|r| r.version(Component::Cuda).map(|v| v.truncate(2))))
            .map_err(|e| e.to_string())
        };
        // `"12"` resolves to the newest 12.x; the wheels need 12.8.
        assert_eq!(
            settle("12", "12.8.4.1")
                .unwrap()
                .map(|v| v.to_string())
                .as_deref(),
            Some("12.8")
        );
        // One minor pinned: its constraints hold the wheels, nothing to settle.
        assert_eq!(settle("12.8", "12.8.4.1").unwrap(), None);
        // An open pin that does not admit what the wheels need: a "no" naming both.
        let e = settle(">=12.6,<13", "12.4.5.8").unwrap_err();
        assert!(e.contains("`stack.cuda: \">=12.6,<13\"` (p.yaml:3:"), "{e}");
        assert!(e.contains("`nvidia-cublas-cu12 12.4.5.8`"), "{e}");
    }

    #[test]
    fn only_a_pin_of_one_minor_holds_the_wheels() {
        let c = Catalog::embedded().unwrap();
        let held = |cuda: &str| {
            let (p, r) = resolved(&c, cuda);
            pinned_minor(&p, &r, &c).map(|v| v.truncate(2).to_string())
        };
        assert_eq!(held("12.8").as_deref(), Some("12.8"));
        assert_eq!(held("=12.8.1").as_deref(), Some("12.8"));
        assert_eq!(held(">=12.4,<12.5").as_deref(), Some("12.4"));
        assert_eq!(held("12"), None);
        assert_eq!(held(">=12.4"), None);
    }
}
