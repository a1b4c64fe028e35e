//! `host: {from: node.yaml}`: a container profile that takes its host facts from a host
//! profile. The node is resolved (`node::resolve`, the same answer `gpuimg resolve` gives for
//! it) and its facts become the container's `host:`: the GPUs and system as the node names
//! them, the driver exactly the node's, the module flavour the node's, the kernel the node's
//! version; the container's stack is then resolved against that driver like any pin (R535
//! runs CUDA 12 at most: a CUDA 13 framework is a "no" saying so). One truth for both sides.
//! Must never install or build anything.

use std::path::Path;

use super::OpsError;
use crate::catalog::{Catalog, ModuleFlavour};
use crate::profile::{KernelModule, Located, Profile, ProfileKind};
use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::Trust;

/// `profile` with its `host:` taken from the node `host.from` names (unchanged without one).
pub fn apply(
    profile: Profile,
    catalog: &Catalog,
    env: &dyn Fn(&str) -> Option<String>,
    cache_root: &Path,
    offline: bool,
    trust: &Trust,
    obs: &mut dyn Observer,
) -> Result<Profile, OpsError> {
    // Applied once: the facts taken are the driver's pin (absent beside `from` at load).
    let Some(from) = profile
        .host
        .from
        .clone()
        .filter(|_| profile.host.driver.is_none())
    else {
        return Ok(profile);
    };
    let path = profile.dir.join(&from.value);
    let node_profile = crate::profile::load(&path, env)?;
    if node_profile.kind != ProfileKind::Host {
        return Err(OpsError::Profile(crate::profile::ProfileError::Invalid {
            file: profile.file.clone(),
            line: from.line,
            column: from.column,
            key: "host.from".into(),
            message: format!("`{}` is not a host profile (`kind: host`)", path.display()),
        }));
    }
    let node = match super::node::resolve(&node_profile, catalog, cache_root, offline, trust, obs)?
    {
        Ok(n) => n,
        Err(no) => {
            return Err(OpsError::Incompatible(format!(
                "the node `{}` (`host.from`) has no resolution: {no}",
                path.display()
            )))
        }
    };
    // Positioned at `host.from`: a "no" about the host points there.
    let at = |value: String| Located {
        value,
        line: from.line,
        column: from.column,
    };
    // `from` stays: it says where the facts came from (no hint proposes changing them).
    let mut out = profile;
    out.host.gpus = node_profile
        .host
        .gpus
        .iter()
        .map(|g| at(g.value.clone()))
        .collect();
    out.host.system = node_profile.host.system.map(|s| at(s.value));
    out.host.driver = Some(at(format!("={}", node.driver)));
    out.host.kernel = Some(at(format!("={}", kernel_version(&node.kernel_abi))));
    out.host.kernel_module = match node.flavour {
        ModuleFlavour::Open => KernelModule::Open,
        ModuleFlavour::Proprietary => KernelModule::Proprietary,
    };
    obs.message(&format!(
        "{:>12} from {}: driver {} ({} module), kernel {}",
        "host",
        from.value,
        node.driver,
        node.flavour.as_str(),
        node.kernel_abi
    ));
    Ok(out)
}

/// The version a kernel ABI's `uname -r` shows (`6.1.0-55-cloud-amd64` → `6.1.0`,
/// `6.12.41+deb13-cloud-amd64` → `6.12.41`): what the self-test compares.
fn kernel_version(abi: &str) -> &str {
    abi.split(['-', '+']).next().unwrap_or(abi)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_kernel_abi_shows_its_version() {
        assert_eq!(super::kernel_version("6.1.0-55-cloud-amd64"), "6.1.0");
        assert_eq!(
            super::kernel_version("6.12.41+deb13-cloud-amd64"),
            "6.12.41"
        );
    }
}
