//! Many downloads at once (`Fetcher::fetch_all_each`), against a real HTTP server the test
//! starts: the biggest go first, each file is handed on the moment it is verified (while
//! the others still download), and the paths come back in input order whatever the order of
//! the downloads.

use crate::common;

use std::sync::Mutex;

use common::*;
use gpuimg_fetch::observe::Silent;
use gpuimg_fetch::{Artifact, FetchLimits, Fetcher, Trust};
use gpuimg_store::cache::Bucket;
use gpuimg_store::digest::Digest;

/// Files of these sizes (bytes made from the index, so no two are alike), served from a
/// fresh directory: the server and the artifacts, in this order.
fn served(sizes: &[usize]) -> (tempfile::TempDir, Server, Vec<Artifact>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    std::fs::create_dir(&root).unwrap();
    let mut files = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let bytes: Vec<u8> = (0..n).map(|k| (k * 31 + i * 7) as u8).collect();
        let name = format!("f{i}.bin");
        std::fs::write(root.join(&name), &bytes).unwrap();
        files.push((name, Digest::of(&bytes), n as u64));
    }
    let server = serve(&root);
    let artifacts = files
        .into_iter()
        .map(|(name, sha256, size)| Artifact {
            url: format!("{}/{name}", server.url),
            sha256,
            size,
            bucket: Bucket::Wheels,
        })
        .collect();
    (dir, server, artifacts)
}

/// A fetcher with a cache under `dir`, `jobs` downloads at a time.
fn fetcher(dir: &std::path::Path, jobs: usize) -> Fetcher {
    Fetcher::new(
        &dir.join("cache"),
        false,
        jobs,
        FetchLimits::default(),
        &Trust::default(),
    )
    .unwrap()
}

#[test]
fn the_biggest_download_first_each_file_handed_on_as_it_lands_paths_in_input_order() {
    let sizes = [1_000, 300_000, 20_000, 5_000_000, 70_000];
    let (dir, server, artifacts) = served(&sizes);
    // One download at a time, so the order of the requests is the order chosen.
    let fetcher = fetcher(dir.path(), 1);
    let handed: Mutex<Vec<(usize, std::path::PathBuf, bool)>> = Mutex::default();
    let paths = fetcher
        .fetch_all_each(&artifacts, "files", None, &mut Silent, &|i, path| {
            // Verified and in place when handed on: its bytes are the served ones.
            let whole = std::fs::read(path)
                .map(|b| Digest::of(&b) == artifacts[i].sha256)
                .unwrap_or(false);
            handed.lock().unwrap().push((i, path.to_path_buf(), whole));
        })
        .unwrap();

    let hits = server.hits.lock().unwrap().clone();
    assert_eq!(
        hits,
        ["/f3.bin", "/f1.bin", "/f4.bin", "/f2.bin", "/f0.bin"],
        "the downloads did not go biggest first"
    );
    let handed = handed.into_inner().unwrap();
    let order: Vec<usize> = handed.iter().map(|(i, _, _)| *i).collect();
    assert_eq!(order, [3, 1, 4, 2, 0], "each file is handed on as it lands");
    for (i, path, whole) in &handed {
        assert!(whole, "file {i} was handed on before it was whole");
        assert_eq!(path, &paths[*i], "file {i} was handed on with another path");
    }
    for (path, a) in paths.iter().zip(&artifacts) {
        assert_eq!(
            Digest::of(&std::fs::read(path).unwrap()),
            a.sha256,
            "paths come back in input order"
        );
    }

    // Served from the cache the second time: handed on just the same, nothing requested.
    let again: Mutex<Vec<usize>> = Mutex::default();
    let paths2 = fetcher
        .fetch_all_each(&artifacts, "files", None, &mut Silent, &|i, _| {
            again.lock().unwrap().push(i)
        })
        .unwrap();
    assert_eq!(paths2, paths);
    let mut again = again.into_inner().unwrap();
    again.sort();
    assert_eq!(again, [0, 1, 2, 3, 4]);
    assert_eq!(
        server.hits.lock().unwrap().len(),
        5,
        "a cached file was fetched again"
    );
}

#[test]
fn a_failed_download_is_not_handed_on_and_the_first_failure_in_input_order_is_the_error() {
    let (dir, _server, mut artifacts) = served(&[10_000, 2_000, 40_000]);
    // Two files whose sha256 the server cannot match.
    artifacts[1].sha256 = Digest::of(b"not these bytes");
    artifacts[2].sha256 = Digest::of(b"nor these");
    let fetcher = fetcher(dir.path(), 2);
    let handed: Mutex<Vec<usize>> = Mutex::default();
    let err = fetcher
        .fetch_all_each(&artifacts, "files", None, &mut Silent, &|i, _| {
            handed.lock().unwrap().push(i)
        })
        .unwrap_err()
        .to_string();
    assert_eq!(handed.into_inner().unwrap(), [0]);
    assert!(
        err.contains("f1.bin"),
        "not the first failure in input order: {err}"
    );
    assert_error(&err, &[]);
}
