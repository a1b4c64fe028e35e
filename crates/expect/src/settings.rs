//! What the image's owner chose about the self-test and the host, as the expectation file
//! records it: the kernel module flavour, the level, what to do on failure, and the floors.
//! The profile's `host` and `selftest` sections use these types; `expect` owns them because
//! the self-test reads them without knowing about profiles.

use serde::{Deserialize, Serialize};

/// Which NVIDIA kernel module flavour the host must run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelModule {
    Open,
    Proprietary,
    #[default]
    Any,
}

/// quick: versions, health and a kernel on every GPU; full: adds bandwidth.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SelftestLevel {
    #[default]
    Quick,
    Full,
}

/// Whether the wrapped workload starts after a failed self-test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    #[default]
    Abort,
    Warn,
}

/// The owner's self-test choices that go into an expectation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Choices {
    pub level: SelftestLevel,
    pub on_failure: OnFailure,
    /// Minimum number of GPUs the host must show (default 1).
    pub min_gpus: Option<u32>,
    /// Host↔device floor in GB/s (default: from the catalog's peak).
    pub host_device_gbps: Option<f64>,
    /// Device-to-device floor as a fraction of the catalog peak (default
    /// `DEFAULT_DEVICE_DEVICE_FRACTION`).
    pub device_device_fraction: Option<f64>,
}
