//! What the probes measured, as plain serialisable data.
//!
//! Checks are pure functions of these structs, so tests feed them recorded probe results.
//! Nothing here probes anything; `None` means "not measured / not supported".

use serde::{Deserialize, Serialize};

pub use super::dl::LoadError;
pub use super::libraries::LibraryProbe;

pub use gpuimg_expect::host_text::{ModuleFlavour, ModuleInfo};

/// How one library's initialisation probe ended (`nvmlInit`, `cuInit`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitOutcome {
    /// The library was not loaded, so it was never called.
    #[default]
    NotCalled,
    Ok,
    /// It (or listing its devices) returned an error, named in `nvml_error` / `cuda_error`.
    Failed,
    /// It did not answer within its time limit.
    TimedOut,
    /// Its probe thread died.
    Crashed,
}

/// Everything measured on one host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// Kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// `uname -s` and `uname -m` (`Linux`, `x86_64`), as the self-test's process sees them
    /// (under an emulator, the emulated machine); absent in older recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The loaded kernel module, if any.
    pub module: Option<ModuleInfo>,
    /// Whether `libnvidia-ml.so.1` / `libcuda.so.1` could be loaded.
    pub nvml_loaded: bool,
    pub cuda_loaded: bool,
    /// Why `libnvidia-ml.so.1` / `libcuda.so.1` was not loaded: no file, a file `dlopen`
    /// refused, or a function it lacks (`None` when it loaded, and in older recordings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml_load_error: Option<LoadError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_load_error: Option<LoadError>,
    /// User-space driver version from NVML (`580.159.04`).
    pub driver_version: Option<String>,
    /// NVML initialisation failure, by name (`NVML_ERROR_LIB_RM_VERSION_MISMATCH`).
    pub nvml_error: Option<String>,
    /// `cuDriverGetVersion` as `major.minor` (`13.0`).
    pub cuda_driver_version: Option<String>,
    /// `cuInit` failure, by name (`CUDA_ERROR_SYSTEM_DRIVER_MISMATCH`).
    pub cuda_error: Option<String>,
    /// How `nvmlInit` and `cuInit` ended; checks that depend on them read these.
    pub nvml_init: InitOutcome,
    pub cuda_init: InitOutcome,
    /// GPUs as NVML sees them, in NVML order.
    pub gpus: Vec<GpuInfo>,
    /// Per-GPU results of CUDA work (functional kernel, bandwidth), by UUID.
    pub cuda_devices: Vec<CudaDeviceResult>,
    /// Probes that did not finish in time (`nvml`, `cuda: kernel on GPU 0`).
    pub timed_out: Vec<String>,
    /// The image's CUDA libraries (expectation format 2), loaded and asked their versions.
    #[serde(default)]
    pub libraries: Vec<LibraryProbe>,
}

/// One GPU from NVML.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub uuid: String,
    /// `9.0`.
    pub compute_capability: String,
    /// NVML brand in libnvidia-container's spelling (`tesla`, `nvidia`).
    pub brand: String,
    /// Total memory from `nvmlDeviceGetMemoryInfo`; 0 when NVML did not say.
    pub memory_total_mib: u64,
    /// `nvmlDeviceGetPciInfo_v3` bus id, normalised to `dddd:bb:dd.f` (lower-case hex).
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    pub pcie: PcieLink,
    pub ecc: EccHealth,
    /// Current clock event (throttle) reasons, as NVML's bit mask and by name.
    pub throttle_mask: Option<u64>,
    pub throttle_reasons: Vec<String>,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub mig_enabled: Option<bool>,
    /// The MIG devices NVML shows on this GPU (empty unless MIG mode is on).
    #[serde(default)]
    pub mig_devices: Vec<MigDevice>,
}

/// One MIG device (GPU instance + compute instance) under a GPU, from NVML.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MigDevice {
    /// Index under the parent (`nvmlDeviceGetMigDeviceHandleByIndex`).
    pub index: u32,
    /// `MIG-xxxxxxxx-…`.
    pub uuid: String,
    pub name: String,
    pub memory_total_mib: u64,
}

/// PCIe link generation and width, maximum and current.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PcieLink {
    pub max_gen: Option<u32>,
    pub max_width: Option<u32>,
    pub current_gen: Option<u32>,
    pub current_width: Option<u32>,
}

/// ECC mode and the counters fleet health checks look at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EccHealth {
    pub enabled: Option<bool>,
    pub volatile_uncorrected: Option<u64>,
    pub aggregate_uncorrected: Option<u64>,
    pub volatile_corrected: Option<u64>,
    /// Pre-Ampere page retirement: pages waiting for a reset.
    pub retired_pages_pending: Option<bool>,
    /// Ampere+ row remapping.
    pub remapped_rows_correctable: Option<u32>,
    pub remapped_rows_uncorrectable: Option<u32>,
    pub remap_pending: Option<bool>,
    pub remap_failure: Option<bool>,
}

/// CUDA work on one device.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CudaDeviceResult {
    pub ordinal: u32,
    /// `cuDeviceGetUuid_v2`, spelled as NVML spells it: `GPU-…`, or `MIG-…` once matched to a
    /// MIG device (the driver returns the same 16 bytes NVML prints after `MIG-`).
    pub uuid: String,
    pub name: String,
    pub compute_capability: String,
    /// `cuDeviceTotalMem_v2`.
    #[serde(default)]
    pub memory_total_mib: Option<u64>,
    /// `cuDeviceGetPCIBusId`, normalised to `dddd:bb:dd.f` (lower-case hex).
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    /// Elements of the embedded PTX kernel's result verified (all of them, when it passed).
    pub kernel_verified: Option<u64>,
    /// Why the functional check failed (JIT, launch, copy, or the first wrong element).
    pub kernel_error: Option<String>,
    pub kernel_ms: Option<f64>,
    pub bandwidth: Option<Bandwidth>,
    pub bandwidth_error: Option<String>,
}

/// `--level full` measurements, GB/s (10^9 bytes per second), medians of repeats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    pub host_to_device_gbps: f64,
    pub device_to_host_gbps: f64,
    /// Counted as 2·N/t (read plus write).
    pub device_to_device_gbps: f64,
    /// PCIe link seen while a host→device copy was running.
    pub link_gen_under_load: Option<u32>,
    pub link_width_under_load: Option<u32>,
}
