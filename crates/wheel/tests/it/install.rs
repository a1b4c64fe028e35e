//! The wheel installer (`gpuimg_wheel::install`) on wheels the tests write: where every
//! scheme's files land, launchers for entry points, `INSTALLER`/`REQUESTED`/`RECORD` as
//! installed, modes, provenance, reproducibility, `.pyc` compilation; and the refusals, each
//! naming the wheel and the path: `../` and absolute names, symlinks, a `RECORD` whose hash or
//! size lies, a file missing from `RECORD`, an entry larger than its zip header says, a name
//! twice, a directory of millions of entries (refused from its end record, memory measured),
//! a version or `Requires-Dist` that is not what resolution used (a poisoned PEP 658 file
//! served by a loopback index).

use crate::common;
use crate::common::{heap, wheel_zip};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use gpuimg_assemble::{DataSource, EntryKind, Tree};
use gpuimg_fetch::observe::Observer;
use gpuimg_pypi::ImagePython;
use gpuimg_pypi::{FetchedWheel, PinnedWheel};
use gpuimg_wheel::{self as wheel, HostPython, WheelError};

const SITE: &str = "usr/local/lib/python3.11/dist-packages";

fn bookworm() -> ImagePython {
    ImagePython {
        version: (3, 11),
        full_version: "3.11.2".into(),
        interpreter: "/usr/bin/python3.11".into(),
        site_dir: format!("/{SITE}"),
        scripts_dir: "/usr/local/bin".into(),
        glibc: (2, 36),
        machine: "x86_64".into(),
    }
}

/// Keeps warnings.
#[derive(Default)]
struct Warnings(Vec<String>);

impl Observer for Warnings {
    fn message(&mut self, _: &str) {}
    fn warn(&mut self, text: &str) {
        self.0.push(text.to_string());
    }
    fn task_start(&mut self, _: &str, _: Option<u64>) {}
    fn task_progress(&mut self, _: u64) {}
    fn task_done(&mut self, _: &str, _: u64, _: &str) {}
}

fn install(
    wheels: &[FetchedWheel],
    compiler: Option<&HostPython>,
    staging: &Path,
) -> Result<(Tree, Vec<String>), WheelError> {
    let set: Vec<PinnedWheel> = wheels.iter().map(|w| w.pin.clone()).collect();
    install_of(wheels, &set, compiler, staging)
}

/// [`install`] of `wheels` out of the resolution `set`.
fn install_of(
    wheels: &[FetchedWheel],
    set: &[PinnedWheel],
    compiler: Option<&HostPython>,
    staging: &Path,
) -> Result<(Tree, Vec<String>), WheelError> {
    let mut w = Warnings::default();
    std::fs::create_dir_all(staging).unwrap();
    let t = wheel::install(wheels, set, &bookworm(), compiler, true, staging, &mut w)?;
    Ok((t, w.0))
}

/// path → (mode, provenance, content) of every entry (directories: empty content).
fn listing(tree: &Tree) -> BTreeMap<String, (u32, String, Vec<u8>)> {
    tree.iter_with_provenance()
        .map(|(e, p)| {
            let data = match &e.kind {
                EntryKind::File {
                    data: DataSource::Path { path, .. },
                    ..
                } => std::fs::read(path).unwrap(),
                EntryKind::File { size, .. } => tree.read_file(&e.path, *size).unwrap().unwrap(),
                EntryKind::Dir => Vec::new(),
                k => panic!("unexpected entry {}: {k:?}", e.path),
            };
            (e.path.clone(), (e.mode, p.to_string(), data))
        })
        .collect()
}

fn text(l: &BTreeMap<String, (u32, String, Vec<u8>)>, path: &str) -> String {
    let e = l
        .get(path)
        .unwrap_or_else(|| panic!("`{path}` is not installed: {:?}", l.keys()));
    String::from_utf8(e.2.clone()).unwrap()
}

fn demo() -> WheelSpec {
    WheelSpec::new("Demo-Pkg", "1.0")
        .file("demo_pkg/__init__.py", "VALUE = 1\n")
        .file("demo_pkg/cli.py", "def main():\n    print('hi')\n")
        .file_mode("demo_pkg/bin/helper", b"#!/bin/sh\necho helper\n", 0o100755)
        .file("Demo_Pkg-1.0.data/scripts/raw-tool", "#!python\nprint('raw')\n")
        .file("Demo_Pkg-1.0.data/scripts/sh-tool", "#!/bin/sh\necho sh\n")
        .file("Demo_Pkg-1.0.data/headers/demo.h", "int demo;\n")
        .file("Demo_Pkg-1.0.data/data/share/demo/readme.txt", "data\n")
        .file("Demo_Pkg-1.0.data/purelib/demo_extra.py", "X = 2\n")
        .file("Demo_Pkg-1.0.data/platlib/demo_native.py", "Y = 3\n")
        .entry_points(
            "[console_scripts]\ndemo = demo_pkg.cli:main\n[gui_scripts]\ndemo-gui = demo_pkg.cli:main\n[other]\nx = y:z\n",
        )
}

#[test]
fn a_wheel_installs_every_scheme_where_debian_pip_would() {
    let t = tempfile::tempdir().unwrap();
    let spec = demo();
    let w = spec.fetched(t.path(), true);
    let (tree, warnings) = install(&[w], None, &t.path().join("staging")).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let l = listing(&tree);
    let di = format!("{SITE}/Demo_Pkg-1.0.dist-info");

    assert_eq!(
        text(&l, &format!("{SITE}/demo_pkg/__init__.py")),
        "VALUE = 1\n"
    );
    assert_eq!(text(&l, &format!("{SITE}/demo_extra.py")), "X = 2\n");
    assert_eq!(text(&l, &format!("{SITE}/demo_native.py")), "Y = 3\n");
    assert_eq!(
        text(&l, "usr/local/include/python3.11/demo-pkg/demo.h"),
        "int demo;\n"
    );
    assert_eq!(text(&l, "usr/local/share/demo/readme.txt"), "data\n");
    assert_eq!(
        text(&l, "usr/local/bin/raw-tool"),
        "#!/usr/bin/python3.11\nprint('raw')\n",
        "`#!python` becomes the image's interpreter"
    );
    assert_eq!(text(&l, "usr/local/bin/sh-tool"), "#!/bin/sh\necho sh\n");
    let launcher = text(&l, "usr/local/bin/demo");
    assert!(
        launcher.starts_with("#!/usr/bin/python3.11\n"),
        "{launcher}"
    );
    assert!(
        launcher.contains("from demo_pkg.cli import main\n"),
        "{launcher}"
    );
    assert!(launcher.contains("sys.exit(main())"), "{launcher}");
    assert!(l.contains_key("usr/local/bin/demo-gui"));
    assert!(
        !l.contains_key("usr/local/bin/x"),
        "only script groups become scripts"
    );
    assert_eq!(text(&l, &format!("{di}/INSTALLER")), "gpuimg\n");
    assert_eq!(text(&l, &format!("{di}/REQUESTED")), "");
    assert!(text(&l, &format!("{di}/METADATA")).contains("Name: Demo-Pkg"));
    assert!(
        !l.keys()
            .any(|k| k.contains(".data/") || k.contains(".data")),
        "no `.data` directory is installed: {:?}",
        l.keys()
    );

    // Modes: scripts and executables 0755, the rest 0644, directories 0755.
    for (path, mode) in [
        ("usr/local/bin/raw-tool", 0o755),
        ("usr/local/bin/sh-tool", 0o755),
        ("usr/local/bin/demo", 0o755),
        (&format!("{SITE}/demo_pkg/bin/helper") as &str, 0o755),
        (&format!("{SITE}/demo_pkg/cli.py"), 0o644),
        (&format!("{di}/RECORD"), 0o644),
        (&format!("{SITE}/demo_pkg"), 0o755),
        ("usr", 0o755),
    ] {
        assert_eq!(l[path].0, mode, "{path}");
    }
    // Provenance: the wheel's files and directories name it; the scheme directories no one.
    assert_eq!(l[&format!("{SITE}/demo_pkg/cli.py")].1, "wheel demo-pkg");
    assert_eq!(l["usr/local/bin/demo"].1, "wheel demo-pkg");
    assert_eq!(l[&format!("{SITE}/demo_pkg")].1, "wheel demo-pkg");
    assert_eq!(l["usr/local/share/demo"].1, "wheel demo-pkg");
    assert_eq!(l[SITE].1, "generated by wheel installer");
    assert_eq!(l["usr/local/bin"].1, "generated by wheel installer");

    // RECORD lists every installed file of the wheel with its installed path, hash and size.
    let record = text(&l, &format!("{di}/RECORD"));
    let mut rows: BTreeMap<String, (String, String)> = BTreeMap::new();
    for line in record.lines() {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 3, "{line}");
        rows.insert(f[0].into(), (f[1].into(), f[2].into()));
    }
    assert_eq!(
        rows["Demo_Pkg-1.0.dist-info/RECORD"],
        (String::new(), String::new())
    );
    let mut listed = 0;
    for (path, (_, _, data)) in l.iter().filter(|(_, v)| v.1.starts_with("wheel")) {
        let rel = relative_to_site(path);
        if path.ends_with("/RECORD") || is_dir(&tree, path) {
            continue;
        }
        let (hash, size) = rows
            .get(&rel)
            .unwrap_or_else(|| panic!("`{rel}` is not in RECORD:\n{record}"));
        assert_eq!(hash, &record_hash(data), "{rel}");
        assert_eq!(size, &data.len().to_string(), "{rel}");
        listed += 1;
    }
    assert_eq!(
        listed + 1,
        rows.len(),
        "RECORD lists exactly the installed files:\n{record}"
    );
    assert!(rows.contains_key("../../../bin/demo"), "{record}");
    assert!(
        rows.contains_key("../../../include/python3.11/demo-pkg/demo.h"),
        "{record}"
    );
    let mut sorted: Vec<&str> = record.lines().collect();
    sorted.sort();
    assert_eq!(
        sorted,
        record.lines().collect::<Vec<_>>(),
        "RECORD rows are sorted"
    );
}

fn is_dir(tree: &Tree, path: &str) -> bool {
    matches!(tree.get(path).map(|e| &e.kind), Some(EntryKind::Dir))
}

fn relative_to_site(path: &str) -> String {
    match path.strip_prefix(&format!("{SITE}/")) {
        Some(r) => r.to_string(),
        None => format!("../../../{}", path.strip_prefix("usr/local/").unwrap()),
    }
}

#[test]
fn requested_only_for_the_profiles_own_requirements() {
    let t = tempfile::tempdir().unwrap();
    let w = WheelSpec::new("dep", "2.0")
        .file("dep.py", "")
        .fetched(t.path(), false);
    let (tree, _) = install(&[w], None, &t.path().join("s")).unwrap();
    let l = listing(&tree);
    assert!(l.contains_key(&format!("{SITE}/dep-2.0.dist-info/INSTALLER")));
    assert!(!l.contains_key(&format!("{SITE}/dep-2.0.dist-info/REQUESTED")));
}

#[test]
fn installing_twice_gives_the_same_tree() {
    let t = tempfile::tempdir().unwrap();
    let a = demo().fetched(t.path(), true);
    let b = WheelSpec::new("other", "0.1")
        .file("other/__init__.py", "")
        .fetched(t.path(), false);
    let (one, _) = install(&[a.clone(), b.clone()], None, &t.path().join("1")).unwrap();
    let (two, _) = install(&[b, a], None, &t.path().join("2")).unwrap();
    assert_eq!(listing(&one), listing(&two));
}

#[test]
fn shared_identical_files_are_fine_and_conflicting_ones_warn() {
    let t = tempfile::tempdir().unwrap();
    let a = WheelSpec::new("nvidia-a", "1")
        .file("nvidia/__init__.py", "")
        .file("nvidia/a.py", "")
        .file("clash.py", "A = 1\n")
        .fetched(t.path(), false);
    let b = WheelSpec::new("nvidia-b", "1")
        .file("nvidia/__init__.py", "")
        .file("nvidia/b.py", "")
        .file("clash.py", "B = 1\n")
        .fetched(t.path(), false);
    let (tree, warnings) = install(&[a, b], None, &t.path().join("s")).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("clash.py") && warnings[0].contains("nvidia_b-1-py3-none-any.whl"),
        "{warnings:?}"
    );
    let l = listing(&tree);
    assert_eq!(text(&l, &format!("{SITE}/clash.py")), "B = 1\n");
    assert_eq!(l[&format!("{SITE}/nvidia/__init__.py")].1, "wheel nvidia-a");
    assert_eq!(l[&format!("{SITE}/nvidia")].1, "wheel nvidia-a");
    assert_eq!(l[&format!("{SITE}/nvidia/b.py")].1, "wheel nvidia-b");
}

/// The installer's error for `spec`, as one line.
fn refusal(spec: WheelSpec) -> String {
    let t = tempfile::tempdir().unwrap();
    let w = spec.fetched(t.path(), true);
    match install(&[w], None, &t.path().join("s")) {
        Ok(_) => panic!("`{}` was installed", spec.filename()),
        Err(e) => gpuimg_entry::error_line::chain(&e),
    }
}

fn ok_spec() -> WheelSpec {
    WheelSpec::new("pkg", "1.0")
        .file("pkg/__init__.py", "")
        .file("pkg/mod.py", "X = 1\n")
}

#[test]
fn paths_that_leave_the_root_are_refused_naming_the_wheel_and_the_path() {
    for (raw, want) in [
        (
            Raw::File {
                name: "../evil.py".into(),
                data: b"x".to_vec(),
            },
            "`../evil.py`, which climbs out of its directory with `..`",
        ),
        (
            Raw::File {
                name: "pkg/../../evil.py".into(),
                data: b"x".to_vec(),
            },
            "`pkg/../../evil.py`, which climbs out",
        ),
        (
            Raw::File {
                name: "/etc/evil".into(),
                data: b"x".to_vec(),
            },
            "`/etc/evil`, which is an absolute path",
        ),
        (
            Raw::Symlink {
                name: "pkg/link".into(),
                target: "/etc/passwd".into(),
            },
            "`pkg/link`, which is a symbolic link",
        ),
    ] {
        let e = refusal(ok_spec().raw(raw));
        assert!(
            e.contains("pkg-1.0-py3-none-any.whl") && e.contains(want),
            "want {want}: {e}"
        );
    }
    let e = refusal(ok_spec().file("pkg-1.0.data/etc/evil", "x"));
    assert!(
        e.contains("`pkg-1.0.data/etc/evil`, which is in an unknown `.data` scheme"),
        "{e}"
    );
}

#[test]
fn a_record_that_lies_is_refused_naming_the_path() {
    let e = refusal(ok_spec().lie(Lie::Hash("pkg/mod.py".into())));
    assert!(
        e.contains("Wheel `pkg-1.0-py3-none-any.whl`: `pkg/mod.py` hashes to `sha256=")
            && e.contains("but its RECORD says"),
        "{e}"
    );
    let e = refusal(ok_spec().lie(Lie::Size("pkg/mod.py".into())));
    assert!(
        e.contains("`pkg/mod.py` is 6 bytes, but its RECORD says 7"),
        "{e}"
    );
    let e = refusal(ok_spec().lie(Lie::Omit("pkg/mod.py".into())));
    assert!(
        e.contains("`pkg/mod.py` is not listed in its RECORD"),
        "{e}"
    );
    let e = refusal(ok_spec().raw(Raw::File {
        name: "pkg/extra.py".into(),
        data: b"x".to_vec(),
    }));
    assert!(
        e.contains("`pkg/extra.py` is not listed in its RECORD"),
        "{e}"
    );
}

/// 2 MiB that deflate well but not to nothing.
fn big_bytes() -> Vec<u8> {
    let mut x: u32 = 11;
    (0..2 << 20)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if i % 7 == 0 {
                (x >> 24) as u8
            } else {
                b"libcublas"[i % 9]
            }
        })
        .collect()
}

#[test]
fn a_large_deflated_file_is_left_in_its_wheel_and_read_back_checked() {
    let t = tempfile::tempdir().unwrap();
    let big = big_bytes();
    let small = "a small data file, deflated in the wheel\n".repeat(40);
    let spec = ok_spec()
        .file_mode("pkg/lib/libbig.so", &big, 0o755)
        .file("pkg/data/small.txt", &small);
    let w = spec.fetched(t.path(), true);
    let staging = t.path().join("s");
    let (tree, _) = install(&[w], None, &staging).unwrap();
    let path = "usr/local/lib/python3.11/dist-packages/pkg/lib/libbig.so";
    match tree.get(path).map(|e| &e.kind) {
        Some(EntryKind::File {
            size,
            data: DataSource::Archived(a),
        }) => {
            assert_eq!(*size, big.len() as u64);
            assert_eq!(a.member, "pkg/lib/libbig.so");
            assert!(a.ends.is_some(), "walked for a gzip layer");
        }
        other => panic!("not left in the wheel: {other:?}"),
    }
    // Nothing of it was written to the staging root; its bytes read back are the file's.
    let on_disk = staging.join("python-root").join(path);
    assert!(!on_disk.exists(), "{} was written", on_disk.display());
    assert!(tree.read_file(path, 4 << 20).unwrap() == Some(big.clone()));
    // A small deflated file is left in the wheel too (read back inflated at once); a `.py`
    // source, which `.pyc` compilation reads, is written.
    let small_path = "usr/local/lib/python3.11/dist-packages/pkg/data/small.txt";
    assert!(matches!(
        tree.get(small_path).map(|e| &e.kind),
        Some(EntryKind::File { data: DataSource::Archived(a), .. }) if a.ends.is_none()
    ));
    assert!(!staging.join("python-root").join(small_path).exists());
    assert!(tree.read_file(small_path, 1 << 20).unwrap() == Some(small.into_bytes()));
    assert!(staging
        .join("python-root/usr/local/lib/python3.11/dist-packages/pkg/mod.py")
        .is_file());
}

#[test]
fn a_large_file_left_in_its_wheel_whose_record_lies_fails_when_read_naming_it() {
    let t = tempfile::tempdir().unwrap();
    let spec = ok_spec()
        .file_mode("pkg/lib/libbig.so", &big_bytes(), 0o755)
        .lie(Lie::Hash("pkg/lib/libbig.so".into()));
    let w = spec.fetched(t.path(), true);
    let (tree, _) = install(&[w], None, &t.path().join("s")).unwrap();
    let path = "usr/local/lib/python3.11/dist-packages/pkg/lib/libbig.so";
    let e = tree.read_file(path, 4 << 20).unwrap_err().to_string();
    assert!(
        e.contains("`pkg/lib/libbig.so` of `pkg-1.0-py3-none-any.whl`")
            && e.contains("not the")
            && e.contains("the wheel's RECORD lists"),
        "{e}"
    );
}

#[test]
fn an_entry_longer_than_its_zip_header_says_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let spec = ok_spec()
        .file("pkg/big.py", &"#".repeat(4000))
        .lie(Lie::NoSize("pkg/big.py".into()));
    let path = spec.write(t.path());
    // Shrink the declared size in both headers: the data is now longer than declared.
    let mut bytes = std::fs::read(&path).unwrap();
    let name = b"pkg/big.py";
    let mut patched = 0;
    for at in 0..bytes.len() - 4 {
        let (sig, size_at, name_at) = match &bytes[at..at + 4] {
            b"PK\x03\x04" => ("local", at + 22, at + 30),
            b"PK\x01\x02" => ("central", at + 24, at + 46),
            _ => continue,
        };
        if bytes.get(name_at..name_at + name.len()) == Some(&name[..]) {
            bytes[size_at..size_at + 4].copy_from_slice(&100u32.to_le_bytes());
            patched += 1;
            let _ = sig;
        }
    }
    assert_eq!(patched, 2);
    std::fs::write(&path, &bytes).unwrap();
    let w = FetchedWheel {
        pin: spec.pin(&path, true),
        path,
    };
    let e = match install(&[w], None, &t.path().join("s")) {
        Ok(_) => panic!("installed"),
        Err(e) => gpuimg_entry::error_line::chain(&e),
    };
    assert!(
        e.contains("`pkg/big.py` unpacks to") && e.contains("but the zip says 100"),
        "{e}"
    );
}

#[test]
fn metadata_that_does_not_fit_the_pin_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let spec = ok_spec();
    let path = spec.write(t.path());
    let mut pin = spec.pin(&path, true);
    pin.name = "other".into();
    let e = install(&[FetchedWheel { pin, path }], None, &t.path().join("s"))
        .err()
        .map(|e| e.to_string())
        .unwrap();
    assert!(
        e.contains("is for `pkg`, but it was pinned as `other`"),
        "{e}"
    );

    let e = refusal(ok_spec().entry_points("[console_scripts]\n../up = pkg:main\n"));
    assert!(
        e.contains("entry point `../up` in `console_scripts`"),
        "{e}"
    );
    let e = refusal(ok_spec().entry_points("[console_scripts]\nx = pkg:main; import os\n"));
    assert!(e.contains("is not an attribute path"), "{e}");
}

#[test]
fn a_file_of_one_wheel_where_another_has_a_directory_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let a = WheelSpec::new("a", "1")
        .file("shared", "file")
        .fetched(t.path(), false);
    let b = WheelSpec::new("b", "1")
        .file("shared/x.py", "")
        .fetched(t.path(), false);
    let e = install(&[a, b], None, &t.path().join("s"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("both install") && e.contains("shared"), "{e}");
}

/// The host's `PATH` directories (the CLI passes them the same way).
fn host_path() -> Vec<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect()
}

#[test]
fn compiled_pyc_files_are_unchecked_hash_name_the_image_path_and_repeat_byte_for_byte() {
    let host = HostPython::find(&host_path(), &bookworm()).unwrap_or_else(|e| {
        panic!("a host python3.11 is needed (scripts/install-deps.sh installs it): {e}")
    });
    assert_eq!(host.magic, 3495);
    let t = tempfile::tempdir().unwrap();
    let spec = demo()
        .file(
            "demo_pkg/sets.py",
            "S = {'a', 'b', 'c', 'd', 'e'}\ndef f(x):\n    return x in {'p', 'q', 'r'}\n",
        )
        .file("demo_pkg/broken.py", "def (:\n");
    let w = spec.fetched(t.path(), true);
    let (one, _) = install(std::slice::from_ref(&w), Some(&host), &t.path().join("1")).unwrap();
    let (two, _) = install(&[w], Some(&host), &t.path().join("2")).unwrap();
    let (l1, l2) = (listing(&one), listing(&two));
    assert_eq!(l1, l2, "two compilations give the same bytes");
    let pyc = format!("{SITE}/demo_pkg/__pycache__/cli.cpython-311.pyc");
    let data = &l1
        .get(&pyc)
        .unwrap_or_else(|| panic!("no {pyc}: {:?}", l1.keys()))
        .2;
    assert_eq!(
        &data[..4],
        &3495u16
            .to_le_bytes()
            .iter()
            .chain(b"\r\n")
            .copied()
            .collect::<Vec<u8>>()[..]
    );
    assert_eq!(
        u32::from_le_bytes(data[4..8].try_into().unwrap()),
        0b01,
        "unchecked-hash"
    );
    let image_path = format!("/{SITE}/demo_pkg/cli.py");
    assert!(
        data.windows(image_path.len())
            .any(|w| w == image_path.as_bytes()),
        "the .pyc names the image path"
    );
    let staging = t.path().to_string_lossy().into_owned();
    for (path, (_, _, data)) in &l1 {
        assert!(
            !data.windows(staging.len()).any(|w| w == staging.as_bytes()),
            "`{path}` holds the staging path"
        );
    }
    assert!(!l1.contains_key(&format!(
        "{SITE}/demo_pkg/__pycache__/broken.cpython-311.pyc"
    )));
    assert!(l1.contains_key(
        &format!("{SITE}/demo_extra.cpython-311.pyc")
            .replace("demo_extra.cpython", "__pycache__/demo_extra.cpython")
    ));
    assert!(
        !l1.keys()
            .any(|k| k.starts_with("usr/local/bin/__pycache__")
                || k.contains("dist-info/__pycache__")),
        "scripts and metadata are not compiled"
    );
    let record = text(&l1, &format!("{SITE}/Demo_Pkg-1.0.dist-info/RECORD"));
    assert!(
        record.contains(&format!(
            "demo_pkg/__pycache__/cli.cpython-311.pyc,{},",
            record_hash(data)
        )),
        "{record}"
    );
    assert_eq!(l1[&pyc].1, "wheel demo-pkg");
}

#[test]
fn without_a_matching_host_interpreter_the_error_names_the_version() {
    let e = HostPython::find(&[], &bookworm())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("Python 3.11") && e.contains("magic number 3495"),
        "{e}"
    );
    let mut p = bookworm();
    p.version = (3, 99);
    let e = HostPython::find(&host_path(), &p)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("Python 3.99"), "{e}");
}

/// Shared objects this test process maps from the system's library directories (the C
/// library, the math library, …), by file name: not what other tests of the binary load from
/// their temporary directories (`dlopen` of a fake `libcuda.so.1`, perhaps deleted since).
fn host_objects() -> BTreeMap<String, Vec<u8>> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|l| !l.ends_with(" (deleted)"))
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with("/lib") || p.starts_with("/usr/lib"))
        .filter(|p| p.contains(".so"))
        .map(|p| {
            let name = p.rsplit('/').next().unwrap().to_string();
            (name, std::fs::read(p).unwrap())
        })
        .collect()
}

#[test]
fn a_tapped_install_takes_each_librarys_elf_facts_as_its_layer_reads_it() {
    let t = tempfile::tempdir().unwrap();
    let objects = host_objects();
    let libc = objects
        .iter()
        .find(|(n, _)| n.starts_with("libc.so"))
        .expect("this test links the C library");
    let other = objects
        .iter()
        .find(|(n, _)| n.starts_with("lib") && !n.starts_with("libc.so"))
        .expect("this test maps another shared object");
    let spec = ok_spec()
        .file_mode(&format!("pkg/lib/{}", libc.0), libc.1, 0o755)
        .file_mode("pkg/lib/libother.so.1", other.1, 0o755)
        // An extension module, and a file named as a library that is no ELF.
        .file_mode("pkg/_ext.cpython-311-x86_64-linux-gnu.so", other.1, 0o755)
        .file("pkg/lib/libnot.so", &"not an ELF\n".repeat(10))
        .file("pkg/lib/libunread.so.2", &"never read\n".repeat(10));
    let w = spec.fetched(t.path(), true);
    let staging = t.path().join("s");
    std::fs::create_dir_all(&staging).unwrap();
    let mut taps = wheel::Taps::new();
    let tree = wheel::install_tapped(
        std::slice::from_ref(&w),
        std::slice::from_ref(&w.pin),
        &bookworm(),
        None,
        false,
        &staging,
        Some(&mut taps),
        &mut Warnings::default(),
    )
    .unwrap();
    let members: Vec<&str> = taps.keys().map(|(_, m)| m.as_str()).collect();
    assert_eq!(
        members,
        [
            "pkg/_ext.cpython-311-x86_64-linux-gnu.so",
            &format!("pkg/lib/{}", libc.0),
            "pkg/lib/libnot.so",
            "pkg/lib/libother.so.1",
            "pkg/lib/libunread.so.2",
        ]
    );
    // The layer writer's read of every file but one.
    for e in tree.iter() {
        if let EntryKind::File { size, .. } = &e.kind {
            if !e.path.ends_with("libunread.so.2") {
                tree.read_file(&e.path, *size).unwrap().unwrap();
            }
        }
    }
    let reads = wheel::library_reads(&w, &bookworm()).unwrap();
    assert_eq!(reads.len(), 5);
    for r in &reads {
        let tap = taps.get(&r.tap_key()).expect("every library has its tap");
        let read = r.read().unwrap();
        assert_eq!(r.read_with(Some(tap)).unwrap(), read, "{}", read.path);
        // The tap itself says it for the ELF files read; the rest is read from the wheel.
        let bytes = match read.path.rsplit('/').next().unwrap() {
            n if n == libc.0 => Some(libc.1),
            "libother.so.1" | "_ext.cpython-311-x86_64-linux-gnu.so" => Some(other.1),
            _ => None,
        };
        let capture = tap.capture().unwrap();
        match bytes {
            Some(b) => {
                let mut again = |off: u64, len: u64| gpuimg_elf::range_at(&mut &b[..], off, len);
                // What reading it whole says, the library names its strings hold with it.
                let named = gpuimg_elf::parse_stream_named(&mut &b[..], &mut again.clone());
                assert_eq!(capture.finish(b.len() as u64, &mut again), Some(named));
                assert!(read.elf.is_some(), "{}", read.path);
            }
            None if read.path.ends_with("libnot.so") => {
                assert_eq!(capture.finish(0, &mut |_, _| None), Some(None));
                assert_eq!(read.elf, None);
            }
            None => assert_eq!(capture.finish(0, &mut |_, _| None), None, "never read"),
        }
    }
}

/// The pin of the wheel written at `path` as `name` `version`.
fn pinned(name: &str, version: &str, path: &Path) -> FetchedWheel {
    FetchedWheel {
        pin: WheelSpec::new(name, version).pin(path, true),
        path: path.to_path_buf(),
    }
}

/// The installer's error for the stored wheel `bytes`, written and pinned as `pkg` 1.0.
fn refusal_of(bytes: &[u8]) -> String {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("pkg-1.0-py3-none-any.whl");
    std::fs::write(&path, bytes).unwrap();
    match install(&[pinned("pkg", "1.0", &path)], None, &t.path().join("s")) {
        Ok(_) => panic!("installed"),
        Err(e) => gpuimg_entry::error_line::chain(&e),
    }
}

#[test]
fn a_wheel_of_two_million_entries_is_refused_from_its_end_record_before_its_directory_is_loaded() {
    let t = tempfile::tempdir().unwrap();
    let spec = ok_spec();
    let path = spec.write(t.path());
    let bytes = wheel_zip::with_more_entries(&std::fs::read(&path).unwrap(), 2_000_000);
    assert!(bytes.len() > 100 << 20, "a real directory of 106 MB");
    std::fs::write(&path, &bytes).unwrap();
    drop(bytes);
    let w = pinned("pkg", "1.0", &path);
    let base = heap::reset();
    let e = install(&[w], None, &t.path().join("s")).err().unwrap();
    let held = heap::since(base);
    assert!(
        matches!(
            e,
            WheelError::TooManyEntries {
                count: 2_000_005,
                cap: 500_000,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "Wheel `pkg-1.0-py3-none-any.whl` has 2000005 entries in its zip directory, over the cap of 500000; refusing to install it"
    );
    // A zip library that loads the directory first holds about 1.2 GB here.
    assert!(held < 4 << 20, "{held} bytes held to refuse it");
}

#[test]
fn a_name_twice_in_the_zip_or_at_one_installed_path_is_refused_not_installed_as_the_last_copy() {
    let meta = wheel_zip::metadata("pkg", "1.0", &[]);
    let di = "pkg-1.0.dist-info";
    let twice = wheel_zip::wheel(
        di,
        &meta,
        &[
            ("pkg/__init__.py", b""),
            ("pkg/mod.py", b"GOOD = 1\n"),
            ("pkg/mod.py", b"EVIL = 1\n"),
        ],
    );
    let e = refusal_of(&twice);
    assert!(
        e.contains("Wheel `pkg-1.0-py3-none-any.whl`: `pkg/mod.py` appears twice in the archive"),
        "{e}"
    );
    // A file and a directory of one name.
    let e = refusal_of(&wheel_zip::wheel(
        di,
        &meta,
        &[("pkg/", b""), ("pkg", b"x")],
    ));
    assert!(e.contains("`pkg` appears twice in the archive"), "{e}");
    // Two names the scheme puts at one path.
    let e = refusal_of(&wheel_zip::wheel(
        di,
        &meta,
        &[
            ("pkg/mod.py", b"GOOD = 1\n"),
            ("pkg-1.0.data/purelib/pkg/mod.py", b"EVIL = 1\n"),
        ],
    ));
    assert!(
        e.contains(&format!(
            "`pkg/mod.py` and `pkg-1.0.data/purelib/pkg/mod.py` both install `/{SITE}/pkg/mod.py`"
        )),
        "{e}"
    );
}

#[test]
fn a_wheel_whose_version_is_not_its_pin_is_refused_naming_the_field_and_both_versions() {
    let t = tempfile::tempdir().unwrap();
    let file = [("pkg/__init__.py", &b""[..])];
    let whl = |version: &str, di: &str, meta: &str| {
        let path = t.path().join(format!("pkg-{version}-py3-none-any.whl"));
        let m = wheel_zip::metadata("pkg", meta, &[]);
        std::fs::write(&path, wheel_zip::wheel(di, &m, &file)).unwrap();
        path
    };
    let refused = |w: FetchedWheel| match install(&[w], None, &t.path().join("s")) {
        Ok(_) => panic!("installed"),
        Err(e) => e.to_string(),
    };
    // `pkg-1.0-….whl` holding `pkg-6.6.6.dist-info`.
    let p = whl("1.0", "pkg-6.6.6.dist-info", "6.6.6");
    assert_eq!(
        refused(pinned("pkg", "1.0", &p)),
        "Wheel `pkg-1.0-py3-none-any.whl`: its `.dist-info` directory's version is `6.6.6`, but it was pinned as version `1.0`; refusing to install it"
    );
    let p = whl("1.0", "pkg-1.0.dist-info", "6.6.6");
    assert!(refused(pinned("pkg", "1.0", &p))
        .contains("its METADATA `Version` is `6.6.6`, but it was pinned as version `1.0`"),);
    let mut w = pinned("pkg", "1.0", &p);
    w.pin.version = "6.6.6".into();
    assert!(refused(w)
        .contains("its file name's version is `1.0`, but it was pinned as version `6.6.6`"));
    // Versions equal by PEP 440 are the pin's.
    let p = whl("1.0", "pkg-1.0.0.dist-info", "1.0.0");
    let (tree, _) = install(&[pinned("pkg", "1.0", &p)], None, &t.path().join("ok")).unwrap();
    assert!(tree
        .get(&format!("{SITE}/pkg-1.0.0.dist-info/METADATA"))
        .is_some());
}

#[test]
fn requires_dist_must_be_what_the_resolution_took_from_the_wheel() {
    let t = tempfile::tempdir().unwrap();
    let spec = |name: &str, requires: &[&str]| {
        let mut s = WheelSpec::new(name, "1.0").file(&format!("{name}/__init__.py"), "");
        for r in requires {
            s = s.requires(r);
        }
        s.fetched(t.path(), false)
    };
    let by = |mut w: FetchedWheel, by: &[&str]| {
        w.pin.required_by = by.iter().map(|s| s.to_string()).collect();
        w
    };
    let refused = |wheels: &[FetchedWheel], set: &[&FetchedWheel]| {
        let set: Vec<PinnedWheel> = set.iter().map(|w| w.pin.clone()).collect();
        match install_of(wheels, &set, None, &t.path().join("s")) {
            Ok(_) => panic!("installed"),
            Err(e) => e.to_string(),
        }
    };
    // Resolution took `evil` from metadata that was not `demo`'s: refused, also when `evil` is
    // installed in another layer.
    let demo = by(spec("demo", &[]), &["demo"]);
    let evil = by(spec("evil", &[]), &["demo 1.0"]);
    let want = "Wheel `demo-1.0-py3-none-any.whl`: its METADATA `Requires-Dist` names nothing, but the resolution took `evil` (not declared) as its dependencies; refusing to install it";
    assert_eq!(
        refused(&[demo.clone(), evil.clone()], &[&demo, &evil]),
        want
    );
    assert_eq!(refused(std::slice::from_ref(&demo), &[&demo, &evil]), want);
    // An unconditional requirement resolution did not take.
    let demo = by(
        spec(
            "demo",
            &[
                "dep>=1",
                "opt; extra == 'x'",
                "win; sys_platform == 'win32'",
            ],
        ),
        &["demo"],
    );
    assert!(refused(std::slice::from_ref(&demo), &[&demo]).contains(
        "names `dep` (not taken), `opt`, `win`, but the resolution took nothing as its dependencies"
    ));
    // What it declares, through an extra too, beside a profile's requirement text.
    let dep = by(spec("dep", &[]), &["demo 1.0", "dep>=0"]);
    let opt = by(spec("opt", &[]), &["demo[x] 1.0"]);
    let all = [demo, dep, opt];
    let set: Vec<PinnedWheel> = all.iter().map(|w| w.pin.clone()).collect();
    install_of(&all, &set, None, &t.path().join("ok")).unwrap();
}

#[test]
fn a_poisoned_pep_658_metadata_file_that_adds_a_dependency_is_refused_at_install() {
    use gpuimg_pypi::{self as pypi, PythonRequest};
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("index");
    let files = root.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let poisoned = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: evil\n";
    for (name, meta) in [("demo", Some(poisoned)), ("evil", None)] {
        let path = WheelSpec::new(name, "1.0")
            .file(&format!("{name}/__init__.py"), "")
            .write(&files);
        let f = path.file_name().unwrap().to_str().unwrap().to_string();
        let sha = pyindex::sha256_hex(&std::fs::read(&path).unwrap());
        let mut attrs = String::new();
        if let Some(m) = meta {
            std::fs::write(files.join(format!("{f}.metadata")), m).unwrap();
            let msha = pyindex::sha256_hex(m.as_bytes());
            attrs = format!(" data-core-metadata=\"sha256={msha}\"");
        }
        let page = root.join("simple").join(name);
        std::fs::create_dir_all(&page).unwrap();
        std::fs::write(
            page.join("index.html"),
            format!("<html><body><a href=\"../../files/{f}#sha256={sha}\"{attrs}>{f}</a></body></html>\n"),
        )
        .unwrap();
    }
    let server = serve(&root);
    let cache = gpuimg_store::cache::Cache::open(&t.path().join("cache")).unwrap();
    let index = format!("{}/simple/", server.url);
    let request = PythonRequest::from_parts(&["demo"], &[("index", &index)]).unwrap();
    let obs = &mut gpuimg_fetch::observe::Silent;
    let pins = pypi::resolve(&request, &bookworm(), &cache, obs, false).unwrap();
    let evil = pins
        .iter()
        .find(|p| p.name == "evil")
        .expect("resolution took `evil`");
    assert_eq!(evil.required_by, ["demo 1.0"]);
    let fetched = pypi::fetch(&pins, &request, &cache, obs, false).unwrap();
    let e = install_of(&fetched, &pins, None, &t.path().join("s"))
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("Wheel `demo-1.0-py3-none-any.whl`: its METADATA `Requires-Dist` names nothing, but the resolution took `evil` (not declared)"),
        "{e}"
    );
}
