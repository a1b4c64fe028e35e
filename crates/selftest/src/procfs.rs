//! Host facts from procfs: the kernel release and the loaded NVIDIA kernel module.
//!
//! Only reads files; parsing is `gpuimg_expect::host_text`'s (pure, tested on recorded text).

use super::data::ModuleInfo;
use gpuimg_expect::host_text::parse_module_version;

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
