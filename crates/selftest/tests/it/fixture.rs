//! Recorded probe data of the H200 host and helpers shared by the self-test check tests.
//!
//! `h200()` is that host (driver 580.159.04, CUDA 13.0, open module, one H200 seen alike by
//! NVML and CUDA); each test changes one fact or one expectation.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use gpuimg_expect::{Choices, KernelModule, SelftestLevel};
use gpuimg_expect::{Expectation, HostFacts, ImagePlatform};
use gpuimg_selftest::{
    report_from, Bandwidth, Check, CudaDeviceResult, EccHealth, GpuInfo, InitOutcome, Measurements,
    ModuleFlavour, ModuleInfo, PcieLink, Report, Status,
};

pub const UUID: &str = "GPU-5f1c0e2a-3b7d-4e11-9a0c-1d2e3f405162";
pub const BUS: &str = "0000:19:00.0";
/// `cuDeviceTotalMem_v2` on the H200 is a little below NVML's total.
pub const CUDA_MIB: u64 = 143_156;

pub fn h200() -> Measurements {
    Measurements {
        kernel: Some("6.18.0-1-cloud-amd64".into()),
        os: Some("Linux".into()),
        machine: Some("x86_64".into()),
        module: Some(ModuleInfo {
            version: "580.159.04".into(),
            flavour: ModuleFlavour::Open,
        }),
        nvml_loaded: true,
        cuda_loaded: true,
        nvml_load_error: None,
        cuda_load_error: None,
        driver_version: Some("580.159.04".into()),
        nvml_error: None,
        cuda_driver_version: Some("13.0".into()),
        cuda_error: None,
        nvml_init: InitOutcome::Ok,
        cuda_init: InitOutcome::Ok,
        gpus: vec![GpuInfo {
            index: 0,
            name: "NVIDIA H200".into(),
            uuid: UUID.into(),
            compute_capability: "9.0".into(),
            brand: "nvidia".into(),
            memory_total_mib: 143771,
            pci_bus_id: Some(BUS.into()),
            pcie: PcieLink {
                max_gen: Some(5),
                max_width: Some(16),
                current_gen: Some(1),
                current_width: Some(16),
            },
            ecc: EccHealth {
                enabled: Some(true),
                volatile_uncorrected: Some(0),
                aggregate_uncorrected: Some(0),
                volatile_corrected: Some(0),
                retired_pages_pending: None,
                remapped_rows_correctable: Some(0),
                remapped_rows_uncorrectable: Some(0),
                remap_pending: Some(false),
                remap_failure: Some(false),
            },
            throttle_mask: Some(1),
            throttle_reasons: vec!["gpu_idle".into()],
            temperature_c: Some(31),
            power_w: Some(76.0),
            power_limit_w: Some(700.0),
            mig_enabled: Some(false),
            mig_devices: vec![],
        }],
        cuda_devices: vec![CudaDeviceResult {
            ordinal: 0,
            uuid: UUID.into(),
            name: "NVIDIA H200".into(),
            compute_capability: "9.0".into(),
            memory_total_mib: Some(CUDA_MIB),
            pci_bus_id: Some(BUS.into()),
            kernel_verified: Some(1 << 20),
            kernel_error: None,
            kernel_ms: Some(110.0),
            bandwidth_error: None,
            bandwidth: Some(Bandwidth {
                host_to_device_gbps: 53.9,
                device_to_host_gbps: 55.0,
                device_to_device_gbps: 4240.0,
                link_gen_under_load: Some(5),
                link_width_under_load: Some(16),
            }),
        }],
        timed_out: vec![],
        libraries: vec![],
    }
}

pub fn matching() -> Expectation {
    let host = HostFacts {
        image: Some("demo".into()),
        platform: Some(ImagePlatform {
            os: "linux".into(),
            architecture: "amd64".into(),
        }),
        driver_range: Some(">=580,<581".into()),
        kernel_range: Some(">=5.15".into()),
        module: KernelModule::Open,
        cuda_driver_floor: Some("12.4".into()),
        gpus: vec!["H200".into(), "H100".into()],
        compute_capabilities: vec![],
        peak_bandwidth_gbps: BTreeMap::from([("H200".to_string(), 4800.0)]),
        nvidia_require: BTreeMap::new(),
        libraries: vec![],
        device_code: None,
    };
    Expectation::new(host, &Choices::default())
}

pub fn run(e: &Expectation, m: &Measurements, level: SelftestLevel) -> Report {
    report_from(e, m, &BTreeMap::new(), level, Duration::from_millis(5))
}

pub fn failed(r: &Report) -> Vec<&str> {
    r.checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| c.name.as_str())
        .collect()
}

pub fn status(r: &Report, name: &str) -> Status {
    r.checks
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.status)
        .unwrap_or_else(|| panic!("no check `{name}` in {:?}", r.checks))
}

/// The check called `name`.
pub fn check<'a>(r: &'a Report, name: &str) -> &'a Check {
    r.checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check `{name}` in {:?}", r.checks))
}

/// Names and statuses of every check whose name starts with `prefix`.
pub fn named<'a>(r: &'a Report, prefix: &str) -> Vec<(&'a str, Status)> {
    r.checks
        .iter()
        .filter(|c| c.name.starts_with(prefix))
        .map(|c| (c.name.as_str(), c.status))
        .collect()
}
