//! Stage `strip`: drop whole files an image does not need at run time, by path class.
//!
//! Removes entries only; never rewrites a file's bytes (NVIDIA's CUDA EULA forbids modifying its
//! libraries). Licence and copyright files are always kept, even when docs are stripped. A hard
//! link that survives while its data carrier is stripped keeps the data ([`Tree::retain`] moves
//! it to the first surviving link), so no link is left dangling. What was removed is
//! returned per class and owner ([`Stripped`]), for the image's size report.

use std::collections::{BTreeMap, HashSet};

use crate::assemble::{EntryKind, Provenance, Tree};
use crate::profile::StripClass;

/// Entries removed and their file bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    pub entries: u64,
    pub bytes: u64,
}

/// What one strip removed, per (class, owner). An entry matching several classes counts for
/// the first of the profile's list; a file whose data a surviving hard link keeps counts as an
/// entry with no bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stripped {
    pub removed: BTreeMap<(StripClass, Provenance), Removed>,
}

impl Stripped {
    /// Entries removed, all classes.
    pub fn entries(&self) -> u64 {
        self.removed.values().map(|r| r.entries).sum()
    }
}

/// Remove entries matching any class; returns what was removed.
pub fn strip(tree: &mut Tree, classes: &[StripClass]) -> Stripped {
    let mut out = Stripped::default();
    if classes.is_empty() {
        return out;
    }
    let class_of = |path: &str| classes.iter().copied().find(|c| matches(*c, path));
    // Files a surviving link still holds: their bytes stay in the layer.
    let held: HashSet<&str> = tree
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Hardlink { target } if class_of(&e.path).is_none() => Some(target.as_str()),
            _ => None,
        })
        .collect();
    for (e, p) in tree.iter_with_provenance() {
        let Some(class) = class_of(&e.path) else {
            continue;
        };
        let bytes = match &e.kind {
            EntryKind::File { size, .. } if !held.contains(e.path.as_str()) => *size,
            _ => 0,
        };
        let r = out.removed.entry((class, p.clone())).or_default();
        r.entries += 1;
        r.bytes += bytes;
    }
    tree.retain(|e| class_of(&e.path).is_none());
    out
}

fn is_licence(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    file == "copyright"
        || file.starts_with("license")
        || file.starts_with("licence")
        || file.starts_with("copying")
        || file.starts_with("notice")
}

fn under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn matches(class: StripClass, path: &str) -> bool {
    match class {
        StripClass::Docs => {
            (under(path, "usr/share/doc") || under(path, "usr/share/info"))
                && !is_licence(path)
                && path != "usr/share/doc"
                && !is_doc_package_dir(path)
        }
        StripClass::Man => under(path, "usr/share/man"),
        StripClass::Locales => {
            under(path, "usr/share/locale") && path != "usr/share/locale/locale.alias"
                || under(path, "usr/share/i18n/locales")
        }
        StripClass::StaticLibs => {
            path.ends_with(".a")
                && (path.starts_with("usr/lib")
                    || path.starts_with("usr/local/lib")
                    || path.contains("/lib/"))
        }
        StripClass::Headers => under(path, "usr/include") || under(path, "usr/local/include"),
        StripClass::DebugSymbols => under(path, "usr/lib/debug"),
    }
}

/// `usr/share/doc/<pkg>` directories stay so that kept copyright files have a parent.
fn is_doc_package_dir(path: &str) -> bool {
    path.strip_prefix("usr/share/doc/")
        .is_some_and(|rest| !rest.contains('/'))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::assemble::{DataSource, Entry, EntryKind, Provenance};

    fn tree(entries: &[(&str, Option<&str>)]) -> Tree {
        let mut t = Tree::new("test");
        for (path, link) in entries {
            let kind = match link {
                Some(target) => EntryKind::Hardlink {
                    target: target.to_string(),
                },
                None => EntryKind::File {
                    size: 1,
                    data: DataSource::Bytes(Arc::new(vec![b'x'])),
                },
            };
            let e = Entry {
                path: path.to_string(),
                kind,
                mode: 0o644,
                uid: 0,
                gid: 0,
            };
            t.insert_with(e, Provenance::deb(format!("pkg-{path}")));
        }
        t.add_missing_parents();
        t.check_links().unwrap();
        t
    }

    /// (path, hard-link target or "" for the data carrier) of every non-directory.
    fn shape(t: &Tree) -> Vec<(&str, &str)> {
        t.iter()
            .filter_map(|e| match &e.kind {
                EntryKind::File { .. } => Some((e.path.as_str(), "")),
                EntryKind::Hardlink { target } => Some((e.path.as_str(), target.as_str())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn stripped_carriers_leave_no_dangling_links() {
        let doc = "usr/share/doc/p/README";
        let man = "usr/share/man/man1/p.1";
        let lib = "usr/lib/p/README";
        type Case<'a> = (
            &'a [(&'a str, Option<&'a str>)],
            &'a [StripClass],
            &'a [(&'a str, &'a str)],
        );
        let cases: [Case; 4] = [
            // The carrier goes, one link stays: the link takes the data.
            (
                &[(doc, None), (lib, Some(doc))],
                &[StripClass::Docs],
                &[(lib, "")],
            ),
            // The carrier goes, two links stay: the first carries, the second links to it.
            (
                &[
                    (doc, None),
                    (lib, Some(doc)),
                    ("usr/share/p/README", Some(doc)),
                ],
                &[StripClass::Docs],
                &[(lib, ""), ("usr/share/p/README", lib)],
            ),
            // All go.
            (
                &[(doc, None), (man, Some(doc))],
                &[StripClass::Docs, StripClass::Man],
                &[],
            ),
            // Only a link goes: the carrier is untouched.
            (
                &[(lib, None), (man, Some(lib))],
                &[StripClass::Man],
                &[(lib, "")],
            ),
        ];
        for (entries, classes, want) in cases {
            let mut t = tree(entries);
            let before = t.len();
            let n = strip(&mut t, classes);
            assert_eq!(n.entries(), (before - t.len()) as u64);
            t.check_links().unwrap();
            assert_eq!(shape(&t), want, "{entries:?} {classes:?}");
        }
        // The promoted link carries the stripped carrier's provenance, and the data it
        // keeps is not counted as removed.
        let mut t = tree(&[(doc, None), (lib, Some(doc))]);
        let removed = strip(&mut t, &[StripClass::Docs]);
        assert_eq!(
            removed.removed[&(StripClass::Docs, Provenance::deb(format!("pkg-{doc}")))],
            Removed {
                entries: 1,
                bytes: 0
            }
        );
        assert_eq!(
            t.provenance_of(lib),
            Some(&Provenance::deb(format!("pkg-{doc}")))
        );
    }

    #[test]
    fn classes() {
        assert!(matches(
            StripClass::Docs,
            "usr/share/doc/libc6/changelog.gz"
        ));
        assert!(!matches(StripClass::Docs, "usr/share/doc/libc6/copyright"));
        assert!(!matches(StripClass::Docs, "usr/share/doc/libc6"));
        assert!(matches(StripClass::Man, "usr/share/man/man1/ls.1.gz"));
        assert!(!matches(StripClass::Man, "usr/share/manual"));
        assert!(matches(
            StripClass::StaticLibs,
            "usr/lib/x86_64-linux-gnu/libc.a"
        ));
        assert!(matches(StripClass::Headers, "usr/include/stdio.h"));
        assert!(!matches(
            StripClass::Locales,
            "usr/share/locale/locale.alias"
        ));
    }
}
