//! An apt resolution is recorded under its request and the digests of the signed indexes
//! (`resolutions-v1`): an unchanged request against unchanged indexes reads no index again,
//! and a republished repository or a changed request resolves afresh, reading the stanzas it
//! needs through the indexes' recorded maps (`index-maps-v1`) and never through a map edited
//! behind the cache's back. Through the CLI
//! (`gpuimg lock`), against a signed fixture repository that the test republishes.

use crate::common;

use std::path::Path;

use common::{build_deb, gen_key, pkg, serve, stanza, write_dist, Pkg, Sandbox};

fn profile(dir: &Path, packages: &str) {
    common::write(
        &dir.join("p.yaml"),
        &format!(
            "name: rescache\nbase:\n  apt:\n    mirror: ${{REPO}}\n    suite: stable\n    packages: [{packages}]\n    keyring: repo.gpg\nselftest: {{enabled: false}}\n"
        ),
    );
}

/// `gpuimg lock`, then the locked (name, version) pairs.
fn lock(dir: &Sandbox, url: &str, cache: &Path, extra: &[&str]) -> Vec<(String, String)> {
    common::run_ok(
        dir.gpuimg()
            .env("REPO", url)
            .arg("lock")
            .arg(dir.join("p.yaml"))
            .arg("--cache")
            .arg(cache)
            .args(extra),
    );
    let text = std::fs::read_to_string(dir.join("p.lock.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out: Vec<(String, String)> = v["artifacts"]
        .as_array()
        .unwrap_or_else(|| panic!("no artifacts in {text}"))
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_string(),
                a["version"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn unchanged_indexes_reuse_the_resolution_and_new_ones_resolve_again() {
    common::require("gpg");
    common::require("dpkg-deb");
    let t = Sandbox::new();
    let repo = t.path().join("repo");
    let work = t.path().join("work");
    let (home, key) = gen_key(t.path(), "rescache");
    std::fs::copy(&key, t.path().join("repo.gpg")).unwrap();
    let publish = |pkgs: &[Pkg]| {
        let stanzas: Vec<String> = pkgs
            .iter()
            .map(|p| stanza(&repo, &build_deb(&repo, &work, p)))
            .collect();
        write_dist(&repo, "stable", &stanzas, Some(&home));
    };
    publish(&[
        pkg("hello", "1.0").field("Depends", "libhello"),
        pkg("libhello", "1.0"),
        pkg("extra", "1.0"),
    ]);
    let server = serve(&repo);
    let cache = t.path().join("cache");
    profile(t.path(), "hello");

    let first = lock(&t, &server.url, &cache, &[]);
    assert_eq!(first, pairs(&[("hello", "1.0"), ("libhello", "1.0")]));
    let records = cache.join("resolutions-v1");
    assert_eq!(entries(&records), 1, "one resolution recorded");
    let maps = cache.join("index-maps-v1");
    assert_eq!(entries(&maps), 1, "the index's map recorded");

    // Without any index in the cache, offline: only the recorded resolution can answer.
    std::fs::remove_dir_all(cache.join("indexes-v1")).unwrap();
    let again = lock(&t, &server.url, &cache, &["--offline"]);
    assert_eq!(again, first);

    // A changed request is a different resolution (and needs the indexes again): through the
    // index's map, it finds the same stanzas a scan would.
    profile(t.path(), "hello, extra");
    let more = lock(&t, &server.url, &cache, &[]);
    assert_eq!(
        more,
        pairs(&[("extra", "1.0"), ("hello", "1.0"), ("libhello", "1.0")])
    );
    assert_eq!(entries(&records), 2);
    assert_eq!(entries(&maps), 1, "the same index, the same map");

    // The repository republished with a newer libhello: new signed digests, new resolution.
    publish(&[
        pkg("hello", "1.0").field("Depends", "libhello (>= 1.1)"),
        pkg("libhello", "1.1"),
        pkg("extra", "1.0"),
    ]);
    profile(t.path(), "hello");
    let newer = lock(&t, &server.url, &cache, &[]);
    assert_eq!(newer, pairs(&[("hello", "1.0"), ("libhello", "1.1")]));
    assert_eq!(entries(&records), 3);

    // A record edited behind the cache's back is not trusted, even when it is a well-formed
    // resolution: every record now says what the first resolution said (libhello 1.0), yet
    // the lock resolves again and gets the true answer.
    let mut texts = Vec::new();
    for e in std::fs::read_dir(&records).unwrap() {
        let p = e.unwrap().path();
        texts.push((std::fs::read(&p).unwrap(), p));
    }
    let old = texts
        .iter()
        .find(|(b, _)| {
            let t = String::from_utf8_lossy(b);
            !t.contains("\"1.1\"") && !t.contains("extra")
        })
        .map(|(b, _)| b.clone())
        .unwrap();
    for (_, p) in &texts {
        std::fs::write(p, &old).unwrap();
    }
    let repaired = lock(&t, &server.url, &cache, &[]);
    assert_eq!(repaired, newer);
    // Garbage is a miss too.
    for (_, p) in &texts {
        std::fs::write(p, b"{\"not\": \"a resolution\"}").unwrap();
    }
    assert_eq!(lock(&t, &server.url, &cache, &[]), newer);

    // A map edited behind the cache's back is not used, even when it fits its index: here every
    // stanza is renamed `extra`, yet a new request still finds hello and libhello by name.
    assert_eq!(entries(&maps), 2, "a map per published index");
    for e in std::fs::read_dir(&maps).unwrap() {
        let p = e.unwrap().path();
        let mut map: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        let n = map["starts"].as_array().unwrap().len();
        map["names"] = vec!["extra"; n].join("\n").into();
        std::fs::write(&p, serde_json::to_vec(&map).unwrap()).unwrap();
    }
    profile(t.path(), "libhello, hello");
    assert_eq!(lock(&t, &server.url, &cache, &[]), newer);
}
