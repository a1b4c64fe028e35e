//! The shape rules every accepted tree obeys, so that standard tools can unpack it: each
//! entry's parent is a directory (never a file, never a symlink of the same source), names fit
//! Linux's limits, and every symlink stays inside the root when followed through the tree's
//! own links (the resolved path is checked, not each link alone).

use super::tree::{EntryKind, Tree};
use super::AssembleError;

/// Linux's `NAME_MAX`: bytes in one path component.
pub(crate) const NAME_MAX: usize = 255;
/// Linux's `PATH_MAX`: bytes in a whole path.
pub(crate) const PATH_MAX: usize = 4096;
/// Links followed while resolving one symlink; a longer chain is a loop and resolves nowhere.
const MAX_HOPS: usize = 40;

pub(crate) fn kind_name(k: &EntryKind) -> &'static str {
    match k {
        EntryKind::Dir => "directory",
        EntryKind::File { .. } => "file",
        EntryKind::Symlink { .. } => "symlink",
        EntryKind::Hardlink { .. } => "hard link",
        EntryKind::CharDevice { .. } => "character device",
        EntryKind::BlockDevice { .. } => "block device",
        EntryKind::Fifo => "fifo",
    }
}

/// Check one entry name against the length limits.
pub(crate) fn check_name(origin: &str, path: &str) -> Result<(), AssembleError> {
    let too_long = |what: String| AssembleError::TooLong {
        origin: origin.to_string(),
        entry: shorten(path),
        what,
    };
    if path.len() + 1 > PATH_MAX {
        return Err(too_long(format!(
            "{} bytes; paths are limited to {PATH_MAX}",
            path.len() + 1
        )));
    }
    if let Some(c) = path.split('/').find(|c| c.len() > NAME_MAX) {
        return Err(too_long(format!(
            "a component of {} bytes; names are limited to {NAME_MAX}",
            c.len()
        )));
    }
    Ok(())
}

/// A long path for a message: its start and end.
fn shorten(p: &str) -> String {
    if p.len() <= 120 {
        return p.to_string();
    }
    let head: String = p.chars().take(60).collect();
    let tail: String = p
        .chars()
        .rev()
        .take(40)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{head}…{tail}")
}

/// Check the whole tree (see the module doc).
pub fn check(tree: &Tree) -> Result<(), AssembleError> {
    for e in tree.iter() {
        check_name(&tree.origin, &e.path)?;
        // The nearest ancestor the tree holds must be a directory (missing ones are added
        // as directories later).
        let mut cur = e.path.as_str();
        while let Some((parent, _)) = cur.rsplit_once('/') {
            cur = parent;
            match tree.get(parent).map(|p| &p.kind) {
                None => continue,
                Some(EntryKind::Dir) => break,
                Some(EntryKind::Symlink { .. }) => {
                    return Err(AssembleError::ThroughSymlink {
                        origin: tree.origin.clone(),
                        entry: e.path.clone(),
                        link: parent.to_string(),
                    })
                }
                Some(k) => {
                    return Err(AssembleError::NotADirectory {
                        origin: tree.origin.clone(),
                        entry: e.path.clone(),
                        parent: parent.to_string(),
                        kind: kind_name(k),
                    })
                }
            }
        }
        if let EntryKind::Symlink { target } = &e.kind {
            if !resolves_inside(tree, &e.path, target) {
                return Err(AssembleError::Escapes {
                    origin: tree.origin.clone(),
                    entry: format!("{} -> {target}", e.path),
                    why: "followed through the tree's links, it climbs above the root",
                });
            }
        }
    }
    Ok(())
}

/// The entries of a layer that are not directories: path → the symlink's target, or `None`
/// for any other kind. What a later layer must not place anything under.
pub type NonDirs = std::collections::BTreeMap<String, Option<String>>;

/// The non-directory entries of `tree`.
pub fn non_dirs(tree: &Tree) -> NonDirs {
    tree.iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Dir => None,
            EntryKind::Symlink { target } => Some((e.path.clone(), Some(target.clone()))),
            _ => Some((e.path.clone(), None)),
        })
        .collect()
}

/// `upper` stacked on a layer whose non-directories are `lower`: nothing of `upper` may lie
/// under a file or a symlink of `lower` (a runtime would replace the file or the link with a
/// directory: `/lib -> usr/lib` would stop being merged-/usr), and no directory of `upper` may
/// replace a file of `lower`.
pub fn check_over(lower: &NonDirs, lower_name: &str, upper: &Tree) -> Result<(), AssembleError> {
    for e in upper.iter() {
        let mut cur = e.path.as_str();
        while let Some((parent, _)) = cur.rsplit_once('/') {
            cur = parent;
            if let Some(target) = lower.get(parent) {
                return Err(AssembleError::UnderLowerFile {
                    origin: upper.origin.clone(),
                    entry: e.path.clone(),
                    lower: lower_name.to_string(),
                    parent: parent.to_string(),
                    what: match target {
                        Some(t) => {
                            format!("a symlink to `{t}`; write to the link's target instead")
                        }
                        None => "a file".to_string(),
                    },
                });
            }
        }
        if matches!(e.kind, EntryKind::Dir) && lower.get(&e.path).is_some_and(|t| t.is_none()) {
            return Err(AssembleError::UnderLowerFile {
                origin: upper.origin.clone(),
                entry: e.path.clone(),
                lower: lower_name.to_string(),
                parent: e.path.clone(),
                what: "a file, and this is a directory".to_string(),
            });
        }
    }
    Ok(())
}

/// Follow the symlink at `link` (with `target`) through the tree's own symlinks; `false` when
/// any step climbs above the root. Names the tree does not hold resolve lexically.
pub(crate) fn resolves_inside(tree: &Tree, link: &str, target: &str) -> bool {
    let mut stack: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        let mut s: Vec<&str> = link.split('/').collect();
        s.pop();
        s
    };
    let mut pending: Vec<&str> = target.split('/').rev().collect();
    let mut hops = 0;
    while let Some(c) = pending.pop() {
        match c {
            "" | "." => continue,
            ".." => {
                if stack.pop().is_none() {
                    return false;
                }
                continue;
            }
            _ => stack.push(c),
        }
        let here = stack.join("/");
        if let Some(EntryKind::Symlink { target: t }) = tree.get(&here).map(|e| &e.kind) {
            hops += 1;
            if hops > MAX_HOPS {
                return true;
            }
            stack.pop();
            if t.starts_with('/') {
                stack.clear();
            }
            pending.extend(t.split('/').rev());
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Entry;

    fn tree(links: &[(&str, &str)], dirs: &[&str]) -> Tree {
        let mut t = Tree::new("test");
        for d in dirs {
            t.insert(Entry {
                path: d.to_string(),
                kind: EntryKind::Dir,
                mode: 0o755,
                uid: 0,
                gid: 0,
            });
        }
        for (l, target) in links {
            t.insert(Entry {
                path: l.to_string(),
                kind: EntryKind::Symlink {
                    target: target.to_string(),
                },
                mode: 0o777,
                uid: 0,
                gid: 0,
            });
        }
        t
    }

    #[test]
    fn chains_that_climb_when_followed_are_refused() {
        // Each link alone stays inside lexically; followed, the chain climbs.
        for (links, dirs, bad) in [
            (
                vec![("a/up", ".."), ("a/x", "up/../../etc")],
                vec!["a"],
                "a/x",
            ),
            (
                vec![("l1", "a/b"), ("a/b", ".."), ("z", "l1/../..")],
                vec!["a"],
                "z",
            ),
            (
                vec![
                    ("lib", "usr/lib"),
                    ("usr/lib/up", "../.."),
                    ("e", "lib/up/../x"),
                ],
                vec!["usr", "usr/lib"],
                "e",
            ),
            (
                vec![("d/one", "/d/two"), ("d/two", "../.."), ("q", "d/one")],
                vec!["d"],
                "d/one",
            ),
        ] {
            let t = tree(&links, &dirs);
            let err = check(&t).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
            assert!(err.contains("climbs above the root"), "{err}");
        }
    }

    #[test]
    fn real_layouts_and_loops_pass() {
        let t = tree(
            &[
                ("lib", "usr/lib"),
                ("lib64", "usr/lib64"),
                (
                    "usr/lib64/ld-linux-x86-64.so.2",
                    "/lib/x86_64-linux-gnu/ld.so",
                ),
                ("usr/bin/python3", "python3.11"),
                ("usr/lib/x/y", "../../../etc/alternatives/y"),
                ("loop1", "loop2"),
                ("loop2", "loop1"),
                ("etc/alternatives/y", "/usr/bin/y"),
            ],
            &[
                "usr",
                "usr/lib",
                "usr/lib64",
                "usr/lib/x",
                "usr/bin",
                "etc",
                "etc/alternatives",
            ],
        );
        check(&t).unwrap();
    }

    #[test]
    fn write_through_symlink_and_file_parents_are_refused() {
        let mut t = tree(&[("etc", "/tmp/host")], &[]);
        t.insert(Entry {
            path: "etc/passwd".into(),
            kind: EntryKind::Dir,
            mode: 0o755,
            uid: 0,
            gid: 0,
        });
        assert!(matches!(
            check(&t),
            Err(AssembleError::ThroughSymlink { .. })
        ));
        let mut t = Tree::new("t");
        for (p, k) in [("opt", EntryKind::Fifo), ("opt/app", EntryKind::Dir)] {
            t.insert(Entry {
                path: p.into(),
                kind: k,
                mode: 0o644,
                uid: 0,
                gid: 0,
            });
        }
        let e = check(&t).unwrap_err().to_string();
        assert!(e.contains("`opt` is a fifo"), "{e}");
    }

    #[test]
    fn long_names_are_refused() {
        let long = "x".repeat(256);
        assert!(check_name("t", &long).is_err());
        assert!(check_name("t", &"x".repeat(255)).is_ok());
        let deep = vec!["d"; 2100].join("/");
        assert!(check_name("t", &deep).is_err());
        let ok = vec!["d"; 2000].join("/");
        assert!(check_name("t", &ok).is_ok());
    }
}
