//! The expectation an image carries in `/etc/gpuimg/expect.json` (and what `gpuimg
//! verify-host` checks): built from the profile and its resolution alone.

use std::collections::BTreeMap;

use crate::expect::{Choices, Expectation, HostFacts};
use crate::profile::Profile;
use crate::resolve::Resolution;

/// The expectation an image built from `profile` with `resolution` carries (also what
/// `gpuimg verify-host` checks): host ranges, GPUs and peaks from the resolution, the image's
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
