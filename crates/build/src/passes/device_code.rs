//! `strip: [device-code]` on a layer's tree: every shared object whose licence terms
//! allow modification (`strip::Rules::may_modify`, from the catalog's licence table) is
//! pruned to the device code the profile's GPUs can select (`fatbin`), and the tree then
//! points at the pruned copy, so the original bytes never reach a layer. Files under terms
//! that forbid modification (NVIDIA's libraries) are never opened for writing, whatever they
//! hold; a file whose containers `fatbin` does not fully understand stays as it is, with a
//! warning. Each pruned file's row in its wheel's `RECORD` gets the new hash.
//!
//! Pruned copies live in the cache (`cache::Cache::copy`), keyed by the original's identity, the GPUs
//! and the pruner's version: a second build finds the same copy.

use std::collections::BTreeMap;
use std::fs;

use super::rewritable::{self, Source};
use super::{PassContext, PassError};
use gpuimg_assemble::{DataSource, Tree};
use gpuimg_elf::fatbin::{self, Cc, Target};
use gpuimg_expect::version::Version;
use gpuimg_fetch::observe::Observer;
use gpuimg_wheel::FileHash;

/// The pruner's version, in the copies' cache key: a change of what is kept changes it.
const PRUNER: &str = gpuimg_store::cache::DEVICE_CODE_COPIES;

/// One file pruned: its image path, what it dropped and kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedFile {
    pub path: String,
    pub entries: usize,
    pub kept: usize,
    pub zeroed: u64,
    pub kept_targets: Vec<Target>,
}

/// Prune every modifiable shared object of `tree` for the compute capabilities `ccs` (see
/// the module doc).
pub(super) fn prune_tree(
    tree: &mut Tree,
    ccs: &[Version],
    ctx: &PassContext,
    obs: &mut dyn Observer,
) -> Result<Vec<PrunedFile>, PassError> {
    let gpus: Vec<Cc> = ccs
        .iter()
        .map(|v| Cc {
            major: v.field(0) as u32,
            minor: v.field(1) as u32,
        })
        .collect();
    let gpus = gpus.as_slice();
    let gpu_names: String = gpus.iter().map(|g| format!(";{g}")).collect();
    let candidates = rewritable::modifiable_shared_objects(tree, ctx.rules);
    let mut out = Vec::new();
    let mut hashes: BTreeMap<String, FileHash> = BTreeMap::new();
    for (image_path, src) in candidates {
        let io = |e: std::io::Error| PassError::DeviceCode {
            path: format!("/{image_path}"),
            source: e,
        };
        let Some(Source { file: f, identity }) =
            rewritable::open_source(&src, ctx.cache).map_err(io)?
        else {
            continue;
        };
        let listing = match fatbin::read(&f) {
            Ok(l) => l,
            Err(fatbin::NotUnderstood::NotElf) => continue,
            Err(e) => {
                obs.warn(&format!(
                    "device-code: /{image_path} left unmodified: its device code is not understood ({e})"
                ));
                continue;
            }
        };
        let p = fatbin::prune(&listing, gpus);
        if !p.changes() {
            continue;
        }
        let (copy, hash) = ctx
            .cache
            .copy(PRUNER, &identity, &gpu_names, p.file_size, |dst| {
                p.write(&f, dst)
            })
            .map_err(io)?;
        let meta = fs::metadata(&copy).map_err(io)?;
        let size = meta.len();
        tree.replace_source(&image_path, DataSource::file(copy, &meta), size);
        hashes.insert(image_path.clone(), FileHash::sha256_value(hash.to_vec()));
        let kept_targets: Vec<Target> = p.kept_targets.iter().copied().collect();
        obs.message(&format!(
            "device-code: /{image_path}: kept {} of {} entries ({}), {} bytes zeroed",
            p.kept,
            p.entries,
            if kept_targets.is_empty() {
                "none".to_string()
            } else {
                kept_targets
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            },
            p.zeroed
        ));
        out.push(PrunedFile {
            path: image_path,
            entries: p.entries,
            kept: p.kept,
            zeroed: p.zeroed,
            kept_targets,
        });
    }
    if !hashes.is_empty() {
        gpuimg_wheel::rehash_records(tree, &hashes)?;
        if out.len() > 1 {
            obs.message(&format!(
                "device-code: pruned {} files of {}",
                out.len(),
                ctx.what
            ));
        }
    }
    Ok(out)
}
