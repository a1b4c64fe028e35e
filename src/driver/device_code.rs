//! `strip: [device-code]` on a wheel layer's tree: every shared object whose licence terms
//! allow modification (`strip::Rules::may_modify`, from the catalog's licence table) is
//! pruned to the device code the profile's GPUs can select (`fatbin`), and the tree then
//! points at the pruned copy, so the original bytes never reach a layer. Files under terms
//! that forbid modification (NVIDIA's libraries) are never opened for writing, whatever they
//! hold; a file whose containers `fatbin` does not fully understand stays as it is, with a
//! warning. Each pruned file's row in its wheel's `RECORD` gets the new hash.
//!
//! Pruned copies live in the cache (`roots-v1/device-code-v1/<key>/`), keyed by the
//! original's identity, the GPUs and the pruner's version: a second build finds the same file
//! (same identity), so the layer's cache key is stable. A copy is reused only when its bytes
//! still hash to the sha256 recorded beside it; otherwise it is pruned again.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use sha2::{Digest as _, Sha256};

use super::BuildError;
use crate::assemble::{open_same_file, DataSource, EntryKind, Tree};
use crate::cache::{Bucket, Cache};
use crate::fatbin::{self, Cc, Target};
use crate::layer::LayerSizes;
use crate::observe::Observer;
use crate::sources::wheel::{self, FileHash};
use crate::strip::Rules;
use crate::version::Version;

/// The pruner's version, in the copies' cache key: a change of what is kept changes it.
const PRUNER: &str = crate::cache::DEVICE_CODE_COPIES;

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
pub fn prune_tree(
    tree: &mut Tree,
    ccs: &[Version],
    rules: &Rules,
    cache: &Cache,
    what: &str,
    obs: &mut dyn Observer,
) -> Result<Vec<PrunedFile>, BuildError> {
    let gpus: Vec<Cc> = ccs
        .iter()
        .map(|v| Cc {
            major: v.field(0) as u32,
            minor: v.field(1) as u32,
        })
        .collect();
    let gpus = gpus.as_slice();
    let candidates = modifiable_shared_objects(tree, rules);
    let mut out = Vec::new();
    let mut hashes: BTreeMap<String, FileHash> = BTreeMap::new();
    for (image_path, src) in candidates {
        let io = |e: std::io::Error| BuildError::DeviceCode {
            path: format!("/{image_path}"),
            source: e,
        };
        let Some((f, identity)) = open_source(&src, cache).map_err(io)? else {
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
        let (copy, hash) = pruned_copy(cache, &f, &identity, gpus, &p).map_err(io)?;
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
        wheel::rehash_records(tree, &hashes)?;
        if out.len() > 1 {
            obs.message(&format!(
                "device-code: pruned {} files of {what}",
                out.len()
            ));
        }
    }
    Ok(out)
}

/// Count the pruned files into a layer's sizes, per library.
pub fn add_sizes(sizes: &mut LayerSizes, pruned: &[PrunedFile]) {
    for p in pruned {
        sizes.add_device_code(
            &format!("/{}", p.path),
            (p.entries - p.kept) as u64,
            p.zeroed,
        );
    }
}

/// The file to prune and the identity its copy is keyed by: a file on disk as it is; a file
/// left in its wheel inflated (and checked) into an unnamed scratch file first, keyed by the
/// wheel's identity and the member's place in it. `None` for bytes held in memory or a span
/// of a tarball (no wheel layer has those as shared objects).
pub(super) fn open_source(
    src: &DataSource,
    cache: &Cache,
) -> std::io::Result<Option<(fs::File, [u64; 5])>> {
    match src {
        DataSource::Path { path, identity, .. } => {
            Ok(Some((open_same_file(path, identity)?, *identity)))
        }
        DataSource::Archived(a) => {
            let dir = cache.dir(Bucket::Roots).join(PRUNER);
            fs::create_dir_all(&dir)?;
            let mut f = tempfile::tempfile_in(&dir)?;
            // The reader yields exactly the recorded bytes, or fails.
            std::io::copy(&mut a.open()?, &mut f)?;
            let identity = [
                a.identity[0],
                a.identity[1],
                a.identity[3],
                a.offset,
                u64::from(a.crc32),
            ];
            Ok(Some((f, identity)))
        }
        DataSource::Bytes(_) | DataSource::TarSpan { .. } => Ok(None),
    }
}

/// The shared objects of `tree` whose licence terms allow modification, with their sources.
pub(super) fn modifiable_shared_objects(tree: &Tree, rules: &Rules) -> Vec<(String, DataSource)> {
    tree.iter()
        .filter_map(|e| match &e.kind {
            EntryKind::File { data, .. }
                if is_shared_object(&e.path) && rules.may_modify(&e.path) =>
            {
                Some((e.path.clone(), data.clone()))
            }
            _ => None,
        })
        .collect()
}

/// A shared library or an extension module, by its file name (as `sources::wheel` tells them).
fn is_shared_object(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    wheel::is_library_name(name) || wheel::is_module_name(name)
}

/// The pruned copy of `src` in the cache (written now unless an earlier build left it), and
/// the sha256 of its bytes.
fn pruned_copy(
    cache: &Cache,
    src: &fs::File,
    identity: &[u64; 5],
    gpus: &[Cc],
    p: &fatbin::Pruning,
) -> std::io::Result<(PathBuf, [u8; 32])> {
    let gpus: String = gpus.iter().map(|g| format!(";{g}")).collect();
    cached_copy(cache, PRUNER, identity, &gpus, p.file_size, |dst| {
        p.write(src, dst)
    })
}

/// A rewritten copy of a file in the cache, under `roots-v1/<kind>/`, keyed by `kind`, the
/// original's `identity` and `extra`: an earlier build's copy is used only when it is
/// `size` bytes and still hashes to the sha256 recorded beside it; otherwise `write` writes
/// it again (returning the sha256 of what it wrote).
pub(super) fn cached_copy(
    cache: &Cache,
    kind: &str,
    identity: &[u64; 5],
    extra: &str,
    size: u64,
    write: impl FnOnce(&mut fs::File) -> std::io::Result<[u8; 32]>,
) -> std::io::Result<(PathBuf, [u8; 32])> {
    let mut k = Sha256::new();
    k.update(kind.as_bytes());
    for v in identity {
        k.update(v.to_le_bytes());
    }
    k.update(extra.as_bytes());
    let key = hex::encode(k.finalize());
    let dir = cache.dir(Bucket::Roots).join(kind).join(&key[..2]);
    fs::create_dir_all(&dir)?;
    let file = dir.join(&key);
    let sum = dir.join(format!("{key}.sha256"));
    // An earlier build's copy is used only when its bytes still hash to what was recorded.
    if let (Ok(m), Ok(h)) = (fs::symlink_metadata(&file), fs::read_to_string(&sum)) {
        if m.is_file() && m.len() == size {
            let recorded = hex::decode(h.trim())
                .ok()
                .and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok());
            if let Some(a) = recorded {
                let mut hasher = Sha256::new();
                let mut f = fs::File::open(&file)?;
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let n = std::io::Read::read(&mut f, &mut buf)?;
                    if n == 0 {
                        break;
                    }
                    hasher.update(&buf[..n]);
                }
                if <[u8; 32]>::from(hasher.finalize()) == a {
                    return Ok((file, a));
                }
            }
        }
    }
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
    let hash = write(tmp.as_file_mut())?;
    tmp.as_file().sync_all()?;
    tmp.persist(&file).map_err(|e| e.error)?;
    fs::write(&sum, hex::encode(hash))?;
    Ok((file, hash))
}
