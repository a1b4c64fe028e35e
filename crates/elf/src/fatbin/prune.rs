//! Pruning a file's containers to the entries given GPUs can select ([`prune`]) and writing
//! the result ([`Pruning::write`]): same size, same container starts, kept entries moved to
//! each container's front byte for byte, the rest zeros.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use sha2::{Digest, Sha256};

use super::target::{Cc, Target};
use super::walk::Listing;
use super::CONTAINER_MAGIC;

/// One container rewritten: its start, its old length, and the (offset, size) of each entry
/// it keeps, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rewrite {
    offset: u64,
    old_size: u64,
    kept: Vec<(u64, u64)>,
}

/// What pruning a file for some GPUs keeps and drops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruning {
    pub file_size: u64,
    pub entries: usize,
    pub kept: usize,
    /// Bytes of the dropped entries (headers and payloads): what becomes zeros.
    pub zeroed: u64,
    /// The targets of the kept entries.
    pub kept_targets: BTreeSet<Target>,
    /// The targets of the dropped entries.
    pub dropped_targets: BTreeSet<Target>,
    rewrites: Vec<Rewrite>,
}

/// What pruning `listing`'s file for `gpus` does: every entry none of them can select goes.
pub fn prune(listing: &Listing, gpus: &[Cc]) -> Pruning {
    let mut p = Pruning {
        file_size: listing.file_size,
        entries: 0,
        kept: 0,
        zeroed: 0,
        kept_targets: BTreeSet::new(),
        dropped_targets: BTreeSet::new(),
        rewrites: Vec::new(),
    };
    for c in &listing.containers {
        let mut kept = Vec::new();
        for e in &c.entries {
            p.entries += 1;
            if e.target.selectable_by_any(gpus) {
                p.kept += 1;
                p.kept_targets.insert(e.target);
                kept.push((e.offset, e.size));
            } else {
                p.zeroed += e.size;
                p.dropped_targets.insert(e.target);
            }
        }
        if kept.len() < c.entries.len() {
            p.rewrites.push(Rewrite {
                offset: c.offset,
                old_size: c.size,
                kept,
            });
        }
    }
    p
}

/// Writes bytes and runs of zeros (as holes) to a new file, hashing what it writes.
struct Sink<'a> {
    file: &'a mut File,
    hash: Sha256,
    written: u64,
}

impl Sink<'_> {
    fn bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.file.write_all(b)?;
        self.hash.update(b);
        self.written += b.len() as u64;
        Ok(())
    }

    fn zeros(&mut self, mut n: u64) -> io::Result<()> {
        self.file.seek(SeekFrom::Current(n as i64))?;
        self.written += n;
        let z = [0u8; 8192];
        while n > 0 {
            let k = n.min(z.len() as u64) as usize;
            self.hash.update(&z[..k]);
            n -= k as u64;
        }
        Ok(())
    }

    fn copy(
        &mut self,
        src: &File,
        mut offset: u64,
        mut len: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        while len > 0 {
            let k = len.min(buf.len() as u64) as usize;
            src.read_exact_at(&mut buf[..k], offset)?;
            self.bytes(&buf[..k])?;
            offset += k as u64;
            len -= k as u64;
        }
        Ok(())
    }
}

impl Pruning {
    /// Whether pruning drops anything (else the file stays as it is).
    pub fn changes(&self) -> bool {
        !self.rewrites.is_empty()
    }

    /// Write the pruned file to `dst` (a new, empty file) from `src` (the file the listing
    /// read); returns the sha256 of what it wrote. Zeroed ranges are left as holes.
    pub fn write(&self, src: &File, dst: &mut File) -> io::Result<[u8; 32]> {
        let size = src.metadata()?.len();
        if size != self.file_size {
            return Err(io::Error::other(format!(
                "the file changed size since it was read ({} → {size} bytes)",
                self.file_size
            )));
        }
        let mut buf = vec![0u8; 1 << 20];
        let mut sink = Sink {
            file: dst,
            hash: Sha256::new(),
            written: 0,
        };
        let mut pos = 0;
        for r in &self.rewrites {
            sink.copy(src, pos, r.offset - pos, &mut buf)?;
            let body: u64 = r.kept.iter().map(|(_, n)| n).sum();
            let mut header = [0u8; 16];
            src.read_exact_at(&mut header, r.offset)?;
            if u32::from_le_bytes([header[0], header[1], header[2], header[3]]) != CONTAINER_MAGIC {
                return Err(io::Error::other(format!(
                    "no container at {:#x} any more",
                    r.offset
                )));
            }
            header[8..16].copy_from_slice(&body.to_le_bytes());
            sink.bytes(&header)?;
            for (off, n) in &r.kept {
                sink.copy(src, *off, *n, &mut buf)?;
            }
            sink.zeros(r.old_size - 16 - body)?;
            pos = r.offset + r.old_size;
        }
        sink.copy(src, pos, size - pos, &mut buf)?;
        let written = sink.written;
        let hash = sink.hash.finalize().into();
        dst.set_len(written)?;
        dst.flush()?;
        Ok(hash)
    }
}
