//! `BlobWriter`: hash while writing to a temp file, rename to `blobs-v1/sha256/<hex>` on commit.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use super::Cache;
use crate::digest::{Digest, HashingWriter};
use crate::staging::Staged;

pub struct BlobWriter {
    inner: HashingWriter<BufWriter<Staged>>,
    dest_dir: PathBuf,
}

impl BlobWriter {
    pub(super) fn new(cache: &Cache) -> io::Result<Self> {
        let tmp = Staged::file(&cache.tmp_dir(), "blob", 0o644)?;
        Ok(BlobWriter {
            inner: HashingWriter::new(BufWriter::with_capacity(1 << 20, tmp)),
            dest_dir: cache.root().join("blobs-v1/sha256"),
        })
    }

    pub fn count(&self) -> u64 {
        self.inner.count()
    }

    /// Flush, name the file by its digest and return (digest, size, path).
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
