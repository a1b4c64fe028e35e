//! A host's own words about its kernel, NVIDIA module and GPUs, parsed: the `NVRM version:`
//! line of `/proc/driver/nvidia/version`, the `Model:` line of a GPU's
//! `/proc/driver/nvidia/gpus/<bus>/information`, the upstream Linux version in the kernel's
//! version string, and whether a GPU's name (NVML's or procfs's, `NVIDIA H100 80GB HBM3`) is a
//! catalog GPU (`H100`). Shared by the self-test (inside an image) and `gpuimg catalog
//! check-host`. Pure: the callers read the texts; must never read a file itself.

use serde::{Deserialize, Serialize};

/// Kernel module flavour from `/proc/driver/nvidia/version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleFlavour {
    Open,
    Proprietary,
}

/// The loaded NVIDIA kernel module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleInfo {
    pub version: String,
    pub flavour: ModuleFlavour,
}

/// Parse the `NVRM version:` line of `/proc/driver/nvidia/version`.
pub fn parse_module_version(text: &str) -> Option<ModuleInfo> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let flavour = if line.contains("Open Kernel Module") {
        ModuleFlavour::Open
    } else {
        ModuleFlavour::Proprietary
    };
    let version = line
        .split_whitespace()
        .find(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.'))?;
    Some(ModuleInfo {
        version: version.to_string(),
        flavour,
    })
}

/// The `Model:` of a GPU's `/proc/driver/nvidia/gpus/<bus>/information` (`NVIDIA H100 80GB HBM3`).
pub fn gpu_model(information: &str) -> Option<String> {
    information
        .lines()
        .find_map(|l| l.strip_prefix("Model:"))
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
}

/// The kernel's upstream version as the host states it, and where: Debian's version string
/// (`/proc/sys/kernel/version`, `uname -v`: `… Debian 6.1.158-1 (2025-11-09)`) names its
/// `linux-image` package's version; Ubuntu's `/proc/version_signature`
/// (`Ubuntu 6.8.0-60.63-generic 6.8.12`) ends with the upstream release. None where neither
/// says (the release alone, `6.8.0-60-generic`, does not).
pub fn kernel_upstream(version: &str, signature: Option<&str>) -> Option<(String, &'static str)> {
    let debian = version
        .split_whitespace()
        .skip_while(|w| *w != "Debian")
        .nth(1)
        .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()));
    if let Some(v) = debian {
        return Some((v.to_string(), "/proc/sys/kernel/version"));
    }
    let sig = signature?.split_whitespace().collect::<Vec<_>>();
    match sig.as_slice() {
        [_, _, up] if up.starts_with(|c: char| c.is_ascii_digit()) => {
            Some((up.to_string(), "/proc/version_signature"))
        }
        _ => None,
    }
}

/// Whether an NVML name (`NVIDIA H100 80GB HBM3`) is the catalog GPU `wanted` (`H100`).
pub fn name_matches(nvml_name: &str, wanted: &str) -> bool {
    let tokens = |s: &str| -> Vec<String> {
        s.split(|c: char| c.is_whitespace() || c == '-')
            .filter(|t| !t.is_empty())
            .map(str::to_ascii_uppercase)
            .collect()
    };
    let (have, want) = (tokens(nvml_name), tokens(wanted));
    !want.is_empty() && have.windows(want.len()).any(|w| w == want.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_and_proprietary_lines() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22-I3-AE18-23-3)  Thu Oct 30 2025\nGCC version:  gcc version 12.2.0\n";
        let m = parse_module_version(open).unwrap();
        assert_eq!(m.version, "580.159.04");
        assert_eq!(m.flavour, ModuleFlavour::Open);
        let prop = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n";
        let m = parse_module_version(prop).unwrap();
        assert_eq!(m.version, "550.54.15");
        assert_eq!(m.flavour, ModuleFlavour::Proprietary);
        assert_eq!(parse_module_version("garbage"), None);
    }

    #[test]
    fn a_gpus_model_and_the_kernels_upstream_version() {
        let info = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t GPU-0\n";
        assert_eq!(gpu_model(info).as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(gpu_model("IRQ: 0\n"), None);
        let debian = "#1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1 (2025-11-09)";
        assert_eq!(
            kernel_upstream(debian, None),
            Some(("6.1.158-1".into(), "/proc/sys/kernel/version"))
        );
        let ubuntu = "#60-Ubuntu SMP PREEMPT_DYNAMIC Fri May 16 10:00:00 UTC 2025";
        assert_eq!(
            kernel_upstream(ubuntu, Some("Ubuntu 6.8.0-60.63-generic 6.8.12\n")),
            Some(("6.8.12".into(), "/proc/version_signature"))
        );
        assert_eq!(kernel_upstream(ubuntu, None), None);
    }

    #[test]
    fn a_gpu_name_matches_its_catalog_name_by_whole_words() {
        assert!(name_matches("NVIDIA H100 80GB HBM3", "H100"));
        assert!(name_matches("Tesla V100-SXM2-16GB", "V100"));
        assert!(!name_matches("NVIDIA GB200", "B200"));
        assert!(!name_matches("NVIDIA H100", ""));
    }
}
