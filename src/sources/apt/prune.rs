//! Keeping dpkg's file lists true after `strip` removed files: each
//! `var/lib/dpkg/info/<pkg>.list` and `<pkg>.md5sums` loses the lines of removed paths (a
//! path through a merged-/usr link, `/bin/ls`, is the file it leads to, `usr/bin/ls`); every
//! other line stays byte for byte, in its order, and a list that lost nothing keeps its
//! bytes. The status file is never touched: a package whose files all went is still installed
//! in the database.

use std::collections::BTreeSet;
use std::ops::Bound;

use super::AptError;
use crate::assemble::{EntryKind, Tree};

const INFO: &str = "var/lib/dpkg/info/";

/// A list larger than this is not read back.
pub const MAX_LIST_BYTES: u64 = 64 << 20;

/// Drop the lines naming stripped paths from every dpkg file list and md5sums in `tree`; how
/// many files were rewritten. `stripped(path)` says whether strip removes `path` (no leading
/// `/`, through the merged-/usr links) by what it removed from the tree or by the path alone:
/// the tree does not hold what a package replayed from its sketch only listed (its
/// component's layer is cached; `unpack::replay`), and the lists must not depend on that. A
/// line naming a directory stays while a line of the same list below it stays.
pub fn prune_lists(tree: &mut Tree, stripped: &dyn Fn(&str) -> bool) -> Result<usize, AptError> {
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
        // Line by line as bytes: a line that is not UTF-8 names no tree path and stays as it is.
        let lines: Vec<(&[u8], Option<String>)> = bytes
            .split_inclusive(|b| *b == b'\n')
            .map(|line| {
                let text = std::str::from_utf8(line).unwrap_or("");
                let text = text.strip_suffix('\n').unwrap_or(text);
                let named = if md5sums {
                    text.split_once("  ").map_or("", |(_, p)| p)
                } else {
                    text
                };
                (line, real_path(tree, named.trim_start_matches('/')))
            })
            .collect();
        let gone: Vec<bool> = lines
            .iter()
            .map(|(_, p)| p.as_deref().is_some_and(stripped))
            .collect();
        let kept: BTreeSet<&str> = lines
            .iter()
            .zip(&gone)
            .filter(|(_, g)| !**g)
            .filter_map(|((_, p), _)| p.as_deref())
            .collect();
        let mut out = Vec::with_capacity(bytes.len());
        let mut dropped = false;
        for ((line, p), g) in lines.iter().zip(&gone) {
            let below = |d: &str| {
                kept.range::<str, _>((Bound::Excluded(d), Bound::Unbounded))
                    .next()
                    .is_some_and(|k| k.strip_prefix(d).is_some_and(|r| r.starts_with('/')))
            };
            if *g && !p.as_deref().is_some_and(below) {
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

/// The tree path a listed `path` (no leading `/`) is: through its first component when that is
/// a symlink in the tree (`bin/ls` → `usr/bin/ls`), else itself; `None` for the root.
fn real_path(tree: &Tree, path: &str) -> Option<String> {
    if path.is_empty() || path == "." {
        return None;
    }
    Some(match path.split_once('/') {
        Some((first, rest)) => match tree.get(first).map(|e| &e.kind) {
            Some(EntryKind::Symlink { target }) => {
                let t = target.trim_start_matches('/').trim_end_matches('/');
                if t.is_empty() || t.split('/').any(|c| c == ".." || c == ".") {
                    path.to_string()
                } else {
                    format!("{t}/{rest}")
                }
            }
            _ => path.to_string(),
        },
        None => path.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use std::collections::BTreeSet;

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
                    /lib/x86_64-linux-gnu/libfoo.so.1\n/usr/share/man\n/usr/share/man/man1\n\
                    /usr/share/man/man1/foo.1.gz\n/usr/share/doc/foo\n\
                    /usr/share/doc/foo/copyright\n";
        let sums = "0123  usr/share/man/man1/foo.1.gz\n4567  usr/share/doc/foo/copyright\n";
        file(&mut t, "var/lib/dpkg/info/foo.list", list);
        file(&mut t, "var/lib/dpkg/info/foo.md5sums", sums);
        file(&mut t, "var/lib/dpkg/info/bar.list", "/.\n/usr/bin/bar\n");
        t.add_missing_parents();
        file(&mut t, "usr/lib/x86_64-linux-gnu/libfoo.so.1", "");
        file(&mut t, "usr/share/doc/foo/copyright", "");
        let removed: BTreeSet<String> = ["usr/lib/x86_64-linux-gnu/libfoo.a"]
            .into_iter()
            .map(String::from)
            .collect();
        // The man page is not in the tree (only listed by a replayed package): the predicate
        // judges it by its path. `/usr/share/doc/foo` stays: a line below it stays.
        let stripped = |p: &str| {
            removed.contains(p)
                || p == "usr/share/man"
                || p.starts_with("usr/share/man/")
                || p == "usr/share/doc/foo"
        };
        assert_eq!(prune_lists(&mut t, &stripped).unwrap(), 2);
        let read = |p: &str| String::from_utf8(t.read_file(p, 1 << 20).unwrap().unwrap()).unwrap();
        assert_eq!(
            read("var/lib/dpkg/info/foo.list"),
            "/.\n/lib\n/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu/libfoo.so.1\n\
             /usr/share/doc/foo\n/usr/share/doc/foo/copyright\n"
        );
        assert_eq!(
            read("var/lib/dpkg/info/foo.md5sums"),
            "4567  usr/share/doc/foo/copyright\n"
        );
        assert_eq!(read("var/lib/dpkg/info/bar.list"), "/.\n/usr/bin/bar\n");
    }
}
