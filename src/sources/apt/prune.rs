//! Keeping dpkg's file lists true after `strip` removed files: each
//! `var/lib/dpkg/info/<pkg>.list` and `<pkg>.md5sums` loses the lines of removed paths (a
//! path through a merged-/usr link, `/bin/ls`, is the file it leads to, `usr/bin/ls`); every
//! other line stays byte for byte, in its order, and a list that lost nothing keeps its
//! bytes. The status file is never touched: a package whose files all went is still installed
//! in the database.

use std::collections::BTreeSet;

use super::AptError;
use crate::assemble::{EntryKind, Tree};

const INFO: &str = "var/lib/dpkg/info/";

/// A list larger than this is not read back.
pub const MAX_LIST_BYTES: u64 = 64 << 20;

/// Drop the lines naming `removed` paths from every dpkg file list and md5sums in `tree`;
/// how many files were rewritten.
pub fn prune_lists(tree: &mut Tree, removed: &BTreeSet<String>) -> Result<usize, AptError> {
    if removed.is_empty() {
        return Ok(0);
    }
    let lists: Vec<String> = tree
        .iter()
        .filter(|e| {
            e.path.strip_prefix(INFO).is_some_and(|n| {
                !n.contains('/') && (n.ends_with(".list") || n.ends_with(".md5sums"))
            })
        })
        .map(|e| e.path.clone())
        .collect();
    let mut n = 0;
    for path in lists {
        let io = |source| AptError::Io {
            path: format!("/{path}").into(),
            source,
        };
        let Some(bytes) = tree.read_file(&path, MAX_LIST_BYTES).map_err(io)? else {
            continue;
        };
        let md5sums = path.ends_with(".md5sums");
        let mut out = Vec::with_capacity(bytes.len());
        let mut dropped = false;
        // Line by line as bytes: a line that is not UTF-8 names no tree path and stays as it is.
        for line in bytes.split_inclusive(|b| *b == b'\n') {
            let text = std::str::from_utf8(line).unwrap_or("");
            let text = text.strip_suffix('\n').unwrap_or(text);
            let named = if md5sums {
                text.split_once("  ").map_or("", |(_, p)| p)
            } else {
                text
            };
            if is_removed(tree, removed, named.trim_start_matches('/')) {
                dropped = true;
                continue;
            }
            out.extend_from_slice(line);
        }
        if dropped {
            tree.replace_data(&path, out);
            n += 1;
        }
    }
    Ok(n)
}

/// Whether `path` (no leading `/`), or the path its first component's link leads to, was
/// removed.
fn is_removed(tree: &Tree, removed: &BTreeSet<String>, path: &str) -> bool {
    if path.is_empty() {
        return false;
    }
    if removed.contains(path) {
        return true;
    }
    let Some((first, rest)) = path.split_once('/') else {
        return false;
    };
    match tree.get(first).map(|e| &e.kind) {
        Some(EntryKind::Symlink { target }) => {
            let t = target.trim_start_matches('/').trim_end_matches('/');
            !t.is_empty() && !t.contains("..") && removed.contains(&format!("{t}/{rest}"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::assemble::{DataSource, Entry};

    fn file(t: &mut Tree, path: &str, data: &str) {
        t.insert(Entry {
            path: path.into(),
            kind: EntryKind::File {
                size: data.len() as u64,
                data: DataSource::Bytes(Arc::new(data.as_bytes().to_vec())),
            },
            mode: 0o644,
            uid: 0,
            gid: 0,
        });
    }

    #[test]
    fn lists_and_md5sums_lose_removed_paths_also_through_merged_usr_links() {
        let mut t = Tree::new("t");
        t.insert(Entry {
            path: "lib".into(),
            kind: EntryKind::Symlink {
                target: "usr/lib".into(),
            },
            mode: 0o777,
            uid: 0,
            gid: 0,
        });
        let list = "/.\n/lib\n/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu/libfoo.a\n\
                    /lib/x86_64-linux-gnu/libfoo.so.1\n/usr/share/man/man1/foo.1.gz\n\
                    /usr/share/doc/foo/copyright\n";
        let sums = "0123  usr/share/man/man1/foo.1.gz\n4567  usr/share/doc/foo/copyright\n";
        file(&mut t, "var/lib/dpkg/info/foo.list", list);
        file(&mut t, "var/lib/dpkg/info/foo.md5sums", sums);
        file(&mut t, "var/lib/dpkg/info/bar.list", "/.\n/usr/bin/bar\n");
        t.add_missing_parents();
        let removed: BTreeSet<String> = [
            "usr/lib/x86_64-linux-gnu/libfoo.a",
            "usr/share/man/man1/foo.1.gz",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(prune_lists(&mut t, &removed).unwrap(), 2);
        let read = |p: &str| String::from_utf8(t.read_file(p, 1 << 20).unwrap().unwrap()).unwrap();
        assert_eq!(
            read("var/lib/dpkg/info/foo.list"),
            "/.\n/lib\n/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu/libfoo.so.1\n\
             /usr/share/doc/foo/copyright\n"
        );
        assert_eq!(
            read("var/lib/dpkg/info/foo.md5sums"),
            "4567  usr/share/doc/foo/copyright\n"
        );
        assert_eq!(read("var/lib/dpkg/info/bar.list"), "/.\n/usr/bin/bar\n");
    }
}
