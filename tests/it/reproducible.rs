//! Reproducibility: the same profile and SOURCE_DATE_EPOCH give the same manifest digest in
//! different output and cache directories, even after the sources' mtimes change; another
//! epoch gives another digest. Checked for gzip and for zstd.

use crate::common;

use std::path::Path;

use common::*;

fn setup(dir: &Path) -> std::path::PathBuf {
    busybox_rootfs(dir);
    write(&dir.join("app/data.txt"), "payload\n");
    std::os::unix::fs::symlink("data.txt", dir.join("app/link")).unwrap();
    std::fs::hard_link(dir.join("app/data.txt"), dir.join("app/hard")).unwrap();
    let p = dir.join("p.yaml");
    write(
        &p,
        "name: repro\nbase:\n  rootfs: ./rootfs\nfiles:\n  - {src: ./app, dst: /app}\nconfig:\n  cmd: [/bin/sh]\n",
    );
    p
}

fn build(
    sb: &Sandbox,
    profile: &Path,
    out: &Path,
    cache: &Path,
    epoch: &str,
    compression: &str,
) -> String {
    manifest_digest(&run_ok(
        sb.gpuimg_with_cache(cache)
            .env("SOURCE_DATE_EPOCH", epoch)
            .arg("build")
            .arg(profile)
            .arg("-o")
            .arg(out)
            .args(["--compression", compression, "--json"]),
    ))
}

fn touch_all(dir: &Path) {
    run_ok(std::process::Command::new("find").arg(dir).args([
        "-exec",
        "touch",
        "-h",
        "-d",
        "2031-01-02 03:04:05",
        "{}",
        "+",
    ]));
}

#[test]
fn same_inputs_same_digest_across_dirs_and_mtimes() {
    for compression in ["gzip", "zstd"] {
        let t = Sandbox::new();
        let p = setup(t.path());
        let a = build(
            &t,
            &p,
            &t.path().join("out-a"),
            &t.path().join("cache-a"),
            "1700000000",
            compression,
        );
        touch_all(&t.path().join("rootfs"));
        touch_all(&t.path().join("app"));
        let b = build(
            &t,
            &p,
            &t.path().join("out-b"),
            &t.path().join("cache-b"),
            "1700000000",
            compression,
        );
        assert_eq!(
            a, b,
            "{compression}: digest changed with mtimes / directories"
        );
        // The blobs themselves are identical, byte for byte.
        let blobs = |d: &str| {
            let mut v: Vec<_> = std::fs::read_dir(t.path().join(d).join("blobs/sha256"))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            v.sort();
            v
        };
        assert_eq!(blobs("out-a"), blobs("out-b"));

        let c = build(
            &t,
            &p,
            &t.path().join("out-c"),
            &t.path().join("cache-c"),
            "1800000000",
            compression,
        );
        assert_ne!(
            a, c,
            "{compression}: another SOURCE_DATE_EPOCH must give another digest"
        );
    }
}

#[test]
fn gzip_and_zstd_differ_and_layers_carry_epoch_mtime() {
    require("python3");
    let t = Sandbox::new();
    let p = setup(t.path());
    let g = build(
        &t,
        &p,
        &t.path().join("g"),
        &t.path().join("cache"),
        "1234567890",
        "gzip",
    );
    let z = build(
        &t,
        &p,
        &t.path().join("z"),
        &t.path().join("cache"),
        "1234567890",
        "zstd",
    );
    assert_ne!(g, z);
    // Every entry in the gzip layers has mtime = SOURCE_DATE_EPOCH, numeric owners, no names,
    // and the entries are sorted.
    let script = r#"
import json, sys, tarfile, os
d = sys.argv[1]
idx = json.load(open(os.path.join(d, 'index.json')))
m = json.load(open(os.path.join(d, 'blobs/sha256', idx['manifests'][0]['digest'][7:])))
for l in m['layers']:
    names = []
    with tarfile.open(os.path.join(d, 'blobs/sha256', l['digest'][7:]), 'r:gz') as t:
        for i in t:
            assert i.mtime == 1234567890, (i.name, i.mtime)
            assert i.uname == '' and i.gname == '', (i.name, i.uname)
            names.append(i.name.rstrip('/'))
    assert names == sorted(names), names
print('ok')
"#;
    let out = run_ok(
        std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(t.path().join("g")),
    );
    assert_eq!(out.trim(), "ok");
}

#[test]
fn compressed_rootfs_tarball_is_reused_unchanged_and_rebuilt_identically_when_touched() {
    let t = Sandbox::new();
    let root = busybox_rootfs(t.path());
    run_ok(
        std::process::Command::new("tar")
            .arg("-C")
            .arg(&root)
            .args(["-czf"])
            .arg(t.path().join("rootfs.tar.gz"))
            .arg("."),
    );
    let p = t.path().join("tar.yaml");
    write(&p, "name: tarball\nbase:\n  rootfs: ./rootfs.tar.gz\n");
    let build = || -> serde_json::Value {
        serde_json::from_str(
            run_ok(
                t.gpuimg()
                    .arg("build")
                    .arg(&p)
                    .arg("-o")
                    .arg(t.path().join("out"))
                    .arg("--json"),
            )
            .trim(),
        )
        .unwrap()
    };
    let first = build();
    let second = build();
    assert_eq!(first["cached_layers"], 0);
    assert_eq!(second["cached_layers"], 1);
    assert_eq!(first["manifest_digest"], second["manifest_digest"]);
    // A touched tarball is a miss (indexed again) but gives the same bytes.
    touch_all(&t.path().join("rootfs.tar.gz"));
    let third = build();
    assert_eq!(first["manifest_digest"], third["manifest_digest"]);
}
