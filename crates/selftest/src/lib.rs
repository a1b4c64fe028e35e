//! `gpuimg-selftest`: the boot-time GPU self-test run by `gpuimg-selftest` (this crate's
//! binary, baked into every image) and `gpuimg verify-host` (through `run`).
//!
//! Probes the host (procfs, NVML and the CUDA driver API, loaded at run time; each probe with a
//! time limit) and the image's own CUDA libraries, checks the results against an
//! `Expectation`, and renders a `Report`. A node image's expectation also drives the host
//! checks (`run_host`, `gpuimg-selftest --host`): what a node needs at boot, read from its files
//! under a root, no GPU call made.
//! Checks are pure functions of `Measurements` (`NodeFacts` for the host checks). Must never
//! link the CUDA toolkit, write to the host, or panic on anything the host or the expectation
//! file controls. Of the builder it depends on `gpuimg-expect`, `gpuimg-entry` and the pure
//! module reader `gpuimg-kmod` alone, never on `gpuimg` itself.

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
mod in_root;
mod libraries;
mod node_checks;
mod node_facts;
mod node_read;
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
pub use in_root::{InRootError, Root};
pub use libraries::probe_all as probe_libraries;
pub use node_checks::evaluate as evaluate_host;
pub use node_facts::{CertificateFacts, Found, Library, ModuleFile, NodeFacts, SignedBy};
pub use node_read::{module_path, read as read_node};
pub use ptx::PTX;
pub use report::Report;
pub use require::{
    evaluate as evaluate_require, requirements, InvalidRequirement, Outcome, RequireFacts,
};

use gpuimg_expect::SelftestLevel;
use gpuimg_expect::{Expectation, NodeExpectation};

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

/// Check the node under `root` (`/` on the node itself) against `node`: the host checks, from
/// its files alone (no GPU call, nothing loaded).
pub fn run_host(node: &NodeExpectation, root: &std::path::Path) -> Report {
    let start = Instant::now();
    let facts = node_read::read(&Root::new(root), node);
    host_report_from(node, &facts, start.elapsed())
}

/// The host checks' report for already-read facts (pure; tests use recorded facts).
pub fn host_report_from(node: &NodeExpectation, f: &NodeFacts, elapsed: Duration) -> Report {
    let checks = node_checks::evaluate(node, f);
    Report {
        verdict: checks::verdict(&checks),
        message: None,
        level: "host",
        kernel: f.kernel.value.clone(),
        kernel_module: f.loaded.value.clone(),
        driver_version: f.library.value.as_ref().and_then(|l| l.version.clone()),
        cuda_driver_version: None,
        nvml_init: InitOutcome::NotCalled,
        cuda_init: InitOutcome::NotCalled,
        gpus: Vec::new(),
        cuda_devices: Vec::new(),
        libraries: Vec::new(),
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
