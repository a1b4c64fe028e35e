//! The files a pass may rewrite inside: the shared objects of a tree whose licence terms allow
//! modification, each opened with the identity its rewritten copy is keyed by (the copies
//! themselves are the cache's, `cache::Cache::copy`).
//! Must never open a file for writing: originals are read, copies are new files.

use std::fs;
use std::io;

use crate::strip::Rules;
use gpuimg_assemble::{open_same_file, DataSource, EntryKind, Tree};
use gpuimg_store::cache::Cache;

/// A file to rewrite, open, and the identity its copy is keyed by.
pub(super) struct Source {
    pub file: fs::File,
    pub identity: [u64; 5],
}

/// The file to rewrite and the identity its copy is keyed by: a file on disk as it is; a file
/// left in its wheel inflated (and checked) into an unnamed staging file first, keyed by the
/// wheel's identity and the member's place in it. `None` for bytes held in memory or a span
/// of a tarball (no wheel layer has those as shared objects).
pub(super) fn open_source(src: &DataSource, cache: &Cache) -> io::Result<Option<Source>> {
    match src {
        DataSource::Path { path, identity, .. } => Ok(Some(Source {
            file: open_same_file(path, identity)?,
            identity: *identity,
        })),
        DataSource::Archived(a) => {
            let staged = cache.temp_file("copy-source")?;
            let mut file = staged.file_handle().try_clone()?;
            // The open descriptor keeps the bytes; the name goes now.
            staged.remove()?;
            // The reader yields exactly the recorded bytes, or fails.
            io::copy(&mut a.open()?, &mut file)?;
            let identity = [
                a.identity[0],
                a.identity[1],
                a.identity[3],
                a.offset,
                u64::from(a.crc32),
            ];
            Ok(Some(Source { file, identity }))
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

/// A shared library or an extension module, by its file name (as `gpuimg_wheel` tells them).
fn is_shared_object(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    gpuimg_wheel::is_library_name(name) || gpuimg_wheel::is_module_name(name)
}
