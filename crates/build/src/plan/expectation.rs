//! The expectation an image carries in `/etc/gpuimg/expect.json` (and what `gpuimg
//! verify-host` checks): built from the profile and its resolution, plus (format 2) the CUDA
//! libraries of the locked wheels the image carries and its device code coverage.

use std::collections::BTreeMap;

use crate::catalog::{wheel_libraries, LibraryTableError};
use crate::profile::Profile;
use crate::resolve::Resolution;
use gpuimg_expect::{
    Choices, DeviceCode, Expectation, HostFacts, ImagePlatform, LibraryExpectation,
};

/// The expectation of an image that carries `libraries` and `device_code` (the image's own
/// contents; `expectation` alone is what `verify-host` checks of a profile).
pub fn image_expectation(
    profile: &Profile,
    res: Option<&Resolution>,
    libraries: Vec<LibraryExpectation>,
    device_code: Option<DeviceCode>,
) -> Expectation {
    let mut e = expectation(profile, res);
    e.libraries = libraries;
    e.device_code = device_code;
    e
}

/// The catalog's record of a framework's device code as the expectation writes it: a cubin
/// per SM, PTX for the highest target, and the record's sources.
pub fn expect_device_code(d: &crate::catalog::DeviceCode) -> DeviceCode {
    use gpuimg_expect::DeviceTarget;
    let sm = d.sm.iter().filter_map(|v| {
        format!("sm_{}{}", v.field(0), v.field(1))
            .parse::<DeviceTarget>()
            .ok()
    });
    let ptx = d.ptx.iter().filter_map(|v| {
        format!("compute_{}{}", v.field(0), v.field(1))
            .parse::<DeviceTarget>()
            .ok()
    });
    let mut source = Vec::new();
    if !d.sources.is_empty() {
        source.push(format!(
            "catalog: {}{}",
            d.sources.join(", "),
            if d.unverified { " (unverified)" } else { "" }
        ));
    }
    if !d.pruned_for.is_empty() {
        let ccs: Vec<String> = d.pruned_for.iter().map(|v| v.to_string()).collect();
        source.push(format!(
            "pruned for cc {} by strip: [device-code]",
            ccs.join(", ")
        ));
    }
    DeviceCode {
        targets: sm.chain(ptx).collect(),
        source: source.join("; "),
        ptx_bytes: None,
    }
}

/// The CUDA libraries that the wheels `(name, version)` installed in `site_dir` carry, as the
/// catalog's table lists them, in load order (the table's order, then the wheel's own).
pub fn wheel_library_expectations<'a>(
    site_dir: &str,
    wheels: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Vec<LibraryExpectation>, LibraryTableError> {
    let mut ranked = Vec::new();
    for (name, version) in wheels {
        let Some((rank, libs)) = wheel_libraries(name, version)? else {
            continue;
        };
        for (i, lib) in libs.into_iter().enumerate() {
            ranked.push((
                (rank, i),
                LibraryExpectation {
                    name: lib.key,
                    soname: lib.soname,
                    dir: format!("{}/{}", site_dir.trim_end_matches('/'), lib.dir),
                    version: version.to_string(),
                    provider: format!("wheel {name}"),
                    cuda_major: lib.cuda_major,
                    call: lib.call,
                    level: lib.level,
                    companions: lib.companions,
                },
            ));
        }
    }
    ranked.sort_by_key(|(rank, _)| *rank);
    Ok(ranked.into_iter().map(|(_, l)| l).collect())
}

/// The CUDA libraries of the locked apt packages (`installed::cuda_debs`), in package order:
/// each in the directory its package installs it to, with the package's upstream release.
pub fn deb_library_expectations(
    debs: &[(
        &crate::lock::LockedPackage,
        gpuimg_expect::version::Version,
        Vec<crate::catalog::WheelLibrary>,
    )],
) -> Vec<LibraryExpectation> {
    let mut out = Vec::new();
    for (d, v, libs) in debs {
        for lib in libs {
            out.push(LibraryExpectation {
                name: lib.key.clone(),
                soname: lib.soname.clone(),
                dir: lib.dir.clone(),
                version: v.to_string(),
                provider: format!("deb {}", d.name),
                cuda_major: lib.cuda_major,
                call: lib.call,
                level: lib.level,
                companions: lib.companions.clone(),
            });
        }
    }
    out
}

/// The expectation an image built from `profile` with `resolution` carries (also what
/// `gpuimg verify-host` checks): the profile's platform, host ranges, GPUs and peaks from the resolution, the image's
/// final `NVIDIA_REQUIRE_*`/`CUDA_VERSION` environment, the profile's `selftest` settings.
pub fn expectation(profile: &Profile, res: Option<&Resolution>) -> Expectation {
    let mut image_env: BTreeMap<String, String> =
        res.map(Resolution::image_env).unwrap_or_default();
    image_env.extend(profile.config.env.clone());
    let nvidia_require = image_env
        .iter()
        .filter(|(k, _)| {
            k.starts_with("NVIDIA_REQUIRE_")
                || *k == "NVIDIA_DISABLE_REQUIRE"
                || *k == "CUDA_VERSION"
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let facts = HostFacts {
        image: Some(profile.name.to_string()),
        platform: Some(ImagePlatform {
            os: profile.platform.os.clone(),
            architecture: profile.platform.architecture.clone(),
        }),
        driver_range: res.map(|r| r.host.driver.to_string()),
        kernel_range: res.map(|r| r.host.kernel.to_string()),
        module: res
            .map(|r| r.host.kernel_module)
            .unwrap_or(profile.host.kernel_module),
        cuda_driver_floor: res.and_then(|r| r.cuda_driver_floor.as_ref().map(|v| v.to_string())),
        gpus: res
            .map(|r| r.host.gpus.iter().map(|g| g.name.clone()).collect())
            .unwrap_or_default(),
        compute_capabilities: res
            .map(|r| {
                let ccs: std::collections::BTreeSet<String> = r
                    .host
                    .gpus
                    .iter()
                    .map(|g| g.compute_capability.to_string())
                    .collect();
                ccs.into_iter().collect()
            })
            .unwrap_or_default(),
        peak_bandwidth_gbps: res
            .map(|r| {
                r.host
                    .gpus
                    .iter()
                    .filter_map(|g| g.peak_bandwidth_gbps.map(|b| (g.name.clone(), b)))
                    .collect()
            })
            .unwrap_or_default(),
        nvidia_require,
        libraries: Vec::new(),
        device_code: None,
    };
    let st = &profile.selftest;
    let choices = Choices {
        level: st.level,
        on_failure: st.on_failure,
        min_gpus: st.min_gpus,
        host_device_gbps: st.floors.host_device_gbps,
        device_device_fraction: st.floors.device_device_fraction,
    };
    Expectation::new(facts, &choices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogs_device_code_becomes_cubins_and_ptx_that_cover_what_it_covers() {
        let v = |s: &str| s.parse::<gpuimg_expect::version::Version>().unwrap();
        let d = crate::catalog::DeviceCode {
            sm: vec![v("8.0"), v("9.0"), v("10.0")],
            ptx: Some(v("10.0")),
            sources: vec!["pytorch-wheel".into()],
            unverified: false,
            pruned_for: vec![],
        };
        let e = expect_device_code(&d);
        let t: Vec<String> = e.targets.iter().map(|t| t.to_string()).collect();
        assert_eq!(t, ["sm_80", "sm_90", "sm_100", "compute_100"]);
        assert_eq!(e.source, "catalog: pytorch-wheel");
        for cc in ["8.6", "9.0", "7.5", "12.0", "10.3"] {
            let c = v(cc);
            assert_eq!(
                e.covers(c.field(0) as u32, c.field(1) as u32),
                d.covers(&c),
                "{cc}"
            );
        }
    }

    #[test]
    fn locked_nvidia_wheels_become_the_expectations_libraries_in_load_order() {
        let site = "/usr/local/lib/python3.11/dist-packages";
        let libs = wheel_library_expectations(
            site,
            [
                ("nvidia-cublas", "13.1.0.3"),
                ("requests", "2.32.3"),
                ("nvidia-cuda-runtime", "13.0.96"),
            ],
        )
        .unwrap();
        let names: Vec<&str> = libs.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["cudart", "cublaslt", "cublas"]);
        assert_eq!(libs[0].dir, format!("{site}/nvidia/cu13/lib"));
        assert_eq!(libs[0].version, "13.0.96");
        assert_eq!(libs[0].provider, "wheel nvidia-cuda-runtime");
        assert_eq!(libs[0].cuda_major, 13);
        assert_eq!(libs[1].soname, "libcublasLt.so.13");
    }
}
