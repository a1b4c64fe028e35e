//! `strip: [debug-symbols]` on a layer's tree, inside files: every shared object whose
//! licence terms allow modification (`strip::Rules::may_modify`) loses its DWARF sections and
//! full symbol table (`elf::strip`), and the tree then points at the stripped copy, so the
//! original bytes never reach a layer. Files under terms that forbid modification (NVIDIA's
//! libraries) are never opened for writing; a file `elf::strip` does not fully understand
//! stays as it is. Each stripped file's row in its wheel's `RECORD` gets the new hash.
//!
//! Stripped copies live in the cache (`cache::Cache::copy`), keyed like `device-code`'s pruned
//! copies, so a second build finds the same copy. Runs after `device-code`: a pruned file is
//! stripped from its pruned copy.

use std::collections::BTreeMap;
use std::fs;

use super::rewritable::{self, Source};
use super::{PassContext, PassError};
use gpuimg_assemble::{DataSource, Tree};
use gpuimg_elf::strip as section_strip;
use gpuimg_fetch::observe::Observer;
use gpuimg_oci::layer::owner_name;
use gpuimg_store::cache::SECTION_STRIP_COPIES as STRIPPER;
use gpuimg_wheel::FileHash;

/// One file stripped: its image path and the bytes it lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrippedFile {
    pub path: String,
    /// Whose file it is (the sizes' owner).
    pub owner: String,
    /// How many sections went, and their bytes.
    pub sections: usize,
    pub removed: u64,
}

/// Strip the sections of every modifiable shared object of `tree` (see the module doc).
pub(super) fn strip_sections_tree(
    tree: &mut Tree,
    ctx: &PassContext,
    obs: &mut dyn Observer,
) -> Result<Vec<StrippedFile>, PassError> {
    let candidates = rewritable::modifiable_shared_objects(tree, ctx.rules);
    let mut out = Vec::new();
    let mut hashes: BTreeMap<String, FileHash> = BTreeMap::new();
    for (image_path, src) in candidates {
        let io = |e: std::io::Error| PassError::DebugSections {
            path: format!("/{image_path}"),
            source: e,
        };
        let Some(Source {
            file: mut f,
            identity,
        }) = rewritable::open_source(&src, ctx.cache).map_err(io)?
        else {
            continue;
        };
        let Some(plan) = section_strip::plan(&mut f).map_err(io)? else {
            continue;
        };
        let (copy, hash) = ctx
            .cache
            .copy(STRIPPER, &identity, "", plan.new_size, |dst| {
                plan.write(&f, dst)
            })
            .map_err(io)?;
        let owner = tree
            .provenance_of(&image_path)
            .map(owner_name)
            .unwrap_or_default();
        let meta = fs::metadata(&copy).map_err(io)?;
        let size = meta.len();
        tree.replace_source(&image_path, DataSource::file(copy, &meta), size);
        hashes.insert(image_path.clone(), FileHash::sha256_value(hash.to_vec()));
        let removed = plan.file_size.saturating_sub(plan.new_size);
        obs.message(&format!(
            "debug-symbols: /{image_path}: {} bytes of {} removed",
            removed,
            plan.removed.join(" ")
        ));
        out.push(StrippedFile {
            path: image_path,
            owner,
            sections: plan.removed.len(),
            removed,
        });
    }
    if !hashes.is_empty() {
        gpuimg_wheel::rehash_records(tree, &hashes)?;
        if out.len() > 1 {
            obs.message(&format!(
                "debug-symbols: stripped the sections of {} files of {}",
                out.len(),
                ctx.what
            ));
        }
    }
    Ok(out)
}
