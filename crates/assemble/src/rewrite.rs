//! Reading a file of a tree back (a small one whole, any one's first bytes) and putting new
//! bytes in its place: how the records that describe a tree (a wheel's `RECORD`, dpkg's file lists) are kept true after entries
//! were removed. Reads are capped; the entry keeps its path, mode, owners, attributes and
//! provenance. A file on disk is read only if it is still the one the tree recorded.

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
        let buf = read_prefix(data, *size)?;
        if buf.len() as u64 != *size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("`/{path}` is shorter than when it was read"),
            ));
        }
        Ok(Some(buf))
    }

    /// The first `n` bytes (fewer for a shorter file) of the regular file at `path`, when it is
    /// one.
    pub fn read_head(&self, path: &str, n: u64) -> io::Result<Option<Vec<u8>>> {
        let Some(EntryKind::File { size, data }) = self.get(path).map(|e| &e.kind) else {
            return Ok(None);
        };
        read_prefix(data, n.min(*size)).map(Some)
    }

    /// Give the regular file at `path` the bytes `data` (everything else about it stays);
    /// false when there is no regular file there.
    pub fn replace_data(&mut self, path: &str, data: Vec<u8>) -> bool {
        let size = data.len() as u64;
        self.replace_source(path, DataSource::Bytes(Arc::new(data)), size)
    }

    /// Give the regular file at `path` the bytes of `data` (`size` bytes), keeping its
    /// metadata, provenance and extended attributes; false when there is no such file.
    pub fn replace_source(&mut self, path: &str, data: DataSource, size: u64) -> bool {
        let Some(e) = self.get(path) else {
            return false;
        };
        if !matches!(e.kind, EntryKind::File { .. }) {
            return false;
        }
        let mut e = e.clone();
        e.kind = EntryKind::File { size, data };
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

/// The first `n` bytes of `data` (fewer when it is shorter): the one reader of a tree file's
/// bytes for `read_file` and `read_head`.
fn read_prefix(data: &DataSource, n: u64) -> io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(n as usize);
    match data {
        DataSource::Bytes(b) => buf.extend_from_slice(&b[..b.len().min(n as usize)]),
        DataSource::Path {
            path: p, identity, ..
        } => {
            super::open_same_file(p, identity)?
                .take(n)
                .read_to_end(&mut buf)?;
        }
        DataSource::TarSpan {
            tarball, offset, ..
        } => {
            let mut f = fs_err::File::open(tarball.as_path())?;
            f.seek(SeekFrom::Start(*offset))?;
            f.take(n).read_to_end(&mut buf)?;
        }
        DataSource::Archived(a) => {
            a.open()?.take(n).read_to_end(&mut buf)?;
        }
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Entry, Provenance};

    #[test]
    fn a_file_is_read_back_only_while_it_is_the_one_recorded_and_replaced_in_place() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("RECORD");
        std::fs::write(&p, b"a,,\n").unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        let mut t = Tree::new("t");
        t.insert_with(
            Entry {
                path: "x/RECORD".into(),
                kind: EntryKind::File {
                    size: 4,
                    data: DataSource::file(p.clone(), &meta),
                },
                mode: 0o640,
                uid: 7,
                gid: 8,
            },
            Provenance::wheel("x"),
        );
        t.set_xattrs("x/RECORD", [("user.k".to_string(), b"v".to_vec())]);
        assert_eq!(t.read_file("x/RECORD", 64).unwrap().unwrap(), b"a,,\n");
        assert!(t.read_file("x/RECORD", 3).is_err(), "over the cap");
        assert_eq!(t.read_file("x", 64).unwrap(), None);

        assert!(t.replace_data("x/RECORD", b"b,,\n".to_vec()));
        let e = t.get("x/RECORD").unwrap();
        assert_eq!((e.mode, e.uid, e.gid), (0o640, 7, 8));
        assert_eq!(t.provenance_of("x/RECORD"), Some(&Provenance::wheel("x")));
        assert_eq!(t.xattrs("x/RECORD").len(), 1);
        assert_eq!(t.read_file("x/RECORD", 64).unwrap().unwrap(), b"b,,\n");

        // A file swapped for another since the tree recorded it is refused.
        let mut u = Tree::new("u");
        u.insert(Entry {
            path: "y".into(),
            kind: EntryKind::File {
                size: 4,
                data: DataSource::file(p.clone(), &meta),
            },
            mode: 0o644,
            uid: 0,
            gid: 0,
        });
        // (The recorded inode stays alive, so the new file cannot reuse its number.)
        std::fs::hard_link(&p, d.path().join("held")).unwrap();
        std::fs::write(d.path().join("other"), b"c,,\n").unwrap();
        std::fs::rename(d.path().join("other"), &p).unwrap();
        let e = u.read_file("y", 64).unwrap_err();
        assert!(e.to_string().contains("changed while"), "{e}");
    }
}
