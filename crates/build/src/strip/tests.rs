//! The strip stage's tests: hard links, each class's rule, the catalog's keep and remove
//! paths, licence terms.

use std::sync::Arc;

use super::*;
use gpuimg_assemble::{DataSource, Entry, EntryKind, Provenance};

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
        let n = strip(&mut t, classes, &Rules::default(), &HashSet::new()).count();
        assert_eq!(n, before - t.len());
        t.check_links().unwrap();
        assert_eq!(shape(&t), want, "{entries:?} {classes:?}");
    }
    // The promoted link carries the stripped carrier's provenance.
    let mut t = tree(&[(doc, None), (lib, Some(doc))]);
    strip(
        &mut t,
        &[StripClass::Docs],
        &Rules::default(),
        &HashSet::new(),
    );
    assert_eq!(
        t.provenance_of(lib),
        Some(&Provenance::deb(format!("pkg-{doc}")))
    );
}

const SITE: &str = "usr/local/lib/python3.11/dist-packages";

fn file(path: &str) -> Entry {
    Entry {
        path: path.to_string(),
        kind: EntryKind::File {
            size: 1,
            data: DataSource::Bytes(Arc::new(vec![b'x'])),
        },
        mode: 0o644,
        uid: 0,
        gid: 0,
    }
}

fn dir(path: &str) -> Entry {
    Entry {
        kind: EntryKind::Dir,
        mode: 0o755,
        ..file(path)
    }
}

/// Whether `class` alone, with `rules`, removes the entry (in a tree holding `others` too).
fn removes_with(class: StripClass, e: Entry, rules: &Rules, others: &[&str]) -> bool {
    let mut t = Tree::new("t");
    for o in others {
        t.insert(file(o));
    }
    let path = e.path.clone();
    t.insert(e);
    t.add_missing_parents();
    strip(&mut t, &[class], rules, &HashSet::new())
        .removed
        .contains(&path)
}

fn removes(class: StripClass, e: Entry) -> bool {
    removes_with(class, e, &Rules::default(), &[])
}

fn site(rel: &str) -> String {
    format!("{SITE}/{rel}")
}

#[test]
fn each_class_removes_its_paths_and_nothing_near_them() {
    use StripClass::*;
    let yes: &[(StripClass, Entry)] = &[
        (Docs, file("usr/share/doc/libc6/changelog.gz")),
        (Docs, file("usr/local/share/doc/demo/README")),
        (Man, file("usr/share/man/man1/ls.1.gz")),
        (Man, file("usr/local/share/man/man1/demo.1")),
        (Locales, file("usr/share/locale/de/LC_MESSAGES/x.mo")),
        (Headers, file("usr/include/stdio.h")),
        (Headers, dir(&site("numpy/_core/include"))),
        (
            Headers,
            file(&site("numpy/_core/include/numpy/arrayobject.h")),
        ),
        (Headers, file(&site("torch/include/ATen/ATen.h"))),
        (Headers, file(&site("pkg/stray.cuh"))),
        (StaticLibs, file("usr/lib/x86_64-linux-gnu/libc.a")),
        (
            StaticLibs,
            file(&site("triton/backends/nvidia/lib/cupti/libcupti_static.a")),
        ),
        (StaticLibs, file(&site("pkg/libfoo.dll.a"))),
        (DebugSymbols, file("usr/lib/debug/.build-id/ab/cdef.debug")),
        (DebugSymbols, file(&site("pkg/_ext.so.debug"))),
        (
            BuildFiles,
            file("usr/lib/x86_64-linux-gnu/cmake/Foo/FooConfig.cmake"),
        ),
        (BuildFiles, dir("usr/lib/x86_64-linux-gnu/pkgconfig")),
        (BuildFiles, file("usr/share/pkgconfig/foo.pc")),
        (BuildFiles, file("usr/lib/x86_64-linux-gnu/libfoo.la")),
        (BuildFiles, dir(&site("torch/share/cmake"))),
        (
            BuildFiles,
            file(&site("torch/share/cmake/Torch/TorchConfig.cmake")),
        ),
        (PythonCaches, dir(&site("pkg/__pycache__"))),
        (
            PythonCaches,
            file(&site("pkg/__pycache__/mod.cpython-311.pyc")),
        ),
        (
            PythonCaches,
            file("usr/lib/python3.11/__pycache__/os.cpython-311.pyc"),
        ),
        (Tests, dir(&site("pkg/tests"))),
        (Tests, file(&site("pkg/tests/test_a.py"))),
        (Tests, file(&site("pkg/sub/test/data.bin"))),
        (TypeStubs, file(&site("pkg/__init__.pyi"))),
    ];
    for (class, e) in yes {
        assert!(removes(*class, e.clone()), "{class:?} keeps {}", e.path);
    }
    let no: &[(StripClass, Entry)] = &[
        (Docs, file("usr/share/doc/libc6/copyright")),
        (Docs, dir("usr/share/doc/libc6")),
        (Docs, file(&site("pkg/docs/index.py"))),
        (Man, file("usr/share/manual")),
        (Locales, file("usr/share/locale/locale.alias")),
        (Headers, file(&site("pkg/include.py"))),
        // A top-level package named `include` is imported as such.
        (Headers, dir(&site("include"))),
        (StaticLibs, file("etc/data.a")),
        (StaticLibs, file(&site("pkg/data.a.py"))),
        (BuildFiles, file(&site("cmake/__init__.py"))),
        (BuildFiles, file("usr/share/cmake-3.25/Modules/X.txt")),
        (BuildFiles, file("usr/bin/pc")),
        (PythonCaches, file(&site("pkg/mod.py"))),
        (Tests, file(&site("tests/__init__.py"))),
        (Tests, file(&site("pkg/test_util.py"))),
        (Tests, file(&site("pkg/tests.py"))),
        (Tests, file(&site("pkg/testing/__init__.py"))),
        (Tests, file("usr/lib/python3.11/test/support/__init__.py")),
        (TypeStubs, file(&site("pkg/py.typed"))),
        (
            OtherGpuBackends,
            file(&site("triton/backends/amd/driver.py")),
        ),
        // Package records and licences stay, whatever the class.
        (Tests, file(&site("tests-1.0.dist-info/RECORD"))),
        (Tests, file(&site("pkg/tests/LICENSE"))),
        (TypeStubs, file(&site("pkg-1.0.dist-info/licenses/x.pyi"))),
        (
            UnusedLibraries,
            file("usr/lib/x86_64-linux-gnu/libfoo.so.1"),
        ),
        (DeviceCode, file(&site("torch/lib/libtorch_cuda.so"))),
    ];
    for (class, e) in no {
        assert!(!removes(*class, e.clone()), "{class:?} removes {}", e.path);
    }
}

#[test]
fn python_caches_keep_what_gpuimg_compiled_and_sourceless_modules() {
    use StripClass::PythonCaches;
    let compiled = Rules {
        compiled_tag: Some("cpython-311".into()),
        ..Rules::default()
    };
    let pyc = site("pkg/__pycache__/mod.cpython-311.pyc");
    assert!(!removes_with(PythonCaches, file(&pyc), &compiled, &[]));
    assert!(!removes_with(
        PythonCaches,
        dir(&site("pkg/__pycache__")),
        &compiled,
        &[]
    ));
    // Another interpreter's bytecode is not what the image loads.
    let other = site("pkg/__pycache__/mod.cpython-312.pyc");
    assert!(removes_with(PythonCaches, file(&other), &compiled, &[]));
    // A legacy `.pyc` beside its source is stray; alone it is the module.
    let legacy = site("pkg/mod.pyc");
    assert!(removes_with(
        PythonCaches,
        file(&legacy),
        &compiled,
        &[&site("pkg/mod.py")]
    ));
    assert!(removes_with(
        PythonCaches,
        file(&legacy),
        &Rules::default(),
        &[&site("pkg/mod.py")]
    ));
    assert!(!removes_with(
        PythonCaches,
        file(&legacy),
        &Rules::default(),
        &[]
    ));
}

fn catalog_rules() -> Rules {
    Rules {
        remove: vec![
            (
                StripClass::OtherGpuBackends,
                PathPattern::parse("triton/backends/amd"),
            ),
            (
                StripClass::BuildFiles,
                PathPattern::parse("triton/backends/nvidia/bin/cuobjdump"),
            ),
        ],
        keep: vec![
            (
                StripClass::Headers,
                PathPattern::parse("triton/backends/nvidia/include"),
            ),
            (StripClass::Tests, PathPattern::parse("torch/testing")),
        ],
        terms: vec![
            Terms {
                path: PathPattern::parse("triton/backends/nvidia/bin"),
                package: "triton".into(),
                licence: "NVIDIA CUDA Toolkit EULA".into(),
                modify: false,
                remove: true,
            },
            Terms {
                path: PathPattern::parse("/opt/vendor/blob"),
                package: "vendor".into(),
                licence: "ship-whole".into(),
                modify: false,
                remove: false,
            },
            Terms {
                path: PathPattern::parse("triton"),
                package: "triton".into(),
                licence: "MIT".into(),
                modify: true,
                remove: true,
            },
        ],
        compiled_tag: None,
        unused: Default::default(),
    }
}

#[test]
fn the_catalogs_paths_widen_and_narrow_a_class() {
    let r = catalog_rules();
    use StripClass::*;
    assert!(removes_with(
        OtherGpuBackends,
        dir(&site("triton/backends/amd")),
        &r,
        &[]
    ));
    assert!(removes_with(
        OtherGpuBackends,
        file(&site("triton/backends/amd/lib/ld.lld")),
        &r,
        &[]
    ));
    assert!(!removes_with(
        OtherGpuBackends,
        file(&site("triton/backends/nvidia/driver.py")),
        &r,
        &[]
    ));
    assert!(removes_with(
        BuildFiles,
        file(&site("triton/backends/nvidia/bin/cuobjdump")),
        &r,
        &[]
    ));
    // ptxas is named nowhere: every class keeps it.
    for c in [BuildFiles, OtherGpuBackends, DebugSymbols, Headers] {
        assert!(!removes_with(
            c,
            file(&site("triton/backends/nvidia/bin/ptxas")),
            &r,
            &[]
        ));
    }
    assert!(!removes_with(
        Headers,
        file(&site("triton/backends/nvidia/include/cuda.h")),
        &r,
        &[]
    ));
    assert!(removes_with(
        Headers,
        file(&site("torch/include/c10/c10.h")),
        &r,
        &[]
    ));
    assert!(!removes_with(
        Tests,
        file(&site("torch/testing/_internal/common.py")),
        &r,
        &[]
    ));
    assert!(!removes_with(
        Tests,
        dir(&site("torch/testing/test")),
        &r,
        &[]
    ));
    assert!(removes_with(Tests, dir(&site("torch/fx/tests")), &r, &[]));
}

#[test]
fn licence_terms_are_by_file_and_decide_what_may_change() {
    let r = catalog_rules();
    let ptxas = site("triton/backends/nvidia/bin/ptxas");
    assert_eq!(
        r.terms_of(&ptxas).unwrap().licence,
        "NVIDIA CUDA Toolkit EULA"
    );
    assert!(!r.may_modify(&ptxas) && r.may_remove(&ptxas));
    let compiler = site("triton/compiler/compiler.py");
    assert_eq!(r.terms_of(&compiler).unwrap().licence, "MIT");
    assert!(r.may_modify(&compiler));
    // Unknown terms: removal allowed, modification not.
    let other = site("requests/api.py");
    assert!(r.terms_of(&other).is_none() && r.may_remove(&other) && !r.may_modify(&other));
    // Terms that forbid leaving a file out keep it from every class, with its directories.
    let mut t = Tree::new("t");
    t.insert(file("opt/vendor/blob/include/x.h"));
    t.insert(file("usr/include/y.h"));
    t.add_missing_parents();
    let s = strip(&mut t, &[StripClass::Headers], &r, &HashSet::new());
    assert!(t.get("opt/vendor/blob/include/x.h").is_some());
    assert_eq!(
        s.removed.into_iter().collect::<Vec<_>>(),
        ["usr/include", "usr/include/y.h"]
    );
}

#[test]
fn protected_paths_and_licences_stay_with_their_directories() {
    let mut t = Tree::new("t");
    for p in [
        "usr/share/doc/p/changelog.gz",
        "usr/share/doc/p/copyright",
        &site("pkg/tests/a.py"),
        &site("pkg/tests/LICENSE.txt"),
        &site("pkg/include/keep.h"),
        &site("pkg/include/other.h"),
    ] {
        t.insert(file(p));
    }
    t.add_missing_parents();
    let protect: HashSet<String> = [site("pkg/include/keep.h")].into_iter().collect();
    let s = strip(
        &mut t,
        &[StripClass::Docs, StripClass::Tests, StripClass::Headers],
        &Rules::default(),
        &protect,
    );
    for kept in [
        "usr/share/doc/p/copyright",
        "usr/share/doc/p",
        &site("pkg/tests/LICENSE.txt"),
        &site("pkg/tests"),
        &site("pkg/include/keep.h"),
        &site("pkg/include"),
    ] {
        assert!(t.get(kept).is_some(), "{kept}");
    }
    let removed: Vec<&str> = s.removed.iter().map(String::as_str).collect();
    assert_eq!(
        removed,
        [
            "usr/local/lib/python3.11/dist-packages/pkg/include/other.h",
            "usr/local/lib/python3.11/dist-packages/pkg/tests/a.py",
            "usr/share/doc/p/changelog.gz",
        ]
    );
    t.check_links().unwrap();
    gpuimg_assemble::shape::check(&t).unwrap();
}

#[test]
fn what_is_removed_is_counted_per_class_and_owner() {
    let doc = "usr/share/doc/p/README";
    let man = "usr/share/man/man1/p.1";
    let kept = "usr/lib/p/data";
    // The man page's data is also held by a kept link: it goes as an entry, its bytes stay.
    let mut t = tree(&[(doc, None), (man, None), (kept, Some(man))]);
    let s = strip(
        &mut t,
        &[StripClass::Docs, StripClass::Man],
        &Rules::default(),
        &HashSet::new(),
    );
    // The two files, and the directories that held only them.
    assert!(s.removed.contains(doc) && s.removed.contains(man) && !s.removed.contains(kept));
    assert_eq!(s.entries(), s.count() as u64);
    let docs = s.by_class[&(StripClass::Docs, Provenance::deb(format!("pkg-{doc}")))];
    assert_eq!((docs.entries, docs.bytes), (1, 1));
    let man_r = s.by_class[&(StripClass::Man, Provenance::deb(format!("pkg-{man}")))];
    assert_eq!((man_r.entries, man_r.bytes), (1, 0));
}
