//! Stack pins made packages: the resolved `pytorch` becomes `torch==X` (`jax` `jax[cudaNN]`,
//! `tensorflow` `tensorflow[and-cuda]`), and `cuda`, `cudnn`, `nccl` become NVIDIA's wheels
//! when no framework is pinned (its own requirements bring and
//! pin them), as the catalog's `stack_wheels` records say; they join the profile's Python
//! requirements. After resolution each pinned CUDA library is checked against the wheel the
//! resolution installed: a pin the framework's own pins contradict is a "no" naming both.
//! A CUDA library the profile takes from apt (`providers: {cuda: apt}`) becomes the
//! catalog's `stack_debs` relation groups instead, added to the base's apt roots, and the
//! installed package's release is checked against the pin the same way; the solver is told to
//! prefer the versions built for the image's CUDA line and of the pinned release.

use super::OpsError;
use crate::catalog::Catalog;
use crate::lock::{LockedPackage, LockedWheel};
use crate::profile::{AptSpec, Located, Profile, ProviderKind};
use crate::resolve::{Component, Resolution};
use gpuimg_apt::Preference;
use gpuimg_expect::version::{Constraint, Version};
use gpuimg_pypi::PythonRequest;

/// The CUDA library components, each with the wheel names that carry it (normalised; a
/// `-cuNN` suffix is allowed after them).
const LIBRARY_WHEELS: &[(Component, &str)] = &[
    (Component::Cuda, "nvidia-cuda-runtime"),
    (Component::Cudnn, "nvidia-cudnn"),
    (Component::Nccl, "nvidia-nccl"),
];

fn pin(profile: &Profile, c: Component) -> Option<&Located<String>> {
    let s = &profile.stack;
    match c {
        Component::Cuda => s.cuda.as_ref(),
        Component::Cudnn => s.cudnn.as_ref(),
        Component::Nccl => s.nccl.as_ref(),
        Component::Python => s.python.as_ref(),
        Component::Pytorch => s.pytorch.as_ref(),
        Component::Tensorflow => s.tensorflow.as_ref(),
        Component::Jax => s.jax.as_ref(),
    }
}

/// Where the profile takes component `c` from: `apt` only where `providers:` says so.
pub fn provider(profile: &Profile, c: Component) -> ProviderKind {
    let p = &profile.providers;
    let at = match c {
        Component::Cuda => p.cuda.as_ref(),
        Component::Cudnn => p.cudnn.as_ref(),
        Component::Nccl => p.nccl.as_ref(),
        _ => None,
    };
    at.map_or(ProviderKind::Wheel, |a| a.value)
}

/// The CUDA library components a profile may take from apt.
const APT_COMPONENTS: [Component; 3] = [Component::Cuda, Component::Cudnn, Component::Nccl];

/// One apt root the stack's pins become: a relation group, the component it is for, and
/// whether its package carries the component's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentRelation {
    pub group: String,
    pub component: Component,
    pub carrier: bool,
    pub sources: Vec<String>,
    /// The image's CUDA major, which a package built for one CUDA line must match
    /// (`libnccl2 2.21.5-1+cuda12.4`).
    pub cuda_major: Option<u64>,
}

/// The apt roots of the components `providers:` takes from apt, in component order. A
/// component the catalog records no packages for is a "no" naming the pin.
pub fn apt_roots(
    profile: &Profile,
    resolution: &Resolution,
    catalog: &Catalog,
) -> Result<Vec<ComponentRelation>, OpsError> {
    let major = cuda_major(resolution);
    let mut out = Vec::new();
    for c in APT_COMPONENTS {
        if provider(profile, c) != ProviderKind::Apt {
            continue;
        }
        let Some(at) = pin(profile, c) else {
            continue;
        };
        let Some(v) = resolution.version(c) else {
            continue;
        };
        let Some(r) = catalog.stack_packages(c.as_str(), v, major) else {
            let cuda = major.map_or(
                " without a CUDA major (pin `stack.cuda` too: the package names carry it)"
                    .to_string(),
                |m| format!(" for CUDA {m}"),
            );
            return Err(OpsError::Incompatible(format!(
                "`stack.{c}: \"{}\"` ({}:{}:{}) resolved to {v}, and `providers.{c}: apt` asks for it from apt, but catalog/debs.yaml records no Debian packages of {c}{cuda}: take it from wheels, or add a record in a catalog overlay",
                at.value, profile.file, at.line, at.column
            )));
        };
        for (i, group) in r.groups.into_iter().enumerate() {
            out.push(ComponentRelation {
                group,
                component: c,
                carrier: i == 0,
                sources: r.sources.clone(),
                cuda_major: major,
            });
        }
    }
    Ok(out)
}

/// What the apt solver should take first for the stack's packages: versions built for the
/// image's CUDA line, and for the component's carrier package (the one the pin is checked
/// against) the pinned release, so that NVIDIA's repository, which carries `libnccl2` for every
/// CUDA line and many releases, gives the one the stack asks for without a version in the
/// profile. A preference only orders: [`check_apt_agreement`] still names what does not fit.
pub fn apt_preferences(profile: &Profile, roots: &[ComponentRelation]) -> Vec<Preference> {
    let mut out: Vec<Preference> = Vec::new();
    for r in roots {
        let release = if r.carrier {
            pin(profile, r.component).and_then(|at| at.value.parse::<Constraint>().ok())
        } else {
            None
        };
        for name in group_names(&r.group) {
            if !out.iter().any(|p| p.package == name) {
                out.push(preference(&name, r.cuda_major, release.clone()));
            }
        }
    }
    out
}

/// The package names of an apt root group (`cuda-cudart-12-4 | libcudart12`), read as the
/// solver reads it; none when it does not parse (the solver then refuses it).
fn group_names(group: &str) -> Vec<String> {
    gpuimg_apt::root_relations(group)
        .map(|g| g.into_iter().map(|r| r.name).collect())
        .unwrap_or_default()
}

/// Versions of `package` built for CUDA `cuda_major` (or for no CUDA line) whose upstream
/// release satisfies `release`.
fn preference(package: &str, cuda_major: Option<u64>, release: Option<Constraint>) -> Preference {
    let mut describe = Vec::new();
    if let Some(m) = cuda_major {
        describe.push(format!("cuda{m}"));
    }
    if let Some(c) = &release {
        describe.push(format!("release {c}"));
    }
    Preference::new(package, describe.join(" "), move |version: &str| {
        let line = match (cuda_major, crate::catalog::cuda_line(version)) {
            (Some(want), Some(built)) => u64::from(built) == want,
            _ => true,
        };
        let fits_release = release
            .as_ref()
            .is_none_or(|c| crate::lock::upstream_release(version).is_some_and(|v| c.matches(&v)));
        line && fits_release
    })
}

/// Each of the base's `packages` must be something the apt solver takes (`name`,
/// `name=version`, `name (>= version)`, `a | b`): bad input at its position otherwise.
pub fn check_base_packages(profile: &Profile, spec: &AptSpec) -> Result<(), OpsError> {
    for p in &spec.packages {
        if let Err(message) = gpuimg_apt::root_relations(&p.value) {
            let refused = gpuimg_apt::AptError::InvalidRoot {
                text: p.value.clone(),
                message,
            };
            return Err(OpsError::Profile(crate::profile::ProfileError::Invalid {
                file: profile.file.clone(),
                line: p.line,
                column: p.column,
                key: "base.apt.packages".into(),
                message: refused.to_string(),
            }));
        }
    }
    Ok(())
}

/// `spec` with the stack's apt roots added to its packages.
pub fn apt_spec(spec: &AptSpec, roots: &[ComponentRelation]) -> AptSpec {
    let mut spec = spec.clone();
    for r in roots {
        if !spec.packages.iter().any(|p| p.value == r.group) {
            spec.packages.push(Located::synthetic(r.group.clone()));
        }
    }
    spec
}

/// Each component taken from apt must be satisfied by the package the base installed for
/// it: a release the pin does not allow is a "no" naming the pin (its position) and the
/// package with its repository.
pub fn check_apt_agreement(
    profile: &Profile,
    roots: &[ComponentRelation],
    debs: &[LockedPackage],
) -> Result<(), OpsError> {
    for r in roots.iter().filter(|r| r.carrier) {
        let Some(at) = pin(profile, r.component) else {
            continue;
        };
        let names = group_names(&r.group);
        let Some(deb) = debs.iter().find(|d| names.contains(&d.name)) else {
            continue;
        };
        let c = r.component;
        let Ok(want) = at.value.parse::<Constraint>() else {
            continue;
        };
        let built_for = crate::catalog::cuda_line(&deb.version).map(u64::from);
        if let (Some(built), Some(image)) = (built_for, r.cuda_major) {
            if built != image {
                return Err(OpsError::Incompatible(format!(
                    "`stack.{c}: \"{}\"` ({}:{}:{}) is taken from apt for an image of CUDA {image}, but the base's apt repositories install `{} {}` ({}), built for CUDA {built}",
                    at.value, profile.file, at.line, at.column, deb.name, deb.version, deb.repository
                )));
            }
        }
        let fits =
            crate::lock::upstream_release(&deb.version).is_some_and(|have| want.matches(&have));
        if !fits {
            return Err(OpsError::Incompatible(format!(
                "`stack.{c}: \"{}\"` ({}:{}:{}) asks for {c} {}, but the base's apt repositories install `{} {}` ({}) for `{}` (catalog/debs.yaml [{}])",
                at.value,
                profile.file,
                at.line,
                at.column,
                at.value,
                deb.name,
                deb.version,
                deb.repository,
                r.group,
                r.sources.join(", ")
            )));
        }
    }
    Ok(())
}

/// The CUDA major version of the image: the resolved `cuda`, else a framework variant's
/// (`cu132` → 13, jax's `cuda12` → 12).
fn cuda_major(resolution: &Resolution) -> Option<u64> {
    if let Some(v) = resolution.version(Component::Cuda) {
        return Some(v.field(0));
    }
    resolution.variants.values().find_map(|v| variant_major(v))
}

/// `cu132` → 13, `cu126` → 12, `cu118` → 11, `cuda12` → 12.
fn variant_major(variant: &str) -> Option<u64> {
    if let Some(n) = variant.strip_prefix("cuda") {
        return n.parse().ok();
    }
    let n: u64 = variant.strip_prefix("cu")?.parse().ok()?;
    Some(n / 10)
}

/// The requirements the stack's pins become (text, origin), in component order.
pub fn requirements(
    profile: &Profile,
    resolution: &Resolution,
    catalog: &Catalog,
) -> Vec<(String, String)> {
    const FRAMEWORKS: [Component; 3] = [Component::Pytorch, Component::Jax, Component::Tensorflow];
    let framework = FRAMEWORKS.iter().any(|f| resolution.version(*f).is_some());
    let major = cuda_major(resolution);
    let mut out = Vec::new();
    for c in [
        Component::Pytorch,
        Component::Jax,
        Component::Tensorflow,
        Component::Cuda,
        Component::Cudnn,
        Component::Nccl,
    ] {
        if framework && !FRAMEWORKS.contains(&c) || provider(profile, c) == ProviderKind::Apt {
            continue;
        }
        let (Some(v), Some(at)) = (resolution.version(c), pin(profile, c)) else {
            continue;
        };
        let Some(r) = catalog.stack_requirements(c.as_str(), v, major) else {
            continue;
        };
        for text in r.requirements {
            let origin = format!(
                "{}:{}:{} (`stack.{c}: \"{}\"` resolved to {v}; catalog/wheels.yaml [{}])",
                profile.file,
                at.line,
                at.column,
                at.value,
                r.sources.join(", ")
            );
            out.push((text, origin));
        }
    }
    out
}

/// Add the stack's requirements to `request`.
pub fn add_to(
    request: &mut PythonRequest,
    profile: &Profile,
    resolution: &Resolution,
    catalog: &Catalog,
) -> Result<(), OpsError> {
    for (text, origin) in requirements(profile, resolution, catalog) {
        request.add_requirement(&text, origin)?;
    }
    Ok(())
}

/// The wheel that carries component `prefix` (`nvidia-cudnn` matches `nvidia-cudnn-cu13`).
fn carrier<'a>(wheels: &'a [LockedWheel], prefix: &str) -> Option<&'a LockedWheel> {
    wheels.iter().find(|w| {
        w.name == prefix
            || w.name
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix("-cu"))
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
    })
}

/// Each pinned CUDA library (`stack.cuda`, `stack.cudnn`, `stack.nccl`) must be satisfied
/// by the wheel the resolution installed for it: a framework that pins another version is a
/// "no" naming the stack pin (its position) and the wheel with what required it.
pub fn check_agreement(profile: &Profile, wheels: &[LockedWheel]) -> Result<(), OpsError> {
    for (c, prefix) in LIBRARY_WHEELS {
        if provider(profile, *c) == ProviderKind::Apt {
            continue;
        }
        let Some(at) = pin(profile, *c) else {
            continue;
        };
        let (Ok(want), Some(w)) = (at.value.parse::<Constraint>(), carrier(wheels, prefix)) else {
            continue;
        };
        let Ok(have) = w.version.parse::<Version>() else {
            continue;
        };
        if want.matches(&have) {
            continue;
        }
        let by = if w.required_by.is_empty() {
            String::new()
        } else {
            format!(", required by {}", w.required_by.join(", "))
        };
        return Err(OpsError::Incompatible(format!(
            "`stack.{c}: \"{}\"` ({}:{}:{}) asks for {c} {}, but the resolved Python packages install `{} {}`{by} (its requirements on the index)",
            at.value, profile.file, at.line, at.column, at.value, w.name, w.version
        )));
    }
    Ok(())
}

/// The framework variant the resolved Python packages install must be the resolution's. The
/// resolution was made with what the index installs for `torch==X` (`ops::known`, `[index]`),
/// so this only confirms it; it says no (naming both) when the index changed between the two
/// reads, or the profile's own requirements pin another build.
pub fn check_installed(
    profile: &Profile,
    catalog: &Catalog,
    resolution: &Resolution,
    wheels: &[LockedWheel],
) -> Result<(), OpsError> {
    let (Some((version, installed)), Some(chosen), Some(at)) = (
        crate::plan::installed::pytorch_variant(wheels, catalog),
        resolution.variants.get(&Component::Pytorch),
        profile.stack.pytorch.as_ref(),
    ) else {
        return Ok(());
    };
    if *chosen == installed {
        return Ok(());
    }
    Err(OpsError::Incompatible(format!(
        "`stack.pytorch: \"{}\"` ({}:{}:{}) resolved to torch {version} ({chosen}), as the index served it when asked, but the resolved Python packages install torch {version} ({installed})",
        at.value, profile.file, at.line, at.column
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wheel(name: &str, version: &str, by: &str) -> LockedWheel {
        LockedWheel {
            name: name.into(),
            version: version.into(),
            filename: format!("{name}-{version}-py3-none-any.whl"),
            sha256: gpuimg_store::digest::Digest::of(name.as_bytes()),
            size: 1,
            index: "host".into(),
            requested: false,
            required_by: vec![by.into()],
        }
    }

    fn profile(stack: &str) -> Profile {
        let text = format!("name: x\nstack:\n{stack}");
        crate::profile::parse(
            &text,
            "p.yaml",
            std::path::Path::new("/nonexistent"),
            &|_| None,
        )
        .unwrap()
    }

    #[test]
    fn a_cuda_pin_the_framework_contradicts_is_a_no_naming_both() {
        let p = profile("  cuda: \"12.4\"\n  pytorch: \"2.15\"\n");
        let wheels = [
            wheel("nvidia-cuda-runtime", "13.2.86", "cuda-toolkit 13.2.2"),
            wheel("torch", "2.15.0", "torch==2.15.0"),
        ];
        let e = check_agreement(&p, &wheels).unwrap_err().to_string();
        assert!(e.contains("`stack.cuda: \"12.4\"` (p.yaml:3:9)"), "{e}");
        assert!(
            e.contains("`nvidia-cuda-runtime 13.2.86`, required by cuda-toolkit 13.2.2"),
            "{e}"
        );
        let ok = [wheel("nvidia-cuda-runtime-cu12", "12.4.127", "x")];
        assert!(check_agreement(&p, &ok).is_ok());
        let cudnn = profile("  cudnn: \"9.10\"\n");
        let e = check_agreement(
            &cudnn,
            &[wheel("nvidia-cudnn-cu13", "9.26.0.51", "torch 2.15.0")],
        );
        assert!(e.is_err());
    }

    #[test]
    fn a_package_built_for_another_cuda_major_is_a_no() {
        let p = profile("  nccl: \"2.21\"\n");
        let root = ComponentRelation {
            group: "libnccl2".into(),
            component: Component::Nccl,
            carrier: true,
            sources: vec!["nvidia-cuda-apt".into()],
            cuda_major: Some(12),
        };
        let deb = |version: &str| LockedPackage {
            name: "libnccl2".into(),
            version: version.into(),
            architecture: "amd64".into(),
            repository: "https://repo.invalid/".into(),
            filename: "l.deb".into(),
            size: 1,
            sha256: gpuimg_store::digest::Digest::of(b"l"),
        };
        let ok = [deb("2.21.5-1+cuda12.4")];
        assert!(check_apt_agreement(&p, std::slice::from_ref(&root), &ok).is_ok());
        let e = check_apt_agreement(&p, std::slice::from_ref(&root), &[deb("2.21.5-1+cuda13.0")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("built for CUDA 13") && e.contains("CUDA 12"),
            "{e}"
        );
        let e = check_apt_agreement(&p, &[root], &[deb("2.19.3-1+cuda12.4")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`libnccl2 2.19.3-1+cuda12.4`"), "{e}");
        assert_eq!(crate::catalog::cuda_line("11.8.89~11.8.0-5~deb12u1"), None);
    }

    #[test]
    fn a_stack_package_prefers_its_cuda_line_and_pinned_release() {
        let p = preference("libnccl2", Some(12), Some("2.21".parse().unwrap()));
        assert!(p.fits("2.21.5-1+cuda12.4"));
        assert!(!p.fits("2.21.5-1+cuda13.0"));
        assert!(!p.fits("2.26.5-1+cuda12.9"));
        // Built for no CUDA line: only the release counts.
        assert!(p.fits("2.21.5-1"));
        assert!(preference("libnccl2", Some(13), None).fits("2.28.9-1+cuda13.0"));
        assert!(preference("libnccl2", None, None).fits("anything"));
        assert_eq!(p.to_string(), "libnccl2 cuda12 release 2.21");
    }

    /// The installed variant is checked against the resolution's, which was made with what the
    /// index installs: agreeing is fine, another build (the index changed in between) a "no"
    /// naming both.
    #[test]
    fn the_installed_framework_variant_must_be_the_resolutions() {
        let c = Catalog::embedded().unwrap();
        let p = profile(
            "  pytorch: \"2.14\"\n  python: \"3.11\"\nhost: {gpus: [H100], driver: \"<550\"}\n",
        );
        let r = crate::resolve::resolve(&p, &c).unwrap();
        assert_eq!(r.variants[&Component::Pytorch], "cu126");
        let torch = |v: &str| [wheel("torch", v, "torch==2.14.1")];
        assert!(check_installed(&p, &c, &r, &torch("2.14.1+cu126")).is_ok());
        let e = check_installed(&p, &c, &r, &torch("2.14.1+cu130"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("resolved to torch 2.14.1 (cu126)")
                && e.contains("install torch 2.14.1 (cu130)"),
            "{e}"
        );
    }

    #[test]
    fn variants_give_the_cuda_major() {
        assert_eq!(variant_major("cu132"), Some(13));
        assert_eq!(variant_major("cu126"), Some(12));
        assert_eq!(variant_major("cuda13"), Some(13));
        assert_eq!(variant_major("rocm6.4"), None);
    }
}
