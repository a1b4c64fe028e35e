//! The apt options of a build and the key of a set of apt packages: the packages (name,
//! version, architecture, sha256) plus what shapes a tree from them (this gpuimg's version,
//! strip classes, layer settings). `apt_layers.rs` keys the whole base and each component
//! layer with it.

use std::path::Path;

use crate::cache::Key;
use crate::digest::Digest;
use crate::layer::LayerOptions;
use crate::lock::LockedPackage;
use crate::profile::Profile;
use crate::sources::apt::AptOptions;

/// The apt options a build or lock uses.
pub fn apt_options(cache_root: &Path, offline: bool) -> AptOptions {
    let mut o = AptOptions::new(cache_root);
    o.offline = offline;
    o
}

pub(super) fn apt_key(
    packages: &[LockedPackage],
    profile: &Profile,
    lopts: LayerOptions,
) -> Digest {
    let mut k = Key::new("apt-base-v2").tool_version();
    k.str(&profile.platform.to_string())
        .names(&profile.strip)
        .str(&lopts.compression.settings_id())
        .u64(lopts.epoch)
        .count(packages.len());
    for p in packages {
        k.str(&p.name)
            .str(&p.version)
            .str(&p.architecture)
            .digest(&p.sha256);
    }
    k.finish()
}
