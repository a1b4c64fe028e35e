//! The content-addressed download cache: layout (on [`Cache`]), verified reads and writes.
//!
//! Bump the bucket version (`apt-v1` -> `apt-v2`) rather than migrate. The layer cache's trust
//! rule (`crate::cache::trust`) applies: a blob is re-hashed unless its file identity still
//! equals the stamp written when it was last verified (on download, or on a full re-hash).
//! Must never return a blob whose bytes were not hashed, now or under an unchanged identity.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::cache::trust::{self, BlobFacts, Identity};
use crate::cache::Finding;
use crate::digest::{hash_reader, Digest, HashingWriter};
use crate::staging::Staged;

use super::FetchError;

const TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n# gpuimg download cache\n";

/// ```text
/// <root>/                      e.g. $GPUIMG_CACHE/apt-v1
///   CACHEDIR.TAG
///   blobs/sha256/<hex>         verified artifacts (.deb, compressed indexes), named by content
///   roots/<hex of url hash>    last copy of an unpinned root (InRelease), re-verified by the caller
///   trust/<hex>.json           stamp: the blob's file identity and size when last verified
///   tmp/                       partial downloads, renamed into place once verified
/// ```
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> FetchError + '_ {
    move |source| FetchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Cache {
    /// Open (creating if needed) the cache at `root`.
    pub fn open(root: &Path) -> Result<Self, FetchError> {
        for sub in ["blobs/sha256", "roots", "trust", "tmp"] {
            let p = root.join(sub);
            fs_err::create_dir_all(&p).map_err(io_err(&p))?;
        }
        let tag = root.join("CACHEDIR.TAG");
        if !tag.exists() {
            fs_err::write(&tag, TAG).map_err(io_err(&tag))?;
        }
        // Partial downloads of killed runs (unlocked staging files) are reclaimed.
        crate::staging::reclaim(&root.join("tmp"), None);
        Ok(Cache {
            root: root.to_path_buf(),
        })
    }

    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(digest.hex())
    }

    fn stamp_path(&self, digest: &Digest) -> PathBuf {
        self.root
            .join("trust")
            .join(format!("{}.json", digest.hex()))
    }

    fn stamp(&self, digest: &Digest, id: Identity) -> Result<(), FetchError> {
        let path = self.stamp_path(digest);
        let facts = BlobFacts::sized(trust::size_of(&id));
        trust::write_stamp(self.temp()?, &path, id, &facts).map_err(io_err(&path))
    }

    /// The cached blob for `digest`, if present and intact: used as is while its identity
    /// equals its stamp, else re-hashed (and stamped again). A corrupted entry is removed and
    /// reported as `Ok(None)` with `corrupted = true`.
    pub fn lookup(&self, digest: &Digest) -> Result<(Option<PathBuf>, bool), FetchError> {
        let path = self.blob_path(digest);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((None, false)),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let id = trust::identity(&file.metadata().map_err(io_err(&path))?);
        if trust::read_stamp::<BlobFacts>(&self.stamp_path(digest))
            .is_some_and(|(s, f)| s == id && f.size == trust::size_of(&id))
        {
            return Ok((Some(path), false));
        }
        let after = file.try_clone().map_err(io_err(&path))?;
        let (actual, _) =
            hash_reader(io::BufReader::with_capacity(1 << 20, file)).map_err(io_err(&path))?;
        if actual == *digest {
            let now = trust::identity(&after.metadata().map_err(io_err(&path))?);
            if now == id {
                // A stamp only saves the next re-hash; failing to write one is no error.
                let _ = self.stamp(digest, id);
            }
            return Ok((Some(path), false));
        }
        trust::remove_checked(&path, &id).map_err(io_err(&path))?;
        let stamp = self.stamp_path(digest);
        trust::remove_if_present(&stamp).map_err(io_err(&stamp))?;
        Ok((None, true))
    }

    /// Hash every blob against its name (`gpuimg cache verify`), ignoring stamps. Returns how
    /// many were checked and the bad ones, named relative to `<cache>` by `prefix` (e.g.
    /// `apt-v1`). With `repair`, bad blobs are removed and good ones stamped.
    pub fn verify_all(
        &self,
        prefix: &str,
        repair: bool,
    ) -> Result<(usize, Vec<Finding>), FetchError> {
        let dir = self.root.join("blobs/sha256");
        let mut names: Vec<String> = Vec::new();
        for e in fs_err::read_dir(&dir).map_err(io_err(&dir))? {
            names.push(
                e.map_err(io_err(&dir))?
                    .file_name()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        names.sort();
        let mut bad = Vec::new();
        for name in &names {
            let path = dir.join(name);
            let entry = format!("{prefix}/blobs/sha256/{name}");
            let problem = match Digest::from_hex(name) {
                Err(_) => Some("is not named by a sha256 digest".to_string()),
                Ok(d) => self.check_one(&path, &d, repair)?,
            };
            if let Some(problem) = problem {
                let removed = repair && {
                    let stamp = self.root.join("trust").join(format!("{name}.json"));
                    trust::remove_if_present(&path).is_ok()
                        && trust::remove_if_present(&stamp).is_ok()
                };
                bad.push(Finding {
                    entry,
                    problem,
                    removed,
                });
            }
        }
        Ok((names.len(), bad))
    }

    /// Hash one blob in full; `Some(problem)` when it is bad. With `repair`, stamp it if good.
    fn check_one(
        &self,
        path: &Path,
        d: &Digest,
        repair: bool,
    ) -> Result<Option<String>, FetchError> {
        let meta = std::fs::symlink_metadata(path).map_err(io_err(path))?;
        if !meta.is_file() {
            return Ok(Some("is not a regular file".into()));
        }
        let file = File::open(path).map_err(io_err(path))?;
        let (actual, _) =
            hash_reader(io::BufReader::with_capacity(1 << 20, file)).map_err(io_err(path))?;
        if actual != *d {
            return Ok(Some(format!("its content hashes to `{actual}`")));
        }
        let now = trust::identity(&std::fs::symlink_metadata(path).map_err(io_err(path))?);
        if repair && now == trust::identity(&meta) {
            self.stamp(d, now)?;
        }
        Ok(None)
    }

    /// A fresh temporary file inside the cache (same file system as the blobs): a staging
    /// file, locked while it lives, reclaimed by a later [`Cache::open`] if its process died.
    pub fn temp(&self) -> Result<Staged, FetchError> {
        let dir = self.root.join("tmp");
        Staged::file(&dir, "download", 0o644).map_err(io_err(&dir))
    }

    /// Move a verified temp file into place as the blob `digest`.
    pub fn commit(&self, tmp: Staged, digest: &Digest) -> Result<PathBuf, FetchError> {
        let path = self.blob_path(digest);
        tmp.persist(&path).map_err(io_err(&path))?;
        // Stamped with its identity after the rename: the bytes were hashed on the way in.
        let meta = std::fs::symlink_metadata(&path).map_err(io_err(&path))?;
        self.stamp(digest, trust::identity(&meta))?;
        Ok(path)
    }

    /// Store bytes as a blob, returning its digest and path.
    pub fn put(&self, data: &[u8]) -> Result<(Digest, PathBuf), FetchError> {
        let tmp = self.temp()?;
        let mut w = HashingWriter::new(tmp);
        w.write_all(data).map_err(io_err(&self.root))?;
        let (tmp, digest, _) = w.finish();
        let path = self.commit(tmp, &digest)?;
        Ok((digest, path))
    }

    fn root_path(&self, key: &str) -> PathBuf {
        self.root
            .join("roots")
            .join(Digest::of(key.as_bytes()).hex())
    }

    /// The last stored copy of the unpinned root `key` (a URL).
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
        let (d, path) = cache.put(b"hello").unwrap();
        assert_eq!(cache.lookup(&d).unwrap(), (Some(path.clone()), false));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[0] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(cache.lookup(&d).unwrap(), (None, true));
        assert!(!path.exists());
    }

    #[test]
    fn unchanged_identity_skips_the_hash_and_any_change_rehashes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let (d, path) = cache.put(b"hello").unwrap();
        let stamp = cache.stamp_path(&d);
        assert!(stamp.is_file(), "put stamps the blob");
        // Same size, same mtime, other bytes, written in place: ctime moves, so it is seen.
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, b"jello").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(cache.lookup(&d).unwrap(), (None, true));
        // A stamp that lies about the identity is only a reason to re-hash.
        let (d, path) = cache.put(b"abc").unwrap();
        std::fs::write(
            cache.stamp_path(&d),
            b"{\"identity\":[0,0,3,0,0],\"size\":3}",
        )
        .unwrap();
        assert_eq!(cache.lookup(&d).unwrap(), (Some(path.clone()), false));
        // ... after which it is stamped again and trusted without hashing.
        let (id, _) = trust::read_stamp::<BlobFacts>(&cache.stamp_path(&d)).unwrap();
        assert_eq!(id, trust::identity(&std::fs::metadata(&path).unwrap()));
    }

    #[test]
    fn verify_all_reports_each_bad_blob_and_repair_removes_them() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let (good, _) = cache.put(b"good").unwrap();
        let (flipped, p1) = cache.put(b"flip").unwrap();
        std::fs::write(&p1, b"flop").unwrap();
        let (cut, p2) = cache.put(b"truncated").unwrap();
        std::fs::write(&p2, b"trunc").unwrap();
        std::fs::write(dir.path().join("blobs/sha256/stray"), b"x").unwrap();
        let (n, bad) = cache.verify_all("apt-v1", false).unwrap();
        assert_eq!(n, 4);
        let entries: std::collections::BTreeSet<String> =
            bad.iter().map(|f| f.entry.clone()).collect();
        let e = |d: &Digest| format!("apt-v1/blobs/sha256/{}", d.hex());
        let want = [
            e(&flipped),
            e(&cut),
            "apt-v1/blobs/sha256/stray".to_string(),
        ];
        assert_eq!(entries, want.into_iter().collect());
        assert!(bad.iter().all(|f| !f.removed));
        let (_, bad) = cache.verify_all("apt-v1", true).unwrap();
        assert!(bad.iter().all(|f| f.removed), "{bad:?}");
        let (n, bad) = cache.verify_all("apt-v1", false).unwrap();
        assert_eq!((n, bad.len()), (1, 0));
        assert!(cache.lookup(&good).unwrap().0.is_some());
    }
}
