//! The tree passes' tests: a wheel layer's pass order, what `apply` returns and what it adds
//! to a layer's sizes.

use std::sync::Arc;

use super::*;
use gpuimg_assemble::{DataSource, Entry, EntryKind, Provenance};
use gpuimg_fetch::observe::Silent;

fn file(path: &str, bytes: &[u8]) -> Entry {
    Entry {
        path: path.to_string(),
        kind: EntryKind::File {
            size: bytes.len() as u64,
            data: DataSource::Bytes(Arc::new(bytes.to_vec())),
        },
        mode: 0o644,
        uid: 0,
        gid: 0,
    }
}

#[test]
fn a_wheel_layer_strips_by_path_then_prunes_then_cuts_sections() {
    let gpus = vec!["9.0".parse::<Version>().unwrap()];
    assert_eq!(
        TreePass::for_wheels(
            &[
                StripClass::DebugSymbols,
                StripClass::Docs,
                StripClass::DeviceCode
            ],
            &gpus
        ),
        [
            TreePass::Strip(vec![
                StripClass::DebugSymbols,
                StripClass::Docs,
                StripClass::DeviceCode
            ]),
            TreePass::DeviceCode(gpus.clone()),
            TreePass::DebugSections,
        ]
    );
    assert_eq!(
        TreePass::for_wheels(&[StripClass::Docs], &gpus),
        [TreePass::Strip(vec![StripClass::Docs])]
    );
}

#[test]
fn apply_returns_what_strip_removed_and_keeps_protected_paths() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    let mut tree = Tree::new("test");
    for (path, bytes) in [
        ("usr/share/doc/p/README", &b"docs"[..]),
        ("usr/share/doc/q/README", b"kept"),
        ("usr/bin/p", b"prog"),
    ] {
        tree.insert_with(file(path, bytes), Provenance::deb("p"));
    }
    tree.add_missing_parents();
    let protect = HashSet::from(["usr/share/doc/q/README".to_string()]);
    let applied = apply(
        &mut tree,
        &[TreePass::Strip(vec![StripClass::Docs])],
        &PassContext {
            rules: &Rules::default(),
            protect: &protect,
            cache: &cache,
            what: "the test tree",
        },
        &mut Silent,
    )
    .unwrap();
    assert_eq!(
        applied.stripped.removed.iter().collect::<Vec<_>>(),
        ["usr/share/doc/p/README"]
    );
    assert!(applied.pruned.is_empty() && applied.sections.is_empty());
    let paths: Vec<&str> = tree.iter().map(|e| e.path.as_str()).collect();
    assert!(paths.contains(&"usr/share/doc/q/README") && paths.contains(&"usr/bin/p"));
    assert!(!paths.contains(&"usr/share/doc/p/README"));

    let mut sizes = LayerSizes::default();
    applied.add_sizes(&mut sizes);
    assert_eq!(sizes.stripped["docs"].entries, 1);
    assert_eq!(sizes.stripped["docs"].bytes, 4);
    assert!(sizes.device_code.is_empty());
}

#[test]
fn sizes_count_pruned_and_cut_libraries() {
    let applied = Applied {
        pruned: vec![PrunedFile {
            path: "site-packages/a/liba.so".into(),
            entries: 5,
            kept: 2,
            zeroed: 300,
            kept_targets: vec![],
        }],
        sections: vec![StrippedFile {
            path: "site-packages/a/liba.so".into(),
            owner: "a".into(),
            sections: 4,
            removed: 1000,
        }],
        ..Applied::default()
    };
    let mut sizes = LayerSizes::default();
    applied.add_sizes(&mut sizes);
    let dc = sizes.device_code["/site-packages/a/liba.so"];
    assert_eq!((dc.entries, dc.bytes), (3, 300));
    let ds = sizes.stripped["debug-symbols"];
    assert_eq!((ds.entries, ds.bytes), (4, 1000));
}

/// Rules under which the files of a site directory's `pkg/` may be modified (or not).
fn terms(modify: bool) -> Rules {
    Rules {
        terms: vec![crate::strip::Terms {
            path: crate::strip::PathPattern::parse("pkg"),
            package: "pkg".into(),
            licence: "test".into(),
            modify,
            remove: true,
        }],
        ..Rules::default()
    }
}

/// Where the test's library lies in its tree (the terms' patterns match below a site
/// directory).
const LIB: &str = "usr/lib/python3/site-packages/pkg/libt.so";

/// A tree holding `lib` at [`LIB`].
fn library_tree(lib: &std::path::Path) -> Tree {
    let mut tree = Tree::new("test");
    let meta = std::fs::metadata(lib).unwrap();
    let mut e = file(LIB, b"");
    e.kind = EntryKind::File {
        size: meta.len(),
        data: DataSource::file(lib.to_path_buf(), &meta),
    };
    tree.insert_with(e, Provenance::file(lib));
    tree.add_missing_parents();
    tree
}

fn source_of(tree: &Tree, path: &str) -> std::path::PathBuf {
    tree.iter()
        .find_map(|e| match &e.kind {
            EntryKind::File {
                data: DataSource::Path { path: p, .. },
                ..
            } if e.path == path => Some(p.clone()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn debug_sections_go_into_a_cached_copy_only_where_the_terms_allow() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("lib.c");
    std::fs::write(&src, "int visible(int x) { return x + 1; }\n").unwrap();
    let lib = dir.path().join("libt.so");
    let st = std::process::Command::new("gcc")
        .args(["-g", "-O1", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("gcc must be installed (scripts/install-deps.sh)");
    assert!(st.success());
    let cache = Cache::open(&dir.path().join("cache")).unwrap();
    let none = HashSet::new();
    let run = |rules: &Rules| {
        let mut tree = library_tree(&lib);
        let ctx = PassContext {
            rules,
            protect: &none,
            cache: &cache,
            what: "the test tree",
        };
        let applied = apply(&mut tree, &[TreePass::DebugSections], &ctx, &mut Silent).unwrap();
        (applied, source_of(&tree, LIB))
    };
    // Terms that forbid modification: the original stays, nothing is written.
    let (applied, src_path) = run(&terms(false));
    assert!(applied.sections.is_empty());
    assert_eq!(src_path, lib);
    // Terms that allow it: the tree points at a smaller copy in the cache's blobs.
    let (applied, copy) = run(&terms(true));
    assert_eq!(applied.sections.len(), 1, "{applied:?}");
    assert!(applied.sections[0].removed > 0);
    assert!(
        copy.starts_with(cache.dir(gpuimg_store::cache::Bucket::Blobs)),
        "{copy:?}"
    );
    assert!(std::fs::metadata(&copy).unwrap().len() < std::fs::metadata(&lib).unwrap().len());
    // A second tree of the same file finds the same copy.
    let (again, copy2) = run(&terms(true));
    assert_eq!((again.sections, copy2), (applied.sections, copy));
}
