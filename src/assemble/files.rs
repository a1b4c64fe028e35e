//! The profile's `files:` entries as a tree: root-owned, placed at their `dst`.

use std::os::unix::fs::MetadataExt;

use super::dir::{walk_into, WalkOptions};
use super::tree::{DataSource, Entry, EntryKind, Tree};
use super::AssembleError;
use crate::profile::FileEntry;

pub fn collect(entries: &[FileEntry]) -> Result<Tree, AssembleError> {
    let mut tree = Tree::new("files");
    for f in entries {
        let meta = fs_err::metadata(&f.src)?;
        if meta.is_dir() {
            walk_into(
                &mut tree,
                &f.src,
                &WalkOptions {
                    prefix: &f.dst,
                    allow_special: false,
                    root_owned: true,
                    top_mode: f.mode,
                },
            )?;
        } else {
            tree.insert(Entry {
                path: f.dst.clone(),
                kind: EntryKind::File {
                    size: meta.len(),
                    data: DataSource::file(f.src.clone(), &meta),
                },
                mode: f.mode.unwrap_or(meta.mode() & 0o7777),
                uid: 0,
                gid: 0,
            });
        }
    }
    tree.add_missing_parents();
    Ok(tree)
}
