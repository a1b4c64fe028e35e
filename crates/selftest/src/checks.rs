//! The checks: pure functions from (expectation, measurements, environment) to check results.
//!
//! No I/O and no GPU calls here, so every rule is tested against recorded probe data.
//! Order of the returned list is stable: host checks, then per-GPU checks in NVML order.
//! A check whose probe gave no answer is `not-measured` with the typed cause (`cause`), never a
//! failure with a guessed reason: after a `cuInit` timeout only `cuda-init` and
//! `probe-timeout` fail, and they say what happened.

use std::collections::BTreeMap;

use super::carried;
use super::cause;
use super::check::{Because, Check, Status, Verdict};
use super::crosscheck::{self, pair};
use super::data::{CudaDeviceResult, GpuInfo, LoadError, Measurements, ModuleFlavour};
use super::platform::{oci_architecture, oci_os};
use super::require::{self, Outcome, RequireFacts};
use gpuimg_expect::{default_host_device_floor, Expectation, VersionRange};
use gpuimg_expect::{KernelModule, SelftestLevel};

/// More uncorrectable remapped rows than this fails the GPU (Azure HPC health checks).
const MAX_UNCORRECTABLE_REMAPS: u32 = 512;

/// Throttle reasons that point at a hardware or cooling problem.
const BAD_THROTTLE: [&str; 4] = [
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
];

/// Why the host counts as having no usable GPU, or `None` when checks should run.
pub fn no_gpu_reason(m: &Measurements) -> Option<String> {
    if !m.nvml_loaded && !m.cuda_loaded {
        let found = |e: &Option<LoadError>| !matches!(e, None | Some(LoadError::NotFound { .. }));
        if !found(&m.nvml_load_error) && !found(&m.cuda_load_error) {
            return Some(
                "No NVIDIA driver: `libnvidia-ml.so.1` and `libcuda.so.1` not found".to_string(),
            );
        }
        let say = |e: &Option<LoadError>, lib: &str| {
            e.as_ref()
                .map_or_else(|| format!("`{lib}` not found"), LoadError::to_string)
        };
        return Some(format!(
            "No usable NVIDIA driver: {}; {}",
            say(&m.nvml_load_error, "libnvidia-ml.so.1"),
            say(&m.cuda_load_error, "libcuda.so.1")
        ));
    }
    let mismatch = m
        .nvml_error
        .as_deref()
        .is_some_and(|e| e.contains("LIB_RM_VERSION_MISMATCH"))
        || m.cuda_error
            .as_deref()
            .is_some_and(|e| e.contains("SYSTEM_DRIVER_MISMATCH"));
    if m.gpus.is_empty() && m.cuda_devices.is_empty() && !mismatch && m.timed_out.is_empty() {
        let why = m
            .nvml_error
            .clone()
            .or_else(|| m.cuda_error.clone())
            .unwrap_or_else(|| "the driver shows 0 devices".to_string());
        return Some(format!("No NVIDIA GPU: {why}"));
    }
    None
}

/// The verdict over a list of checks (no-GPU is decided before checks run). `not-measured`
/// checks are neutral: the probe they depend on has its own failing check.
pub fn verdict(checks: &[Check]) -> Verdict {
    if checks.iter().any(|c| c.status == Status::Fail) {
        Verdict::Fail
    } else {
        Verdict::Pass
    }
}

/// Every check, in a stable order.
pub fn evaluate(
    e: &Expectation,
    m: &Measurements,
    env: &BTreeMap<String, String>,
    level: SelftestLevel,
) -> Vec<Check> {
    let mut out = Vec::new();
    out.extend(timeouts(m));
    out.push(platform(e, m));
    out.push(driver_libraries(m));
    out.push(kernel(e, m));
    out.push(driver(e, m));
    out.push(module(e, m));
    out.push(cuda_driver(e, m));
    out.push(cuda_init(m));
    out.extend(carried::libraries(e, m, level));
    out.push(gpu_count(e, m));
    for g in &m.gpus {
        out.push(gpu_model(e, g));
    }
    out.extend(carried::device_code(e, m));
    out.extend(crosscheck::crosscheck(m, env));
    out.extend(nvidia_require(e, m, env));
    for g in &m.gpus {
        out.push(ecc_health(g));
        out.push(throttle(g));
        out.push(functional(m, g));
        if level == SelftestLevel::Full {
            out.extend(bandwidth(e, m, g));
        }
    }
    out
}

fn timeouts(m: &Measurements) -> Vec<Check> {
    m.timed_out
        .iter()
        .map(|stage| {
            Check::new("probe-timeout", Status::Fail)
                .measured(stage.clone())
                .detail(format!(
                    "`{stage}` did not finish in time; the driver may be hung"
                ))
        })
        .collect()
}

fn driver_version(m: &Measurements) -> Option<&str> {
    m.module
        .as_ref()
        .map(|x| x.version.as_str())
        .or(m.driver_version.as_deref())
}

fn driver_libraries(m: &Measurements) -> Check {
    let c = Check::new("driver-libraries", Status::Pass);
    if let Some(err) = &m.nvml_error {
        if err.contains("LIB_RM_VERSION_MISMATCH") {
            return Check::new("driver-libraries", Status::Fail)
                .measured(err.clone())
                .detail("The user-space driver libraries differ from the loaded kernel module (an image must not carry libnvidia-ml/libcuda)");
        }
    }
    match (&m.module, &m.driver_version) {
        (Some(module), Some(lib)) if module.version != *lib => c
            .status_fail()
            .expected(module.version.clone())
            .measured(lib.clone())
            .detail("libnvidia-ml.so.1 is from another driver than the loaded kernel module"),
        (Some(module), Some(_)) => c.measured(module.version.clone()),
        (None, _) => Check::new("driver-libraries", Status::Warn)
            .detail("`/proc/driver/nvidia/version` is not readable; kernel module not compared"),
        (Some(_), None) => match cause::nvml(m) {
            Some(why) => Check::not_measured("driver-libraries", why),
            None => Check::new("driver-libraries", Status::Skip)
                .detail("NVML did not report a driver version"),
        },
    }
}

trait FailExt {
    fn status_fail(self) -> Self;
}

impl FailExt for Check {
    fn status_fail(mut self) -> Self {
        self.status = Status::Fail;
        self
    }
}

fn range_check(name: &str, range: Option<VersionRange>, measured: Option<&str>) -> Check {
    let Some(range) = range else {
        return Check::new(name, Status::Skip).detail("No expectation");
    };
    let Some(v) = measured else {
        return Check::new(name, Status::Fail)
            .expected(range.to_string())
            .detail("Not measured");
    };
    let status = if range.matches(v) {
        Status::Pass
    } else {
        Status::Fail
    };
    Check::new(name, status)
        .expected(range.to_string())
        .measured(v.to_string())
}

/// The image's platform (`linux/arm64`) against the host's `uname` (`aarch64` is arm64,
/// `x86_64` amd64). An expectation without one (an older image) is not compared.
pub(crate) fn platform(e: &Expectation, m: &Measurements) -> Check {
    let Some(want) = &e.platform else {
        return Check::new("platform", Status::Skip).detail("No expectation");
    };
    let (Some(os), Some(machine)) = (&m.os, &m.machine) else {
        return Check::new("platform", Status::Warn)
            .expected(want.to_string())
            .detail("`uname` gave no answer; the platform was not compared");
    };
    let (os, arch) = (oci_os(os), oci_architecture(machine));
    let got = format!("{os}/{arch}");
    let c = Check::new("platform", Status::Pass)
        .expected(want.to_string())
        .measured(format!("{got} (uname -m: {machine})"));
    if os == want.os && arch == want.architecture {
        return c;
    }
    c.status_fail().detail(format!(
        "The image was built for {want}; its programs and libraries cannot run on {got}"
    ))
}

fn kernel(e: &Expectation, m: &Measurements) -> Check {
    range_check("kernel", e.kernel_range(), m.kernel.as_deref())
}

fn driver(e: &Expectation, m: &Measurements) -> Check {
    range_check("driver", e.driver_range(), driver_version(m))
}

fn module(e: &Expectation, m: &Measurements) -> Check {
    let want = match e.kernel_module {
        KernelModule::Any => {
            return Check::new("kernel-module", Status::Skip).detail("Any flavour accepted")
        }
        KernelModule::Open => ModuleFlavour::Open,
        KernelModule::Proprietary => ModuleFlavour::Proprietary,
    };
    let name = |f: ModuleFlavour| match f {
        ModuleFlavour::Open => "open",
        ModuleFlavour::Proprietary => "proprietary",
    };
    match &m.module {
        None => Check::new("kernel-module", Status::Fail)
            .expected(name(want))
            .detail("`/proc/driver/nvidia/version` is not readable"),
        Some(got) => Check::new(
            "kernel-module",
            if got.flavour == want {
                Status::Pass
            } else {
                Status::Fail
            },
        )
        .expected(name(want))
        .measured(name(got.flavour)),
    }
}

fn cuda_driver(e: &Expectation, m: &Measurements) -> Check {
    let Some(floor) = e.cuda_driver_floor.as_deref() else {
        return Check::new("cuda-driver", Status::Skip).detail("No expectation");
    };
    // A bare version is a floor here (the oldest CUDA the driver must support).
    let text = if floor.starts_with(|c: char| c.is_ascii_digit()) {
        format!(">={floor}")
    } else {
        floor.to_string()
    };
    let range = VersionRange::parse(&text).ok();
    if let (Some(range), Some(why)) = (&range, cause::cuda_version(m)) {
        let mut c = Check::not_measured("cuda-driver", why);
        c.expected = Some(range.to_string());
        return c;
    }
    let mut c = range_check("cuda-driver", range, m.cuda_driver_version.as_deref());
    if c.status == Status::Fail && m.cuda_driver_version.is_some() {
        c = c.detail("The driver is older than the CUDA version the image was built for (CUDA error 35, \"CUDA driver version is insufficient\")");
    }
    c
}

fn cuda_init(m: &Measurements) -> Check {
    if !m.cuda_loaded {
        let c = Check::new("cuda-init", Status::Fail);
        return match &m.cuda_load_error {
            None | Some(LoadError::NotFound { .. }) => c
                .measured("`libcuda.so.1` not found")
                .detail("The container runtime did not inject the driver's libcuda"),
            Some(e @ LoadError::Symbol { library, symbol }) => c.measured(e.to_string()).detail(
                format!("`{library}` was found but lacks `{symbol}`, which the self-test calls: it is not a driver's libcuda (a stub, or one baked into the image?); cuInit never ran"),
            ),
            Some(e @ LoadError::Refused { library, .. }) => c
                .measured(e.to_string())
                .detail(format!("`{library}` was found but `dlopen` refused it; cuInit never ran")),
        };
    }
    match (&m.cuda_error, cause::cuda(m)) {
        (_, Some(Because::CuinitTimedOut)) => Check::new("cuda-init", Status::Fail)
            .measured("no answer")
            .detail("cuInit did not answer within its time limit; the driver may be hung"),
        (_, Some(Because::CuinitCrashed)) => Check::new("cuda-init", Status::Fail)
            .measured("probe crashed")
            .detail("The thread that called cuInit died"),
        (_, Some(Because::EarlierProbeTimedOut)) => {
            Check::not_measured("cuda-init", Because::EarlierProbeTimedOut)
        }
        (None, _) => Check::new("cuda-init", Status::Pass)
            .measured(format!("{} device(s)", m.cuda_devices.len())),
        (Some(err), _) => {
            let hint = if err.contains("SYSTEM_DRIVER_MISMATCH") {
                "libcuda does not match the kernel driver (a cuda-compat or baked-in libcuda?)"
            } else if err.contains("COMPAT_NOT_SUPPORTED_ON_DEVICE") {
                "The forward-compatibility library does not support this GPU"
            } else {
                "cuInit failed"
            };
            Check::new("cuda-init", Status::Fail)
                .measured(err.clone())
                .detail(hint)
        }
    }
}

fn gpu_count(e: &Expectation, m: &Measurements) -> Check {
    let nvml = cause::nvml(m).map_or(Ok(m.gpus.len()), Err);
    let cuda = cause::cuda(m).map_or(Ok(m.cuda_devices.len()), Err);
    let n = match (nvml, cuda) {
        (Ok(a), Ok(b)) => a.max(b),
        (Ok(a), Err(_)) => a,
        (Err(_), Ok(b)) => b,
        (Err(_), Err(why)) => {
            let mut c = Check::not_measured("gpu-count", why);
            c.expected = Some(format!(">={}", e.min_gpus));
            return c;
        }
    };
    let side = |r: Result<usize, Because>| match r {
        Ok(n) => n.to_string(),
        Err(b) => format!("not measured: {}", b.as_text()),
    };
    let measured = match (nvml, cuda) {
        (Ok(_), Ok(_)) => n.to_string(),
        _ => format!("{n} (NVML {}, CUDA {})", side(nvml), side(cuda)),
    };
    Check::new(
        "gpu-count",
        if n >= e.min_gpus as usize {
            Status::Pass
        } else {
            Status::Fail
        },
    )
    .expected(format!(">={}", e.min_gpus))
    .measured(measured)
}

pub use gpuimg_expect::host_text::name_matches;

fn gpu_model(e: &Expectation, g: &GpuInfo) -> Check {
    let name = format!("gpu-model[{}]", g.index);
    if e.gpus.is_empty() && e.compute_capabilities.is_empty() {
        return Check::new(name, Status::Skip).detail("Any GPU accepted");
    }
    let mut allowed: Vec<String> = e.gpus.clone();
    allowed.extend(e.compute_capabilities.iter().map(|c| format!("cc {c}")));
    let by_name = e.gpus.iter().any(|w| name_matches(&g.name, w));
    let by_cc = e.compute_capabilities.iter().any(|c| {
        gpuimg_expect::leading_fields(c)
            .zip(gpuimg_expect::leading_fields(&g.compute_capability))
            .is_some_and(|(a, b)| gpuimg_expect::compare_fields(&a, &b).is_eq())
    });
    Check::new(
        name,
        if by_name || by_cc {
            Status::Pass
        } else {
            Status::Fail
        },
    )
    .expected(allowed.join(" | "))
    .measured(format!("{} (cc {})", g.name, g.compute_capability))
}

fn nvidia_require(e: &Expectation, m: &Measurements, env: &BTreeMap<String, String>) -> Vec<Check> {
    let Some(reqs) = require::requirements(env, &e.nvidia_require) else {
        return vec![
            Check::new("nvidia-require", Status::Skip).detail("NVIDIA_DISABLE_REQUIRE is set")
        ];
    };
    if reqs.is_empty() {
        return vec![
            Check::new("nvidia-require", Status::Skip).detail("No NVIDIA_REQUIRE_* variables")
        ];
    }
    let mut out = Vec::new();
    for (var, value) in &reqs {
        let mut failures = Vec::new();
        let mut invalid = None;
        for g in &m.gpus {
            let facts = RequireFacts {
                cuda: m.cuda_driver_version.as_deref(),
                driver: driver_version(m),
                arch: Some(g.compute_capability.as_str()).filter(|s| !s.is_empty()),
                brand: Some(g.brand.as_str()).filter(|s| !s.is_empty()),
            };
            match require::evaluate(value, &facts) {
                Ok(Outcome::Satisfied) => {}
                Ok(Outcome::Unsatisfied(expr)) => {
                    failures.push(format!("GPU {}: unsatisfied `{expr}`", g.index))
                }
                Err(err) => invalid = Some(err.to_string()),
            }
        }
        let measured = format!(
            "cuda={} driver={}",
            m.cuda_driver_version.as_deref().unwrap_or("?"),
            driver_version(m).unwrap_or("?")
        );
        let c = Check::new(format!("nvidia-require[{var}]"), Status::Pass)
            .expected(value.clone())
            .measured(measured);
        out.push(if let Some(err) = invalid {
            c.status_fail().detail(err)
        } else if !failures.is_empty() {
            c.status_fail().detail(failures.join("; "))
        } else {
            c
        });
    }
    out
}

fn ecc_health(g: &GpuInfo) -> Check {
    let name = format!("ecc-health[{}]", g.index);
    let ecc = &g.ecc;
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    if ecc.remap_pending == Some(true) {
        fails.push("row remap pending (reset the GPU)".to_string());
    }
    if ecc.remap_failure == Some(true) {
        fails.push("row remap failure".to_string());
    }
    if let Some(n) = ecc
        .remapped_rows_uncorrectable
        .filter(|n| *n > MAX_UNCORRECTABLE_REMAPS)
    {
        fails.push(format!(
            "{n} uncorrectable remapped rows (> {MAX_UNCORRECTABLE_REMAPS})"
        ));
    }
    if ecc.retired_pages_pending == Some(true) {
        fails.push("retired pages pending (reset the GPU)".to_string());
    }
    if let Some(n) = ecc.volatile_uncorrected.filter(|n| *n > 0) {
        fails.push(format!("{n} uncorrectable ECC errors since boot"));
    }
    if let Some(n) = ecc.aggregate_uncorrected.filter(|n| *n > 0) {
        warns.push(format!("{n} uncorrectable ECC errors over the GPU's life"));
    }
    if ecc.enabled == Some(false) {
        warns.push("ECC disabled".to_string());
    }
    let measured = format!(
        "ecc={} unc_volatile={} remap_pending={} remap_failure={}",
        opt(ecc.enabled),
        opt(ecc.volatile_uncorrected),
        opt(ecc.remap_pending),
        opt(ecc.remap_failure)
    );
    let (status, detail) = if !fails.is_empty() {
        (Status::Fail, fails.join("; "))
    } else if !warns.is_empty() {
        (Status::Warn, warns.join("; "))
    } else {
        (Status::Pass, String::new())
    };
    let c = Check::new(name, status)
        .expected("no pending remap, no remap failure, no uncorrectable errors")
        .measured(measured);
    if detail.is_empty() {
        c
    } else {
        c.detail(detail)
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string())
        .unwrap_or_else(|| "n/a".to_string())
}

fn throttle(g: &GpuInfo) -> Check {
    let name = format!("throttle[{}]", g.index);
    if g.throttle_mask.is_none() {
        return Check::new(name, Status::Skip).detail("Not reported");
    }
    let bad: Vec<&String> = g
        .throttle_reasons
        .iter()
        .filter(|r| BAD_THROTTLE.contains(&r.as_str()))
        .collect();
    let measured = if g.throttle_reasons.is_empty() {
        "none".to_string()
    } else {
        g.throttle_reasons.join(",")
    };
    let c = Check::new(
        name,
        if bad.is_empty() {
            Status::Pass
        } else {
            Status::Warn
        },
    )
    .measured(measured);
    match g.temperature_c {
        Some(t) if !bad.is_empty() => c.detail(format!("Hardware or thermal slowdown at {t} °C")),
        _ => c,
    }
}

/// The CUDA device that runs work for NVML GPU `g` (for a GPU in MIG mode, the first of its MIG
/// devices CUDA shows).
fn cuda_device<'a>(m: &'a Measurements, g: &GpuInfo) -> Option<&'a CudaDeviceResult> {
    let (pairs, _) = pair(&m.gpus, &m.cuda_devices);
    pairs
        .into_iter()
        .find(|p| std::ptr::eq(p.gpu, g))
        .map(|p| p.cuda)
}

/// Why there is no CUDA result for `g`: the cuInit outcome when that is the reason.
fn unseen(name: String, m: &Measurements) -> Check {
    match cause::cuda(m) {
        Some(why) => Check::not_measured(name, why),
        None => Check::new(name, Status::Skip).detail("GPU not visible to CUDA (see nvml-cuda)"),
    }
}

fn functional(m: &Measurements, g: &GpuInfo) -> Check {
    let name = format!("functional[{}]", g.index);
    let Some(dev) = cuda_device(m, g) else {
        return unseen(name, m);
    };
    let c = Check::new(name, Status::Pass)
        .expected("embedded PTX kernel (.version 7.0, sm_52) verified");
    match (&dev.kernel_error, dev.kernel_verified) {
        (Some(err), _) => c.status_fail().measured(err.clone()),
        (None, Some(n)) => c.measured(format!(
            "{n} elements verified in {:.0} ms",
            dev.kernel_ms.unwrap_or(0.0)
        )),
        (None, None) if !m.timed_out.is_empty() => {
            Check::not_measured(c.name, Because::EarlierProbeTimedOut)
        }
        (None, None) => c.status_fail().detail("Kernel did not run"),
    }
}

fn bandwidth(e: &Expectation, m: &Measurements, g: &GpuInfo) -> Vec<Check> {
    let i = g.index;
    let Some(dev) = cuda_device(m, g) else {
        return vec![unseen(format!("bandwidth[{i}]"), m)];
    };
    let bw = match (&dev.bandwidth, &dev.bandwidth_error) {
        (_, Some(err)) => {
            return vec![Check::new(format!("bandwidth[{i}]"), Status::Fail).measured(err.clone())]
        }
        (Some(bw), None) => bw,
        (None, None) if !m.timed_out.is_empty() => {
            return vec![Check::not_measured(
                format!("bandwidth[{i}]"),
                Because::EarlierProbeTimedOut,
            )]
        }
        (None, None) => {
            return vec![Check::new(format!("bandwidth[{i}]"), Status::Fail).detail("Not measured")]
        }
    };
    let mut out = Vec::new();
    let (max_gen, max_width) = (g.pcie.max_gen, g.pcie.max_width);
    let link = |gen: Option<u32>, w: Option<u32>| format!("Gen{} x{}", opt(gen), opt(w));
    let at_max = bw.link_gen_under_load.is_some()
        && bw.link_gen_under_load == max_gen
        && bw.link_width_under_load == max_width;
    out.push(
        Check::new(
            format!("pcie-link[{i}]"),
            if at_max { Status::Pass } else { Status::Fail },
        )
        .expected(link(max_gen, max_width))
        .measured(link(bw.link_gen_under_load, bw.link_width_under_load))
        .detail("Link under a host-to-device copy"),
    );
    let hd = bw.host_to_device_gbps.min(bw.device_to_host_gbps);
    let floor = e.bandwidth.host_device_gbps.or_else(|| {
        max_gen
            .zip(max_width)
            .and_then(|(gen, w)| default_host_device_floor(gen, w))
    });
    let measured = format!(
        "h2d {:.1} GB/s, d2h {:.1} GB/s",
        bw.host_to_device_gbps, bw.device_to_host_gbps
    );
    out.push(match floor {
        Some(f) => Check::new(
            format!("host-device-bandwidth[{i}]"),
            if hd >= f { Status::Pass } else { Status::Fail },
        )
        .expected(format!(">={f:.1} GB/s"))
        .measured(measured),
        None => Check::new(format!("host-device-bandwidth[{i}]"), Status::Skip)
            .measured(measured)
            .detail("No floor for this PCIe link"),
    });
    let peak = e
        .bandwidth
        .peak_device_gbps
        .iter()
        .find(|(name, _)| name_matches(&g.name, name))
        .map(|(_, p)| *p);
    let measured = format!("{:.0} GB/s", bw.device_to_device_gbps);
    out.push(match peak {
        Some(p) => {
            let floor = p * e.bandwidth.device_device_fraction;
            Check::new(
                format!("device-device-bandwidth[{i}]"),
                if bw.device_to_device_gbps >= floor {
                    Status::Pass
                } else {
                    Status::Fail
                },
            )
            .expected(format!(
                ">={floor:.0} GB/s ({:.0}% of {p:.0})",
                e.bandwidth.device_device_fraction * 100.0
            ))
            .measured(measured)
        }
        None => Check::new(format!("device-device-bandwidth[{i}]"), Status::Skip)
            .measured(measured)
            .detail("No catalog peak for this GPU"),
    });
    out
}
