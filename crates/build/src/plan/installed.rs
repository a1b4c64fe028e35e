//! What the locked wheels say about the image's CUDA, for its config and annotations: the
//! runtime's version (`CUDA_VERSION`, and `NVIDIA_REQUIRE_CUDA`'s `cuda>=` per the compat
//! mode, from the installed cudart wheel rather than the request; the resolution's minor
//! where the other CUDA wheels need a higher one than cudart's), `arch>=` as the lowest
//! target GPU the framework's device code covers, each CUDA library wheel's version and the
//! covered SMs (`io.gpuimg.*`), and the CUDA libraries' files for the self-test's
//! expectation. The CUDA libraries of apt packages (`providers: {cuda: apt}`) count the same
//! way, as the catalog's library table records them. Pure: the caller hands in the locked
//! wheels and packages and the catalog.

use std::collections::BTreeMap;

use super::wheel_components;
use crate::catalog::{Catalog, DeviceCode};
use crate::lock::{LockedPackage, LockedWheel};
use crate::profile::CompatMode;
use crate::resolve::{Component, Resolution};
use gpuimg_expect::version::Version;
use gpuimg_oci::image::annotations::*;

/// The wheel components that hold NVIDIA's CUDA libraries.
pub(super) const LIBRARY_COMPONENTS: &[&str] = &["cuda-runtime", "cuda-math", "cudnn", "nccl"];

/// The locked cudart wheel (`nvidia-cuda-runtime`, `nvidia-cuda-runtime-cuNN`) and its version.
pub fn runtime(wheels: &[LockedWheel]) -> Option<(&LockedWheel, Version)> {
    wheels
        .iter()
        .filter(|w| {
            w.name == "nvidia-cuda-runtime"
                || w.name
                    .strip_prefix("nvidia-cuda-runtime-cu")
                    .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
        })
        .find_map(|w| Some((w, w.version.parse::<Version>().ok()?)))
}

/// The locked apt packages that carry CUDA libraries (the catalog's library table knows
/// them), each with its upstream release and its libraries.
pub fn cuda_debs<'a>(
    debs: &'a [LockedPackage],
    debian_arch: &str,
) -> Vec<(
    &'a LockedPackage,
    Version,
    Vec<crate::catalog::WheelLibrary>,
)> {
    debs.iter()
        .filter_map(|d| {
            let v = crate::lock::upstream_release(&d.version)?;
            let libs =
                crate::catalog::deb_libraries(&d.name, &v.to_string(), &d.version, debian_arch)
                    .ok()
                    .flatten()?;
            Some((d, v, libs))
        })
        .collect()
}

/// The locked torch wheel's release and CUDA variant: the variant from its local version
/// (`2.15.0+cu126`), else the one the catalog records for the default index.
pub fn pytorch_variant(wheels: &[LockedWheel], catalog: &Catalog) -> Option<(Version, String)> {
    let torch = wheels.iter().find(|w| w.name == "torch")?;
    let (public, local) = match torch.version.split_once('+') {
        Some((p, l)) => (p, Some(l)),
        None => (torch.version.as_str(), None),
    };
    let version: Version = public.parse().ok()?;
    let variant = match local {
        Some(l) => l.to_string(),
        None => catalog.default_pytorch_variant(&version)?.to_string(),
    };
    Some((version, variant))
}

/// The device code of the locked framework wheel ([`pytorch_variant`]'s record).
pub fn device_code(wheels: &[LockedWheel], catalog: &Catalog) -> Option<DeviceCode> {
    let (version, variant) = pytorch_variant(wheels, catalog)?;
    catalog.device_code("pytorch", &version, &variant)
}

/// One shared library of a CUDA library wheel, as the image carries it: for the self-test's
/// expectation (which library to load, and the locked version it must report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaLibrary {
    /// The wheel (`nvidia-cuda-runtime-cu12`) and its locked version (`12.4.127`).
    pub wheel: String,
    pub version: String,
    /// The wheel's component layer (`cuda-runtime`, `cuda-math`, `cudnn`, `nccl`).
    pub component: &'static str,
    /// The image path, with a leading `/`, and the SONAME the loader knows it by.
    pub path: String,
    pub soname: String,
}

/// Every shared library of the CUDA library wheels in `install`, sorted by path.
pub fn cuda_libraries(install: &super::PythonInstall) -> Vec<CudaLibrary> {
    let mut out = Vec::new();
    for w in &install.wheels {
        let component = wheel_components::component_of(&w.name);
        if !LIBRARY_COMPONENTS.contains(&component) {
            continue;
        }
        for l in install.libraries.get(&w.name).into_iter().flatten() {
            if l.elf.is_none() || l.module {
                continue;
            }
            out.push(CudaLibrary {
                wheel: w.name.clone(),
                version: w.version.clone(),
                component,
                path: format!("/{}", l.path),
                soname: l.soname().to_string(),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Update `env` and `annotations` (the resolution's) with what the locked wheels and the
/// CUDA packages among the locked debs (`cuda_debs`: the runtime's version) install.
pub fn apply(
    resolution: &Resolution,
    wheels: &[LockedWheel],
    debs: &[(&LockedPackage, Version, Vec<crate::catalog::WheelLibrary>)],
    code: Option<&DeviceCode>,
    env: &mut BTreeMap<String, String>,
    annotations: &mut BTreeMap<String, String>,
) {
    for w in wheels {
        if LIBRARY_COMPONENTS.contains(&wheel_components::component_of(&w.name)) {
            annotations.insert(
                format!("{ANN_CUDA_LIBRARY_PREFIX}{}", w.name),
                w.version.clone(),
            );
        }
    }
    let mut r = resolution.clone();
    if let Some(code) = code {
        annotations.insert(ANN_DEVICE_CODE_SM.into(), code.sm_list());
        if let Some(p) = &code.ptx {
            annotations.insert(
                ANN_DEVICE_CODE_PTX.into(),
                format!("compute_{}{}", p.field(0), p.field(1)),
            );
        }
        let mut sources = code.sources.join(",");
        if code.unverified {
            sources.push_str(",unverified");
        }
        if !sources.is_empty() {
            annotations.insert(ANN_DEVICE_CODE_SOURCE.into(), sources);
        }
        if !code.pruned_for.is_empty() {
            let ccs: Vec<String> = code.pruned_for.iter().map(|v| v.to_string()).collect();
            annotations.insert(ANN_DEVICE_CODE_PRUNED_FOR.into(), ccs.join(","));
        }
        let covered: Vec<Version> = r
            .compute_capabilities
            .iter()
            .filter(|cc| code.covers(cc))
            .cloned()
            .collect();
        if !covered.is_empty() {
            r.compute_capabilities = covered;
        }
    }
    let deb_runtime = debs
        .iter()
        .find(|(_, _, libs)| libs.iter().any(|l| l.key == "cudart"))
        .map(|(_, v, _)| v.clone());
    if let Some(v) = runtime(wheels).map(|(_, v)| v).or(deb_runtime) {
        // The runtime's version, unless other CUDA libraries need a higher minor of its major
        // from the driver: the resolution was made for that minor then (`ops::cuda_minor`).
        let v = match r.version(Component::Cuda) {
            Some(c) if c.field(0) == v.field(0) && c.truncate(2) > v.truncate(2) => c.truncate(2),
            _ => v,
        };
        env.insert("CUDA_VERSION".into(), v.to_string());
        r.cuda_driver_floor = Some(match r.compat {
            CompatMode::Strict => v.truncate(2),
            CompatMode::Minor | CompatMode::Forward => Version::from_fields(&[v.major(), 0]),
        });
    }
    let pruned = code.is_some_and(|c| !c.pruned_for.is_empty());
    if let Some(req) = r.require_cuda_for(pruned) {
        env.insert("NVIDIA_REQUIRE_CUDA".into(), req);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    fn wheel(name: &str, version: &str) -> LockedWheel {
        LockedWheel {
            name: name.into(),
            version: version.into(),
            filename: format!("{name}-{version}-py3-none-any.whl"),
            sha256: gpuimg_store::digest::Digest::of(name.as_bytes()),
            size: 1,
            index: "host".into(),
            requested: false,
            required_by: vec![],
        }
    }

    fn resolved(yaml: &str) -> Resolution {
        let p =
            crate::profile::parse(yaml, "p.yaml", std::path::Path::new("/x"), &|_| None).unwrap();
        crate::resolve::resolve(&p, &Catalog::embedded().unwrap()).unwrap()
    }

    #[test]
    fn the_runtime_wheel_sets_cuda_version_and_the_floor_per_compat_mode() {
        let wheels = [
            wheel("nvidia-cuda-runtime-cu12", "12.4.127"),
            wheel("numpy", "2.0"),
        ];
        for (compat, floor) in [("strict", "cuda>=12.4"), ("minor", "cuda>=12.0")] {
            let r = resolved(&format!(
                "name: x\nhost: {{gpus: [H200]}}\nstack: {{cuda: \"12.4\"}}\ncompat: {compat}\n"
            ));
            let (mut env, mut ann) = (r.image_env(), BTreeMap::new());
            apply(&r, &wheels, &[], None, &mut env, &mut ann);
            assert_eq!(env["CUDA_VERSION"], "12.4.127");
            assert_eq!(env["NVIDIA_REQUIRE_CUDA"], format!("{floor},arch>=9.0"));
            assert_eq!(
                ann["io.gpuimg.cuda-library.nvidia-cuda-runtime-cu12"],
                "12.4.127"
            );
            assert!(!ann.contains_key("io.gpuimg.cuda-library.numpy"));
        }
        // Made for the CUDA 12.9 the other wheels need (cuBLAS 12.9): that minor, not cudart's.
        let r =
            resolved("name: x\nhost: {gpus: [H200]}\nstack: {cuda: \"12.9\"}\ncompat: strict\n");
        let wheels = [wheel("nvidia-cuda-runtime-cu12", "12.8.90")];
        let (mut env, mut ann) = (r.image_env(), BTreeMap::new());
        apply(&r, &wheels, &[], None, &mut env, &mut ann);
        assert_eq!(env["CUDA_VERSION"], "12.9");
        assert_eq!(env["NVIDIA_REQUIRE_CUDA"], "cuda>=12.9,arch>=9.0");
    }

    #[test]
    fn cuda_libraries_are_the_library_wheels_shared_objects() {
        use gpuimg_wheel::WheelLibrary;
        let so = |s: &str| gpuimg_elf::SharedObject {
            is_64: true,
            machine: 62,
            soname: Some(s.into()),
            ..Default::default()
        };
        let site = "usr/local/lib/python3.11/dist-packages";
        let install = crate::plan::PythonInstall {
            wheels: vec![
                wheel("nvidia-cuda-runtime-cu12", "12.4.127"),
                wheel("numpy", "2.0"),
            ],
            python: gpuimg_pypi::ImagePython {
                version: (3, 11),
                full_version: "3.11.2".into(),
                interpreter: "/usr/bin/python3.11".into(),
                site_dir: format!("/{site}"),
                scripts_dir: "/usr/local/bin".into(),
                glibc: (2, 36),
                machine: "x86_64".into(),
            },
            compiler: None,
            libraries: BTreeMap::from([
                (
                    "nvidia-cuda-runtime-cu12".to_string(),
                    vec![WheelLibrary {
                        path: format!("{site}/nvidia/cuda_runtime/lib/libcudart.so.12"),
                        elf: Some(so("libcudart.so.12")),
                        module: false,
                    }],
                ),
                (
                    "numpy".to_string(),
                    vec![WheelLibrary {
                        path: format!("{site}/numpy.libs/libgfortran-1.so.5"),
                        elf: Some(so("libgfortran-1.so.5")),
                        module: false,
                    }],
                ),
            ]),
        };
        let libs = cuda_libraries(&install);
        assert_eq!(libs.len(), 1);
        assert_eq!(libs[0].soname, "libcudart.so.12");
        assert_eq!(libs[0].version, "12.4.127");
        assert_eq!(libs[0].component, "cuda-runtime");
        assert!(libs[0].path.starts_with("/usr/local/lib/python3.11/"));
    }

    #[test]
    fn arch_is_the_lowest_target_the_device_code_covers() {
        let c = Catalog::embedded().unwrap();
        let wheels = [
            wheel("torch", "2.15.0"),
            wheel("nvidia-cuda-runtime", "13.2.86"),
        ];
        let code = device_code(&wheels, &c).unwrap();
        assert_eq!(code.sm_list(), "sm_75,sm_80,sm_86,sm_90,sm_100,sm_120");
        let r = resolved("name: x\nhost: {gpus: [V100, H200]}\nstack: {cuda: \"12.4\"}\n");
        let (mut env, mut ann) = (r.image_env(), BTreeMap::new());
        apply(&r, &wheels, &[], Some(&code), &mut env, &mut ann);
        assert_eq!(
            env["NVIDIA_REQUIRE_CUDA"], "cuda>=13.0,arch>=9.0",
            "V100's 7.0 has no code"
        );
        assert_eq!(ann["io.gpuimg.device-code.sm"], code.sm_list());
        // Pruned for the H100/H200 and the B200: one `arch=` alternative per GPU, and the
        // annotations say what is left.
        let r = resolved("name: x\nhost: {gpus: [H200, B200]}\nstack: {cuda: \"13.0\"}\n");
        let pruned = code.pruned(&[v("9.0"), v("10.0")]);
        let (mut env, mut ann) = (r.image_env(), BTreeMap::new());
        apply(&r, &wheels, &[], Some(&pruned), &mut env, &mut ann);
        assert_eq!(
            env["NVIDIA_REQUIRE_CUDA"],
            "cuda>=13.0,arch=9.0 cuda>=13.0,arch=10.0"
        );
        assert_eq!(ann["io.gpuimg.device-code.sm"], "sm_90,sm_100");
        assert_eq!(ann["io.gpuimg.device-code.pruned-for"], "9.0,10.0");
        // A local version names the variant.
        let cu130 = device_code(&[wheel("torch", "2.15.0+cu130")], &c).unwrap();
        assert!(
            cu130.unverified,
            "the catalog marks 2.15.0 cu130's SM list unverified"
        );
    }
}
