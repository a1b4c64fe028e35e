//! A build killed mid-way (SIGKILL) leaves the previous output intact, and the next build
//! succeeds and reclaims the leftovers of every kind (partial blobs and scratch directories
//! in the cache's tmp/, `.NAME.gpuimg-tmp.*` beside outputs). Staging that a live build
//! holds locked is never reclaimed: concurrent builds on one cache both succeed.
//!
//! Each build is killed (or held while another runs) at one exact point: it stops itself there
//! (`common::stop`, the binaries' debug-build hook), so no test races the build it watches.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use gpuimg_store::staging::Staged;

/// `mib` MiB of poorly compressible bytes at `path` (a layer of about that size).
fn noise(path: &Path, mib: usize) {
    let mut f = std::fs::File::create(path).unwrap();
    let mut x: u64 = 0x9E3779B97F4A7C15 ^ mib as u64;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..mib {
        for chunk in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&buf).unwrap();
    }
}

/// Names in `dir` (empty when it does not exist).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// SIGKILL a build stopped at its stop point (`spawn_stopped`) and reap it.
fn kill_stopped(mut child: std::process::Child) {
    child.kill().unwrap(); // SIGKILL, which a stopped process takes at once
    let status = child.wait().unwrap();
    assert!(!status.success(), "{status}");
}

/// Whether `dir` holds an entry named `<stem>.gpuimg-tmp.*` (a file larger than `min`).
fn has_staging(dir: &Path, stem: &str, min: u64) -> bool {
    std::fs::read_dir(dir)
        .map(|r| {
            r.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{stem}.gpuimg-tmp."))
                    && e.metadata().is_ok_and(|m| m.is_dir() || m.len() > min)
            })
        })
        .unwrap_or(false)
}

fn build_cmd(sb: &Sandbox, profile: &Path, cache: &Path, target: &str) -> Command {
    let mut c = sb.gpuimg_with_cache(cache);
    c.arg("build")
        .arg(profile)
        .arg("-o")
        .arg(target)
        .arg("--json");
    c
}

fn unpack_ok(layout: &Path, bundle: &Path) -> PathBuf {
    run_ok(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", layout.display()))
            .arg(bundle),
    );
    assert!(bundle.join("rootfs/bin/busybox").is_file());
    bundle.join("rootfs")
}

#[test]
fn sigkill_mid_build_keeps_previous_output() {
    require("umoci");
    let t = Sandbox::new();
    let root = busybox_rootfs(t.path());
    let p = t.path().join("p.yaml");
    write(&p, "name: big\nbase:\n  rootfs: ./rootfs\n");
    let out = t.path().join("out");
    let cache = t.path().join("cache");
    let build = |cache: &std::path::Path| {
        let mut c = t.gpuimg_with_cache(cache);
        c.arg("build").arg(&p).arg("-o").arg(&out).arg("--json");
        c
    };
    let first = manifest_digest(&run_ok(&mut build(&cache)));
    let index_before = std::fs::read(out.join("index.json")).unwrap();

    // The next build has a new layer to write.
    noise(&root.join("big.bin"), 4);

    // Kill it when its layer is written to the cache's tmp/ and not yet named.
    kill_stopped(spawn_stopped(&mut build(&cache), "blob"));
    // What the killed build left: its scratch directory and its partial blob.
    let left = names(&cache.join("tmp"));
    assert!(
        left.iter().any(|n| n.starts_with("blob.gpuimg-tmp.")),
        "{left:?}"
    );
    assert!(
        left.iter().any(|n| n.starts_with("build.gpuimg-tmp.")),
        "{left:?}"
    );

    // The previous layout is untouched and still valid.
    assert_eq!(std::fs::read(out.join("index.json")).unwrap(), index_before);
    let bundle = t.path().join("bundle");
    run_ok(
        std::process::Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", out.display()))
            .arg(&bundle),
    );
    assert!(bundle.join("rootfs/bin/busybox").is_file());
    assert!(!bundle.join("rootfs/big.bin").exists());

    // The next build succeeds, replaces the output and leaves no staging directories.
    let second = manifest_digest(&run_ok(&mut build(&cache)));
    assert_ne!(first, second);
    assert_ne!(std::fs::read(out.join("index.json")).unwrap(), index_before);
    let leftovers: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("gpuimg-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(names(&cache.join("tmp")), Vec::<String>::new());
}

#[test]
fn sigkill_after_decompressing_a_rootfs_tarball_leaves_a_scratch_dir_the_next_build_reclaims() {
    require("umoci");
    let t = Sandbox::new();
    let root = busybox_rootfs(t.path());
    noise(&root.join("big.bin"), 4);
    run_ok(
        Command::new("tar")
            .arg("-czf")
            .arg(t.path().join("rootfs.tar.gz"))
            .arg("-C")
            .arg(&root)
            .arg("."),
    );
    let p = t.path().join("p.yaml");
    write(&p, "name: tarball\nbase:\n  rootfs: ./rootfs.tar.gz\n");
    let cache = t.path().join("cache");
    let out = t.path().join("out");
    // Kill it when its layer is written: the decompressed tarball lies in the build's scratch
    // directory under the cache's tmp/.
    let child = spawn_stopped(
        &mut build_cmd(&t, &p, &cache, &out.display().to_string()),
        "blob",
    );
    let scratch_has_tar = || {
        std::fs::read_dir(cache.join("tmp")).is_ok_and(|r| {
            r.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("build.gpuimg-tmp.")
                    && !names(&e.path()).is_empty()
            })
        })
    };
    assert!(scratch_has_tar(), "{:?}", names(&cache.join("tmp")));
    kill_stopped(child);
    assert!(!out.exists());
    let left = names(&cache.join("tmp"));
    assert!(
        left.iter().any(|n| n.starts_with("build.gpuimg-tmp.")),
        "{left:?}"
    );

    // Another profile on the same cache reclaims it, then this one builds.
    let small = t.path().join("small");
    std::fs::create_dir(&small).unwrap();
    busybox_rootfs(&small);
    write(
        &small.join("p.yaml"),
        "name: small\nbase:\n  rootfs: ./rootfs\n",
    );
    run_ok(&mut build_cmd(
        &t,
        &small.join("p.yaml"),
        &cache,
        &small.join("out").display().to_string(),
    ));
    assert_eq!(names(&cache.join("tmp")), Vec::<String>::new());
    run_ok(&mut build_cmd(&t, &p, &cache, &out.display().to_string()));
    assert!(unpack_ok(&out, &t.path().join("bundle"))
        .join("big.bin")
        .is_file());
    assert_eq!(names(&cache.join("tmp")), Vec::<String>::new());
}

#[test]
fn sigkill_while_writing_an_archive_leaves_staging_beside_it_the_next_build_reclaims() {
    require("skopeo");
    let t = Sandbox::new();
    let root = busybox_rootfs(t.path());
    noise(&root.join("big.bin"), 4);
    let p = t.path().join("p.yaml");
    write(&p, "name: arch\nbase:\n  rootfs: ./rootfs\n");
    let cache = t.path().join("cache");
    let img = t.path().join("img.tar");
    let target = format!("oci-archive:{}", img.display());
    // The first build fills the cache, so that the next one only exports.
    run_ok(&mut build_cmd(&t, &p, &cache, &target));
    std::fs::remove_file(&img).unwrap();
    // Kill it when the archive is written in full beside its place, not yet in it.
    kill_stopped(spawn_stopped(
        &mut build_cmd(&t, &p, &cache, &target),
        ".img.tar",
    ));
    assert!(!img.exists());
    assert!(
        has_staging(t.path(), ".img.tar", 0),
        "{:?}",
        names(t.path())
    );

    run_ok(&mut build_cmd(&t, &p, &cache, &target));
    let left: Vec<_> = names(t.path())
        .into_iter()
        .filter(|n| n.contains("gpuimg-tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    run_ok(
        Command::new("skopeo")
            .arg("inspect")
            .arg(format!("oci-archive:{}:latest", img.display())),
    );
}

#[test]
fn stale_staging_of_every_kind_is_reclaimed_and_live_staging_is_kept() {
    let t = Sandbox::new();
    busybox_rootfs(t.path());
    let p = t.path().join("p.yaml");
    write(&p, "name: img\nbase:\n  rootfs: ./rootfs\n");
    let cache = t.path().join("cache");
    let tmpd = cache.join("tmp");
    let out = t.path().join("img");
    // What killed builds leave: nobody holds a lock on these.
    write(
        &tmpd.join("build.gpuimg-tmp.00000000000000aa/rootfs-x.tar"),
        "tar",
    );
    write(
        &tmpd.join("build.gpuimg-tmp.00000000000000ab/a/b/c"),
        "deep",
    );
    write(
        &tmpd.join("blob.gpuimg-tmp.00000000000000bb"),
        "partial blob",
    );
    write(&tmpd.join("record.gpuimg-tmp.00000000000000cc"), "{");
    write(&tmpd.join("build-Ab12Cd/rootfs-y.tar"), "legacy scratch");
    write(
        &t.path()
            .join(".img.gpuimg-tmp.00000000000000dd/blobs/sha256/x"),
        "old",
    );
    write(
        &t.path().join(".img.gpuimg-tmp.4242"),
        "a pid-named leftover",
    );
    // What live builds hold, and things that are not staging at all.
    let live_scratch = Staged::dir(&tmpd, "build", 0o700).unwrap();
    write(&live_scratch.path().join("rootfs-z.tar"), "in use");
    let mut live_blob = Staged::file(&tmpd, "blob", 0o644).unwrap();
    live_blob.write_all(b"being written").unwrap();
    let live_out = Staged::dir(t.path(), ".img", 0o755).unwrap();
    write(&live_out.path().join("index.json"), "{}");
    write(&tmpd.join(".tmpQw3rTy"), "someone else's temp file");
    write(
        &t.path().join(".other.gpuimg-tmp.00000000000000ee"),
        "another output's",
    );

    run_ok(&mut build_cmd(&t, &p, &cache, &out.display().to_string()));

    assert_eq!(names(&tmpd), {
        let mut v = vec![
            ".tmpQw3rTy".to_string(),
            live_blob
                .path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            live_scratch
                .path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
        ];
        v.sort();
        v
    });
    assert!(live_scratch.path().join("rootfs-z.tar").is_file());
    assert_eq!(std::fs::read(live_blob.path()).unwrap(), b"being written");
    assert!(live_out.path().join("index.json").is_file());
    let beside: Vec<_> = names(t.path())
        .into_iter()
        .filter(|n| n.contains("gpuimg-tmp"))
        .collect();
    let mut want = vec![
        ".other.gpuimg-tmp.00000000000000ee".to_string(),
        live_out
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
    ];
    want.sort();
    assert_eq!(beside, want);
    // Their holders remove them when done.
    drop(live_scratch);
    drop(live_blob);
    drop(live_out);
    assert_eq!(names(&tmpd), [".tmpQw3rTy"]);
}

#[test]
fn concurrent_builds_on_one_cache_never_reclaim_each_others_staging() {
    require("umoci");
    let t = Sandbox::new();
    let cache = t.path().join("cache");
    let a = t.path().join("a");
    std::fs::create_dir(&a).unwrap();
    let a_root = busybox_rootfs(&a);
    noise(&a_root.join("big.bin"), 4);
    write(&a.join("p.yaml"), "name: a\nbase:\n  rootfs: ./rootfs\n");
    let b = t.path().join("b");
    std::fs::create_dir(&b).unwrap();
    busybox_rootfs(&b);
    write(&b.join("p.yaml"), "name: b\nbase:\n  rootfs: ./rootfs\n");

    let a_out = a.join("out");
    // A stops with its layer written to tmp/ and not yet named: its scratch directory and its
    // blob's staging file are live (locked) while B runs.
    let child_a = spawn_stopped(
        build_cmd(&t, &a.join("p.yaml"), &cache, &a_out.display().to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
        "blob",
    );
    assert!(has_staging(&cache.join("tmp"), "blob", 1 << 20));
    // A's scratch directory lives as long as A does (its partial blob only until committed).
    let a_scratch: Vec<String> = names(&cache.join("tmp"))
        .into_iter()
        .filter(|n| n.starts_with("build.gpuimg-tmp."))
        .collect();
    assert_eq!(a_scratch.len(), 1, "{a_scratch:?}");
    // B builds (and reclaims) several times while A is held: different outputs, and B's own
    // previous output rebuilt.
    for i in 0..3 {
        let b_out = b.join(format!("out{}", i % 2));
        run_ok(&mut build_cmd(
            &t,
            &b.join("p.yaml"),
            &cache,
            &b_out.display().to_string(),
        ));
        let now = names(&cache.join("tmp"));
        for n in &a_scratch {
            assert!(now.contains(n), "B reclaimed A's live `{n}`: {now:?}");
        }
        assert!(has_staging(&cache.join("tmp"), "blob", 1 << 20), "{now:?}");
    }
    resume(&child_a);
    let a_result = child_a.wait_with_output().unwrap();
    assert!(
        a_result.status.success(),
        "A failed: {}",
        String::from_utf8_lossy(&a_result.stderr)
    );
    assert!(unpack_ok(&a_out, &t.path().join("bundle-a"))
        .join("big.bin")
        .is_file());
    for i in 0..2 {
        unpack_ok(
            &b.join(format!("out{i}")),
            &t.path().join(format!("bundle-b{i}")),
        );
    }
    assert_eq!(names(&cache.join("tmp")), Vec::<String>::new());
}
