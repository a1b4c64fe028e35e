//! The cache's documented layout is the one on disk: a rootfs build and an apt build from a
//! fixture repository into one cache use every bucket, and the directories they leave are
//! exactly those the `src/cache/mod.rs` drawing and `cache::Bucket` declare;
//! `cache verify` covers the downloads, `cache prune` removes earlier layouts' directories,
//! and an offline rebuild is served from the buckets alone; `cache prune`'s download policies
//! keep the downloads in bounds, and both commands say what each bucket holds.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{assert_error, pkg, signed_repo, Sandbox};
use gpuimg_store::cache::{Bucket, Shape, RETIRED};

/// The module doc of `crates/store/src/cache/mod.rs`, whose drawing this test holds the disk to.
const CACHE_DOC: &str = include_str!("../../crates/store/src/cache/mod.rs");

/// (top-level name, literal second path component if any) for every line of the drawing.
fn drawn() -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for line in CACHE_DOC.lines().take_while(|l| l.starts_with("//!")) {
        let Some(rest) = line
            .split_once("├── ")
            .or_else(|| line.split_once("└── "))
            .map(|(_, r)| r)
        else {
            continue;
        };
        let path = rest.split_whitespace().next().unwrap_or_default();
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        let top = parts.next().unwrap_or_default().to_string();
        let sub = parts
            .next()
            .filter(|p| !p.starts_with('<'))
            .map(str::to_string);
        out.push((top, sub));
    }
    out
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Buckets the builds here do not touch: Python wheels and their metadata (a profile with
/// `python:` fills them; tests/pypi_index.rs checks where wheels land), the push mount
/// hints (tests/registry_push.rs pushes) and the library copies (`strip: [device-code]` and
/// `debug-symbols` on wheels; tests/device_code.rs).
const UNUSED_HERE: [Bucket; 4] = [
    Bucket::Wheels,
    Bucket::WheelMetadata,
    Bucket::Pushed,
    Bucket::Copies,
];

fn declared() -> BTreeSet<String> {
    let mut d: BTreeSet<String> = Bucket::ALL.iter().map(|b| b.dir().to_string()).collect();
    d.insert("CACHEDIR.TAG".into());
    d.insert("lock".into());
    d
}

struct Builds {
    t: Sandbox,
    cache: std::path::PathBuf,
    repo_url: String,
    _repo: common::SignedRepo,
}

fn setup() -> Builds {
    common::require("gpg");
    common::require("dpkg-deb");
    let t = common::Sandbox::new();
    // A rootfs build with a files layer.
    common::busybox_rootfs(t.path());
    common::write(&t.path().join("app/data.txt"), "payload\n");
    // A file large enough for its gzip blocks to be recorded (`fragments-v1/`).
    let big: String = (0..120_000).map(|i| format!("{i:08}\n")).collect();
    common::write(&t.path().join("app/big.txt"), &big);
    common::write(
        &t.path().join("rootfs.yaml"),
        "name: layout-rootfs\nbase:\n  rootfs: ./rootfs\nfiles:\n  - {src: ./app, dst: /app}\nconfig:\n  cmd: [/bin/sh]\n",
    );
    // An apt build from a signed fixture repository (InRelease, Packages.gz, two debs).
    let mut hello = pkg("hello", "1.0").field("Depends", "libhello");
    hello.files = vec![("/usr/bin/hello", b"#!/bin/sh\necho hi\n", 0o755)];
    let mut lib = pkg("libhello", "1.0");
    lib.files = vec![("/usr/lib/libhello.so.1", b"\x7fELF-ish\n", 0o644)];
    let repo = signed_repo(&[("stable", vec![&hello, &lib])]);
    repo.keyring_into(t.path());
    common::write(
        &t.path().join("apt.yaml"),
        "name: layout-apt\nbase:\n  apt:\n    mirror: ${REPO}\n    suite: stable\n    packages: [hello]\n    keyring: repo.gpg\n",
    );
    let cache = t.path().join("cache");
    Builds {
        cache,
        repo_url: repo.url.clone(),
        _repo: repo,
        t,
    }
}

impl Builds {
    fn build(&self, profile: &str, out: &str, extra: &[&str]) -> serde_json::Value {
        let json = common::run_ok(
            self.t
                .gpuimg_with_cache(&self.cache)
                .env("REPO", &self.repo_url)
                .env("SOURCE_DATE_EPOCH", "1700000000")
                .arg("build")
                .arg(self.t.path().join(profile))
                .arg("-o")
                .arg(self.t.path().join(out))
                .arg("--json")
                .args(extra),
        );
        serde_json::from_str(json.trim()).unwrap()
    }

    fn cache_cmd(&self, args: &[&str]) -> String {
        common::run_ok(
            self.t
                .gpuimg_with_cache(&self.cache)
                .arg("cache")
                .args(args),
        )
    }

    /// Every top-level entry and every bucket's directories are the declared ones.
    fn assert_layout(&self) {
        let c = &self.cache;
        let mut want = declared();
        for b in UNUSED_HERE {
            want.remove(b.dir());
        }
        assert_eq!(names(c), want, "top level of {}", c.display());
        for b in Bucket::ALL.into_iter().filter(|b| !UNUSED_HERE.contains(b)) {
            let dir = c.join(b.dir());
            let inside = names(&dir);
            match (b, b.shape()) {
                (_, Shape::Content) => {
                    assert_eq!(inside, BTreeSet::from(["sha256".to_string()]), "{b:?}");
                    assert!(!names(&dir.join("sha256")).is_empty(), "{b:?} is unused");
                }
                (_, Shape::Records) => {
                    assert!(!inside.is_empty(), "{b:?} is unused");
                    for n in &inside {
                        let hex = n
                            .strip_suffix(".json")
                            .unwrap_or_else(|| panic!("{b:?}: {n}"));
                        assert!(
                            gpuimg_store::digest::Digest::from_hex(hex).is_ok(),
                            "{b:?}: {n}"
                        );
                    }
                }
                (Bucket::Trust, _) => {
                    let stamped: BTreeSet<String> = Bucket::ALL
                        .iter()
                        .filter(|b| b.stamped() && !UNUSED_HERE.contains(b))
                        .map(|b| b.dir().to_string())
                        .collect();
                    assert_eq!(inside, stamped, "one stamp directory per stamped bucket");
                    for s in &stamped {
                        assert!(!names(&dir.join(s)).is_empty(), "no stamps for {s}");
                    }
                }
                (Bucket::Roots, _) => {
                    assert!(!inside.is_empty(), "roots unused");
                }
                (Bucket::Tmp, _) => assert!(inside.is_empty(), "leftovers in tmp: {inside:?}"),
                _ => unreachable!("{b:?}"),
            }
        }
    }
}

#[test]
fn the_drawing_and_the_bucket_enum_declare_the_same_layout() {
    let d = drawn();
    let tops: BTreeSet<String> = d.iter().map(|(t, _)| t.clone()).collect();
    assert_eq!(
        tops,
        declared(),
        "crates/store/src/cache/mod.rs drawing vs cache::Bucket"
    );
    for b in Bucket::ALL {
        let subs: BTreeSet<Option<String>> = d
            .iter()
            .filter(|(t, _)| t == b.dir())
            .map(|(_, s)| s.clone())
            .collect();
        let want = match b.shape() {
            Shape::Content => Some("sha256".to_string()),
            _ => None,
        };
        assert_eq!(subs, BTreeSet::from([want]), "{b:?}");
    }
    for old in RETIRED {
        assert!(
            CACHE_DOC.contains(&format!("`{old}/`")),
            "{old} is documented"
        );
    }
}

#[test]
fn a_rootfs_and_an_apt_build_leave_exactly_the_documented_layout() {
    let s = setup();
    let rootfs = s.build("rootfs.yaml", "out-rootfs", &[]);
    let apt = s.build("apt.yaml", "out-apt", &[]);
    s.assert_layout();

    // The drawing's literal sub-directories exist where it draws them.
    for (top, sub) in drawn() {
        if UNUSED_HERE.iter().any(|b| b.dir() == top) {
            continue;
        }
        if let Some(sub) = sub {
            assert!(s.cache.join(&top).join(&sub).is_dir(), "{top}/{sub}");
        }
    }

    // verify checks the downloads too: two debs and the indexes.
    let out = s.cache_cmd(&["verify"]);
    let line = out.lines().last().unwrap_or_default();
    let downloads: usize = line
        .split(", ")
        .find_map(|p| p.strip_suffix(" downloads: all good"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    let debs = names(&s.cache.join("debs-v1/sha256")).len();
    let indexes = names(&s.cache.join("indexes-v1/sha256")).len();
    assert_eq!(debs, 2, "{out}");
    assert_eq!(downloads, debs + indexes, "{out}");

    // Offline, from the buckets alone (roots, indexes, debs, layers), the same images.
    let again = s.build("apt.yaml", "out-apt-2", &["--offline"]);
    assert_eq!(again["manifest_digest"], apt["manifest_digest"]);
    let again = s.build("rootfs.yaml", "out-rootfs-2", &[]);
    assert_eq!(again["manifest_digest"], rootfs["manifest_digest"]);
    s.assert_layout();
}

#[test]
fn prune_removes_earlier_layouts_and_keeps_the_current_one() {
    let s = setup();
    let first = s.build("rootfs.yaml", "out-rootfs", &[]);
    s.build("apt.yaml", "out-apt", &[]);
    let old = [
        "apt-v1/blobs/sha256/0000",
        "apt-v1/CACHEDIR.TAG",
        "bases-v1/k.json",
        "layers-v1/k.json",
        "trust-v1/blobs/x.json",
    ];
    for p in old {
        common::write(&s.cache.join(p), &"o".repeat(1000));
    }
    // A listing of a layer no record names any more.
    let stale = s.cache.join("listings-v1").join(format!(
        "{}.json",
        gpuimg_store::digest::Digest::of(b"gone").hex()
    ));
    std::fs::write(&stale, b"{}").unwrap();
    let out = s.cache_cmd(&["prune"]);
    for dir in RETIRED {
        assert!(
            out.contains(&format!("removed {dir}/ (an earlier cache layout, ")),
            "{out}"
        );
        assert!(!s.cache.join(dir).exists(), "{dir}");
    }
    assert!(out.contains("freed 5.0 kB"), "{out}");
    assert!(!stale.exists(), "stale listing removed");
    s.assert_layout();
    // Nothing current was lost: both builds are cache hits, the apt one even offline.
    let again = s.build("rootfs.yaml", "out-rootfs-2", &[]);
    assert_eq!(again["manifest_digest"], first["manifest_digest"]);
    assert_eq!(
        again["cached_layers"],
        first["layers"].as_array().unwrap().len()
    );
    s.build("apt.yaml", "out-apt-2", &["--offline"]);
    s.assert_layout();
}

/// The files under `dir`, sorted by name.
fn entries(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// Set a download's last use (access and modification time) to `days` ago.
fn used_days_ago(path: &Path, days: u64) {
    let t = std::time::SystemTime::now() - std::time::Duration::from_secs(days * 86_400);
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_times(std::fs::FileTimes::new().set_accessed(t).set_modified(t))
        .unwrap();
}

fn hex_of(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// Downloads are kept in bounds by the policies `cache prune` is given (issue 34, item 12),
/// and only by them: a plain prune keeps every download and says so; `--older-than` removes
/// those unused for longer (a dry run first lists them and removes nothing), `--max-size` the
/// least recently used until the downloads fit, `--keep-locked` all a real lock does not pin;
/// an unreadable lock removes nothing (exit 2), nor does a prune while a build holds the cache;
/// `cache verify` reading every download is no use of it. Each prints what each bucket holds
/// before and after, as `cache verify` prints what each holds. Nothing pinned is lost: the
/// locked build is still served.
#[test]
fn prune_policies_keep_the_downloads_in_bounds() {
    let s = setup();
    let first = s.build("apt.yaml", "out-apt", &[]);
    let debs = entries(&s.cache.join("debs-v1/sha256"));
    let indexes = entries(&s.cache.join("indexes-v1/sha256"));
    assert_eq!(debs.len(), 2);
    assert!(!indexes.is_empty());

    let out = s.cache_cmd(&["verify"]);
    let row = |out: &str, dir: &str| -> String {
        out.lines()
            .find(|l| l.starts_with(&format!("{dir} ")))
            .unwrap_or_else(|| panic!("no row for {dir}:\n{out}"))
            .to_string()
    };
    let debs_row = row(&out, "debs-v1");
    assert!(
        debs_row.contains("downloaded .deb packages") && debs_row.contains(" 2 entries, "),
        "{out}"
    );

    let out = s.cache_cmd(&["prune"]);
    assert!(out.contains("downloads are kept"), "{out}");
    assert_eq!(entries(&s.cache.join("debs-v1/sha256")), debs, "{out}");

    // Last use set explicitly: one deb unused for 40 days, every other download for 10.
    for p in debs.iter().chain(&indexes) {
        used_days_ago(p, 10);
    }
    used_days_ago(&debs[0], 40);
    let old = format!("debs-v1/sha256/{}", hex_of(&debs[0]));
    // Checking every download in full is no use of it: the ages stay.
    assert!(s.cache_cmd(&["verify"]).contains("all good"));
    let out = s.cache_cmd(&["prune", "--older-than", "30d", "--dry-run"]);
    assert!(
        out.contains(&format!("would remove {old} (")) && out.contains("last used 40 days ago"),
        "{out}"
    );
    assert!(out.contains("would prune 1 download: would free "), "{out}");
    let projected = row(&out, "debs-v1");
    assert!(
        projected.contains(" 2 entries, ") && projected.contains(" 1 entry, "),
        "before and after: {out}"
    );
    assert!(debs[0].exists(), "a dry run removed it");

    // While a build holds the cache (its shared lock, taken here as a build takes it), a
    // prune refuses and removes nothing; a dry run runs beside it.
    {
        let _build = gpuimg_store::cache::Cache::open(&s.cache).unwrap();
        let refused = common::run(s.t.gpuimg_with_cache(&s.cache).args([
            "cache",
            "prune",
            "--older-than",
            "30d",
        ]));
        let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
        assert_eq!(refused.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("in use by a running build"), "{stderr}");
        assert_error(&stderr, &[s.t.path()]);
        assert!(debs[0].exists(), "removed under a running build");
        let out = s.cache_cmd(&["prune", "--older-than", "30d", "--dry-run"]);
        assert!(out.contains(&format!("would remove {old} (")), "{out}");
    }

    let out = s.cache_cmd(&["prune", "--older-than", "30d", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["dry_run"], false);
    let gone = v["downloads"].as_array().unwrap();
    assert_eq!(gone.len(), 1, "{out}");
    assert_eq!(gone[0]["entry"], old.as_str());
    assert_eq!(gone[0]["why"], "unused");
    let size1 = std::fs::metadata(&debs[1]).unwrap().len();
    let b = &v["buckets"]["debs-v1"];
    assert_eq!(b["before"]["entries"], 2, "{out}");
    assert_eq!(
        (&b["after"]["entries"], &b["after"]["bytes"]),
        (&1.into(), &size1.into())
    );
    assert!(!debs[0].exists() && debs[1].exists());
    assert!(!s
        .cache
        .join("trust-v2/debs-v1")
        .join(format!("{}.json", hex_of(&debs[0])))
        .exists());

    // The indexes are used less recently than the deb left: they go until the deb fits.
    used_days_ago(&debs[1], 5);
    let out = s.cache_cmd(&["prune", "--max-size", &size1.to_string()]);
    assert!(out.contains("past --max-size"), "{out}");
    assert!(
        entries(&s.cache.join("indexes-v1/sha256")).is_empty(),
        "{out}"
    );
    assert!(debs[1].exists(), "{out}");

    // A real lock pins both debs; an unpinned download (a stray wheel) and the indexes the
    // lock fetched again go, the pinned deb stays however old it is.
    let lock: serde_json::Value = serde_json::from_str(&common::run_ok(
        s.t.gpuimg_with_cache(&s.cache)
            .env("REPO", &s.repo_url)
            .args(["lock", "--json"])
            .arg(s.t.path().join("apt.yaml")),
    ))
    .unwrap();
    let lock_path = lock["lock"].as_str().unwrap().to_string();
    let wheel_bytes = b"not really a wheel";
    let wheel = s
        .cache
        .join("wheels-v1/sha256")
        .join(gpuimg_store::digest::Digest::of(wheel_bytes).hex());
    common::write(&wheel, std::str::from_utf8(wheel_bytes).unwrap());
    used_days_ago(&debs[1], 400);
    let missing = s.t.path().join("missing.lock.json");
    let refused = common::run(
        s.t.gpuimg_with_cache(&s.cache)
            .args(["cache", "prune", "--keep-locked", &lock_path])
            .arg(&missing),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Failed to read lock"), "{stderr}");
    assert_error(&stderr, &[s.t.path()]);
    assert!(wheel.exists(), "an unreadable lock removed something");
    let out = s.cache_cmd(&["prune", "--keep-locked", &lock_path, "--older-than", "1d"]);
    assert!(out.contains("a download no given lock pins"), "{out}");
    assert!(!wheel.exists() && debs[1].exists(), "{out}");
    assert!(
        entries(&s.cache.join("indexes-v1/sha256")).is_empty(),
        "{out}"
    );
    assert!(row(&out, "wheels-v1").contains(" 0 entries, "), "{out}");

    // What went comes back on demand; the image is the same.
    let again = s.build("apt.yaml", "out-apt-2", &[]);
    assert_eq!(again["manifest_digest"], first["manifest_digest"]);
    assert!(s.cache_cmd(&["verify"]).contains("all good"));
}
