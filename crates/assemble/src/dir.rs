//! Walk a directory into a `Tree`: lstat only, symlinks never followed, names sorted; or take
//! the entries at given paths under it the same way (`entries_at`).

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use super::paths::symlink_stays_inside;
use super::tree::{DataSource, Entry, EntryKind, Tree};
use super::AssembleError;

/// How a walked tree is placed and owned.
pub(crate) struct WalkOptions<'a> {
    /// Path inside the image the directory maps to ("" = the root).
    pub prefix: &'a str,
    pub allow_special: bool,
    /// Owners forced to 0:0 (files copied from the build context).
    pub root_owned: bool,
    /// Mode for the top directory itself.
    pub top_mode: Option<u32>,
}

/// Walk `root` (the image root or a subtree) into a tree.
pub(crate) fn walk(
    root: &Path,
    prefix: &str,
    allow_special: bool,
    top_mode: Option<u32>,
) -> Result<Tree, AssembleError> {
    let mut tree = Tree::new(root.display().to_string());
    walk_into(
        &mut tree,
        root,
        &WalkOptions {
            prefix,
            allow_special,
            root_owned: false,
            top_mode,
        },
    )?;
    Ok(tree)
}

/// Walk `root` into an existing tree.
pub(crate) fn walk_into(
    tree: &mut Tree,
    root: &Path,
    opts: &WalkOptions<'_>,
) -> Result<(), AssembleError> {
    let mut seen: HashMap<(u64, u64), String> = HashMap::new();
    if !opts.prefix.is_empty() {
        let meta = fs_err::symlink_metadata(root)?;
        tree.insert(Entry {
            path: opts.prefix.to_string(),
            kind: EntryKind::Dir,
            mode: opts.top_mode.unwrap_or(meta.mode() & 0o7777),
            uid: if opts.root_owned { 0 } else { meta.uid() },
            gid: if opts.root_owned { 0 } else { meta.gid() },
        });
    }
    let mut stack = vec![(root.to_path_buf(), opts.prefix.to_string())];
    while let Some((dir, rel)) = stack.pop() {
        let mut entries: Vec<_> = fs_err::read_dir(&dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_cached_key(|e| e.file_name());
        // Push in reverse so that the smallest name is walked first.
        let mut subdirs = Vec::new();
        for entry in entries {
            let name = entry.file_name();
            let name_str = name.to_str().ok_or_else(|| AssembleError::NotUtf8 {
                origin: tree.origin.clone(),
                entry: format!("{rel}/{}", name.to_string_lossy()),
            })?;
            let path = if rel.is_empty() {
                name_str.to_string()
            } else {
                format!("{rel}/{name_str}")
            };
            let full = dir.join(&name);
            // Asked of the directory just read (`fstatat` beside it), not by the whole path
            // again: it never follows a symlink either.
            let meta = entry.metadata()?;
            if add_entry(tree, &full, &meta, path.clone(), opts, &mut seen)? {
                subdirs.push((full, path));
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    tree.order_hardlinks();
    Ok(())
}

/// The entries at `paths` (relative to `root`, as they lie there) and nothing else, in a tree
/// named `origin`: each as a full walk of `root` would record it, hard links among them
/// grouped the same way. Special files are refused.
pub fn entries_at<'p>(
    root: &Path,
    paths: impl IntoIterator<Item = &'p str>,
    origin: &str,
) -> Result<Tree, AssembleError> {
    let mut tree = Tree::new(origin);
    let opts = WalkOptions {
        prefix: "",
        allow_special: false,
        root_owned: false,
        top_mode: None,
    };
    let mut seen: HashMap<(u64, u64), String> = HashMap::new();
    let mut sorted: Vec<&str> = paths.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    for path in sorted {
        let full = root.join(path);
        let meta = fs_err::symlink_metadata(&full)?;
        add_entry(&mut tree, &full, &meta, path.to_string(), &opts, &mut seen)?;
    }
    tree.order_hardlinks();
    Ok(tree)
}

/// Record the entry at `full`, whose `lstat` is `meta` (never following it), as `path`; `true`
/// when it is a directory. The first regular file of a hard-link group seen carries the data;
/// `seen` holds the groups.
fn add_entry(
    tree: &mut Tree,
    full: &Path,
    meta: &std::fs::Metadata,
    path: String,
    opts: &WalkOptions<'_>,
    seen: &mut HashMap<(u64, u64), String>,
) -> Result<bool, AssembleError> {
    let ft = meta.file_type();
    let (uid, gid) = if opts.root_owned {
        (0, 0)
    } else {
        (meta.uid(), meta.gid())
    };
    let mode = meta.mode() & 0o7777;
    let is_dir = ft.is_dir();
    let kind = if ft.is_dir() {
        EntryKind::Dir
    } else if ft.is_symlink() {
        let target = fs_err::read_link(full)?;
        let target = target.to_str().ok_or_else(|| AssembleError::NotUtf8 {
            origin: tree.origin.clone(),
            entry: path.clone(),
        })?;
        if !symlink_stays_inside(&path, target) {
            return Err(AssembleError::Escapes {
                origin: tree.origin.clone(),
                entry: format!("{path} -> {target}"),
                why: "symlink target leaves the root",
            });
        }
        EntryKind::Symlink {
            target: target.to_string(),
        }
    } else if ft.is_file() {
        let key = (meta.dev(), meta.ino());
        if meta.nlink() > 1 {
            if let Some(first) = seen.get(&key) {
                tree.insert(Entry {
                    path,
                    kind: EntryKind::Hardlink {
                        target: first.clone(),
                    },
                    mode,
                    uid,
                    gid,
                });
                return Ok(false);
            }
            seen.insert(key, path.clone());
        }
        EntryKind::File {
            size: meta.len(),
            data: DataSource::file(full.to_path_buf(), meta),
        }
    } else {
        let (kind, label) = if ft.is_char_device() {
            (
                EntryKind::CharDevice {
                    major: major(meta.rdev()),
                    minor: minor(meta.rdev()),
                },
                "character device",
            )
        } else if ft.is_block_device() {
            (
                EntryKind::BlockDevice {
                    major: major(meta.rdev()),
                    minor: minor(meta.rdev()),
                },
                "block device",
            )
        } else if ft.is_fifo() {
            (EntryKind::Fifo, "fifo")
        } else {
            // Sockets cannot be stored in a tar layer.
            if opts.allow_special {
                return Ok(false);
            }
            (EntryKind::Fifo, "socket")
        };
        if !opts.allow_special {
            return Err(AssembleError::Special {
                origin: tree.origin.clone(),
                entry: path,
                kind: label,
            });
        }
        kind
    };
    let attrs = super::xattr::read_dir_entry(full)?;
    tree.insert(Entry {
        path: path.clone(),
        kind,
        mode,
        uid,
        gid,
    });
    if !attrs.is_empty() {
        tree.set_xattrs(&path, attrs);
    }
    Ok(is_dir)
}

fn major(rdev: u64) -> u32 {
    (((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0xfff)) as u32
}

fn minor(rdev: u64) -> u32 {
    (((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff)) as u32
}
