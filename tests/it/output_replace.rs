//! Existing files are never destroyed: an output path is replaced only when it is empty or a
//! previous build of the same tag (an OCI layout by content, or a tar archive of one);
//! anything else is refused with one line and exit 2, untouched, unless `--force` is given.
//! Devices and FIFOs are never replaced. A failed export (no space left, a path that cannot
//! be a file) leaves no staging behind.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

struct Fixture {
    t: Sandbox,
    root: PathBuf,
    profile: PathBuf,
}

fn fixture() -> Fixture {
    let t = Sandbox::new();
    let root = t.path().to_path_buf();
    busybox_rootfs(&root);
    let profile = root.join("p.yaml");
    write(&profile, "name: demo\nbase:\n  rootfs: ./rootfs\n");
    Fixture { t, root, profile }
}

impl Fixture {
    fn build(&self, target: &str, extra: &[&str]) -> std::process::Output {
        run(self
            .t
            .gpuimg()
            .arg("build")
            .arg(&self.profile)
            .arg("-o")
            .arg(target)
            .args(extra))
    }

    fn build_ok(&self, target: &str, extra: &[&str]) {
        let out = self.build(target, extra);
        assert!(
            out.status.success(),
            "build {target} {extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The build is refused with one line naming `needle`, the line is its reviewed snapshot,
    /// and nothing under the root changed.
    fn refused(&self, target: &str, extra: &[&str], needle: &str) -> String {
        let stderr = self.refused_unsnapshotted(target, extra, needle);
        assert_error(&stderr, &[self.root.as_path()]);
        stderr
    }

    /// [`Fixture::refused`] without the snapshot, for a line that quotes bytes of the file.
    fn refused_unsnapshotted(&self, target: &str, extra: &[&str], needle: &str) -> String {
        let before = snapshot(&self.root);
        let out = self.build(target, extra);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{target}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
        assert!(stderr.starts_with("error: Refusing to"), "{stderr}");
        assert!(stderr.contains(needle), "expected `{needle}` in: {stderr}");
        let mut after = snapshot(&self.root);
        // The cache may have been created; the rest is as it was.
        after.retain(|p, _| !p.starts_with(self.root.join("cache")));
        let mut before = before;
        before.retain(|p, _| !p.starts_with(self.root.join("cache")));
        assert_eq!(before, after, "{target}: something changed");
        stderr
    }
}

/// Every path under `root` with its contents (files), target (links) or kind.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let t = e.file_type().unwrap();
            let v = if t.is_dir() {
                todo.push(p.clone());
                b"<dir>".to_vec()
            } else if t.is_file() {
                std::fs::read(&p).unwrap()
            } else if t.is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                b"<special>".to_vec()
            };
            m.insert(p, v);
        }
    }
    m
}

fn unpacks(layout: &Path, tag: &str, bundle: &Path) {
    require("umoci");
    run_ok(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:{tag}", layout.display()))
            .arg(bundle),
    );
    assert!(bundle.join("rootfs/bin/busybox").is_file());
}

fn archive_ok(file: &Path, tag: &str) {
    require("skopeo");
    let v: serde_json::Value = serde_json::from_str(&run_ok(
        Command::new("skopeo")
            .arg("inspect")
            .arg(format!("oci-archive:{}:{tag}", file.display())),
    ))
    .unwrap();
    assert_eq!(v["Architecture"], "amd64", "{v}");
}

fn python_tar(path: &Path, body: &str) {
    require("python3");
    let script = format!(
        "import tarfile, io\nt = tarfile.open({:?}, 'w')\n\
         def f(name, data=b'x'):\n    i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))\n\
         {body}\nt.close()\n",
        path.display().to_string()
    );
    run_ok(Command::new("python3").arg("-c").arg(script));
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn directories_that_are_not_our_layout_are_refused() {
    let f = fixture();
    let r = &f.root;
    let hex = "a".repeat(64);

    // Unrelated files, with and without an oci-layout beside them.
    write(&r.join("notes/todo.txt"), "keep me\n");
    f.refused(&s(&r.join("notes")), &[], "`todo.txt`");
    write(
        &r.join("mixed/oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    );
    write(&r.join("mixed/index.json"), r#"{"manifests":[]}"#);
    write(&r.join("mixed/README.md"), "mine\n");
    f.refused(&s(&r.join("mixed")), &[], "`README.md`");
    // Layout-shaped but with something more inside blobs/.
    write(
        &r.join("deep/oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    );
    write(&r.join("deep/index.json"), r#"{"manifests":[]}"#);
    write(&r.join(format!("deep/blobs/sha256/{hex}/x")), "x");
    f.refused(&s(&r.join("deep")), &[], "not part of an OCI layout");
    write(
        &r.join("other-algo/oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    );
    write(&r.join("other-algo/index.json"), r#"{"manifests":[]}"#);
    write(&r.join("other-algo/blobs/sha512/abc"), "x");
    f.refused(&s(&r.join("other-algo")), &[], "`blobs/sha512/`");
    // Not valid: no oci-layout, bad JSON, untagged images.
    write(&r.join("noid/index.json"), r#"{"manifests":[]}"#);
    f.refused(&s(&r.join("noid")), &[], "no `oci-layout`");
    write(
        &r.join("badjson/oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    );
    write(&r.join("badjson/index.json"), "{not json");
    f.refused(&s(&r.join("badjson")), &[], "not valid JSON");
    write(
        &r.join("untagged/oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    );
    write(
        &r.join("untagged/index.json"),
        &format!(r#"{{"manifests":[{{"digest":"sha256:{hex}","size":1}}]}}"#),
    );
    f.refused(&s(&r.join("untagged")), &[], "untagged image");
    // A file or a symlink where a directory is asked.
    write(&r.join("plain-file"), "data\n");
    f.refused(&s(&r.join("plain-file")), &[], "it is a file");
    std::fs::create_dir(r.join("elsewhere")).unwrap();
    write(&r.join("elsewhere/precious"), "data\n");
    std::os::unix::fs::symlink(r.join("elsewhere"), r.join("link")).unwrap();
    f.refused(&s(&r.join("link")), &[], "symbolic link");
}

#[test]
fn a_layout_holding_other_tags_is_refused_and_the_same_tag_is_rebuilt() {
    let f = fixture();
    let out = f.root.join("out");
    f.build_ok(&s(&out), &["--tag", "stable"]);
    f.refused(&s(&out), &["--tag", "latest"], "tagged `stable`");
    f.refused(&s(&out), &[], "tagged `stable`");
    // Rebuilding the tag it holds replaces it; so does building into an empty directory.
    write(&f.root.join("rootfs/etc/motd"), "changed\n");
    f.build_ok(&s(&out), &["--tag", "stable"]);
    unpacks(&out, "stable", &f.root.join("b1"));
    assert!(f.root.join("b1/rootfs/etc/motd").is_file());
    std::fs::create_dir(f.root.join("empty")).unwrap();
    f.build_ok(&s(&f.root.join("empty")), &[]);
    unpacks(&f.root.join("empty"), "latest", &f.root.join("b2"));
    let staging: Vec<_> = std::fs::read_dir(&f.root)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("gpuimg-tmp"))
        .collect();
    assert!(staging.is_empty(), "{staging:?}");
}

#[test]
fn force_replaces_what_was_refused_but_never_follows_a_link() {
    let f = fixture();
    let r = &f.root;
    write(&r.join("notes/todo.txt"), "x\n");
    write(
        &r.join("mixed/oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    );
    write(&r.join("mixed/README.md"), "mine\n");
    write(&r.join("plain-file"), "data\n");
    std::fs::create_dir(r.join("elsewhere")).unwrap();
    write(&r.join("elsewhere/precious"), "data\n");
    std::os::unix::fs::symlink(r.join("elsewhere"), r.join("link")).unwrap();
    let tagged = r.join("tagged");
    f.build_ok(&s(&tagged), &["--tag", "stable"]);
    for (i, name) in ["notes", "mixed", "plain-file", "link", "tagged"]
        .iter()
        .enumerate()
    {
        let target = r.join(name);
        f.build_ok(&s(&target), &["--force"]);
        assert!(std::fs::symlink_metadata(&target).unwrap().is_dir());
        unpacks(&target, "latest", &r.join(format!("bundle{i}")));
        let names: Vec<_> = std::fs::read_dir(&target)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 3, "{name}: {names:?}");
    }
    // The link was replaced; what it pointed to was not touched.
    assert_eq!(
        std::fs::read_to_string(r.join("elsewhere/precious")).unwrap(),
        "data\n"
    );
    assert_eq!(std::fs::read_dir(r.join("elsewhere")).unwrap().count(), 1);
}

#[test]
fn devices_and_fifos_are_never_replaced_even_with_force() {
    let f = fixture();
    let fifo = f.root.join("fifo");
    run_ok(Command::new("mkfifo").arg(&fifo));
    for extra in [&[][..], &["--force"][..]] {
        f.refused(&s(&fifo), extra, "it is a FIFO");
        f.refused(&format!("oci-archive:{}", s(&fifo)), extra, "it is a FIFO");
    }
    for extra in [&[][..], &["--force"][..]] {
        let out = f.build("oci-archive:/dev/null", extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("it is a device"), "{stderr}");
        assert_error(&stderr, &[f.root.as_path()]);
    }
    let m = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &m.file_type()
    ));
}

#[test]
fn archives_replace_only_archives_of_our_layout() {
    let f = fixture();
    let r = &f.root;
    // A previous archive of the same tag is replaced; one of another tag is not.
    let img = r.join("img.tar");
    f.build_ok(&format!("oci-archive:{}", s(&img)), &[]);
    archive_ok(&img, "latest");
    f.build_ok(&format!("oci-archive:{}", s(&img)), &[]);
    archive_ok(&img, "latest");
    f.refused(
        &format!("oci-archive:{}", s(&img)),
        &["--tag", "v2"],
        "tagged `latest`",
    );

    write(
        &r.join("text.tar"),
        "just some text, not a tar archive at all\n",
    );
    write(&r.join("empty.tar"), "");
    python_tar(
        &r.join("other.tar"),
        "f('etc/passwd', b'root:x:0:0::/:/bin/sh\\n')",
    );
    python_tar(
        &r.join("half.tar"),
        "f('oci-layout', b'{\"imageLayoutVersion\":\"1.0.0\"}')\nf('index.json', b'{\"manifests\":[]}')\nf('extra.txt')",
    );
    run_ok(Command::new("gzip").args(["-k", "-n"]).arg(&img));
    std::fs::create_dir(r.join("dir.tar")).unwrap();
    write(&r.join("dir.tar/inside"), "x");
    for (name, needle) in [
        ("text.tar", "not a tar archive"),
        ("empty.tar", "not a tar archive"),
        ("other.tar", "`etc/passwd`"),
        ("half.tar", "`extra.txt`"),
        ("img.tar.gz", "not a tar archive"),
        ("dir.tar", "it is a directory"),
    ] {
        let target = format!("oci-archive:{}", s(&r.join(name)));
        if name == "img.tar.gz" {
            // The tar reader's message quotes the gzip bytes it took for a header (they vary
            // with the image, and from host to host): compared by its stable part only.
            f.refused_unsnapshotted(&target, &[], needle);
        } else {
            f.refused(&target, &[], needle);
        }
    }
    // With --force each becomes our archive.
    for name in ["text.tar", "other.tar", "img.tar.gz", "dir.tar"] {
        let p = r.join(name);
        f.build_ok(&format!("oci-archive:{}", s(&p)), &["--force"]);
        assert!(std::fs::symlink_metadata(&p).unwrap().is_file());
        archive_ok(&p, "latest");
    }
}

#[test]
fn output_files_are_0644_and_directories_0755_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let out = f.root.join("out");
    let mut build = f.t.gpuimg();
    build.arg("build").arg(&f.profile).arg("-o").arg(&out);
    let o = run(&mut wrap(
        &["sh", "-c", "umask 077 && exec \"$@\"", "sh"],
        &build,
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let blobs: Vec<_> = std::fs::read_dir(out.join("blobs/sha256"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(blobs.len(), 3, "{blobs:?}"); // the base layer, config and manifest
    for p in blobs
        .iter()
        .chain([out.join("index.json"), out.join("oci-layout")].iter())
    {
        assert_eq!(mode(p), 0o644, "{}", p.display());
    }
    for d in [out.clone(), out.join("blobs"), out.join("blobs/sha256")] {
        assert_eq!(mode(&d), 0o755, "{}", d.display());
    }
}

/// A small tmpfs mounted at `dir` for the life of the value.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        run_ok(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(dir),
        );
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn failed_exports_remove_their_staging_at_once() {
    let f = fixture();
    // Poorly compressible data so that the layer is larger than the file system.
    let mut x: u64 = 0x2545F4914F6CDD1D;
    let data: Vec<u8> = (0..(2 << 20))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(f.root.join("rootfs/noise.bin"), data).unwrap();
    let small = Tmpfs::mount(&f.root.join("small"), "1m");
    for target in [
        format!("{}/img", s(&small.0)),
        format!("oci-archive:{}/img.tar", s(&small.0)),
    ] {
        let out = f.build(&target, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{target}: {stderr}");
        assert!(stderr.contains("No space left"), "{stderr}");
        let left: Vec<_> = std::fs::read_dir(&small.0).unwrap().flatten().collect();
        assert!(left.is_empty(), "{target} left {left:?}");
    }
    drop(small);

    // A file asked for at a path that can only be a directory (trailing `/`), and a
    // directory asked for under a file: the error comes after staging began, or before.
    write(&f.root.join("afile"), "x");
    for target in [
        format!("oci-archive:{}/outdir/img.tar/", s(&f.root)),
        format!("oci-archive:{}/afile/img.tar", s(&f.root)),
        format!("{}/afile/img", s(&f.root)),
    ] {
        let out = f.build(&target, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{target}: {stderr}");
        let errors = stderr.lines().filter(|l| l.starts_with("error")).count();
        assert_eq!(errors, 1, "{stderr}");
        assert!(
            stderr.trim_end().ends_with("Not a directory (os error 20)"),
            "{stderr}"
        );
    }
    let outdir: Vec<_> = std::fs::read_dir(f.root.join("outdir"))
        .map(|r| r.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(outdir.is_empty(), "staging left: {outdir:?}");
    assert_eq!(std::fs::read_to_string(f.root.join("afile")).unwrap(), "x");
}
