//! The build root of a node's NVIDIA module: a root file system installed from the host
//! profile's repositories (the same signed indexes as the resolution) holding what compiling
//! the module for exactly the resolved kernel needs: the `Essential` set (a shell and the
//! tools make's recipes call), the compiler, `make`, `kmod`, `linux-headers-<abi>` (with its
//! `-common` and `linux-kbuild`) and the module source at the resolved version (`dkms.conf`
//! beside it). Installed as data by `gpuimg-apt` (no maintainer script runs, dkms included):
//! the compile itself runs later, confined, in `gpuimg-sandbox`. Must never run anything.

use std::path::Path;

use super::OpsError;
use crate::driver::apt_options;
use crate::plan::source_specs;
use crate::profile::{Base, Profile};
use crate::resolve::node::NodeResolution;
use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::Trust;

/// What the build root holds besides the `Essential` set, for `node`.
pub fn packages(node: &NodeResolution) -> Vec<String> {
    vec![
        "gcc".into(),
        "make".into(),
        "libc6-dev".into(),
        "kmod".into(),
        format!("linux-headers-{}", node.kernel_abi),
        format!("{}={}", node.source, node.source_version),
    ]
}

/// Install the build root of `node` into the empty directory `dest`.
pub fn install(
    profile: &Profile,
    node: &NodeResolution,
    dest: &Path,
    cache_root: &Path,
    offline: bool,
    trust: &Trust,
    obs: &mut dyn Observer,
) -> Result<gpuimg_apt::Installed, OpsError> {
    let Base::Apt(spec) = &profile.base else {
        return Err(OpsError::Incompatible(
            "a host profile installs from apt repositories (`base.apt`)".into(),
        ));
    };
    let mut spec = source_specs::apt_packages(spec, &profile.dir);
    spec.packages = packages(node);
    spec.essential = true;
    let aopts = apt_options(cache_root, offline, trust);
    gpuimg_apt::install(
        &spec,
        &source_specs::architecture(&profile.platform).debian(),
        &aopts,
        None,
        dest,
        obs,
    )
    .map_err(|e| super::apt_error_at(profile, e))
}
