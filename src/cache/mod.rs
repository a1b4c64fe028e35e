//! The content-addressed cache shared by all builds on a machine.
//!
//! ```text
//! $GPUIMG_CACHE (default: $XDG_CACHE_HOME/gpuimg, else ~/.cache/gpuimg)
//! ├── CACHEDIR.TAG
//! ├── blobs-v1/sha256/<hex>      compressed layer blobs, named by their digest
//! ├── layers-v1/<key-hex>.json   layer key (tree + settings) → the blob it produced
//! └── tmp/                       partial writes; renamed into place only when complete
//! ```
//! Buckets carry a version in their name: bump it rather than migrate. Every blob is verified
//! against its name before reuse; a mismatch is treated as a miss and the entry removed.
//! Must never hand out a blob whose bytes were not checked.

mod blob;

use std::path::{Path, PathBuf};

pub use blob::BlobWriter;

use crate::digest::{hash_reader, Digest};

const CACHEDIR_TAG: &str =
    "Signature: 8a477f597d28d172789f06886806bc55\n# This directory is a cache made by gpuimg.\n";

#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
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

    /// Open (creating when needed) the cache at `root`.
    pub fn open(root: &Path) -> std::io::Result<Cache> {
        for d in ["blobs-v1/sha256", "layers-v1", "tmp"] {
            fs_err::create_dir_all(root.join(d))?;
        }
        let tag = root.join("CACHEDIR.TAG");
        if !tag.exists() {
            fs_err::write(&tag, CACHEDIR_TAG)?;
        }
        Ok(Cache {
            root: root.to_path_buf(),
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
    pub fn blob_writer(&self) -> std::io::Result<BlobWriter> {
        BlobWriter::new(self)
    }

    /// The blob's path if it is present with the right size and digest. A corrupt entry is
    /// removed and reported as absent.
    pub fn verified_blob(&self, d: &Digest, size: u64) -> Option<PathBuf> {
        let p = self.blob_path(d);
        let f = fs_err::File::open(&p).ok()?;
        let meta = f.metadata().ok()?;
        if meta.len() != size {
            let _ = fs_err::remove_file(&p);
            return None;
        }
        match hash_reader(std::io::BufReader::with_capacity(1 << 20, f)) {
            Ok((got, _)) if got == *d => Some(p),
            _ => {
                let _ = fs_err::remove_file(&p);
                None
            }
        }
    }

    /// Look up a JSON record in a bucket by key.
    pub fn record<T: serde::de::DeserializeOwned>(&self, bucket: &str, key: &Digest) -> Option<T> {
        let bytes =
            fs_err::read(self.root.join(bucket).join(format!("{}.json", key.hex()))).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Store a JSON record atomically.
    pub fn put_record<T: serde::Serialize>(
        &self,
        bucket: &str,
        key: &Digest,
        value: &T,
    ) -> std::io::Result<()> {
        let dir = self.root.join(bucket);
        fs_err::create_dir_all(&dir)?;
        let mut tmp = crate::staging::Staged::file(&self.tmp_dir(), "record", 0o644)?;
        serde_json::to_writer(&mut tmp, value).map_err(std::io::Error::other)?;
        tmp.persist(&dir.join(format!("{}.json", key.hex())))?;
        Ok(())
    }
}
