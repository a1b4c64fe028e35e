//! The base layer from `base.rootfs`. A directory is walked and keyed entry by entry (see
//! `layer::layer_key`); a tarball is first looked up by its own identity (device, inode, size,
//! mtime, ctime) and the settings, so an unchanged tarball is neither decompressed nor indexed
//! again.

use std::path::Path;

use super::{BuildError, Observer};
use crate::assemble::{self, identity, Input};
use crate::cache::{Cache, Key};
use crate::digest::Digest;
use crate::layer::{self, LayerBlob, LayerOptions};
use crate::profile::Profile;
use crate::strip;

fn tarball_key(
    meta: &std::fs::Metadata,
    allow_special: bool,
    profile: &Profile,
    lopts: LayerOptions,
) -> Digest {
    let mut k = Key::new("rootfs-tarball-v2").tool_version();
    k.count(5);
    for v in identity(meta) {
        k.u64(v);
    }
    k.bool(allow_special)
        .names(&profile.strip)
        .str(&lopts.compression.settings_id())
        .u64(lopts.epoch);
    k.finish()
}

/// Build (or reuse) the base layer from a root filesystem tarball or directory.
pub fn rootfs_base_layer(
    path: &Path,
    allow_special: bool,
    profile: &Profile,
    lopts: LayerOptions,
    cache: &Cache,
    scratch: &Path,
    obs: &mut dyn Observer,
) -> Result<(LayerBlob, bool), BuildError> {
    let meta = fs_err::metadata(path).map_err(assemble::AssembleError::Io)?;
    let key = (!meta.is_dir()).then(|| tarball_key(&meta, allow_special, profile, lopts));
    if let Some(blob) = key.as_ref().and_then(|k| layer::lookup(cache, k, obs)) {
        return Ok((blob, true));
    }
    let mut tree = assemble::assemble(
        &Input::Rootfs {
            path,
            allow_special,
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
    if let Some(k) = &key {
        layer::remember(cache, k, &blob)?;
    }
    Ok((blob, cached))
}
