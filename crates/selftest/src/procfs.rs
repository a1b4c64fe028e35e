//! Host facts from procfs: the kernel release and the loaded NVIDIA kernel module.
//!
//! Only reads files; parsing is a pure function so tests feed it recorded text.

use super::data::{ModuleFlavour, ModuleInfo};

const OSRELEASE: &str = "/proc/sys/kernel/osrelease";
const NVIDIA_VERSION: &str = "/proc/driver/nvidia/version";

/// The running kernel's release (`6.18.0-1-amd64`).
pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string(OSRELEASE)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The loaded NVIDIA kernel module, if the driver is loaded.
pub fn nvidia_module() -> Option<ModuleInfo> {
    std::fs::read_to_string(NVIDIA_VERSION)
        .ok()
        .and_then(|t| parse_module_version(&t))
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
}
