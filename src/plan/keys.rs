//! The cache keys of planned layers, known before any input is read.
//!
//! An apt component is keyed by its own packages (name, version, architecture, sha256) and
//! the settings that shape a tree from them, so two profiles that share a component's
//! packages share its digest, and adding a package changes only its component's key and
//! `metadata`'s (keyed by the whole set and the `layers:` overrides). A rootfs tarball is
//! keyed by its file identity. Every key names its purpose and this gpuimg's version
//! (`cache::Key`).

use crate::cache::Key;
use crate::digest::Digest;
use crate::layer::LayerOptions;
use crate::lock::LockedPackage;
use crate::profile::Profile;

/// The packages' part of a key: the set (name, version, architecture, sha256) plus what
/// shapes a tree from it (platform, strip classes, layer settings).
pub fn debs_key(packages: &[&LockedPackage], profile: &Profile, lopts: LayerOptions) -> Digest {
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

/// The key of one apt component layer: its name and its packages' key.
pub fn component_key(component: &str, packages: &Digest) -> Digest {
    let mut k = Key::new("apt-component-v1");
    k.str(component).digest(packages);
    k.finish()
}

/// The key of the whole apt base: its packages' key and the profile's `layers:` overrides
/// (which move packages between components). `metadata` is keyed by it.
pub fn set_key(packages: &[LockedPackage], profile: &Profile, lopts: LayerOptions) -> Digest {
    let all: Vec<&LockedPackage> = packages.iter().collect();
    let mut k = Key::new("apt-set-v1");
    k.digest(&debs_key(&all, profile, lopts))
        .count(profile.layers.len());
    for l in &profile.layers {
        k.str(&l.name.value).count(l.deb.len());
        for d in &l.deb {
            k.str(&d.value);
        }
    }
    k.finish()
}

/// The key of a rootfs tarball's layer: the tarball's identity (dev, inode, size, mtime,
/// ctime) and the settings, so an unchanged tarball is neither decompressed nor indexed again.
pub fn tarball_key(
    identity: [u64; 5],
    allow_special: bool,
    profile: &Profile,
    lopts: LayerOptions,
) -> Digest {
    let mut k = Key::new("rootfs-tarball-v2").tool_version();
    k.count(5);
    for v in identity {
        k.u64(v);
    }
    k.bool(allow_special)
        .names(&profile.strip)
        .str(&lopts.compression.settings_id())
        .u64(lopts.epoch);
    k.finish()
}
