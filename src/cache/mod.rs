//! The content-addressed cache shared by all builds on a machine.
//!
//! ```text
//! $GPUIMG_CACHE (default: $XDG_CACHE_HOME/gpuimg, else ~/.cache/gpuimg)
//! ├── CACHEDIR.TAG
//! ├── lock                            flock: shared while a build runs, exclusive for prune
//! ├── blobs-v1/sha256/<hex>           compressed layer blobs, named by their digest
//! ├── layers-v1/<key-hex>.json        record: layer key (tree + settings) → digest, size,
//! │                                   diff_id, uncompressed size, compression
//! ├── trust-v1/blobs/<hex>.json       stamp: the blob's file identity when last verified,
//! │                                   its size, diff_id and uncompressed size
//! ├── trust-v1/layers-v1/<key>.json   stamp: the record's file identity and the sha256 of its
//! │                                   bytes when written or last verified
//! ├── apt-v1/                         downloads (`fetch::Cache`, same trust rule)
//! └── tmp/                            partial writes; renamed into place only when complete
//! ```
//! Buckets carry a version in their name: bump it rather than migrate.
//!
//! Trust (see `trust.rs`): an entry is used without re-hashing only while its file identity
//! (dev, inode, size, mtime, ctime) equals its stamp. A record whose stamp does not match is
//! checked in full before use: its blob is hashed and decompressed and the digest, size,
//! diff_id and uncompressed size must all agree; a blob whose stamp does not match (under a
//! record that does) is hashed against its name and size. Whatever fails is a miss: it is
//! removed with a warning and rebuilt. `gpuimg cache verify` checks every entry in full.
//!
//! Blobs are never modified in place: every write goes to a new file under `tmp/` and is
//! renamed over the old name, and nothing opens a blob for writing, so an output that
//! hard-links a blob keeps its bytes whatever later happens to the cache entry.
//! Must never hand out a blob whose bytes were not checked, either now or under an unchanged
//! identity.

mod blob;
mod record;
pub mod trust;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use blob::BlobWriter;
pub use record::RecordRead;
pub use trust::{BlobFacts, Identity};

use crate::digest::Digest;

/// The bucket of layer records.
pub const LAYERS: &str = "layers-v1";

const CACHEDIR_TAG: &str =
    "Signature: 8a477f597d28d172789f06886806bc55\n# This directory is a cache made by gpuimg.\n";

#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
    /// The open `lock` file, holding a shared or exclusive flock for this handle's lifetime.
    _lock: Arc<File>,
}

impl Cache {
    /// Where the cache lives: `$GPUIMG_CACHE`, else the XDG cache directory.
    pub fn default_root() -> PathBuf {
        if let Some(p) = std::env::var_os("GPUIMG_CACHE").filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
            return PathBuf::from(p).join("gpuimg");
        }
        match std::env::var_os("HOME") {
            Some(h) => PathBuf::from(h).join(".cache/gpuimg"),
            None => std::env::temp_dir().join("gpuimg-cache"),
        }
    }

    /// Open (creating when needed) the cache at `root` for building: takes the shared lock,
    /// waiting while a prune holds it exclusively.
    pub fn open(root: &Path) -> io::Result<Cache> {
        Cache::open_locked(root, rustix::fs::FlockOperation::LockShared)
    }

    /// Open the cache for a prune: takes the lock exclusively, and fails at once with
    /// `ErrorKind::WouldBlock` while any build holds it.
    pub fn open_exclusive(root: &Path) -> io::Result<Cache> {
        Cache::open_locked(root, rustix::fs::FlockOperation::NonBlockingLockExclusive)
    }

    fn open_locked(root: &Path, op: rustix::fs::FlockOperation) -> io::Result<Cache> {
        for d in [
            "blobs-v1/sha256",
            LAYERS,
            "trust-v1/blobs",
            "trust-v1/layers-v1",
            "tmp",
        ] {
            fs_err::create_dir_all(root.join(d))?;
        }
        let tag = root.join("CACHEDIR.TAG");
        if !tag.exists() {
            fs_err::write(&tag, CACHEDIR_TAG)?;
        }
        let lock_path = root.join("lock");
        let with_path = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("Failed to lock `{}`: {e}", lock_path.display()),
            )
        };
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(with_path)?;
        rustix::fs::flock(&lock, op).map_err(|e| with_path(e.into()))?;
        Ok(Cache {
            root: root.to_path_buf(),
            _lock: Arc::new(lock),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A scratch directory for partial writes, on the same file system as the blobs.
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        self.root.join("blobs-v1/sha256").join(d.hex())
    }

    /// Start writing a blob; it becomes visible under its digest on `commit`.
    pub fn blob_writer(&self) -> io::Result<BlobWriter> {
        BlobWriter::new(self)
    }

    /// Remove the stamps whose blob or record is gone; returns how many.
    pub fn sweep_stamps(&self) -> io::Result<usize> {
        let mut n = 0;
        for (stamps, entries, keep_suffix) in [
            ("trust-v1/blobs", "blobs-v1/sha256", false),
            ("trust-v1/layers-v1", LAYERS, true),
        ] {
            for name in blob::list(&self.root.join(stamps))? {
                let entry = match name.strip_suffix(".json") {
                    Some(stem) if !keep_suffix => stem.to_string(),
                    _ => name.clone(),
                };
                if std::fs::symlink_metadata(self.root.join(entries).join(&entry)).is_err() {
                    trust::remove_if_present(&self.root.join(stamps).join(&name))?;
                    n += 1;
                }
            }
        }
        Ok(n)
    }
}

/// One bad entry found by a full check (`gpuimg cache verify`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The entry's path relative to the cache root, e.g. `blobs-v1/sha256/<hex>`.
    pub entry: String,
    pub problem: String,
    /// Whether the entry was removed (`--repair`).
    pub removed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_lock_excludes_builds_and_builds_share() {
        let dir = tempfile::tempdir().unwrap();
        let a = Cache::open(dir.path()).unwrap();
        let b = Cache::open(dir.path()).unwrap();
        let e = Cache::open_exclusive(dir.path()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        drop((a, b));
        let x = Cache::open_exclusive(dir.path()).unwrap();
        let clone = x.clone();
        drop(x);
        assert!(
            Cache::open_exclusive(dir.path()).is_err(),
            "a clone holds it"
        );
        drop(clone);
        assert!(Cache::open_exclusive(dir.path()).is_ok());
    }
}
