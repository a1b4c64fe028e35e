//! Every tree gpuimg accepts is one standard tools can unpack: paths that are both a directory
//! and a file, writes through a symlink of the same source, symlink chains that climb above
//! the root when followed, over-long names and owner ids that do not fit 32 bits are refused
//! (exit 2, naming the entry); extended attributes and file capabilities are carried as PAX
//! `SCHILY.xattr.*` records, deterministically, and those not carried are warned about.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;

/// Make a tarball with Python's tarfile (it writes what tar allows, hostile or not). Helpers:
/// `f(name, data)`, `d(name)`, `l(name, target)`, `info(name, **attrs)`.
fn python_tar(path: &Path, body: &str) {
    require("python3");
    let script = format!(
        "import tarfile, io\nt = tarfile.open({:?}, 'w', format=tarfile.PAX_FORMAT)\n\
         def add(i, data=b''):\n    i.size = len(data); t.addfile(i, io.BytesIO(data))\n\
         def f(name, data=b'x', **kw):\n    i = tarfile.TarInfo(name)\n    [setattr(i, k, v) for k, v in kw.items() if k != 'pax']\n    i.pax_headers = kw.get('pax', {{}})\n    add(i, data)\n\
         def d(name, **kw):\n    i = tarfile.TarInfo(name); i.type = tarfile.DIRTYPE; i.mode = 0o755\n    [setattr(i, k, v) for k, v in kw.items()]\n    add(i)\n\
         def l(name, target):\n    i = tarfile.TarInfo(name); i.type = tarfile.SYMTYPE; i.linkname = target; add(i)\n\
         def p(name):\n    i = tarfile.TarInfo(name); i.type = tarfile.FIFOTYPE; add(i)\n\
         {body}\nt.close()\n",
        path.display().to_string()
    );
    run_ok(Command::new("python3").arg("-c").arg(script));
}

fn profile(dir: &Path, extra: &str) -> std::path::PathBuf {
    let p = dir.join("p.yaml");
    write(
        &p,
        &format!("name: shape\nbase:\n  rootfs: ./rootfs.tar\n{extra}"),
    );
    p
}

/// Build `body`'s tarball; assert exit 2, one line naming `needles`, nothing written.
fn refused(body: &str, extra: &str, needles: &[&str]) {
    let t = Sandbox::new();
    python_tar(&t.path().join("rootfs.tar"), body);
    let p = profile(t.path(), extra);
    let out = run(t
        .gpuimg()
        .arg("build")
        .arg(&p)
        .arg("-o")
        .arg(t.path().join("out")));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{body}\n{stderr}");
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "expected `{n}` in: {stderr}");
    }
    assert_error(&stderr, &[t.path()]);
    assert!(!t.path().join("out").exists(), "output written: {body}");
}

#[test]
fn a_path_that_is_both_a_directory_and_a_file_is_refused() {
    refused("f('a')\nd('a')", "", &["`a` appears twice", "file"]);
    refused("d('a')\nf('a')", "", &["`a` appears twice"]);
    refused("d('a')\nl('a', 'b')", "", &["`a` appears twice", "symlink"]);
    refused(
        "f('x')\nf('x/y')",
        "",
        &["`x/y` needs `x` to be a directory", "file"],
    );
    refused("f('x')\nd('x/y/z')", "", &["needs `x` to be a directory"]);
    refused(
        "p('fifo')\nf('fifo/y')",
        "  allow-special-files: true\n",
        &["`fifo/y` needs `fifo` to be a directory", "fifo"],
    );
}

#[test]
fn writing_through_a_symlink_of_the_same_source_is_refused() {
    refused(
        "l('etc', '/tmp/host')\nf('etc/passwd')",
        "",
        &["`etc/passwd` lies under `etc`"],
    );
    refused(
        "d('usr')\nd('usr/lib')\nl('lib', 'usr/lib')\nf('lib/x.so')",
        "",
        &["under `lib`"],
    );
    refused(
        "l('a', 'b')\nd('a/c')\nf('a/c/d')",
        "",
        &["`a/c` lies under `a`"],
    );
}

#[test]
fn symlink_chains_that_climb_when_followed_are_refused() {
    refused(
        "d('a')\nl('a/up', '..')\nl('a/x', 'up/../../etc/shadow')",
        "",
        &["a/x -> up/../../etc/shadow", "climbs above the root"],
    );
    refused(
        "d('a')\nl('a/b', '..')\nl('l1', 'a/b')\nl('z', 'l1/../../host')",
        "",
        &["z -> l1/../../host"],
    );
    refused(
        "d('usr')\nd('usr/lib')\nl('lib', 'usr/lib')\nl('usr/lib/up', '../..')\nl('e', '/lib/up/../x')",
        "",
        &["e -> /lib/up/../x"],
    );
    // A single link that climbs is refused lexically, as before.
    refused("l('x', '../etc/passwd')", "", &["escapes the root"]);
}

#[test]
fn over_long_names_are_refused() {
    let long = "n".repeat(256);
    refused(&format!("f('{long}')"), "", &["component of 256 bytes"]);
    refused(
        &format!("d('d')\nf('d/{long}/x')"),
        "",
        &["component of 256 bytes"],
    );
    let deep = vec!["abcdefgh"; 460].join("/");
    refused(&format!("f('{deep}')"), "", &["paths are limited to 4096"]);
}

#[test]
fn owner_ids_that_do_not_fit_are_refused_never_truncated() {
    // uid 2^32 would become uid 0 if truncated, with its setuid bit kept.
    refused(
        "f('bin/su', uid=2**32, mode=0o4755)",
        "",
        &["uid 4294967296", "bin/su"],
    );
    refused("f('x', gid=2**40)", "", &["gid 1099511627776"]);
    refused("d('d', uid=2**33 + 5)", "", &["uid 8589934597"]);
}

fn build_ok(dir: &Sandbox, p: &Path, out: &str) -> (String, String) {
    let o = run(dir
        .gpuimg_with_cache(&dir.join(format!("cache-{out}")))
        .env("SOURCE_DATE_EPOCH", "0")
        .arg("build")
        .arg(p)
        .arg("-o")
        .arg(dir.join(out))
        .arg("--json"));
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    (manifest_digest(&String::from_utf8_lossy(&o.stdout)), stderr)
}

const PING_CAP: &str = "0100000200200000000000000000000000000000";

#[test]
fn capabilities_and_user_xattrs_are_carried_from_a_tarball() {
    require("umoci");
    let t = Sandbox::new();
    python_tar(
        &t.path().join("rootfs.tar"),
        "d('bin')\n\
         cap = bytes.fromhex('0100000200200000000000000000000000000000').decode('utf-8', 'surrogateescape')\n\
         f('bin/ping', b'\\x7fELF', mode=0o755, pax={'SCHILY.xattr.security.capability': cap})\n\
         f('bin/labelled', pax={'SCHILY.xattr.security.selinux': 'system_u:object_r:bin_t:s0', 'SCHILY.xattr.user.note': 'kept'})\n\
         f('bin/plain')",
    );
    let p = profile(t.path(), "");
    let (a, stderr) = build_ok(&t, &p, "a");
    let x = layer_xattrs(&t.path().join("a"));
    let cap = hex::decode(PING_CAP).unwrap();
    assert_eq!(
        x,
        vec![
            ("bin/labelled".into(), "user.note".into(), b"kept".to_vec()),
            ("bin/ping".into(), "security.capability".into(), cap.clone()),
        ]
    );
    assert!(
        stderr.contains("extended attribute `security.selinux` is not carried"),
        "{stderr}"
    );
    assert_error(line_with(&stderr, "is not carried"), &[t.path()]);
    // Deterministic: a second build from a fresh cache gives the same digest.
    let (b, _) = build_ok(&t, &p, "b");
    assert_eq!(a, b);
    // umoci unpacks it (verifying every digest) and applies the capability.
    let bundle = t.path().join("bundle");
    run_ok(
        Command::new("umoci")
            .arg("unpack")
            .arg("--image")
            .arg(format!("{}:latest", t.path().join("a").display()))
            .arg(&bundle),
    );
    let got = run_ok(Command::new("python3").arg("-c").arg(format!(
        "import os; print(os.getxattr({:?}, 'security.capability').hex())",
        bundle.join("rootfs/bin/ping").display().to_string()
    )));
    assert_eq!(got.trim(), PING_CAP);
}

#[test]
fn capabilities_are_carried_from_a_directory_and_change_the_layer() {
    let t = Sandbox::new();
    let root = t.path().join("rootfs");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::write(root.join("bin/ping"), "ping").unwrap();
    write(
        &t.path().join("p.yaml"),
        "name: shape\nbase:\n  rootfs: ./rootfs\n",
    );
    let p = t.path().join("p.yaml");
    let (plain, _) = build_ok(&t, &p, "plain");
    run_ok(Command::new("python3").arg("-c").arg(format!(
        "import os; os.setxattr({:?}, 'security.capability', bytes.fromhex({:?}))",
        root.join("bin/ping").display().to_string(),
        PING_CAP
    )));
    let (with_cap, _) = build_ok(&t, &p, "cap");
    assert_ne!(plain, with_cap, "the capability did not reach the layer");
    let x = layer_xattrs(&t.path().join("cap"));
    assert_eq!(x.len(), 1, "{x:?}");
    assert_eq!(x[0].0, "bin/ping");
    assert_eq!(x[0].1, "security.capability");
}
