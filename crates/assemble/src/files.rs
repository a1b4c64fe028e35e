//! The profile's `files:` entries as a tree: root-owned, placed at their `dst`, each entry's
//! provenance the `files:` source it came from.
//!
//! Sources were checked at load (inside the build context, no special files); this checks
//! again with lstat, because the tree is built later: a source that became a FIFO, socket or
//! device since is refused here, and never opened.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::dir::{walk_into, WalkOptions};
use super::tree::{DataSource, Entry, EntryKind, Tree};
use super::{AssembleError, Provenance};

/// One `files:` entry as plain values (the plan converts the profile's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpec {
    /// The source in the build context (canonical: no symlink on its path).
    pub src: PathBuf,
    /// Its image path, no leading `/`.
    pub dst: String,
    /// The mode it gets (default: the source's).
    pub mode: Option<u32>,
}

pub fn collect(entries: &[FileSpec]) -> Result<Tree, AssembleError> {
    let mut tree = Tree::new("files");
    for f in entries {
        // `src` is canonical (no symlinks), so lstat sees the source itself.
        let meta = fs_err::symlink_metadata(&f.src)?;
        let t = meta.file_type();
        tree.set_default_provenance(Provenance::file(&f.src));
        if t.is_dir() {
            walk_into(
                &mut tree,
                &f.src,
                &WalkOptions {
                    prefix: &f.dst,
                    allow_special: false,
                    root_owned: true,
                    top_mode: f.mode,
                },
            )
            .map_err(|e| inside(e, &f.src, &f.dst))?;
        } else if t.is_file() {
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
        } else {
            return Err(AssembleError::SpecialSource {
                path: f.src.display().to_string(),
                kind: special_kind(&t),
            });
        }
    }
    // Directories above a `dst` that no entry names: made for it.
    tree.set_default_provenance(Provenance::generated("files"));
    tree.add_missing_parents();
    Ok(tree)
}

fn special_kind(t: &std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "symlink"
    }
}

/// A special file inside a source directory, named by its path on the host.
fn inside(e: AssembleError, src: &Path, dst: &str) -> AssembleError {
    match e {
        AssembleError::Special { entry, kind, .. } => {
            let rel = entry
                .strip_prefix(dst)
                .map(|r| r.trim_start_matches('/'))
                .unwrap_or(&entry);
            AssembleError::SpecialSource {
                path: src.join(rel).display().to_string(),
                kind: match kind {
                    "fifo" => "FIFO",
                    other => other,
                },
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn entry(src: &Path) -> FileSpec {
        FileSpec {
            src: src.to_path_buf(),
            dst: "opt/x".into(),
            mode: None,
        }
    }

    fn mkfifo(p: &Path) {
        let ok = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mkfifo {}", p.display());
    }

    // A source that turned into a FIFO after the profile was loaded: refused, never opened
    // (opening a FIFO for reading would block this test forever).
    #[test]
    fn special_sources_are_refused_at_assembly() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo");
        mkfifo(&fifo);
        let _sock = std::os::unix::net::UnixListener::bind(t.path().join("sock")).unwrap();
        for (src, kind) in [
            (fifo.clone(), "FIFO"),
            (t.path().join("sock"), "socket"),
            (PathBuf::from("/dev/null"), "character device"),
        ] {
            match collect(&[entry(&src)]) {
                Err(AssembleError::SpecialSource { path, kind: k }) => {
                    assert_eq!((path, k), (src.display().to_string(), kind));
                }
                other => panic!("{src:?}: {other:?}"),
            }
        }
        let dir = t.path().join("d/e");
        std::fs::create_dir_all(&dir).unwrap();
        mkfifo(&dir.join("p"));
        match collect(&[entry(&t.path().join("d"))]) {
            Err(AssembleError::SpecialSource { path, kind }) => {
                assert_eq!(path, dir.join("p").display().to_string());
                assert_eq!(kind, "FIFO");
            }
            other => panic!("{other:?}"),
        }
    }
}
