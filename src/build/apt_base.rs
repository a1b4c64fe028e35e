//! The apt options of a build and the key of a set of apt packages: the packages (name,
//! version, architecture, sha256) plus what shapes a tree from them (this gpuimg's version,
//! strip classes, layer settings). `apt_layers.rs` keys the whole base and each component
//! layer with it.

use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::digest::Digest;
use crate::layer::LayerOptions;
use crate::profile::Profile;
use crate::sources::apt::AptOptions;
use crate::lock::LockedPackage;

/// The apt options a build or lock uses.
pub fn apt_options(cache_root: &Path, offline: bool) -> AptOptions {
    let mut o = AptOptions::new(cache_root);
    o.offline = offline;
    o
}

pub(super) fn apt_key(packages: &[LockedPackage], profile: &Profile, lopts: LayerOptions) -> Digest {
    let mut h = Sha256::new();
    let mut put = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    put(b"gpuimg-apt-base-v2");
    put(env!("CARGO_PKG_VERSION").as_bytes());
    put(profile.platform.to_string().as_bytes());
    put(format!("{:?}", profile.strip).as_bytes());
    put(lopts.compression.settings_id().as_bytes());
    put(&lopts.epoch.to_le_bytes());
    for p in packages {
        put(p.name.as_bytes());
        put(p.version.as_bytes());
        put(p.architecture.as_bytes());
        put(p.sha256.to_string().as_bytes());
    }
    Digest::from_bytes(h.finalize().into())
}

