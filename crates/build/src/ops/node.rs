//! A host profile's node (`kind: host`): read what the profile's apt repositories offer (the
//! kernels, both NVIDIA module sources, the driver's user space and GSP firmware, from the
//! signed indexes) and resolve kernel × driver × flavour × GPUs against it
//! (`resolve::node`), reading each candidate module source's `dkms.conf`. Must never install or build anything: that is the node build's.

use std::path::Path;

use super::OpsError;
use crate::catalog::Catalog;
use crate::driver::apt_options;
use crate::lock::upstream_release;
use crate::plan::source_specs;
use crate::profile::{Base, Profile};
use crate::resolve::node::{
    self, Exclusive, KernelPin, NodeOffer, NodeRequest, NodeResolution, GSP_FIRMWARE, OPEN_SOURCE,
    PROPRIETARY_SOURCE, USER_SPACE,
};
use crate::resolve::Explanation;
use gpuimg_expect::version::Constraint;
use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::Trust;

/// The kernel flavour a version pin (`host.kernel: ">=6.1"`) is resolved in.
pub const DEFAULT_KERNEL_FLAVOUR: &str = "cloud-amd64";

/// Resolve the node of `profile` (a host profile) against its repositories: the node, or the
/// explanation of "no".
pub fn resolve(
    profile: &Profile,
    catalog: &Catalog,
    cache_root: &Path,
    offline: bool,
    trust: &Trust,
    obs: &mut dyn Observer,
) -> Result<Result<NodeResolution, Explanation>, OpsError> {
    let Base::Apt(spec) = &profile.base else {
        return Err(OpsError::Incompatible(
            "a host profile installs from apt repositories (`base.apt`)".into(),
        ));
    };
    let mut gpus = Vec::new();
    for g in &profile.host.gpus {
        match catalog.gpu(&g.value) {
            Some(r) => gpus.push(r),
            None => {
                return Err(OpsError::Profile(crate::profile::ProfileError::Invalid {
                    file: profile.file.clone(),
                    line: g.line,
                    column: g.column,
                    key: "host.gpus".into(),
                    message: format!(
                        "`{}` is not a GPU the catalog knows (`gpuimg catalog list gpus`)",
                        g.value
                    ),
                }))
            }
        }
    }
    let driver = match &profile.host.driver {
        None => None,
        Some(d) => Some((
            d.value
                .parse::<Constraint>()
                .map_err(|e| invalid(profile, d, "host.driver", e.to_string()))?,
            d.value.clone(),
        )),
    };
    let kernel = match &profile.host.kernel {
        None => KernelPin::Version {
            constraint: Constraint::any(),
            text: "*".into(),
            flavour: DEFAULT_KERNEL_FLAVOUR.into(),
        },
        Some(k) if is_abi(&k.value) => KernelPin::Abi(k.value.clone()),
        Some(k) => KernelPin::Version {
            constraint: k
                .value
                .parse::<Constraint>()
                .map_err(|e| invalid(profile, k, "host.kernel", e.to_string()))?,
            text: k.value.clone(),
            flavour: DEFAULT_KERNEL_FLAVOUR.into(),
        },
    };
    let aopts = apt_options(cache_root, offline, trust);
    let system = match &profile.host.system {
        None => None,
        Some(s) => Some(catalog.system(&s.value).ok_or_else(|| {
            invalid(
                profile,
                s,
                "host.system",
                format!(
                    "`{}` is not a system the catalog knows ({})",
                    s.value,
                    catalog
                        .systems
                        .iter()
                        .map(|s| format!("`{}`", s.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?),
    };
    let names = [
        OPEN_SOURCE,
        PROPRIETARY_SOURCE,
        USER_SPACE,
        GSP_FIRMWARE,
        "linux-image-*",
        "linux-headers-*",
        "nvidia-fabricmanager-*",
    ];
    let offered = gpuimg_apt::offered(
        &source_specs::apt_packages(spec, &profile.dir),
        &source_specs::architecture(&profile.platform).debian(),
        &aopts,
        &names,
        obs,
    )
    .map_err(|e| super::apt_error_at(profile, e))?;
    let nodes: Vec<NodeOffer> = offered
        .iter()
        .cloned()
        .map(|o| {
            let version = o.version.to_string();
            NodeOffer {
                upstream: upstream_release(&version),
                depends: o.depends.into_iter().flatten().collect(),
                name: o.name,
                version,
            }
        })
        .collect();
    let req = NodeRequest {
        catalog,
        gpus,
        driver,
        kernel,
        module: profile.host.kernel_module,
        offered: &nodes,
        system,
    };
    // The kernels each candidate source builds for, read from its own `dkms.conf`.
    node::pick(&req, |driver| {
        let Some(deb) = offered
            .iter()
            .find(|o| o.name == driver.source && o.version.to_string() == driver.source_version)
        else {
            return Err(OpsError::Incompatible(format!(
                "`{}` {} vanished from the offer (internal error)",
                driver.source, driver.source_version
            )));
        };
        let package = locked(deb);
        let conf = gpuimg_apt::read_file(&package, "/dkms.conf", MAX_DKMS_CONF, &aopts, obs)?
            .ok_or_else(|| OpsError::NoDkmsConf {
                package: format!("{} {}", package.name, package.version),
            })?;
        let conf = crate::sources::dkms_conf::parse(&String::from_utf8_lossy(&conf));
        Ok(Exclusive {
            kernel: conf.build_exclusive_kernel,
            config: conf.build_exclusive_config,
            source: format!("{} {}'s dkms.conf", package.name, package.version),
        })
    })
}

/// The package `name` at the Debian version `version`, as the profile's repositories offer it
/// (the exact file, by its signed sha256): what the node installs of the resolution's choice.
pub fn offered_package(
    profile: &Profile,
    name: &str,
    version: &str,
    cache_root: &Path,
    offline: bool,
    trust: &Trust,
    obs: &mut dyn Observer,
) -> Result<crate::lock::LockedPackage, OpsError> {
    let offered = offer(profile, &[name], cache_root, offline, trust, obs)?;
    offered
        .iter()
        .find(|o| o.version.to_string() == version)
        .map(locked)
        .ok_or_else(|| {
            OpsError::Incompatible(format!(
                "the repositories no longer offer `{name}` {version}"
            ))
        })
}

/// What the host profile's repositories offer of `names` (globs allowed), read from their
/// signed indexes: the one read of a node's offer.
pub fn offer(
    profile: &Profile,
    names: &[&str],
    cache_root: &Path,
    offline: bool,
    trust: &Trust,
    obs: &mut dyn Observer,
) -> Result<Vec<gpuimg_apt::Offered>, OpsError> {
    let Base::Apt(spec) = &profile.base else {
        return Err(OpsError::Incompatible(
            "a host profile installs from apt repositories (`base.apt`)".into(),
        ));
    };
    gpuimg_apt::offered(
        &source_specs::apt_packages(spec, &profile.dir),
        &source_specs::architecture(&profile.platform).debian(),
        &apt_options(cache_root, offline, trust),
        names,
        obs,
    )
    .map_err(|e| super::apt_error_at(profile, e))
}

/// An offered package as a lock (and an install from exactly it) names it.
fn locked(o: &gpuimg_apt::Offered) -> crate::lock::LockedPackage {
    crate::lock::LockedPackage {
        repository: o.repository.clone(),
        name: o.name.clone(),
        version: o.version.to_string(),
        architecture: o.architecture.clone(),
        filename: o.filename.clone(),
        size: o.size,
        sha256: o.sha256,
    }
}

/// Bytes of a module source's `dkms.conf` read.
const MAX_DKMS_CONF: u64 = 1 << 20;

/// An exact kernel ABI (`6.1.0-41-cloud-amd64`, `6.12.41+deb13-cloud-amd64`): a version,
/// then the ABI's own suffix; a constraint (`6.1`, `>=6.1`) has neither `-` nor `+`.
fn is_abi(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit())
        && s.contains(['-', '+'])
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn invalid(
    profile: &Profile,
    at: &crate::profile::Located<String>,
    key: &str,
    message: String,
) -> OpsError {
    OpsError::Profile(crate::profile::ProfileError::Invalid {
        file: profile.file.clone(),
        line: at.line,
        column: at.column,
        key: key.into(),
        message,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_abi_is_a_version_a_number_and_a_flavour() {
        assert!(super::is_abi("6.1.0-41-cloud-amd64"));
        assert!(super::is_abi("6.12.41+deb13-cloud-amd64"));
        assert!(!super::is_abi(">=6.1"));
        assert!(!super::is_abi("6.1"));
    }
}
