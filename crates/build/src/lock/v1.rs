//! Lock format version 1, frozen: the schema gpuimg wrote before lock v2, read only to convert.
//!
//! Version 1 stored `packages` (plain .deb records) and `resolution` (the resolver's type as it
//! serialised then). Its shape is copied here so that later changes to the v2 types or to the
//! resolver never change what a v1 lock means. Conversion copies every text field as written:
//! no version, range or digest is parsed and printed again on the way.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::resolution::{LockedCompat, LockedGpu, LockedHost, LockedKernelModule};
use super::{LockInputs, LockedArtifact, LockedPackage, LockedResolution};

/// A v1 lock file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LockV1 {
    #[allow(dead_code)]
    version: u32,
    #[serde(default)]
    packages: Vec<DebV1>,
    #[serde(default)]
    resolution: Option<ResolutionV1>,
    #[serde(default)]
    inputs: Option<LockInputs>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DebV1 {
    name: String,
    version: String,
    architecture: String,
    repository: String,
    filename: String,
    size: u64,
    sha256: gpuimg_store::digest::Digest,
}

// The v1 resolution came from the resolver's own serde derive, which accepted unknown fields
// and defaulted these; so does this copy.
#[derive(Debug, Deserialize)]
struct ResolutionV1 {
    components: BTreeMap<String, String>,
    #[serde(default)]
    variants: BTreeMap<String, String>,
    host: HostV1,
    compat: LockedCompat,
    #[serde(default)]
    cuda_driver_floor: Option<String>,
    #[serde(default)]
    compute_capabilities: Vec<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct HostV1 {
    driver: String,
    kernel: String,
    kernel_module: LockedKernelModule,
    gpus: Vec<GpuV1>,
    #[serde(default)]
    forward_compat_branches: Vec<u64>,
}

#[derive(Debug, Deserialize)]
struct GpuV1 {
    name: String,
    compute_capability: String,
    #[serde(default)]
    arch: Option<String>,
    #[serde(default)]
    peak_bandwidth_gbps: Option<f64>,
}

/// A v1 lock's contents in v2 terms: (artifacts, resolution, inputs).
pub(super) type Converted = (
    Vec<LockedArtifact>,
    Option<LockedResolution>,
    Option<LockInputs>,
);

impl LockV1 {
    pub(super) fn convert(self) -> Converted {
        let artifacts = self
            .packages
            .into_iter()
            .map(|p| {
                LockedArtifact::Deb(LockedPackage {
                    name: p.name,
                    version: p.version,
                    architecture: p.architecture,
                    repository: p.repository,
                    filename: p.filename,
                    size: p.size,
                    sha256: p.sha256,
                })
            })
            .collect();
        let resolution = self.resolution.map(|r| LockedResolution {
            components: r.components,
            variants: r.variants,
            host: LockedHost {
                driver: r.host.driver,
                kernel: r.host.kernel,
                kernel_module: r.host.kernel_module,
                gpus: r
                    .host
                    .gpus
                    .into_iter()
                    .map(|g| LockedGpu {
                        name: g.name,
                        compute_capability: g.compute_capability,
                        arch: g.arch,
                        peak_bandwidth_gbps: g.peak_bandwidth_gbps,
                    })
                    .collect(),
                forward_compat_branches: r.host.forward_compat_branches,
            },
            compat: r.compat,
            cuda_driver_floor: r.cuda_driver_floor,
            compute_capabilities: r.compute_capabilities,
            warnings: r.warnings,
        });
        (artifacts, resolution, self.inputs)
    }
}
