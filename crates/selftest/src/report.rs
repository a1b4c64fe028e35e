//! The self-test report: the JSON shape scripts read (`--json`) and the human table.
//!
//! Rendering only; the verdict and checks are computed in `checks`. Writes nothing itself.

use std::fmt::Write as _;

use serde::Serialize;

use super::check::{Check, Status, Verdict};
use super::data::{CudaDeviceResult, GpuInfo, InitOutcome, LibraryProbe, ModuleInfo};

/// Everything one run found, as printed with `--json` and written with `--report`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub verdict: Verdict,
    /// One line saying why, for `no-gpu` and `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub level: &'static str,
    pub kernel: Option<String>,
    pub kernel_module: Option<ModuleInfo>,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    /// How `nvmlInit` and `cuInit` ended (`ok`, `failed`, `timed-out`, `crashed`, `not-called`).
    pub nvml_init: InitOutcome,
    pub cuda_init: InitOutcome,
    pub gpus: Vec<GpuInfo>,
    pub cuda_devices: Vec<CudaDeviceResult>,
    /// The image's CUDA libraries as loaded (expectation format 2; absent when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<LibraryProbe>,
    pub checks: Vec<Check>,
    pub duration_ms: u64,
}

impl Report {
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            format!("{{\"verdict\": \"error\", \"message\": \"Failed to render the report: {e}\"}}")
        });
        s.push('\n');
        s
    }

    /// The human table.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "gpuimg-selftest: {} ({} level, {:.2} s)",
            self.verdict.as_str().to_uppercase(),
            self.level,
            self.duration_ms as f64 / 1000.0
        );
        if let Some(m) = &self.message {
            let _ = writeln!(s, "  {m}");
        }
        let module = self
            .kernel_module
            .as_ref()
            .map(|m| format!("{} ({:?})", m.version, m.flavour).to_lowercase())
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "host: kernel {}  module {}  driver {}  CUDA {}",
            self.kernel.as_deref().unwrap_or("-"),
            module,
            self.driver_version.as_deref().unwrap_or("-"),
            self.cuda_driver_version.as_deref().unwrap_or("-"),
        );
        for g in &self.gpus {
            let _ = writeln!(
                s,
                "GPU {}: {}  {}  cc {}  {} MiB  PCIe Gen{} x{} (max Gen{} x{})  {}  {}",
                g.index,
                g.name,
                g.uuid,
                g.compute_capability,
                g.memory_total_mib,
                num(g.pcie.current_gen),
                num(g.pcie.current_width),
                num(g.pcie.max_gen),
                num(g.pcie.max_width),
                g.temperature_c
                    .map(|t| format!("{t} °C"))
                    .unwrap_or_default(),
                g.power_w.map(|p| format!("{p:.0} W")).unwrap_or_default(),
            );
        }
        for g in &self.gpus {
            for x in &g.mig_devices {
                let _ = writeln!(
                    s,
                    "  MIG {}: {}  {}  {} MiB",
                    x.index, x.name, x.uuid, x.memory_total_mib
                );
            }
        }
        for d in &self.cuda_devices {
            let _ = writeln!(
                s,
                "CUDA {}: {}  {}  cc {}  {} MiB  bus {}",
                d.ordinal,
                d.name,
                d.uuid,
                d.compute_capability,
                d.memory_total_mib
                    .map_or_else(|| "?".to_string(), |m| m.to_string()),
                d.pci_bus_id.as_deref().unwrap_or("?"),
            );
        }
        for l in &self.libraries {
            let what = match (&l.raw, &l.error) {
                (_, Some(e)) => e.clone(),
                (Some(raw), None) => raw.clone(),
                (None, None) => "-".into(),
            };
            let _ = writeln!(
                s,
                "library {}: {}  {}  {:.1} ms",
                l.name, l.path, what, l.ms
            );
        }
        if self.checks.is_empty() {
            return s;
        }
        let w = self
            .checks
            .iter()
            .map(|c| c.name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let sw = self
            .checks
            .iter()
            .map(|c| c.status.as_str().len())
            .max()
            .unwrap_or(6)
            .max(6);
        let _ = writeln!(
            s,
            "{:<w$}  {:<sw$}  {:<28}  MEASURED",
            "CHECK", "STATUS", "EXPECTED"
        );
        for c in &self.checks {
            let mut line = format!(
                "{:<w$}  {:<sw$}  {:<28}  {}",
                c.name,
                c.status.as_str(),
                clip(c.expected.as_deref().unwrap_or("-"), 28),
                c.measured.as_deref().unwrap_or("-")
            );
            if let Some(from) = &c.read_from {
                let _ = write!(line, "  from {from}");
            }
            if let Some(d) = &c.detail {
                if c.status != Status::Pass {
                    let _ = write!(line, "  ({d})");
                }
            }
            let _ = writeln!(s, "{}", line.trim_end());
        }
        s
    }
}

/// At most `n` characters, ending in `…` when cut (the JSON keeps the full text).
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

fn num(v: Option<u32>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "?".into())
}
