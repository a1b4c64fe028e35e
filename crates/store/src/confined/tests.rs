//! Both resolvers on the same hostile trees: same answers, nothing outside the root touched.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::{Kind, Resolver, Root};

/// A root whose links point at a real directory outside it (by absolute host path and by
/// climbing), plus loops and chains; returns (tempdir, root, outside).
fn hostile() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let outside = t.path().join("outside");
    std::fs::create_dir_all(root.join("usr/lib/x86_64-linux-gnu")).unwrap();
    std::fs::create_dir_all(root.join("var/lib")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("shadow"), "host secret\n").unwrap();
    // A directory an escaping write through `var/lib/dpkg` would land in.
    std::fs::create_dir_all(outside.join("dpkg/info")).unwrap();
    std::fs::write(root.join("usr/lib/real.txt"), "inside\n").unwrap();
    let o = outside.display().to_string();
    for (link, target) in [
        ("etc", o.clone()),
        ("var/lib/dpkg", format!("{o}/dpkg")),
        ("climb", "../../../../..".to_string()),
        ("climb-out", "../outside".to_string()),
        ("abs-shadow", format!("{o}/shadow")),
        ("rel-shadow", "../outside/shadow".to_string()),
        ("lib", "usr/lib".to_string()),
        ("lib64", "/usr/lib".to_string()),
        ("loop-a", "loop-b".to_string()),
        ("loop-b", "loop-a".to_string()),
        ("chain1", "chain2/real.txt".to_string()),
        ("chain2", "/climb/../usr/lib".to_string()),
        ("usr/lib/up", "../../..".to_string()),
        ("dangling", "/nowhere/at/all".to_string()),
    ] {
        symlink(target, root.join(link)).unwrap();
    }
    (t, root, outside)
}

fn outside_untouched(outside: &Path) {
    let mut names: Vec<_> = std::fs::read_dir(outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["dpkg", "shadow"]);
    assert_eq!(std::fs::read_dir(outside.join("dpkg")).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_dir(outside.join("dpkg/info"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("shadow")).unwrap(),
        "host secret\n"
    );
}

const PATHS: &[&str] = &[
    "etc/passwd",
    "etc",
    "var/lib/dpkg/status",
    "var/lib/dpkg/info/x.postinst",
    "climb/usr/lib/real.txt",
    "climb/outside/shadow",
    "climb-out/shadow",
    "abs-shadow",
    "rel-shadow",
    "lib/real.txt",
    "lib64/real.txt",
    "lib64/up/lib/real.txt",
    "loop-a",
    "loop-a/x",
    "chain1",
    "/../../outside/shadow",
    "../outside/shadow",
    "usr/lib/up/usr/lib/real.txt",
    "dangling",
    "dangling/x",
    "usr/lib/real.txt/x",
    "",
];

/// One observable answer per operation, comparable across resolvers.
fn observe(root: &Root, p: &str) -> Vec<String> {
    let p = Path::new(p);
    let err = |e: std::io::Error| format!("err {:?}", e.raw_os_error().map(|_| e.kind()));
    vec![
        format!(
            "lstat {:?}",
            root.symlink_metadata(p).map(|m| m.map(|m| m.kind))
        ),
        format!("stat {:?}", root.metadata(p).map(|m| m.map(|m| m.kind))),
        match root.read(p, 1 << 20) {
            Ok(b) => format!("read {}", String::from_utf8_lossy(&b)),
            Err(e) => format!("read {}", err(e)),
        },
        match root.read_link(p) {
            Ok(t) => format!("readlink {}", t.display()),
            Err(e) => format!("readlink {}", err(e)),
        },
        match root.read_dir(p) {
            Ok(v) => format!("readdir {}", v.len()),
            Err(e) => format!("readdir {}", err(e)),
        },
    ]
}

#[test]
fn kernel_and_userspace_agree_on_hostile_reads() {
    let (_t, root, outside) = hostile();
    let k = Root::with_resolver(&root, Resolver::Kernel).unwrap();
    let u = Root::with_resolver(&root, Resolver::Userspace).unwrap();
    for p in PATHS {
        let (a, b) = (observe(&k, p), observe(&u, p));
        assert_eq!(a, b, "resolvers disagree on `{p}`");
        for line in &a {
            assert!(!line.contains("host secret"), "`{p}` read the host: {line}");
        }
    }
    // Climbing and absolute links land inside the root.
    assert_eq!(
        k.read(Path::new("climb/usr/lib/real.txt"), 100).unwrap(),
        b"inside\n"
    );
    assert_eq!(
        k.read(Path::new("lib64/up/lib/real.txt"), 100).unwrap(),
        b"inside\n"
    );
    assert_eq!(k.read(Path::new("chain1"), 100).unwrap(), b"inside\n");
    assert!(k.read(Path::new("abs-shadow"), 100).is_err());
    outside_untouched(&outside);
}

#[test]
fn kernel_and_userspace_agree_on_hostile_writes() {
    for p in PATHS {
        let mut answers = Vec::new();
        for r in [Resolver::Kernel, Resolver::Userspace] {
            let (_t, root, outside) = hostile();
            let root_h = Root::with_resolver(&root, r).unwrap();
            let p = Path::new(p);
            let w = root_h.write(p, b"written\n", 0o644).map_err(|e| e.kind());
            let d = root_h.create_dir_all(&p.join("sub")).map_err(|e| e.kind());
            let s = root_h
                .symlink(Path::new("/etc/shadow"), &p.join("l"))
                .map_err(|e| e.kind());
            let h = root_h
                .hard_link(Path::new("usr/lib/real.txt"), &p.join("h"))
                .map_err(|e| e.kind());
            let o = root_h.set_owner(p, 1, 1).map_err(|e| e.kind());
            answers.push(format!("{w:?} {d:?} {s:?} {h:?} {o:?}"));
            outside_untouched(&outside);
            // What a write did is visible inside the root only.
            assert_eq!(
                std::fs::read_to_string(outside.join("shadow")).unwrap(),
                "host secret\n"
            );
        }
        assert_eq!(answers[0], answers[1], "resolvers disagree writing `{p}`");
    }
}

#[test]
fn writes_replace_symlinks_instead_of_following_them() {
    for r in [Resolver::Kernel, Resolver::Userspace] {
        let (_t, root, outside) = hostile();
        let root_h = Root::with_resolver(&root, r).unwrap();
        root_h
            .write(Path::new("abs-shadow"), b"mine\n", 0o600)
            .unwrap();
        assert!(!std::fs::symlink_metadata(root.join("abs-shadow"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(root.join("abs-shadow")).unwrap(), b"mine\n");
        // Through a directory symlink that resolves inside: lands inside.
        root_h
            .write(Path::new("lib64/new.txt"), b"n\n", 0o644)
            .unwrap();
        assert!(root.join("usr/lib/new.txt").is_file());
        // Through `etc -> <outside>`: the target does not exist inside the root.
        assert!(root_h
            .write(Path::new("etc/passwd"), b"x\n", 0o644)
            .is_err());
        outside_untouched(&outside);
    }
}

#[test]
fn loops_and_non_regular_files_are_refused() {
    let (_t, root, _outside) = hostile();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    for r in [Resolver::Kernel, Resolver::Userspace] {
        let root_h = Root::with_resolver(&root, r).unwrap();
        assert!(root_h.read(Path::new("loop-a"), 10).is_err());
        // A FIFO is refused without blocking.
        assert!(root_h.read(Path::new("fifo"), 10).is_err());
        assert!(root_h.read(Path::new("usr/lib/real.txt"), 3).is_err());
        assert_eq!(
            root_h
                .symlink_metadata(Path::new("fifo"))
                .unwrap()
                .map(|m| m.kind),
            Some(Kind::Other)
        );
    }
}

#[test]
fn clear_removes_everything_inside_only() {
    let (_t, root, outside) = hostile();
    let r = Root::open(&root).unwrap();
    r.clear();
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
    outside_untouched(&outside);
}

#[test]
fn real_paths_resolve_parents_inside_the_root() {
    let (_t, root, _outside) = hostile();
    let r = Root::open(&root).unwrap();
    for (p, want) in [
        ("lib/real.txt", "usr/lib/real.txt"),
        ("/lib64/x.so", "usr/lib/x.so"),
        ("lib64/up/lib/real.txt", "usr/lib/real.txt"),
        ("climb/usr/lib/real.txt", "usr/lib/real.txt"),
        ("usr/lib/up", "usr/lib/up"),
        ("chain2/a", "usr/lib/a"),
        ("etc", "etc"),
    ] {
        assert_eq!(r.real_path(Path::new(p)).unwrap(), Path::new(want), "{p}");
    }
    // A parent that resolves outside the tree (dangling inside the root) is an error.
    assert!(r.real_path(Path::new("etc/passwd")).is_err());
}

#[test]
fn forcing_the_userspace_resolver_reaches_every_open() {
    let t = tempfile::tempdir().unwrap();
    super::force_userspace_resolver(true);
    let forced = Root::open(t.path()).unwrap().resolver();
    super::force_userspace_resolver(false);
    assert_eq!(forced, Resolver::Userspace);
    // Both give the same answers, so another test opening a root meanwhile is unaffected.
}

#[test]
fn the_leave_unchanged_owner_id_is_an_error_not_a_panic() {
    // A package's tar header can say uid or gid 4294967295 (found by the `deb` fuzz target:
    // rustix asserts on it); chown would read it as "leave unchanged".
    let (_t, root, _outside) = hostile();
    let root_h = Root::open(&root).unwrap();
    root_h.write(Path::new("f"), b"x", 0o644).unwrap();
    for (uid, gid) in [(u32::MAX, 0), (0, u32::MAX)] {
        let e = root_h.set_owner(Path::new("f"), uid, gid).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }
    root_h.set_owner(Path::new("f"), 0, 0).unwrap();
    let f = std::fs::File::open(root.join("f")).unwrap();
    let e = Root::set_owner_mode_fd(&f, u32::MAX, 0, 0o644).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}
