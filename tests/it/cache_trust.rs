//! The cache is never trusted blindly (RELIABILITY.md, class 5), end to end through the binary:
//! tampered layer records (diff_id, sizes, compression, digest, garbage) and damaged blobs
//! (bytes flipped in place, truncated, deleted, replaced) each give a warning and a correct
//! image (umoci unpack verifies every digest and diff_id); healing never changes an output
//! that hard-links the old blob and never links a bad blob into a new one; unchanged entries
//! are not checked again; `gpuimg cache verify [--repair]` and `gpuimg cache prune`.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use gpuimg_store::digest::{hash_reader, Digest};

struct Setup {
    t: Sandbox,
    profile: PathBuf,
    cache: PathBuf,
}

fn setup() -> Setup {
    require("umoci");
    let t = Sandbox::new();
    busybox_rootfs(t.path());
    write(&t.path().join("app/data.txt"), "payload\n");
    write(&t.path().join("app/more.txt"), &"x".repeat(5000));
    let profile = t.path().join("p.yaml");
    write(
        &profile,
        "name: trust\nbase:\n  rootfs: ./rootfs\nfiles:\n  - {src: ./app, dst: /app}\nconfig:\n  cmd: [/bin/sh]\n",
    );
    let cache = t.path().join("cache");
    Setup { t, profile, cache }
}

impl Setup {
    fn path(&self, p: &str) -> PathBuf {
        self.t.path().join(p)
    }

    fn build_cmd(&self, out: &str) -> Command {
        let mut c = self.t.gpuimg_with_cache(&self.cache);
        c.env("SOURCE_DATE_EPOCH", "1700000000")
            .arg("build")
            .arg(&self.profile)
            .arg("-o")
            .arg(self.target(out))
            .arg("--json");
        c
    }

    fn target(&self, out: &str) -> String {
        match out.strip_suffix(".tar") {
            Some(_) => format!("oci-archive:{}", self.path(out).display()),
            None => self.path(out).display().to_string(),
        }
    }

    /// Build into `out` (a layout, or an archive when it ends in `.tar`); returns the build's
    /// JSON and its stderr.
    fn build(&self, out: &str) -> (serde_json::Value, String) {
        let o = run(&mut self.build_cmd(out));
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "build failed: {stderr}");
        let v = serde_json::from_slice(&o.stdout).expect("build --json");
        (v, stderr)
    }

    fn cache_cmd(&self, args: &[&str]) -> Output {
        run(self
            .t
            .gpuimg_with_cache(&self.cache)
            .arg("cache")
            .args(args))
    }

    /// The layer records in the cache that parse: (path, JSON).
    fn records(&self) -> Vec<(PathBuf, serde_json::Value)> {
        let mut v: Vec<_> = std::fs::read_dir(self.cache.join("layers-v2"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v.into_iter()
            .filter_map(|p| {
                let j = serde_json::from_slice(&std::fs::read(&p).unwrap()).ok()?;
                Some((p, j))
            })
            .collect()
    }

    /// The record of the layer whose blob is `digest`.
    fn record_of(&self, digest: &str) -> PathBuf {
        self.records()
            .into_iter()
            .find(|(_, j)| j["digest"] == digest)
            .map(|(p, _)| p)
            .unwrap_or_else(|| panic!("no record names {digest}"))
    }

    fn blob(&self, digest: &str) -> PathBuf {
        self.cache
            .join("blobs-v1/sha256")
            .join(digest.trim_start_matches("sha256:"))
    }
}

fn layers(build: &serde_json::Value) -> Vec<(String, String)> {
    build["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["digest"].as_str().unwrap().to_string(),
                l["diff_id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn sha(p: &Path) -> Digest {
    hash_reader(std::fs::File::open(p).unwrap()).unwrap().0
}

/// umoci unpacks the layout (checking every blob's digest and every layer's diff_id) and the
/// tree is the expected one; every blob in it hashes to its name.
fn assert_good_image(layout: &Path) {
    let bundle = layout.with_extension("bundle");
    let _ = std::fs::remove_dir_all(&bundle);
    run_ok(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", layout.display()))
            .arg(&bundle),
    );
    let rootfs = bundle.join("rootfs");
    assert!(rootfs.join("bin/busybox").is_file());
    assert_eq!(
        std::fs::read_to_string(rootfs.join("app/data.txt")).unwrap(),
        "payload\n"
    );
    for e in std::fs::read_dir(layout.join("blobs/sha256")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(sha(&p).hex(), name, "{} in the output is bad", p.display());
    }
}

/// Return once the file system's timestamp clock has ticked past the stamps just written in
/// `cache` (see `cache::trust`: a change in the same tick as its stamp is the one change not
/// seen): a probe file beside them is changed until its ctime, the clock every change sets, is
/// later than its first one, itself no earlier than every stamp. No sleep, and no guess at the
/// tick's length.
fn tick(cache: &Path) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir_in(cache).unwrap();
    let probe = dir.path().join("probe");
    std::fs::write(&probe, b"").unwrap();
    let ctime = |m: &std::fs::Metadata| (m.ctime(), m.ctime_nsec());
    let first = ctime(&std::fs::metadata(&probe).unwrap());
    let mut mode = 0o600;
    loop {
        mode ^= 0o040;
        std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(mode)).unwrap();
        if ctime(&std::fs::metadata(&probe).unwrap()) > first {
            return;
        }
        std::thread::yield_now();
    }
}

fn flip(p: &Path, at: u64) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut f = std::fs::File::options()
        .read(true)
        .write(true)
        .open(p)
        .unwrap();
    let mut b = [0u8];
    f.seek(SeekFrom::Start(at)).unwrap();
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&[b[0] ^ 0x01]).unwrap();
}

/// Edit a record's JSON and put its mtime back, as a careful tamperer would.
fn edit_json(p: &Path, edit: &dyn Fn(&mut serde_json::Value)) {
    let mtime = std::fs::metadata(p).unwrap().modified().unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(p, serde_json::to_vec(&v).unwrap()).unwrap();
    std::fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

type RecordEdit = Box<dyn Fn(&Path, &[(String, String)])>;

#[test]
fn tampered_records_give_a_warning_and_a_correct_image() {
    let json = |f: fn(&mut serde_json::Value, &[(String, String)])| -> RecordEdit {
        Box::new(move |p, l| edit_json(p, &|v| f(v, l)))
    };
    let cases: Vec<(&str, RecordEdit)> = vec![
        (
            "diff_id of another digest",
            json(|v, _| v["diff_id"] = Digest::of(b"forged").to_string().into()),
        ),
        (
            "diff_id of the other layer",
            json(|v, l| v["diff_id"] = l[1].1.clone().into()),
        ),
        (
            "uncompressed size",
            json(|v, _| {
                v["uncompressed_size"] = (v["uncompressed_size"].as_u64().unwrap() + 512).into()
            }),
        ),
        ("compression", json(|v, _| v["compression"] = "zstd".into())),
        (
            "digest of the other layer's blob",
            json(|v, l| v["digest"] = l[1].0.clone().into()),
        ),
        (
            "digest of a missing blob",
            json(|v, _| v["digest"] = Digest::of(b"absent").to_string().into()),
        ),
        (
            "garbage JSON",
            Box::new(|p, _| std::fs::write(p, b"{\"digest\": garbage").unwrap()),
        ),
        (
            "truncated to half",
            Box::new(|p, _| {
                let b = std::fs::read(p).unwrap();
                std::fs::write(p, &b[..b.len() / 2]).unwrap();
            }),
        ),
        ("emptied", Box::new(|p, _| std::fs::write(p, b"").unwrap())),
    ];
    for (what, edit) in cases {
        let s = setup();
        let (first, _) = s.build("a");
        let l = layers(&first);
        assert_eq!(l.len(), 2, "base and files");
        let record = s.record_of(&l[0].0);
        tick(&s.cache);
        edit(&record, &l);

        let (again, stderr) = s.build("b");
        assert!(
            stderr.contains("warning: Cache record")
                && stderr.contains(record.file_name().unwrap().to_str().unwrap()),
            "{what}: no warning naming the record:\n{stderr}"
        );
        assert_error(&without_sizes(&warnings(&stderr)), &[s.t.path()]);
        assert_eq!(
            again["manifest_digest"], first["manifest_digest"],
            "{what}: the image changed"
        );
        assert_good_image(&s.path("b"));
        // Healed: the next build neither warns nor rebuilds.
        let (third, stderr) = s.build("c");
        assert!(!stderr.contains("warning"), "{what}: {stderr}");
        assert_eq!(third["cached_layers"], 2, "{what}");
        assert_eq!(third["manifest_digest"], first["manifest_digest"]);
    }
}

#[test]
fn damaged_blobs_are_detected_removed_and_rebuilt() {
    type Damage = fn(&Path, &Path);
    let cases: Vec<(&str, Damage)> = vec![
        ("first byte flipped in place", |p, _| flip(p, 0)),
        ("middle byte flipped in place", |p, _| {
            flip(p, std::fs::metadata(p).unwrap().len() / 2)
        }),
        ("last byte flipped in place", |p, _| {
            flip(p, std::fs::metadata(p).unwrap().len() - 1)
        }),
        ("truncated in place", |p, _| {
            let n = std::fs::metadata(p).unwrap().len();
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(n / 3)
                .unwrap();
        }),
        ("deleted", |p, _| std::fs::remove_file(p).unwrap()),
        ("replaced by the other layer's blob", |p, other| {
            std::fs::copy(other, p.with_extension("new")).unwrap();
            std::fs::rename(p.with_extension("new"), p).unwrap();
        }),
    ];
    for (what, damage) in cases {
        let s = setup();
        // An archive output: nothing outside the cache shares the blob's inode.
        let (first, _) = s.build("a.tar");
        let l = layers(&first);
        let blob = s.blob(&l[0].0);
        tick(&s.cache);
        damage(&blob, &s.blob(&l[1].0));

        let (again, stderr) = s.build("b");
        assert!(
            stderr.contains("warning: Cache "),
            "{what}: no warning:\n{stderr}"
        );
        assert_error(&without_sizes(&warnings(&stderr)), &[s.t.path()]);
        assert_eq!(
            again["cached_layers"], 1,
            "{what}: only the damaged layer is rebuilt"
        );
        assert_eq!(again["manifest_digest"], first["manifest_digest"], "{what}");
        assert_good_image(&s.path("b"));
        assert_eq!(sha(&blob).to_string(), l[0].0, "{what}: cache healed");
        let (_, stderr) = s.build("c");
        assert!(!stderr.contains("warning"), "{what}: {stderr}");
    }
}

#[test]
fn healing_never_changes_an_output_that_links_the_old_blob() {
    type Replace = fn(&Path);
    let cases: Vec<(&str, Replace)> = vec![
        ("replaced by same-size garbage", |p| {
            let n = std::fs::metadata(p).unwrap().len() as usize;
            std::fs::write(p.with_extension("new"), vec![0x5a; n]).unwrap();
            std::fs::rename(p.with_extension("new"), p).unwrap();
        }),
        ("replaced by a truncated copy", |p| {
            let b = std::fs::read(p).unwrap();
            std::fs::write(p.with_extension("new"), &b[..b.len() / 2]).unwrap();
            std::fs::rename(p.with_extension("new"), p).unwrap();
        }),
        ("unlinked and rewritten with one byte changed", |p| {
            let mut b = std::fs::read(p).unwrap();
            b[10] ^= 0xff;
            std::fs::remove_file(p).unwrap();
            std::fs::write(p, b).unwrap();
        }),
    ];
    for (what, replace) in cases {
        let s = setup();
        let (first, _) = s.build("a");
        let l = layers(&first);
        let out_blob = s
            .path("a/blobs/sha256")
            .join(l[0].0.trim_start_matches("sha256:"));
        let cache_blob = s.blob(&l[0].0);
        assert_eq!(
            std::fs::metadata(&out_blob).unwrap().ino(),
            std::fs::metadata(&cache_blob).unwrap().ino(),
            "the export hard-links the cache's blob"
        );
        let before: Vec<(PathBuf, Digest)> = std::fs::read_dir(s.path("a/blobs/sha256"))
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let d = sha(&p);
                (p, d)
            })
            .collect();
        tick(&s.cache);
        replace(&cache_blob);
        // Held open, so that its inode number cannot be reused once healing unlinks it.
        let bad = std::fs::File::open(&cache_blob).unwrap();
        let bad_ino = bad.metadata().unwrap().ino();

        let (again, stderr) = s.build("b");
        assert!(stderr.contains("warning: Cache blob"), "{what}: {stderr}");
        assert_error(&without_sizes(&warnings(&stderr)), &[s.t.path()]);
        assert_eq!(again["manifest_digest"], first["manifest_digest"]);
        // The old output is byte for byte what it was, and still a good image.
        for (p, d) in &before {
            assert_eq!(&sha(p), d, "{what}: {} changed", p.display());
        }
        assert_good_image(&s.path("a"));
        // The new output got a fresh, good blob, never the bad inode.
        assert_good_image(&s.path("b"));
        let new_blob = s
            .path("b/blobs/sha256")
            .join(l[0].0.trim_start_matches("sha256:"));
        assert_ne!(
            std::fs::metadata(&new_blob).unwrap().ino(),
            bad_ino,
            "{what}"
        );
        drop(bad);
        assert_eq!(sha(&cache_blob).to_string(), l[0].0, "{what}: cache healed");
    }
}

/// Files under `dir` with (inode, mtime ns): a full check rewrites a stamp (new inode).
fn stamps(dir: &Path) -> Vec<(PathBuf, u64, i64)> {
    let mut v = Vec::new();
    for sub in ["blobs-v1", "layers-v2"] {
        for e in std::fs::read_dir(dir.join(sub)).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::metadata(&p).unwrap();
            v.push((p, m.ino(), m.mtime_nsec()));
        }
    }
    v.sort();
    v
}

#[test]
fn unchanged_entries_are_trusted_without_a_check() {
    let s = setup();
    s.build("a");
    let trust = s.cache.join("trust-v2");
    let stamped = stamps(&trust);
    assert_eq!(stamped.len(), 4, "two blobs, two records: {stamped:?}");
    tick(&s.cache);
    // Into an archive: nothing links the blobs, so nothing moves their ctime.
    let (v, stderr) = s.build("b.tar");
    assert_eq!(v["cached_layers"], 2, "{stderr}");
    assert_eq!(stamps(&trust), stamped, "no entry was checked again");
    // Into a layout, twice: the links move the blobs' ctime, and the build carries the stamps
    // over, so the build after that checks nothing either.
    s.build("c");
    let after_link = stamps(&trust);
    tick(&s.cache);
    let (v, _) = s.build("d.tar");
    assert_eq!(v["cached_layers"], 2);
    assert_eq!(stamps(&trust), after_link);
    // Replacing the output "c" (unlinking its links) is carried over the same way.
    s.build("c");
    let after_replace = stamps(&trust);
    tick(&s.cache);
    s.build("e.tar");
    assert_eq!(stamps(&trust), after_replace);
}

#[test]
fn cache_verify_reports_each_bad_entry_and_repair_heals() {
    let s = setup();
    let (first, _) = s.build("a.tar");
    let l = layers(&first);
    let out = s.cache_cmd(&["verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("2 layer blobs, 2 layer records, 0 downloads: all good"),
        "{stdout}"
    );

    // Downloads: one good, one flipped, one named by no digest.
    let apt = s.cache.join("debs-v1/sha256");
    std::fs::create_dir_all(&apt).unwrap();
    std::fs::write(apt.join(Digest::of(b"deb").hex()), b"deb").unwrap();
    let bad_deb = Digest::of(b"package");
    std::fs::write(apt.join(bad_deb.hex()), b"packagf").unwrap();
    std::fs::write(apt.join("partial"), b"x").unwrap();
    // Layers: a record's diff_id, the other layer's blob bytes, a garbage record, a stray.
    edit_json(&s.record_of(&l[0].0), &|v| {
        v["diff_id"] = Digest::of(b"forged").to_string().into()
    });
    flip(&s.blob(&l[1].0), 7);
    let garbage = s
        .cache
        .join("layers-v2")
        .join(format!("{}.json", Digest::of(b"k").hex()));
    std::fs::write(&garbage, b"[1, 2").unwrap();
    std::fs::write(s.cache.join("layers-v2/notes.txt"), b"hi").unwrap();

    let out = s.cache_cmd(&["verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let bad: Vec<&str> = stdout.lines().filter(|l| l.starts_with("bad: ")).collect();
    let expect = [
        format!("debs-v1/sha256/{}", bad_deb.hex()),
        "debs-v1/sha256/partial".to_string(),
        s.record_of(&l[0].0)
            .strip_prefix(&s.cache)
            .unwrap()
            .display()
            .to_string(),
        s.record_of(&l[1].0)
            .strip_prefix(&s.cache)
            .unwrap()
            .display()
            .to_string(),
        format!("blobs-v1/sha256/{}", l[1].0.trim_start_matches("sha256:")),
        garbage
            .strip_prefix(&s.cache)
            .unwrap()
            .display()
            .to_string(),
        "layers-v2/notes.txt".to_string(),
    ];
    for e in &expect {
        assert!(
            bad.iter().any(|b| b.starts_with(&format!("bad: {e}: "))),
            "{e} not reported:\n{stdout}"
        );
    }
    assert_eq!(bad.len(), expect.len(), "{stdout}");
    assert!(stdout.contains("diff_id"), "{stdout}");
    assert!(stdout.contains("7 bad"), "{stdout}");
    assert!(!stdout.contains("(removed)"));

    let out = s.cache_cmd(&["verify", "--repair"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "bad entries were found: {stdout}"
    );
    assert_eq!(stdout.matches("(removed)").count(), 7, "{stdout}");
    let out = s.cache_cmd(&["verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("all good"), "{stdout}");

    // The next build rebuilds what was removed, without warnings, into a good image.
    let (again, stderr) = s.build("b");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(again["manifest_digest"], first["manifest_digest"]);
    assert_good_image(&s.path("b"));
    assert_eq!(s.cache_cmd(&["verify"]).status.code(), Some(0));
}

#[test]
fn cache_prune_removes_unreferenced_blobs_and_says_what_it_freed() {
    let s = setup();
    let (first, _) = s.build("a");
    let l = layers(&first);
    // The files layer's record goes (as after a repair), and a stray file appears.
    std::fs::remove_file(s.record_of(&l[1].0)).unwrap();
    std::fs::write(s.cache.join("blobs-v1/sha256/leftover"), vec![0u8; 3000]).unwrap();

    let out = s.cache_cmd(&["prune"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("removed blobs-v1/sha256/leftover (3.0 kB)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "removed blobs-v1/sha256/{} ",
            l[1].0.trim_start_matches("sha256:")
        )) && stdout.contains("still linked from an output"),
        "the files blob is still hard-linked from output a:\n{stdout}"
    );
    assert!(
        stdout.contains("pruned 2 unreferenced blobs: freed 3.0 kB ("),
        "{stdout}"
    );
    assert!(stdout.contains("kept 1 blob referenced"), "{stdout}");
    assert!(!s.blob(&l[1].0).exists() && s.blob(&l[0].0).exists());
    assert_good_image(&s.path("a"));

    // Nothing left to prune; the next build reuses the base and rebuilds the files layer.
    let out = s.cache_cmd(&["prune"]);
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("pruned 0 unreferenced blobs: freed 0 bytes; kept 1 blob referenced"));
    let (again, stderr) = s.build("b");
    assert_eq!(again["cached_layers"], 1, "{stderr}");
    assert_good_image(&s.path("b"));

    // A running build holds the cache's lock (shared, as every build takes it; held here by the
    // test itself, so it is held before prune starts): prune refuses, exit 2, and removes
    // nothing.
    std::fs::write(s.cache.join("blobs-v1/sha256/leftover"), b"x").unwrap();
    let lock = std::fs::File::open(s.cache.join("lock")).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockShared).unwrap();
    let out = s.cache_cmd(&["prune"]);
    drop(lock);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("in use by a running build"), "{stderr}");
    assert_error(&stderr, &[s.t.path()]);
    assert!(s.cache.join("blobs-v1/sha256/leftover").exists());
}

#[test]
fn cache_commands_refuse_a_directory_that_is_not_a_cache() {
    let t = Sandbox::new();
    let missing = t.path().join("none");
    for cmd in ["verify", "prune"] {
        let out = run(t.gpuimg().args(["cache", cmd, "--cache"]).arg(&missing));
        assert_eq!(out.status.code(), Some(0), "{cmd}: nothing to do");
        assert!(!missing.exists(), "{cmd} created the cache");
    }
    let home = t.path().join("home");
    write(&home.join("notes.txt"), "mine\n");
    for cmd in ["verify", "prune"] {
        let out = run(t.gpuimg().args(["cache", cmd, "--cache"]).arg(&home));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{cmd}: {stderr}");
        assert!(stderr.contains("is not a gpuimg cache"), "{stderr}");
        assert_error(&stderr, &[t.path()]);
        assert_eq!(
            std::fs::read_dir(&home).unwrap().count(),
            1,
            "{cmd} wrote into it"
        );
    }
}
