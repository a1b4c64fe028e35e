//! Tests for `Tree`: provenance through every mutation, and hard-link groups kept whole when
//! entries are removed.

use std::sync::Arc;

use super::*;

fn entry(path: &str, kind: EntryKind, mode: u32, uid: u32) -> Entry {
    Entry {
        path: path.to_string(),
        kind,
        mode,
        uid,
        gid: uid,
    }
}

fn file(path: &str) -> Entry {
    let bytes = Arc::new(path.as_bytes().to_vec());
    let size = bytes.len() as u64;
    entry(
        path,
        EntryKind::File {
            size,
            data: DataSource::Bytes(bytes),
        },
        0o4755,
        7,
    )
}

fn link(path: &str, target: &str) -> Entry {
    entry(
        path,
        EntryKind::Hardlink {
            target: target.to_string(),
        },
        0o644,
        0,
    )
}

fn cap() -> Vec<(String, Vec<u8>)> {
    vec![("security.capability".to_string(), vec![1, 2, 3])]
}

/// `a/data` carries the bytes; `b/one` and `c/two` link to it. Each member has its own
/// provenance; the carrier has a carried attribute.
fn group() -> Tree {
    let mut t = Tree::new("test");
    t.insert_with(file("a/data"), Provenance::deb("carrier"));
    t.insert_with(link("b/one", "a/data"), Provenance::deb("one"));
    t.insert_with(link("c/two", "a/data"), Provenance::deb("two"));
    t.set_xattrs("a/data", cap());
    t.check_links().unwrap();
    t
}

fn target(t: &Tree, path: &str) -> Option<String> {
    match &t.get(path)?.kind {
        EntryKind::Hardlink { target } => Some(target.clone()),
        _ => None,
    }
}

fn bytes(t: &Tree, path: &str) -> Option<Vec<u8>> {
    match &t.get(path)?.kind {
        EntryKind::File {
            data: DataSource::Bytes(b),
            ..
        } => Some(b.to_vec()),
        _ => None,
    }
}

#[test]
fn removing_the_carrier_promotes_the_first_surviving_link() {
    for by_retain in [true, false] {
        let mut t = group();
        if by_retain {
            t.retain(|e| e.path != "a/data");
        } else {
            assert!(t.remove("a/data").is_some());
        }
        t.check_links().unwrap();
        assert_eq!(t.len(), 2);
        // `b/one` now holds the inode: data, mode, owners, attributes and provenance.
        assert_eq!(bytes(&t, "b/one"), Some(b"a/data".to_vec()));
        let e = t.get("b/one").unwrap();
        assert_eq!((e.mode, e.uid, e.gid), (0o4755, 7, 7));
        assert_eq!(t.xattrs("b/one"), cap().as_slice());
        assert_eq!(t.provenance_of("b/one"), Some(&Provenance::deb("carrier")));
        // `c/two` links to the new carrier and keeps its own provenance.
        assert_eq!(target(&t, "c/two").as_deref(), Some("b/one"));
        assert_eq!(t.provenance_of("c/two"), Some(&Provenance::deb("two")));
        assert!(t.xattrs("a/data").is_empty());
    }
}

#[test]
fn removing_the_carrier_and_the_first_link_promotes_the_next() {
    let mut t = group();
    t.retain(|e| e.path == "c/two");
    t.check_links().unwrap();
    assert_eq!(bytes(&t, "c/two"), Some(b"a/data".to_vec()));
    assert_eq!(t.provenance_of("c/two"), Some(&Provenance::deb("carrier")));
    assert_eq!(t.xattrs("c/two"), cap().as_slice());
}

#[test]
fn removing_a_whole_group_leaves_nothing_behind() {
    let mut t = group();
    t.insert(file("z"));
    t.retain(|e| e.path == "z");
    t.check_links().unwrap();
    assert_eq!(t.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(), ["z"]);
    assert!(t.xattrs("a/data").is_empty() && t.xattrs("b/one").is_empty());
}

#[test]
fn removing_a_link_keeps_the_carrier() {
    let mut t = group();
    t.retain(|e| e.path != "b/one");
    t.check_links().unwrap();
    assert_eq!(bytes(&t, "a/data"), Some(b"a/data".to_vec()));
    assert_eq!(target(&t, "c/two").as_deref(), Some("a/data"));
    assert_eq!(t.xattrs("a/data"), cap().as_slice());
    let mut t = group();
    assert!(t.remove("c/two").is_some());
    t.check_links().unwrap();
    assert_eq!(target(&t, "b/one").as_deref(), Some("a/data"));
}

#[test]
fn two_groups_are_repaired_independently() {
    let mut t = group();
    t.insert(file("d/data"));
    t.insert(link("e/link", "d/data"));
    t.insert(link("f/link", "d/data"));
    t.retain(|e| !e.path.ends_with("data"));
    t.check_links().unwrap();
    assert_eq!(bytes(&t, "b/one"), Some(b"a/data".to_vec()));
    assert_eq!(bytes(&t, "e/link"), Some(b"d/data".to_vec()));
    assert_eq!(target(&t, "c/two").as_deref(), Some("b/one"));
    assert_eq!(target(&t, "f/link").as_deref(), Some("e/link"));
    assert_eq!(
        t.provenance_of("e/link"),
        Some(&Provenance::generated("test"))
    );
}

#[test]
fn order_hardlinks_moves_provenance_with_the_data() {
    let mut t = Tree::new("test");
    t.insert_with(file("z/data"), Provenance::deb("carrier"));
    t.insert_with(link("a/link", "z/data"), Provenance::deb("link"));
    t.insert_with(link("m/link", "z/data"), Provenance::deb("other"));
    t.set_xattrs("z/data", cap());
    t.order_hardlinks();
    t.check_links().unwrap();
    assert_eq!(bytes(&t, "a/link"), Some(b"z/data".to_vec()));
    assert_eq!(t.provenance_of("a/link"), Some(&Provenance::deb("carrier")));
    assert_eq!(t.xattrs("a/link"), cap().as_slice());
    assert_eq!(target(&t, "z/data").as_deref(), Some("a/link"));
    assert_eq!(target(&t, "m/link").as_deref(), Some("a/link"));
    assert_eq!(t.provenance_of("m/link"), Some(&Provenance::deb("other")));
}

#[test]
fn insert_and_stamp_set_provenance() {
    let mut t = Tree::new("files");
    t.insert(file("a"));
    assert_eq!(t.provenance_of("a"), Some(&Provenance::generated("files")));
    t.set_default_provenance(Provenance::Rootfs);
    t.insert(file("b/c"));
    t.add_missing_parents();
    assert_eq!(t.provenance_of("b"), Some(&Provenance::Rootfs));
    assert_eq!(t.provenance_of("a"), Some(&Provenance::generated("files")));
    // Replacing an entry replaces its provenance.
    t.insert_with(file("a"), Provenance::deb("x"));
    assert_eq!(t.provenance_of("a"), Some(&Provenance::deb("x")));
    assert!(t.set_provenance("b/c", Provenance::deb("y")));
    assert!(!t.set_provenance("nope", Provenance::deb("y")));
    assert_eq!(t.provenance_of("nope"), None);
    t.stamp(|e| (e.path == "b").then(|| Provenance::deb("dir")));
    let all: Vec<String> = t
        .iter_with_provenance()
        .map(|(e, p)| format!("{} {p}", e.path))
        .collect();
    assert_eq!(all, ["a deb x", "b deb dir", "b/c deb y"]);
    t.stamp_all(Provenance::Rootfs);
    assert!(t
        .iter_with_provenance()
        .all(|(_, p)| *p == Provenance::Rootfs));
    assert_eq!(t.default_provenance(), &Provenance::Rootfs);
    // Attributes are only ever kept for entries the tree holds.
    t.set_xattrs("nope", cap());
    assert!(t.xattrs("nope").is_empty());
}
