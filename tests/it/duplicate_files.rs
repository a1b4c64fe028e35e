//! Duplicate files stored once: byte-identical regular files of one layer (with the same mode
//! and owners, at least `layer::DEDUP_MIN_BYTES`) become hard links to the first of them in
//! layer order, in a root filesystem layer, a `files:` layer, a wheel layer (a wheel that
//! ships one library three times, as triton ships libcupti) and an apt package's layer written
//! while the install unpacks (with the package's bytes and its stripped docs in the size
//! report). Checked in the tar listing
//! (`tar -tv`), by `umoci unpack` (verifies every digest; the copies read back identical and
//! are one inode), and never across layers, for files of another mode, or for small files.

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::*;

/// `n` bytes that compress poorly and differ by `seed`.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn put(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Each layer's tar listing (`tar -tvzf`), by component.
fn listings(out: &Path) -> BTreeMap<String, String> {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    let blob = |d: &str| {
        out.join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let m = index["manifests"][0]["digest"].as_str().unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(blob(m)).unwrap()).unwrap();
    manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let c = l["annotations"]["io.gpuimg.component"].as_str().unwrap();
            let listing = run_ok(
                std::process::Command::new("tar")
                    .arg("-tvzf")
                    .arg(blob(l["digest"].as_str().unwrap())),
            );
            (c.to_string(), listing)
        })
        .collect()
}

/// The hard links of a listing: (path, target).
fn links(listing: &str) -> Vec<(String, String)> {
    listing
        .lines()
        .filter(|l| l.starts_with('h'))
        .filter_map(|l| {
            let (left, target) = l.split_once(" link to ")?;
            let path = left.rsplit(' ').next()?;
            Some((path.to_string(), target.to_string()))
        })
        .collect()
}

fn unpack(sb: &Sandbox, out: &Path, tag: &str) -> PathBuf {
    let bundle = sb.join(format!("bundle-{tag}"));
    run_ok(
        std::process::Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:{tag}", out.display()))
            .arg(&bundle),
    );
    bundle.join("rootfs")
}

/// Both paths read back the same bytes, `same_inode` says whether they are one file.
fn assert_copies(root: &Path, a: &str, b: &str, same_inode: bool) {
    let (ma, mb) = (
        std::fs::metadata(root.join(a)).unwrap(),
        std::fs::metadata(root.join(b)).unwrap(),
    );
    assert_eq!(
        std::fs::read(root.join(a)).unwrap(),
        std::fs::read(root.join(b)).unwrap(),
        "{a} and {b}"
    );
    assert_eq!(ma.ino() == mb.ino(), same_inode, "{a} and {b}: one inode?");
}

#[test]
fn identical_files_of_a_layer_are_hard_links_after_unpack() {
    require("umoci");
    require("tar");
    let sb = Sandbox::new();
    let big = noise(64 << 10, 1);
    let other = noise(64 << 10, 2);
    let root = sb.join("rootfs");
    put(&root.join("etc/passwd"), b"root:x:0:0:root:/root:/bin/sh\n");
    // Written in an order unlike the layer's: the carrier is the first path in layer order.
    put(&root.join("opt/z/copy.bin"), &big);
    put(&root.join("opt/a/first.bin"), &big);
    put(&root.join("opt/m/copy.bin"), &big);
    put(&root.join("opt/other.bin"), &other);
    put(&root.join("opt/small-1"), &big[..100]);
    put(&root.join("opt/small-2"), &big[..100]);
    // The same bytes, executable: an inode's mode is shared, so this one stays apart.
    put(&root.join("opt/run.bin"), &big);
    std::fs::set_permissions(
        root.join("opt/run.bin"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    // The `files:` layer holds the same bytes again, and a pair of its own.
    let app = noise(8 << 10, 3);
    put(&sb.join("app/lib/a.so"), &app);
    put(&sb.join("app/lib/b.so"), &app);
    put(&sb.join("app/data.bin"), &big);
    let p = sb.join("p.yaml");
    write(
        &p,
        "name: dups\nbase:\n  rootfs: ./rootfs\nfiles:\n  - {src: ./app, dst: /app}\nselftest: {enabled: false}\n",
    );
    let out = sb.join("out");
    run_ok(
        sb.gpuimg()
            .args(["build", "-q", "--tag", "v1", "-o"])
            .arg(&out)
            .arg(&p),
    );

    let l = listings(&out);
    assert_eq!(
        links(&l["base"]),
        [
            ("opt/m/copy.bin".to_string(), "opt/a/first.bin".to_string()),
            ("opt/z/copy.bin".to_string(), "opt/a/first.bin".to_string()),
        ],
        "{}",
        l["base"]
    );
    assert_eq!(
        links(&l["files"]),
        [("app/lib/b.so".to_string(), "app/lib/a.so".to_string())],
        "{}",
        l["files"]
    );

    let r = unpack(&sb, &out, "v1");
    assert_copies(&r, "opt/a/first.bin", "opt/z/copy.bin", true);
    assert_copies(&r, "opt/a/first.bin", "opt/m/copy.bin", true);
    assert_copies(&r, "app/lib/a.so", "app/lib/b.so", true);
    assert_eq!(std::fs::read(r.join("opt/a/first.bin")).unwrap(), big);
    // Another mode, another layer, or below the threshold: separate files.
    assert_copies(&r, "opt/a/first.bin", "opt/run.bin", false);
    assert_copies(&r, "opt/a/first.bin", "app/data.bin", false);
    assert_copies(&r, "opt/small-1", "opt/small-2", false);
    assert_eq!(
        std::fs::metadata(r.join("opt/run.bin")).unwrap().mode() & 0o777,
        0o755
    );

    // Built again from a fresh cache, the bytes are the same: the choice is deterministic.
    let again = sb.join("again");
    run_ok(
        sb.gpuimg_with_cache(&sb.join("cache-2"))
            .args(["build", "-q", "--tag", "v1", "-o"])
            .arg(&again)
            .arg(&p),
    );
    assert_eq!(
        std::fs::read(out.join("index.json")).unwrap(),
        std::fs::read(again.join("index.json")).unwrap()
    );
}

const STATUS: &str = "\
Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u10\n\n\
Package: python3.11\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n\n\
Package: libpython3.11-stdlib\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n";

#[test]
fn a_wheel_shipping_one_file_three_times_stores_it_once() {
    require("umoci");
    require("tar");
    let sb = Sandbox::new();
    write(&sb.join("rootfs/var/lib/dpkg/status"), STATUS);
    let cupti = noise(200 << 10, 4);
    let wheel = WheelSpec::new("tritonish", "3.0")
        .file_mode(
            "tritonish/backends/nvidia/lib/cupti/cupti.bin",
            &cupti,
            0o644,
        )
        .file_mode("tritonish/third_party/cupti/cupti.bin", &cupti, 0o644)
        .file_mode("tritonish/profiler/cupti.bin", &cupti, 0o644)
        .file("tritonish/__init__.py", "");
    let server = serve(&wheel_index(sb.path(), &[wheel]));
    let p = sb.join("p.yaml");
    write(
        &p,
        &format!(
            "name: wheel-dups\nbase:\n  rootfs: ./rootfs\nselftest: {{enabled: false}}\npython:\n  index: {}/simple/\n  packages: [tritonish]\n",
            server.url
        ),
    );
    let out = sb.join("out");
    run_ok(
        sb.gpuimg()
            .args(["build", "-q", "--tag", "w", "-o"])
            .arg(&out)
            .arg(&p),
    );
    let l = listings(&out);
    let (component, listing) = l
        .iter()
        .find(|(_, t)| t.contains("cupti.bin"))
        .expect("a layer holds the wheel");
    let site = "usr/local/lib/python3.11/dist-packages/tritonish";
    let carrier = format!("{site}/backends/nvidia/lib/cupti/cupti.bin");
    assert_eq!(
        links(listing),
        [
            (format!("{site}/profiler/cupti.bin"), carrier.clone()),
            (
                format!("{site}/third_party/cupti/cupti.bin"),
                carrier.clone()
            ),
        ],
        "{component}: {listing}"
    );
    let r = unpack(&sb, &out, "w");
    assert_copies(&r, &carrier, &format!("{site}/profiler/cupti.bin"), true);
    assert_copies(
        &r,
        &carrier,
        &format!("{site}/third_party/cupti/cupti.bin"),
        true,
    );
    assert_eq!(std::fs::read(r.join(&carrier)).unwrap(), cupti);
}

#[test]
fn an_apt_package_streamed_while_unpacking_stores_its_duplicates_once() {
    require("umoci");
    require("tar");
    let sb = Sandbox::new();
    let repo = sb.join("repo");
    let (home, key) = gen_key(sb.path(), "fixture");
    let lib: &'static [u8] = Box::leak(noise(16 << 10, 5).into_boxed_slice());
    let mut p = pkg("dupes", "1.0");
    p.files = vec![
        ("/usr/lib/dupes/a.bin", lib, 0o644),
        ("/usr/lib/dupes/b.bin", lib, 0o644),
        ("/usr/share/doc/dupes/README", &[b'r'; 6000], 0o644),
        ("/usr/share/doc/dupes/copyright", b"MIT\n", 0o644),
    ];
    let stanza = stanza(&repo, &build_deb(&repo, &sb.join("work"), &p));
    write_dist(&repo, "stable", &[stanza], Some(&home));
    let server = serve(&repo);
    std::fs::copy(&key, sb.join("repo.gpg")).unwrap();
    let profile = sb.join("p.yaml");
    write(
        &profile,
        "name: apt-dups\nbase:\n  apt:\n    mirror: ${REPO}\n    suite: stable\n    packages: [dupes]\n    keyring: repo.gpg\nstrip: [docs]\nselftest: {enabled: false}\n",
    );
    let out = sb.join("out");
    let built = run(sb
        .gpuimg()
        .env("REPO", &server.url)
        .args(["build", "--tag", "a", "-o"])
        .arg(&out)
        .arg(&profile));
    let log = String::from_utf8_lossy(&built.stderr).into_owned();
    assert!(built.status.success(), "{log}");
    let l = listings(&out);
    let (component, listing) = l
        .iter()
        .find(|(_, t)| t.contains("usr/lib/dupes/a.bin"))
        .expect("a layer holds the package");
    assert!(
        log.lines()
            .any(|line| line.trim_start().starts_with(component.as_str())
                && line.contains("written while unpacking")),
        "{component} was not streamed: {log}"
    );
    assert_eq!(
        links(listing),
        [(
            "usr/lib/dupes/b.bin".to_string(),
            "usr/lib/dupes/a.bin".to_string()
        )],
        "{listing}"
    );
    let r = unpack(&sb, &out, "a");
    assert_copies(&r, "usr/lib/dupes/a.bin", "usr/lib/dupes/b.bin", true);
    assert_eq!(std::fs::read(r.join("usr/lib/dupes/b.bin")).unwrap(), lib);

    // The size report gives the package its bytes: before (as shipped), after (stored),
    // and the docs strip removed in that package's layer.
    let report: serde_json::Value = serde_json::from_str(&run_ok(
        sb.gpuimg().args(["inspect", "--sizes", "--json"]).arg(&out),
    ))
    .unwrap();
    let owner = report["owners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["owner"] == "deb dupes")
        .expect("the package is listed");
    assert_eq!(owner["component"], component.as_str());
    let n = lib.len() as u64;
    assert_eq!(owner["before"], 2 * n + 6000 + 4, "{report:#}");
    assert_eq!(owner["after"], n + 4, "{report:#}");
    assert_eq!(report["strip_classes"]["docs"]["bytes"], 6000);
    let row = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["component"] == component.as_str())
        .unwrap();
    assert_eq!(row["duplicates"]["bytes"], n);
    assert_eq!(row["stripped"]["bytes"], 6000);
}
