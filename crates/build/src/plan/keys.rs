//! The cache keys of planned layers, known before any input is read.
//!
//! An apt component is keyed by its own packages (name, version, architecture, sha256) and
//! the settings that shape a tree from them, so two profiles that share a component's
//! packages share its digest, and adding a package changes only its component's key and
//! `metadata`'s (keyed by the whole set and the `layers:` overrides). A rootfs tarball is
//! keyed by its file identity. The Python wheels are keyed by the locked set (name, version,
//! file, sha256, `REQUESTED`, the dependencies resolution took from each), the installer's
//! version, the image's interpreter and the compiler, so profiles with the same locked set
//! share the layer. Every key names its purpose
//! and this gpuimg's version (`cache::Key`). The keys that name a finished layer carry the
//! layer writer's version in their purpose (`apt-base-v3`, `rootfs-tarball-v3`,
//! `python-packages-v3`, with `layer::layer_key`'s `layer-v3`: duplicates stored once).

use crate::catalog::strip_table_text;
use crate::lock::LockedPackage;
use crate::profile::Profile;
use gpuimg_oci::layer::LayerOptions;
use gpuimg_pypi::PinnedWheel;
use gpuimg_store::cache::Key;
use gpuimg_store::digest::Digest;
use gpuimg_wheel::{dependency_edges, normalize, INSTALLER_VERSION};

use super::PythonInstall;

/// The packages' part of a key: the set (name, version, architecture, sha256) plus what
/// shapes a tree from it (platform, strip classes, layer settings).
pub fn debs_key(packages: &[&LockedPackage], profile: &Profile, lopts: LayerOptions) -> Digest {
    let mut k = Key::new("apt-base-v3").tool_version();
    k.str(&profile.platform.to_string());
    // A node's root boots: users, enabled units and its empty machine-id are made for it
    // (`gpuimg_apt::PackagesSpec::system`). Containers' keys are unchanged.
    if profile.kind == crate::profile::ProfileKind::Host {
        k.str("system-root-v1");
    }
    strip(&mut k, profile)
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

/// The strip classes, and the catalog's strip table when any class applies (its paths and
/// terms decide what the classes remove).
fn strip<'k>(k: &'k mut Key, profile: &Profile) -> &'k mut Key {
    k.names(&profile.strip);
    if !profile.strip.is_empty() {
        k.str(strip_table_text());
    }
    // Libraries stripped inside depend on the section stripper.
    if profile
        .strip
        .contains(&crate::profile::StripClass::DebugSymbols)
    {
        k.str(gpuimg_store::cache::SECTION_STRIP_COPIES);
    }
    // Pruned device code depends on the GPUs it is pruned for, and on the pruner.
    if profile
        .strip
        .contains(&crate::profile::StripClass::DeviceCode)
    {
        k.str("device-code-v1");
        for g in &profile.host.gpus {
            k.str(&g.value.to_ascii_lowercase());
        }
    }
    k
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

/// The key of the `metadata` layer: the apt set's key, and what its `ld.so.cache` and the
/// one-provider rule read of the wheels (the conf file, the libraries the cache indexes, every
/// wheel library and the rules).
pub fn metadata_key(set: &Digest, loader: &super::Loader) -> Digest {
    let mut k = Key::new("apt-metadata-v1");
    k.digest(set).digest(&super::libraries::rules_digest(
        &loader.picks,
        loader.forward,
    ));
    match &loader.conf {
        None => k.bool(false),
        Some((path, text)) => k.bool(true).str(path).str(text),
    };
    k.count(loader.found.len());
    for (path, so) in &loader.found {
        k.str(path).str(so.soname.as_deref().unwrap_or(""));
    }
    k.count(loader.wheel_libraries.len());
    for l in &loader.wheel_libraries {
        k.str(&l.path).str(&l.soname).str(l.provider.name());
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
    let mut k = Key::new("rootfs-tarball-v3").tool_version();
    k.count(5);
    for v in identity {
        k.u64(v);
    }
    k.bool(allow_special);
    strip(&mut k, profile)
        .str(&lopts.compression.settings_id())
        .u64(lopts.epoch);
    k.finish()
}

/// The key of one wheel component's layer (`component`, holding the wheels `names`): each of
/// its locked wheels (name, version, file name, sha256, whether the profile requested it), the
/// installer's version, the image's Python (version, paths, interpreter) and the `.pyc`
/// compiler (none, or its version and magic number: its output is its own), and the layer
/// settings; and the dependencies resolution took from each of its wheels, which the installer
/// checks against the wheel's own `Requires-Dist` (a new one installs the layer again, so it
/// is checked). Not the index, nor a profile's requirement text, nor the other components'
/// wheels: none of them changes a byte of this layer.
pub fn wheels_key(
    p: &PythonInstall,
    component: &str,
    names: &[String],
    profile: &Profile,
    unused: &std::collections::BTreeSet<String>,
    lopts: LayerOptions,
) -> Digest {
    let mut k = Key::new("python-packages-v3").tool_version();
    k.str(component)
        .str(INSTALLER_VERSION)
        .u64(p.python.version.0.into())
        .u64(p.python.version.1.into())
        .str(&p.python.full_version)
        .str(&p.python.interpreter)
        .str(&p.python.site_dir)
        .str(&p.python.scripts_dir);
    match &p.compiler {
        None => k.bool(false),
        Some(c) => k.bool(true).str(&c.version).u64(c.magic.into()),
    };
    let wheels: Vec<_> = p
        .wheels
        .iter()
        .filter(|w| names.contains(&w.name))
        .collect();
    strip(&mut k, profile)
        .str(&lopts.compression.settings_id())
        .u64(lopts.epoch)
        .count(wheels.len());
    for w in &wheels {
        k.str(&w.name)
            .str(&w.version)
            .str(&w.filename)
            .digest(&w.sha256)
            .bool(w.requested);
    }
    let pins: Vec<PinnedWheel> = p.wheels.iter().map(PinnedWheel::from).collect();
    let edges = dependency_edges(&pins);
    for w in &wheels {
        let deps = edges.get(&normalize(&w.name));
        k.count(deps.map_or(0, |d| d.len()));
        for d in deps.into_iter().flatten() {
            k.str(d);
        }
    }
    // `unused-libraries` removes what the whole image's closure leaves unreached: the
    // libraries of these wheels it removes.
    for w in &wheels {
        for l in p.libraries.get(&w.name).into_iter().flatten() {
            if unused.contains(&l.path) {
                k.str(&l.path);
            }
        }
    }
    k.finish()
}

/// The key of the SBOM's layer: the document's bytes and the layer settings (the tar writer's
/// version with them), so an unchanged SBOM is reused without writing.
pub fn sbom_key(document: &[u8], lopts: LayerOptions) -> Digest {
    let mut k = Key::new("sbom-layer-v1").tool_version();
    k.digest(&Digest::of(document))
        .str(&lopts.compression.settings_id())
        .u64(lopts.epoch);
    k.finish()
}
