//! What a node installs from its repositories besides the NVIDIA modules gpuimg builds: the
//! resolved kernel's image, the driver's user space and GSP firmware at exactly the module
//! source's Debian version (libcuda, the PTX JIT compiler, NVML, `nvidia-smi`, the `nvidia`
//! alternative and the flavour's modprobe configuration), `nvidia-persistenced` at its own
//! version of the driver's branch, and the rest of a cloud node (systemd as init, udev, kmod,
//! networking, an SSH server, cloud-init). No metapackage that pulls an X server
//! (`nvidia-driver` does) and no Recommends: a headless compute node. Must never pick a user
//! space whose version differs from the module source's.

use std::path::Path;

use super::OpsError;
use crate::catalog::ModuleFlavour;
use crate::profile::Profile;
use crate::resolve::node::NodeResolution;
use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::Trust;

/// The driver's user space a compute node needs, each at exactly the module source's version.
pub const USER_SPACE: [&str; 7] = [
    "libcuda1",
    "libnvidia-ptxjitcompiler1",
    "libnvidia-ml1",
    "libnvidia-cfg1",
    "nvidia-smi",
    "nvidia-alternative",
    "firmware-nvidia-gsp",
];

/// The persistence daemon: its own source, its own version, of the driver's branch.
pub const PERSISTENCED: &str = "nvidia-persistenced";

/// What makes the root a bootable cloud node (configured by the disk image's stage).
pub const SYSTEM: [&str; 8] = [
    "systemd",
    "systemd-sysv",
    "udev",
    "kmod",
    "ifupdown",
    "isc-dhcp-client",
    "openssh-server",
    "cloud-init",
];

/// The flavour's modprobe configuration (`/etc/nvidia/current*/nvidia-modprobe.conf`: `nvidia`
/// reached as the built `nvidia-current*` module), at the module source's version.
fn kernel_support(flavour: ModuleFlavour) -> &'static str {
    match flavour {
        ModuleFlavour::Open => "nvidia-open-kernel-support",
        ModuleFlavour::Proprietary => "nvidia-kernel-support",
    }
}

/// The packages of `node`'s image, pinned where the node decides the version
/// (`name=version`), the persistence daemon at the newest version the repositories offer of
/// the driver's branch.
pub fn packages(
    profile: &Profile,
    node: &NodeResolution,
    cache_root: &Path,
    offline: bool,
    trust: &Trust,
    obs: &mut dyn Observer,
) -> Result<Vec<String>, OpsError> {
    let offered = super::node::offer(profile, &[PERSISTENCED], cache_root, offline, trust, obs)?;
    let branch = node.driver.major();
    let persistenced = offered
        .iter()
        .filter(|o| {
            crate::lock::upstream_release(&o.version.to_string())
                .is_some_and(|v| v.major() == branch)
        })
        .max_by(|a, b| a.version.cmp(&b.version))
        .ok_or_else(|| {
            OpsError::Incompatible(format!(
                "the repositories offer no `{PERSISTENCED}` of driver branch {branch} (offered: {}); the node's persistence daemon must be of its driver's branch",
                if offered.is_empty() {
                    "none".to_string()
                } else {
                    offered
                        .iter()
                        .map(|o| o.version.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ))
        })?;
    let mut out = vec![format!(
        "linux-image-{}={}",
        node.kernel_abi, node.kernel_version
    )];
    for p in USER_SPACE
        .iter()
        .copied()
        .chain([kernel_support(node.flavour)])
    {
        out.push(format!("{p}={}", node.source_version));
    }
    out.push(format!("{PERSISTENCED}={}", persistenced.version));
    if let Some((name, version)) = &node.fabric_manager {
        out.push(format!("{name}={version}"));
    }
    out.extend(SYSTEM.iter().map(|s| s.to_string()));
    Ok(out)
}
