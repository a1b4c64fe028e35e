//! Which repository of a registry held a blob when gpuimg last pushed it there: the hint for
//! a cross-repository mount. Kept as records in the cache (`pushed-v1/<key>.json`, keyed by
//! registry and digest). Only a hint: a mount the registry declines becomes an upload, and a
//! record that cannot be read or written is ignored.

use gpuimg_store::cache::{Bucket, Cache, Key};
use gpuimg_store::digest::Digest;

#[derive(serde::Serialize, serde::Deserialize)]
struct Pushed {
    repo: String,
}

fn key(registry: &str, digest: &Digest) -> Digest {
    let mut k = Key::new("pushed-v1");
    k.str(registry).digest(digest);
    k.finish()
}

/// The repository that held `digest` in `registry`, if gpuimg pushed it there.
pub fn lookup(cache: &Cache, registry: &str, digest: &Digest) -> Option<String> {
    let rec = cache
        .read_record(Bucket::Pushed, &key(registry, digest))
        .ok()??;
    let p: Pushed = serde_json::from_slice(&rec.bytes).ok()?;
    crate::reference::RepoName::parse(&p.repo)
        .ok()
        .map(|r| r.to_string())
}

/// Remember that `repo` of `registry` holds `digest`.
pub fn record(cache: &Cache, registry: &str, digest: &Digest, repo: &str) {
    let _ = cache.put_record(
        Bucket::Pushed,
        &key(registry, digest),
        &Pushed {
            repo: repo.to_string(),
        },
    );
}
