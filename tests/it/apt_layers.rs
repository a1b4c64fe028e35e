//! Apt bases split into component layers, against the build host's own Debian mirror
//! (`mirror: host`): two profiles that share a component's packages get a byte-identical layer
//! for it; adding a package rewrites only the component that takes it and `metadata`; the
//! split image unpacks (umoci) to exactly the tree a single install of the same packages makes,
//! and dpkg-query inside it lists every package.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::*;

const BASE: &str = "base-files, base-passwd, libc6, python3-minimal";

fn profile(dir: &Path, name: &str, packages: &str) -> std::path::PathBuf {
    let p = dir.join(format!("{name}.yaml"));
    write(
        &p,
        &format!(
            "name: {name}\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [{packages}]\n"
        ),
    );
    p
}

/// Build; returns component → layer digest, and how many layers came from the cache.
fn build(sb: &Sandbox, p: &Path, cache: &Path, out: &Path) -> (BTreeMap<String, String>, u64) {
    let json = run_ok(
        sb.gpuimg_with_cache(cache)
            .env("SOURCE_DATE_EPOCH", "0")
            .arg("build")
            .arg(p)
            .arg("-o")
            .arg(out)
            .arg("--json"),
    );
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    (layers_of(&v), v["cached_layers"].as_u64().unwrap())
}

/// Build without `--json`: component → layer digest (read back with `inspect`), and what the
/// build said on stderr.
fn build_logged(
    sb: &Sandbox,
    p: &Path,
    cache: &Path,
    out: &Path,
) -> (BTreeMap<String, String>, String) {
    let output = run(sb
        .gpuimg_with_cache(cache)
        .env("SOURCE_DATE_EPOCH", "0")
        .arg("build")
        .arg(p)
        .arg("-o")
        .arg(out));
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "build failed: {log}");
    let json = run_ok(
        sb.gpuimg_with_cache(cache)
            .arg("inspect")
            .arg("--json")
            .arg(out),
    );
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    (layers_of(&v), log)
}

/// component → digest of a `build --json` or `inspect --json` document.
fn layers_of(v: &serde_json::Value) -> BTreeMap<String, String> {
    v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["component"].as_str().unwrap().to_string(),
                l["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn components_are_shared_split_and_complete() {
    require("umoci");
    require("dpkg-query");
    let t = Sandbox::new();
    let cache = t.path().join("cache");

    let a = profile(t.path(), "a", BASE);
    let (la, _) = build(&t, &a, &cache, &t.path().join("out-a"));
    for c in ["os", "python", "metadata"] {
        assert!(la.contains_key(c), "no `{c}` layer: {la:?}");
    }

    // Adding xz-utils: only the component that takes it, metadata and the SBOM (which lists
    // it) are new.
    let b = profile(t.path(), "b", &format!("{BASE}, xz-utils"));
    let (lb, log) = build_logged(&t, &b, &cache, &t.path().join("out-b"));
    let changed: Vec<&String> = lb
        .iter()
        .filter(|(c, d)| la.get(*c) != Some(d))
        .map(|(c, _)| c)
        .collect();
    assert!(changed.contains(&&"metadata".to_string()), "{la:?}\n{lb:?}");
    assert!(changed.contains(&&"sbom".to_string()), "{la:?}\n{lb:?}");
    assert!(
        changed.len() <= 3,
        "more than one component changed: {changed:?}"
    );
    assert!(log.contains("reused os, python"), "{log}");
    assert_eq!(la["os"], lb["os"]);
    assert_eq!(la["python"], lb["python"]);
    // That build wrote the cached components' packages from their sketches (no file of theirs
    // unpacked), yet its metadata layer is byte for byte a cold build's: the same profile with
    // a fresh cache, where every package is unpacked in full.
    assert!(log.contains("of them from sketches"), "{log}");
    // xz-utils' layer was written while the install ran, and accepted as it was written.
    assert!(
        log.lines()
            .any(|l| l.contains("packages") && l.contains("written while unpacking")),
        "{log}"
    );
    // Of the replayed packages' entries, only those something observes were written: the
    // files the metadata steps read, libraries, and the directories and links on the way to
    // those and to xz-utils' own entries.
    let (written, all) = replayed_entries(&log);
    assert!(
        written > 0 && written * 2 < all,
        "{written} of {all} replayed entries written:\n{log}"
    );
    let (cold, cached_cold) = build(
        &t,
        &b,
        &t.path().join("cache-cold"),
        &t.path().join("out-bc"),
    );
    assert_eq!(cached_cold, 0);
    assert_eq!(lb, cold, "incremental and cold builds differ");
    let sketches = std::fs::read_dir(cache.join("sketches-v1"))
        .unwrap()
        .count();
    assert!(sketches > 20, "{sketches} sketches recorded");

    // `layers:` moves xz-utils into a layer of its own, even with the same package set cached.
    let d = t.path().join("d.yaml");
    write(
        &d,
        &format!(
            "name: d\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [{BASE}, xz-utils]\nlayers:\n  tools:\n    deb: [xz-utils]\n"
        ),
    );
    let (ld, log) = build_logged(&t, &d, &cache, &t.path().join("out-d"));
    let order: Vec<&str> = ld.keys().map(String::as_str).collect();
    assert!(order.contains(&"tools"), "{ld:?}");
    assert_eq!(ld["os"], lb["os"]);
    assert_eq!(ld.get("packages"), None, "{ld:?}");
    // Replayed again (os and python cached), and again the image a cold build makes.
    assert!(log.contains("of them from sketches"), "{log}");
    let (cold_d, _) = build(
        &t,
        &d,
        &t.path().join("cache-cold-d"),
        &t.path().join("out-dc"),
    );
    assert_eq!(ld, cold_d, "incremental and cold builds differ");

    // Another profile sharing the os and python packages, built with a fresh cache: the same
    // layers, byte for byte (the digests are computed from scratch here, nothing is reused).
    let c = profile(t.path(), "c", &format!("xz-utils, {BASE}"));
    let (lc, cached_c) = build(&t, &c, &t.path().join("cache-c"), &t.path().join("out-c"));
    assert_eq!(cached_c, 0);
    assert_eq!(la["os"], lc["os"], "{la:?}\n{lc:?}");
    assert_eq!(la["python"], lc["python"], "{la:?}\n{lc:?}");

    // The split image unpacks to the tree a single install makes, and dpkg sees every package.
    let bundle = t.path().join("bundle");
    run_ok(
        Command::new("umoci")
            .arg("unpack")
            .arg("--image")
            .arg(format!("{}:latest", t.path().join("out-a").display()))
            .arg(&bundle),
    );
    let rootfs = bundle.join("rootfs");
    let single = t.path().join("single");
    std::fs::create_dir(&single).unwrap();
    install_into(&single, BASE);
    // The image adds its SBOM (its own layer) to what the install makes.
    let sbom = rootfs.join("usr/share/gpuimg/sbom.spdx.json");
    assert!(sbom.is_file(), "no SBOM in the image");
    std::fs::remove_dir_all(rootfs.join("usr/share/gpuimg")).unwrap();
    assert_eq!(tree(&rootfs), tree(&single));
    let listed = run_ok(
        Command::new("dpkg-query")
            .arg("--admindir")
            .arg(rootfs.join("var/lib/dpkg"))
            .args(["-W", "-f", "${Package} ${Status}\\n"]),
    );
    run_ok(t.gpuimg_with_cache(&cache).arg("lock").arg(&a));
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("a.lock.json")).unwrap())
            .unwrap();
    let locked = lock_package_names(&lock);
    assert!(locked.len() > 5, "{locked:?}");
    for name in &locked {
        assert!(
            listed.contains(&format!("{name} install ok installed")),
            "dpkg does not list {name}: {listed}"
        );
    }
}

/// (written, all) of the replayed packages' entries, from the build log's unpack line.
fn replayed_entries(log: &str) -> (u64, u64) {
    let line = log
        .lines()
        .find(|l| l.contains("entries written"))
        .unwrap_or_else(|| panic!("no replay line in:\n{log}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "written)").unwrap();
    (
        words[at - 5].parse().unwrap(),
        words[at - 2].parse().unwrap(),
    )
}

/// The package names of a lock file, whatever its version.
fn lock_package_names(lock: &serde_json::Value) -> Vec<String> {
    let list = lock
        .get("packages")
        .or_else(|| lock.get("artifacts"))
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    list.iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect()
}

/// Install `packages` from the host's mirror into `dest` in one piece, with the library.
fn install_into(dest: &Path, packages: &str) {
    use gpuimg_apt::{self as apt, AptOptions};
    use gpuimg_build::plan::source_specs;
    use gpuimg_build::profile::{self, Base};
    use gpuimg_fetch::observe::Silent;
    let yaml = format!(
        "name: t\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [{packages}]\n"
    );
    let p = profile::parse(&yaml, "t.yaml", Path::new("."), &|_| None).unwrap();
    let Base::Apt(spec) = p.base else {
        panic!("no apt base")
    };
    let (spec, arch) = (
        source_specs::apt_packages(&spec, Path::new(".")),
        source_specs::architecture(&p.platform),
    );
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("apt-layers-cache");
    let opts = AptOptions::new(&cache);
    let locked = apt::resolve(&spec, &arch.debian(), &opts, &mut Silent).unwrap();
    apt::install(
        &spec,
        &arch.debian(),
        &opts,
        Some(&locked),
        dest,
        &mut Silent,
    )
    .unwrap();
}
