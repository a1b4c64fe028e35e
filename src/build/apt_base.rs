//! The base layer from apt packages: resolve (or take the lock's set), then reuse the cached
//! layer for exactly that set, or install into a scratch root and write the layer.
//!
//! The key of an apt base is the package set (name, version, architecture, sha256) plus what
//! shapes the tree from it (this gpuimg's version, strip classes, layer settings), so a
//! rebuild with nothing changed neither unpacks nor compresses.

use std::path::Path;

use super::{BuildError, BuildOptions, Observer};
use crate::assemble::{self, Input};
use crate::cache::{Cache, Key};
use crate::digest::Digest;
use crate::layer::{self, LayerBlob, LayerOptions};
use crate::lock::LockedPackage;
use crate::profile::{AptSpec, Profile};
use crate::sources::apt::{self, AptOptions};
use crate::strip;

/// The apt options a build or lock uses.
pub fn apt_options(cache_root: &Path, offline: bool) -> AptOptions {
    let mut o = AptOptions::new(cache_root);
    o.offline = offline;
    o
}

fn apt_key(packages: &[LockedPackage], profile: &Profile, lopts: LayerOptions) -> Digest {
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

/// Build (or reuse) the base layer for `spec`. Returns the blob, whether it came from the
/// cache, and the installed package set.
#[allow(clippy::too_many_arguments)]
pub fn apt_base_layer(
    spec: &AptSpec,
    profile: &Profile,
    opts: &BuildOptions,
    lopts: LayerOptions,
    cache: &Cache,
    scratch: &Path,
    obs: &mut dyn Observer,
) -> Result<(LayerBlob, bool, Vec<LockedPackage>), BuildError> {
    let aopts = apt_options(&opts.cache_root, opts.offline);
    let packages = match &opts.locked_packages {
        Some(p) => p.clone(),
        None => apt::resolve(spec, &profile.platform, &profile.dir, &aopts, obs)?,
    };
    let key = apt_key(&packages, profile, lopts);
    if let Some(blob) = layer::lookup(cache, &key, obs) {
        return Ok((blob, true, packages));
    }
    let root = scratch.join("apt-root");
    fs_err::create_dir_all(&root).map_err(assemble::AssembleError::Io)?;
    let installed = apt::install(
        spec,
        &profile.platform,
        &profile.dir,
        &aopts,
        Some(&packages),
        &root,
        obs,
    )?;
    for w in &installed.warnings {
        obs.warn(w);
    }
    let mut tree = assemble::assemble(
        &Input::Dir {
            path: &root,
            origin: "the apt packages",
            allow_special: false,
        },
        scratch,
    )?;
    for w in tree.warnings() {
        obs.warn(&w);
    }
    let n = strip::strip(&mut tree, &profile.strip);
    if n > 0 {
        obs.message(&format!("strip: removed {n} entries from the base"));
    }
    let (blob, cached) = layer::write_layer("base", &tree, lopts, cache, obs)?;
    layer::remember(cache, &key, &blob)?;
    Ok((blob, cached, installed.packages))
}
