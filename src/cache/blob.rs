//! Blobs: `BlobWriter` (hash while writing to a temp file, rename to `blobs-v1/sha256/<hex>` on
//! commit), their trust stamps, and the one function that creates the cache's temp files.
//!
//! A blob file is never opened for writing once it has its name: replacing one is always a new
//! file renamed over it, so hard links to the old inode (outputs) keep their bytes.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use crate::staging::Staged;

use super::trust::{self, BlobFacts, Identity};
use super::Cache;
use crate::digest::{Digest, HashingWriter};

impl Cache {
    /// A fresh temp file under `tmp/`. Every partial write into this cache (blobs, records,
    /// stamps) starts here, and reaches its name only by a rename.
    /// A staging file (locked while it lives, reclaimed by the next build if this one dies),
    /// 0644 so that an output can hard-link the blob it becomes.
    pub(crate) fn temp_file(&self, stem: &str) -> io::Result<Staged> {
        Staged::file(&self.tmp_dir(), stem, 0o644)
    }

    fn blob_stamp_path(&self, d: &Digest) -> PathBuf {
        self.root()
            .join("trust-v1/blobs")
            .join(format!("{}.json", d.hex()))
    }

    /// What blob `d` is known to be, if its file still has the identity it was stamped with.
    /// `None` (missing, never stamped, or changed since) means: check it before use.
    pub fn trusted_blob(&self, d: &Digest) -> Option<BlobFacts> {
        let meta = std::fs::symlink_metadata(self.blob_path(d)).ok()?;
        if !meta.is_file() {
            return None;
        }
        let (id, facts) = trust::read_stamp::<BlobFacts>(&self.blob_stamp_path(d))?;
        (id == trust::identity(&meta)).then_some(facts)
    }

    /// Open blob `d` for a full check (never following a symlink), with the identity of the
    /// opened file. `Ok(None)` when there is no such blob.
    pub fn open_blob(&self, d: &Digest) -> io::Result<Option<(File, Identity)>> {
        let path = self.blob_path(d);
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // ELOOP: a symlink where a blob belongs; the check reports it as bad.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "is a symlink"))
            }
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "is not a regular file",
            ));
        }
        Ok(Some((file, trust::identity(&meta))))
    }

    /// Stamp blob `d` as checked: `id` is the identity of the file whose bytes were checked.
    pub fn stamp_blob(&self, d: &Digest, id: Identity, facts: &BlobFacts) -> io::Result<()> {
        trust::write_stamp(
            self.temp_file("stamp")?,
            &self.blob_stamp_path(d),
            id,
            facts,
        )
    }

    /// Stamp the blob just committed under `d` (its identity is read now, after the rename).
    pub fn stamp_new_blob(&self, d: &Digest, facts: &BlobFacts) -> io::Result<()> {
        let meta = std::fs::symlink_metadata(self.blob_path(d))?;
        self.stamp_blob(d, trust::identity(&meta), facts)
    }

    /// After an export hard-linked blob `d` (which moves its ctime, as does unlinking an old
    /// output's link), carry the stamp over to the new ctime — only when dev, inode, size and
    /// mtime are all still the stamped ones. Anything else stays for the next use to check.
    pub fn restamp_linked(&self, d: &Digest) -> io::Result<()> {
        let Some((then, facts)) = trust::read_stamp::<BlobFacts>(&self.blob_stamp_path(d)) else {
            return Ok(());
        };
        let now = trust::identity(&std::fs::symlink_metadata(self.blob_path(d))?);
        if now != then && trust::only_ctime_moved(&then, &now) {
            self.stamp_blob(d, now, &facts)?;
        }
        Ok(())
    }

    /// Remove blob `d` (found bad) and its stamp — the blob only while its path still names the
    /// inode that was checked (`checked`), so a good copy renamed in meanwhile stays.
    pub fn remove_blob(&self, d: &Digest, checked: Option<&Identity>) -> io::Result<()> {
        match checked {
            Some(id) => trust::remove_checked(&self.blob_path(d), id)?,
            None => trust::remove_if_present(&self.blob_path(d))?,
        }
        trust::remove_if_present(&self.blob_stamp_path(d))
    }

    /// The file names under `blobs-v1/sha256/`, sorted: each should be a digest's hex.
    pub fn blob_names(&self) -> io::Result<Vec<String>> {
        list(&self.root().join("blobs-v1/sha256"))
    }
}

/// The file names in `dir`, sorted; a missing directory lists as empty.
pub(super) fn list(dir: &std::path::Path) -> io::Result<Vec<String>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("Failed to list `{}`: {e}", dir.display()),
            ))
        }
    };
    let mut v = Vec::new();
    for e in rd {
        v.push(e?.file_name().to_string_lossy().into_owned());
    }
    v.sort();
    Ok(v)
}

pub struct BlobWriter {
    inner: HashingWriter<BufWriter<Staged>>,
    dest_dir: PathBuf,
}

impl BlobWriter {
    pub(super) fn new(cache: &Cache) -> io::Result<Self> {
        let tmp = cache.temp_file("blob")?;
        Ok(BlobWriter {
            inner: HashingWriter::new(BufWriter::with_capacity(1 << 20, tmp)),
            dest_dir: cache.root().join("blobs-v1/sha256"),
        })
    }

    pub fn count(&self) -> u64 {
        self.inner.count()
    }

    /// Flush, name the file by its digest (a rename: an existing blob of that name is replaced,
    /// never rewritten) and return (digest, size, path).
    pub fn commit(self) -> io::Result<(Digest, u64, PathBuf)> {
        let (buf, digest, size) = self.inner.finish();
        let tmp = buf.into_inner().map_err(|e| e.into_error())?;
        let dest = self.dest_dir.join(digest.hex());
        tmp.persist(&dest)?;
        Ok((digest, size, dest))
    }
}

impl Write for BlobWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
