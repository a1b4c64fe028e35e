//! Downloads in the shared cache (`gpuimg_store::cache`): verified lookups and commits of artifacts
//! in the content-addressed download buckets (`debs-v1`, `indexes-v1`), and the last copy of
//! each unpinned root (`roots-v1`).
//!
//! The cache's trust rule (`gpuimg_store::cache::trust`) applies: a download is re-hashed unless its
//! file identity still equals the stamp written when it was committed or last verified. Every
//! partial download is a staging file in the cache's one `tmp/`.
//! Must never return a download whose bytes were not hashed, now or under an unchanged identity.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use gpuimg_store::cache::{self, trust, BlobFacts, Bucket};
use gpuimg_store::digest::{hash_reader, Digest, HashingWriter};
use gpuimg_store::staging::Staged;

use super::FetchError;

/// A handle on the shared cache for downloads (holds its shared lock while it lives).
#[derive(Debug, Clone)]
pub struct Cache {
    cache: cache::Cache,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> FetchError + '_ {
    move |source| FetchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Cache {
    /// Open (creating if needed) the gpuimg cache at `root`.
    pub fn open(root: &Path) -> Result<Self, FetchError> {
        let cache = cache::Cache::open(root).map_err(io_err(root))?;
        // Partial downloads of killed runs (unlocked staging files) are reclaimed.
        gpuimg_store::staging::reclaim(&cache.tmp_dir(), Some("download"));
        Ok(Cache { cache })
    }

    /// The shared cache underneath.
    pub fn shared(&self) -> &cache::Cache {
        &self.cache
    }

    pub fn blob_path(&self, bucket: Bucket, digest: &Digest) -> PathBuf {
        self.cache.store(bucket).path(digest)
    }

    /// The cached download `digest` in `bucket`, if present and intact: used as is while its
    /// identity equals its stamp, else re-hashed (and stamped again). A corrupted entry is
    /// removed and reported as `Ok(None)` with `corrupted = true`.
    pub fn lookup(
        &self,
        bucket: Bucket,
        digest: &Digest,
    ) -> Result<(Option<PathBuf>, bool), FetchError> {
        let store = self.cache.store(bucket);
        let path = store.path(digest);
        if store.trusted(digest).is_some() {
            return Ok((Some(path), false));
        }
        let (file, id) = match store.open(digest) {
            Ok(Some(f)) => f,
            Ok(None) => return Ok((None, false)),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                store.remove(digest, None).map_err(io_err(&path))?;
                return Ok((None, true));
            }
            Err(e) => return Err(io_err(&path)(e)),
        };
        let after = file.try_clone().map_err(io_err(&path))?;
        let (actual, size) =
            hash_reader(io::BufReader::with_capacity(1 << 20, file)).map_err(io_err(&path))?;
        if actual == *digest {
            let now = trust::identity(&after.metadata().map_err(io_err(&path))?);
            if now == id {
                // A stamp only saves the next re-hash; failing to write one is no error.
                let _ = store.stamp(digest, id, &BlobFacts::sized(size));
            }
            return Ok((Some(path), false));
        }
        store.remove(digest, Some(&id)).map_err(io_err(&path))?;
        Ok((None, true))
    }

    /// A fresh staging file in the cache's `tmp/` (same file system as every bucket), locked
    /// while it lives, reclaimed by a later open if its process died.
    pub fn temp(&self) -> Result<Staged, FetchError> {
        let dir = self.cache.tmp_dir();
        self.cache.temp_file("download").map_err(io_err(&dir))
    }

    /// Move a verified temp file into place as the download `digest` in `bucket`, stamped with
    /// its identity after the rename (its bytes were hashed on the way in).
    pub fn commit(
        &self,
        tmp: Staged,
        bucket: Bucket,
        digest: &Digest,
    ) -> Result<PathBuf, FetchError> {
        let path = self.blob_path(bucket, digest);
        self.cache
            .store(bucket)
            .commit(tmp, digest)
            .map_err(io_err(&path))
    }

    /// Store bytes in `bucket`, returning their digest and path.
    pub fn put(&self, bucket: Bucket, data: &[u8]) -> Result<(Digest, PathBuf), FetchError> {
        let tmp = self.temp()?;
        let mut w = HashingWriter::new(tmp);
        w.write_all(data).map_err(io_err(self.cache.root()))?;
        let (tmp, digest, _) = w.finish();
        let path = self.commit(tmp, bucket, &digest)?;
        Ok((digest, path))
    }

    fn root_path(&self, key: &str) -> PathBuf {
        self.cache
            .dir(Bucket::Roots)
            .join(Digest::of(key.as_bytes()).hex())
    }

    /// The last stored copy of the unpinned root `key` (a URL). Not stamped: the caller
    /// verifies its signature at every use.
    pub fn get_root(&self, key: &str) -> Result<Option<Vec<u8>>, FetchError> {
        let path = self.root_path(key);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    pub fn put_root(&self, key: &str, data: &[u8]) -> Result<(), FetchError> {
        let path = self.root_path(key);
        let mut tmp = self.temp()?;
        tmp.write_all(data).map_err(io_err(&path))?;
        let dir = self.cache.dir(Bucket::Roots);
        fs_err::create_dir_all(&dir).map_err(io_err(&dir))?;
        tmp.persist(&path).map_err(io_err(&path))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupted_entry_is_detected_and_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        for bucket in [Bucket::Debs, Bucket::Indexes] {
            let (d, path) = cache.put(bucket, b"hello").unwrap();
            assert!(path.starts_with(dir.path().join(bucket.dir()).join("sha256")));
            assert_eq!(
                cache.lookup(bucket, &d).unwrap(),
                (Some(path.clone()), false)
            );
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[0] ^= 1;
            std::fs::write(&path, bytes).unwrap();
            assert_eq!(cache.lookup(bucket, &d).unwrap(), (None, true));
            assert!(!path.exists());
        }
    }

    #[test]
    fn a_symlink_in_place_of_a_download_is_a_corrupt_entry() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let (d, path) = cache.put(Bucket::Debs, b"deb").unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, b"deb").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        assert_eq!(cache.lookup(Bucket::Debs, &d).unwrap(), (None, true));
        assert!(std::fs::symlink_metadata(&path).is_err());
        assert!(elsewhere.exists(), "the link's target is left alone");
    }

    #[test]
    fn unchanged_identity_skips_the_hash_and_any_change_rehashes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let stamp_path = |d: &Digest| {
            dir.path()
                .join("trust-v2/debs-v1")
                .join(format!("{}.json", d.hex()))
        };
        let (d, path) = cache.put(Bucket::Debs, b"hello").unwrap();
        assert!(stamp_path(&d).is_file(), "put stamps the download");
        // Same size, same mtime, other bytes, written in place: ctime moves, so it is seen.
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, b"jello").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(cache.lookup(Bucket::Debs, &d).unwrap(), (None, true));
        // A stamp that lies about the identity is only a reason to re-hash.
        let (d, path) = cache.put(Bucket::Debs, b"abc").unwrap();
        std::fs::write(stamp_path(&d), b"{\"identity\":[0,0,3,0,0],\"size\":3}").unwrap();
        assert_eq!(
            cache.lookup(Bucket::Debs, &d).unwrap(),
            (Some(path.clone()), false)
        );
        // ... after which it is stamped again and trusted without hashing.
        let (id, _) = trust::read_stamp::<BlobFacts>(&stamp_path(&d)).unwrap();
        assert_eq!(id, trust::identity(&std::fs::metadata(&path).unwrap()));
    }

    #[test]
    fn roots_live_in_their_bucket_and_partial_writes_in_the_one_tmp() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        assert_eq!(cache.get_root("http://x/InRelease").unwrap(), None);
        cache.put_root("http://x/InRelease", b"signed").unwrap();
        assert_eq!(
            cache.get_root("http://x/InRelease").unwrap().as_deref(),
            Some(&b"signed"[..])
        );
        let t = cache.temp().unwrap();
        assert_eq!(t.path().parent(), Some(dir.path().join("tmp").as_path()));
        let mut top: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        top.sort();
        assert_eq!(top, ["CACHEDIR.TAG", "lock", "roots-v1", "tmp"]);
    }
}
