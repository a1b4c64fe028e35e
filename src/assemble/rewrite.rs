//! Reading a small file of a tree back and putting new bytes in its place: how the records
//! that describe a tree (a wheel's `RECORD`, dpkg's file lists) are kept true after entries
//! were removed. Reads are capped; the entry keeps its path, mode, owners, attributes and
//! provenance.

use std::io::{self, Read, Seek, SeekFrom};
use std::sync::Arc;

use super::{DataSource, EntryKind, Tree};

impl Tree {
    /// The bytes of the regular file at `path`, when it is one and at most `cap` bytes long.
    pub fn read_file(&self, path: &str, cap: u64) -> io::Result<Option<Vec<u8>>> {
        let Some(EntryKind::File { size, data }) = self.get(path).map(|e| &e.kind) else {
            return Ok(None);
        };
        if *size > cap {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("`/{path}` is {size} bytes, more than the {cap} read back"),
            ));
        }
        let mut buf = Vec::with_capacity(*size as usize);
        match data {
            DataSource::Bytes(b) => buf.extend_from_slice(b),
            DataSource::Path { path: p, .. } => {
                fs_err::File::open(p)?.take(*size).read_to_end(&mut buf)?;
            }
            DataSource::TarSpan {
                tarball, offset, ..
            } => {
                let mut f = fs_err::File::open(tarball.as_path())?;
                f.seek(SeekFrom::Start(*offset))?;
                f.take(*size).read_to_end(&mut buf)?;
            }
        }
        if buf.len() as u64 != *size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("`/{path}` is shorter than when it was read"),
            ));
        }
        Ok(Some(buf))
    }

    /// Give the regular file at `path` the bytes `data` (everything else about it stays);
    /// false when there is no regular file there.
    pub fn replace_data(&mut self, path: &str, data: Vec<u8>) -> bool {
        let Some(e) = self.get(path) else {
            return false;
        };
        if !matches!(e.kind, EntryKind::File { .. }) {
            return false;
        }
        let mut e = e.clone();
        e.kind = EntryKind::File {
            size: data.len() as u64,
            data: DataSource::Bytes(Arc::new(data)),
        };
        let provenance = self.provenance_of(path).cloned();
        let xattrs = self.xattrs(path).to_vec();
        match provenance {
            Some(p) => self.insert_with(e, p),
            None => self.insert(e),
        }
        if !xattrs.is_empty() {
            self.set_xattrs(path, xattrs);
        }
        true
    }
}
