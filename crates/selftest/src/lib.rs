//! `gpuimg-selftest`: the boot-time GPU self-test run by `gpuimg-selftest` (this crate's
//! binary, baked into every image) and `gpuimg verify-host` (through `run`).
//!
//! Probes the host (procfs, NVML and the CUDA driver API, loaded at run time; each probe with a
//! time limit) and the image's own CUDA libraries, checks the results against an
//! `Expectation`, and renders a `Report`.
//! Checks are pure functions of `Measurements`. Must never link the CUDA toolkit, write to the
//! host, or panic on anything the host or the expectation file controls. Of the builder it
//! depends on `gpuimg-expect` and `gpuimg-entry` alone, never on `gpuimg` itself.

mod carried;
mod cause;
mod check;
mod checks;
mod cli;
mod collect;
mod crosscheck;
mod cuda_api;
mod cuda_work;
mod data;
mod dl;
mod exec;
mod libraries;
mod nvml;
mod platform;
mod procfs;
mod ptx;
mod report;
mod require;
mod segments;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use check::{Because, Check, Status, Verdict};
pub use checks::{evaluate, name_matches, no_gpu_reason};
pub use cli::main;
pub use crosscheck::{
    memory_agrees, normalize_pci_bus_id, pair, MatchedBy, Pair, MEMORY_TOLERANCE_MIB,
    MEMORY_TOLERANCE_PERCENT,
};
pub use data::{
    Bandwidth, CudaDeviceResult, EccHealth, GpuInfo, InitOutcome, LibraryProbe, LoadError,
    Measurements, MigDevice, ModuleFlavour, ModuleInfo, PcieLink,
};
pub use exec::{exec, ExecError};
pub use gpuimg_expect::host_text::parse_module_version;
pub use libraries::probe_all as probe_libraries;
pub use ptx::PTX;
pub use report::Report;
pub use require::{
    evaluate as evaluate_require, requirements, InvalidRequirement, Outcome, RequireFacts,
};

use gpuimg_expect::Expectation;
use gpuimg_expect::SelftestLevel;

/// Probe this host at `level` and check it against `expect`; `env` is the process environment
/// (for `NVIDIA_REQUIRE_*`).
pub fn run(expect: &Expectation, level: SelftestLevel, env: &BTreeMap<String, String>) -> Report {
    let start = Instant::now();
    let m = collect::collect(level, &expect.libraries);
    report_from(expect, &m, env, level, start.elapsed())
}

/// The report for already-collected measurements (pure; tests use recorded probe data).
pub fn report_from(
    expect: &Expectation,
    m: &Measurements,
    env: &BTreeMap<String, String>,
    level: SelftestLevel,
    elapsed: Duration,
) -> Report {
    let (verdict, message, checks) = match no_gpu_reason(m) {
        // A host of another platform fails whether or not it has a GPU: nothing of the
        // image runs there.
        Some(why) => match checks::platform(expect, m) {
            c if c.status == Status::Fail => (Verdict::Fail, Some(why), vec![c]),
            _ => (Verdict::NoGpu, Some(why), Vec::new()),
        },
        None => {
            let checks = evaluate(expect, m, env, level);
            (checks::verdict(&checks), None, checks)
        }
    };
    Report {
        verdict,
        message,
        level: match level {
            SelftestLevel::Quick => "quick",
            SelftestLevel::Full => "full",
        },
        kernel: m.kernel.clone(),
        kernel_module: m.module.clone(),
        driver_version: m.driver_version.clone(),
        cuda_driver_version: m.cuda_driver_version.clone(),
        nvml_init: m.nvml_init,
        cuda_init: m.cuda_init,
        gpus: m.gpus.clone(),
        cuda_devices: m.cuda_devices.clone(),
        libraries: m.libraries.clone(),
        checks,
        duration_ms: elapsed.as_millis() as u64,
    }
}

/// The process environment as UTF-8 pairs (others cannot hold `NVIDIA_REQUIRE_*`).
pub fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}
