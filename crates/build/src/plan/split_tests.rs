//! Tests of `split`: hand-made trees (hard links across owners, xattrs, unowned files, nested
//! directories) and a property test that the output trees add up to the input.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use gpuimg_assemble::{DataSource, Entry, Provenance};

fn entry(path: &str, kind: EntryKind, mode: u32) -> Entry {
    Entry {
        path: path.to_string(),
        kind,
        mode,
        uid: 0,
        gid: 0,
    }
}

fn dir(path: &str) -> Entry {
    entry(path, EntryKind::Dir, 0o755)
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
        0o644,
    )
}

fn link(path: &str, target: &str) -> Entry {
    entry(
        path,
        EntryKind::Hardlink {
            target: target.to_string(),
        },
        0o644,
    )
}

fn symlink(path: &str, target: &str) -> Entry {
    entry(
        path,
        EntryKind::Symlink {
            target: target.to_string(),
        },
        0o777,
    )
}

fn tree(entries: Vec<Entry>) -> Tree {
    let mut t = Tree::new("apt packages");
    for e in entries {
        t.insert(e);
    }
    t
}

fn owners(v: &[(&str, &str)]) -> HashMap<String, String> {
    v.iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect()
}

fn order(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Component → its paths, in layer order.
fn paths(out: &[(String, Tree)]) -> Vec<(&str, Vec<&str>)> {
    out.iter()
        .map(|(c, t)| (c.as_str(), t.iter().map(|e| e.path.as_str()).collect()))
        .collect()
}

/// Everything an entry carries, as text (entries have no `PartialEq`: their data may live on
/// disk).
fn fingerprint(t: &Tree, e: &Entry) -> String {
    format!(
        "{:?} {:?} {:?}",
        e,
        t.xattrs(&e.path),
        t.provenance_of(&e.path)
    )
}

#[test]
fn entries_go_to_their_owners_and_unowned_ones_to_metadata() {
    let t = tree(vec![
        dir("etc"),
        file("etc/passwd"),
        file("etc/ld.so.cache"),
        dir("usr"),
        dir("usr/bin"),
        file("usr/bin/bash"),
        file("usr/bin/python3.11"),
        symlink("usr/bin/python3", "python3.11"),
        dir("var"),
        dir("var/lib"),
        dir("var/lib/dpkg"),
        file("var/lib/dpkg/status"),
        file("usr/bin/xz"),
    ]);
    let own = owners(&[
        ("usr", "os"),
        ("usr/bin", "os"),
        ("usr/bin/bash", "os"),
        ("usr/bin/python3.11", "python"),
        ("usr/bin/python3", "python"),
        ("usr/bin/xz", "packages"),
    ]);
    let out = split(t, &own, &order(&["os", "python", "packages"]), "metadata").unwrap();
    assert_eq!(
        paths(&out),
        [
            ("os", vec!["usr", "usr/bin", "usr/bin/bash"]),
            (
                "python",
                vec!["usr", "usr/bin", "usr/bin/python3", "usr/bin/python3.11"]
            ),
            ("packages", vec!["usr", "usr/bin", "usr/bin/xz"]),
            (
                "metadata",
                vec![
                    "etc",
                    "etc/ld.so.cache",
                    "etc/passwd",
                    "var",
                    "var/lib",
                    "var/lib/dpkg",
                    "var/lib/dpkg/status"
                ]
            ),
        ]
    );
    assert_eq!(out[1].1.origin, "`apt packages` layer `python`");
}

#[test]
fn hard_links_stay_with_their_data_carrier() {
    let t = tree(vec![
        dir("usr"),
        dir("usr/bin"),
        file("usr/bin/perl5.36"),
        link("usr/bin/perl", "usr/bin/perl5.36"),
        dir("usr/share"),
        file("usr/share/a"),
        link("usr/share/b", "usr/share/a"),
        link("usr/share/c", "usr/share/a"),
        file("etc-generated"),
        link("usr/share/gen", "etc-generated"),
    ]);
    // The links are owned elsewhere (or not at all); the groups must not be torn apart.
    let own = owners(&[
        ("usr/bin/perl5.36", "os"),
        ("usr/bin/perl", "packages"),
        ("usr/share/a", "packages"),
        ("usr/share/b", "os"),
        ("usr/share/gen", "os"),
    ]);
    let out = split(t, &own, &order(&["os", "packages"]), "metadata").unwrap();
    assert_eq!(
        paths(&out),
        [
            (
                "os",
                vec!["usr", "usr/bin", "usr/bin/perl", "usr/bin/perl5.36"]
            ),
            (
                "packages",
                vec![
                    "usr",
                    "usr/share",
                    "usr/share/a",
                    "usr/share/b",
                    "usr/share/c"
                ]
            ),
            (
                "metadata",
                vec!["etc-generated", "usr", "usr/share", "usr/share/gen"]
            ),
        ]
    );
    for (_, t) in &out {
        t.check_links().unwrap();
    }
}

#[test]
fn xattrs_travel_with_their_entries_and_directory_copies() {
    let mut t = tree(vec![
        dir("usr"),
        dir("usr/bin"),
        file("usr/bin/ping"),
        file("usr/bin/ls"),
        file("usr/bin/gen"),
    ]);
    let cap = ("security.capability".to_string(), vec![1, 2, 3]);
    t.set_xattrs("usr/bin/ping", [cap.clone()]);
    t.set_xattrs("usr/bin", [("user.note".to_string(), b"bin".to_vec())]);
    let mut usr = t.get("usr").unwrap().clone();
    usr.mode = 0o700;
    usr.uid = 7;
    t.insert(usr);
    let own = owners(&[("usr/bin/ping", "packages"), ("usr/bin/ls", "os")]);
    let out = split(t, &own, &order(&["os", "packages"]), "metadata").unwrap();
    assert_eq!(out.len(), 3);
    for (c, t) in &out {
        assert_eq!(
            t.xattrs("usr/bin"),
            [("user.note".to_string(), b"bin".to_vec())],
            "{c}"
        );
        let u = t.get("usr").unwrap();
        assert_eq!((u.mode, u.uid), (0o700, 7), "{c}");
    }
    assert_eq!(out[1].1.xattrs("usr/bin/ping"), [cap]);
    assert!(out[0].1.xattrs("usr/bin/ls").is_empty());
    assert!(out[2].1.get("usr/bin/gen").is_some());
}

#[test]
fn directories_follow_owners_and_contents() {
    let t = tree(vec![
        dir("opt"),
        dir("opt/empty-owned"),
        dir("opt/empty-unowned"),
        dir("opt/shared"),
        file("opt/shared/py"),
        dir("a"),
        dir("a/b"),
        dir("a/b/c"),
        dir("a/b/c/d"),
        file("a/b/c/d/deep"),
    ]);
    let own = owners(&[
        ("opt/empty-owned", "python"),
        // Owned by os, but only python puts files there: os still gets it (what an os layer
        // holds depends on os packages only), python gets it as the parent of its file.
        ("opt/shared", "os"),
        ("opt/shared/py", "python"),
        ("a/b/c/d/deep", "os"),
    ]);
    let out = split(t, &own, &order(&["os", "python"]), "metadata").unwrap();
    assert_eq!(
        paths(&out),
        [
            (
                "os",
                vec![
                    "a",
                    "a/b",
                    "a/b/c",
                    "a/b/c/d",
                    "a/b/c/d/deep",
                    "opt",
                    "opt/shared"
                ]
            ),
            (
                "python",
                vec!["opt", "opt/empty-owned", "opt/shared", "opt/shared/py"]
            ),
            ("metadata", vec!["opt", "opt/empty-unowned"]),
        ]
    );
}

#[test]
fn empty_components_are_dropped_and_metadata_may_sit_in_the_order() {
    let t = tree(vec![file("x"), file("y")]);
    let own = owners(&[("x", "packages")]);
    let out = split(
        t.clone(),
        &own,
        &order(&["os", "python", "packages"]),
        "metadata",
    )
    .unwrap();
    assert_eq!(
        paths(&out),
        [("packages", vec!["x"]), ("metadata", vec!["y"])]
    );
    let out = split(t, &own, &order(&["metadata", "packages"]), "metadata").unwrap();
    assert_eq!(
        paths(&out),
        [("metadata", vec!["y"]), ("packages", vec!["x"])]
    );
    let out = split(Tree::new("none"), &own, &order(&["os"]), "metadata").unwrap();
    assert!(out.is_empty());
}

#[test]
fn provenance_travels_with_entries_and_directory_copies() {
    let mut t = tree(vec![
        dir("usr"),
        dir("usr/lib"),
        file("usr/lib/libc.so.6"),
        file("usr/lib/libpython3.so"),
        link("usr/lib/libpython3.so.1", "usr/lib/libpython3.so"),
        file("etc/ld.so.cache"),
    ]);
    t.add_missing_parents();
    t.stamp(|e| {
        let pkg = match e.path.as_str() {
            "usr/lib/libc.so.6" | "usr/lib" | "usr" => "libc6",
            p if p.starts_with("usr/lib/libpython") => "libpython3",
            _ => return None,
        };
        Some(Provenance::deb(pkg))
    });
    let own = owners(&[
        ("usr/lib/libc.so.6", "os"),
        ("usr/lib/libpython3.so", "python"),
        ("usr/lib/libpython3.so.1", "python"),
    ]);
    let out = split(t, &own, &order(&["os", "python"]), "metadata").unwrap();
    let of = |c: &str, p: &str| {
        let (_, t) = out.iter().find(|(n, _)| n == c).unwrap();
        t.provenance_of(p).map(ToString::to_string)
    };
    assert_eq!(of("os", "usr/lib/libc.so.6").as_deref(), Some("deb libc6"));
    assert_eq!(of("os", "usr/lib").as_deref(), Some("deb libc6"));
    // The directory's copy in another layer keeps its provenance.
    assert_eq!(of("python", "usr/lib").as_deref(), Some("deb libc6"));
    assert_eq!(
        of("python", "usr/lib/libpython3.so.1").as_deref(),
        Some("deb libpython3")
    );
    // Entries nobody stamped keep the input tree's default.
    assert_eq!(
        of("metadata", "etc/ld.so.cache").as_deref(),
        Some("generated by apt packages")
    );
    assert_eq!(
        of("metadata", "etc").as_deref(),
        Some("generated by apt packages")
    );
    for (_, t) in &out {
        assert_eq!(
            t.default_provenance(),
            &Provenance::generated("apt packages")
        );
    }
}

#[test]
fn bad_input_is_refused() {
    let e = split(
        tree(vec![file("x")]),
        &owners(&[("x", "tools")]),
        &order(&["os"]),
        "metadata",
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "`apt packages`: `x` is owned by component `tools`, which is not in the layer order"
    );
    let e = split(
        tree(vec![link("x", "gone")]),
        &HashMap::new(),
        &order(&["os"]),
        "metadata",
    )
    .unwrap_err();
    assert!(matches!(e, SplitError::Links(_)), "{e}");
    assert!(e.to_string().contains("`gone`"), "{e}");
}

/// A random tree: paths over a small alphabet (so that directories nest and share), some
/// hard links to earlier files, random owners among three components or none.
fn arb_case() -> impl Strategy<Value = (Tree, HashMap<String, String>)> {
    let path = prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 1..5)
        .prop_map(|v| v.join("/"));
    let item = (path, 0u8..6, 0usize..4, any::<bool>(), 0u32..3);
    prop::collection::vec(item, 1..40).prop_map(|items| {
        let mut t = Tree::new("random");
        let mut own = HashMap::new();
        let mut files: Vec<String> = Vec::new();
        for (path, kind, owner, xattr, mode) in items {
            // Keep a path a directory if a later entry lives under it.
            if t.get(&path).is_some() {
                continue;
            }
            let mut e = match kind {
                0 | 1 => dir(&path),
                2 if !files.is_empty() => link(&path, &files[path.len() % files.len()]),
                3 => symlink(&path, "elsewhere"),
                _ => file(&path),
            };
            e.mode |= mode;
            if matches!(e.kind, EntryKind::File { .. }) {
                files.push(path.clone());
            }
            t.insert(e);
            if xattr {
                t.set_xattrs(&path, [("user.k".to_string(), path.as_bytes().to_vec())]);
            }
            if let Some(c) = ["os", "python", "packages"].get(owner) {
                own.insert(path, c.to_string());
            }
        }
        // A path that got children must be a directory: make parents directories.
        let parents: Vec<String> = t
            .iter()
            .flat_map(|e| {
                e.path
                    .match_indices('/')
                    .map(|(i, _)| e.path[..i].to_string())
            })
            .collect();
        for p in parents {
            if t.get(&p).is_some_and(|e| !matches!(e.kind, EntryKind::Dir)) {
                t.insert(dir(&p));
            }
        }
        // Drop links whose carrier was turned into a directory.
        let dangling: Vec<String> = t
            .iter()
            .filter(|e| match &e.kind {
                EntryKind::Hardlink { target } => {
                    !matches!(t.get(target).map(|x| &x.kind), Some(EntryKind::File { .. }))
                }
                _ => false,
            })
            .map(|e| e.path.clone())
            .collect();
        for p in dangling {
            t.remove(&p);
        }
        (t, own)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn outputs_add_up_to_the_input((mut t, own) in arb_case()) {
        prop_assume!(t.check_links().is_ok());
        // Provenance varies by entry, independently of the owners.
        t.stamp(|e| Some(Provenance::deb(format!("pkg{}", e.path.len() % 3))));
        let input: BTreeMap<String, String> =
            t.iter().map(|e| (e.path.clone(), fingerprint(&t, e))).collect();
        let dirs: Vec<String> = t
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::Dir))
            .map(|e| e.path.clone())
            .collect();
        let out = split(t, &own, &order(&["os", "python", "packages"]), "metadata").unwrap();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (c, ct) in &out {
            prop_assert!(!ct.is_empty());
            prop_assert!(ct.check_links().is_ok());
            for e in ct.iter() {
                // Every output entry is the input's entry, unchanged.
                prop_assert_eq!(Some(&fingerprint(ct, e)), input.get(&e.path));
                *seen.entry(e.path.clone()).or_default() += 1;
                // Non-directories go to their owner (links: their carrier's owner).
                let by = match &e.kind {
                    EntryKind::Dir => continue,
                    EntryKind::Hardlink { target } => target,
                    _ => &e.path,
                };
                prop_assert_eq!(own.get(by).map_or("metadata", String::as_str), c.as_str());
                // Its parents in the input are in the same layer.
                let mut p = e.path.as_str();
                while let Some(i) = p.rfind('/') {
                    p = &p[..i];
                    prop_assert!(!input.contains_key(p) || ct.get(p).is_some(), "{}", p);
                }
            }
        }
        // An owned directory is in its owner's layer.
        for d in &dirs {
            if let Some(c) = own.get(d) {
                let layer = out.iter().find(|(n, _)| n == c);
                prop_assert!(layer.is_some_and(|(_, t)| t.get(d).is_some()), "{} not in {}", d, c);
            }
        }
        // Every input entry is in some output; non-directories in exactly one.
        prop_assert_eq!(seen.len(), input.len());
        for (p, n) in &seen {
            prop_assert!(dirs.contains(p) || *n == 1, "{} in {} layers", p, n);
        }
    }
}
