//! The content-addressed download cache: layout (on [`Cache`]), verified reads and writes.
//!
//! Bump the bucket version (`apt-v1` -> `apt-v2`) rather than migrate. Must never return a blob
//! without re-hashing it.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::digest::{hash_reader, Digest, HashingWriter};

use super::FetchError;

const TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n# gpuimg download cache\n";

/// ```text
/// <root>/                      e.g. $GPUIMG_CACHE/apt-v1
///   CACHEDIR.TAG
///   blobs/sha256/<hex>         verified artifacts (.deb, compressed indexes), named by content
///   roots/<hex of url hash>    last copy of an unpinned root (InRelease), re-verified by the caller
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
        for sub in ["blobs/sha256", "roots", "tmp"] {
            let p = root.join(sub);
            fs_err::create_dir_all(&p).map_err(io_err(&p))?;
        }
        let tag = root.join("CACHEDIR.TAG");
        if !tag.exists() {
            fs_err::write(&tag, TAG).map_err(io_err(&tag))?;
        }
        Ok(Cache {
            root: root.to_path_buf(),
        })
    }

    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(digest.hex())
    }

    /// The cached blob for `digest`, if present and intact. A corrupted entry is removed and
    /// reported as `Ok(None)` with `corrupted = true`.
    pub fn lookup(&self, digest: &Digest) -> Result<(Option<PathBuf>, bool), FetchError> {
        let path = self.blob_path(digest);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((None, false)),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let (actual, _) =
            hash_reader(io::BufReader::with_capacity(1 << 20, file)).map_err(io_err(&path))?;
        if actual == *digest {
            return Ok((Some(path), false));
        }
        fs_err::remove_file(&path).map_err(io_err(&path))?;
        Ok((None, true))
    }

    /// A fresh temporary file inside the cache (same file system as the blobs).
    pub fn temp(&self) -> Result<tempfile::NamedTempFile, FetchError> {
        let dir = self.root.join("tmp");
        tempfile::NamedTempFile::new_in(&dir).map_err(io_err(&dir))
    }

    /// Move a verified temp file into place as the blob `digest`.
    pub fn commit(
        &self,
        tmp: tempfile::NamedTempFile,
        digest: &Digest,
    ) -> Result<PathBuf, FetchError> {
        let path = self.blob_path(digest);
        tmp.persist(&path).map_err(|e| io_err(&path)(e.error))?;
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
        tmp.persist(&path).map_err(|e| io_err(&path)(e.error))?;
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
}
