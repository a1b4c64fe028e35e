//! Duplicate files stored once: while a layer's tar is written, a regular file whose bytes,
//! mode, owners and extended attributes equal a file already written to the same layer is
//! written as a hard link to it. The file first in layer order carries the data, so the
//! choice depends only on the layer's entries and their bytes, never on how they were fed.
//!
//! Files are compared by size first; only files that share (size, mode, owners, attributes)
//! with an earlier one are hashed (sha256, streamed in fixed-size reads, never whole), and
//! an earlier file is hashed only once such a candidate arrives. Files below
//! [`MIN_BYTES`] are left alone. Bytes are never changed: a file is either written as it is
//! or linked to a byte-identical one, so this is licence-neutral. Only within one layer:
//! hard links never cross layers.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Seek, SeekFrom};

use gpuimg_assemble::{DataSource, Xattrs};
use gpuimg_store::digest::{Digest, HashingWriter};

/// Files smaller than this are never linked: a link saves at most this much (a tar header of
/// 512 bytes replaces the data), which the compressor mostly removes anyway, and the many
/// identical small files of a package tree stay independent files.
pub const MIN_BYTES: u64 = 4096;

/// What two files must share to be stored once (an inode's attributes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Shape {
    size: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    xattrs: Xattrs,
}

/// Files of one [`Shape`] written so far.
#[derive(Default)]
struct Group {
    /// Not hashed yet: (path, where its bytes are).
    unhashed: Vec<(String, DataSource)>,
    /// Hashed: content digest → the first path with those bytes.
    by_digest: HashMap<Digest, String>,
}

/// The duplicate finder of one layer being written.
#[derive(Default)]
pub struct Dedup {
    groups: HashMap<Shape, Group>,
    /// Paths written as links to an identical file: path → (carrier, size).
    linked: BTreeMap<String, (String, u64)>,
}

/// One regular file about to be written.
pub struct Candidate<'a> {
    pub path: &'a str,
    pub size: u64,
    pub data: &'a DataSource,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub xattrs: &'a [(String, Vec<u8>)],
}

impl Dedup {
    /// The path `f` is to be linked to, when an identical file was already written; else `f`
    /// is remembered as written. An error reading a file's bytes is the write's error.
    pub fn carrier(&mut self, f: &Candidate<'_>) -> io::Result<Option<String>> {
        if f.size < MIN_BYTES {
            return Ok(None);
        }
        let shape = Shape {
            size: f.size,
            mode: f.mode,
            uid: f.uid,
            gid: f.gid,
            xattrs: f.xattrs.to_vec(),
        };
        let group = self.groups.entry(shape).or_default();
        if group.unhashed.is_empty() && group.by_digest.is_empty() {
            group.unhashed.push((f.path.to_string(), f.data.clone()));
            return Ok(None);
        }
        for (path, data) in std::mem::take(&mut group.unhashed) {
            let d = hash(&data, f.size, &path)?;
            group.by_digest.entry(d).or_insert(path);
        }
        let d = hash(f.data, f.size, f.path)?;
        match group.by_digest.get(&d) {
            Some(first) => {
                self.linked
                    .insert(f.path.to_string(), (first.clone(), f.size));
                Ok(Some(first.clone()))
            }
            None => {
                group.by_digest.insert(d, f.path.to_string());
                Ok(None)
            }
        }
    }

    /// Where a hard link of the tree to `target` must point: the carrier when `target` itself
    /// was written as a link (so no link points at a link).
    pub fn link_target<'a>(&'a self, target: &'a str) -> &'a str {
        self.linked.get(target).map_or(target, |(c, _)| c.as_str())
    }

    /// The paths written as links to an identical file, with their sizes.
    pub fn linked(&self) -> BTreeMap<String, u64> {
        self.linked
            .iter()
            .map(|(p, (_, size))| (p.clone(), *size))
            .collect()
    }
}

/// The sha256 of a file's `size` bytes, read in fixed-size pieces.
fn hash(data: &DataSource, size: u64, path: &str) -> io::Result<Digest> {
    let mut h = HashingWriter::new(io::sink());
    let n = match data {
        DataSource::Bytes(b) => io::copy(&mut b.as_slice(), &mut h)?,
        DataSource::Path { path, identity, .. } => {
            let f = gpuimg_assemble::open_same_file(path, identity)?;
            io::copy(&mut io::BufReader::new(f).take(size), &mut h)?
        }
        DataSource::TarSpan {
            tarball, offset, ..
        } => {
            let mut f = fs_err::File::open(tarball.as_path())?;
            f.seek(SeekFrom::Start(*offset))?;
            io::copy(&mut io::BufReader::new(f).take(size), &mut h)?
        }
        DataSource::Archived(a) => io::copy(&mut a.open()?.take(size), &mut h)?,
    };
    if n != size {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("`{path}` changed while it was being read"),
        ));
    }
    Ok(h.finish().1)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn bytes(b: &[u8]) -> DataSource {
        DataSource::Bytes(Arc::new(b.to_vec()))
    }

    fn cand<'a>(path: &'a str, data: &'a DataSource, mode: u32) -> Candidate<'a> {
        let size = match data {
            DataSource::Bytes(b) => b.len() as u64,
            _ => unreachable!(),
        };
        Candidate {
            path,
            size,
            data,
            mode,
            uid: 0,
            gid: 0,
            xattrs: &[],
        }
    }

    #[test]
    fn the_first_identical_file_carries_the_rest() {
        let a = bytes(&[1u8; 5000]);
        let b = bytes(&[2u8; 5000]);
        let small = bytes(&[1u8; 100]);
        let mut d = Dedup::default();
        assert_eq!(d.carrier(&cand("x/a", &a, 0o644)).unwrap(), None);
        assert_eq!(d.carrier(&cand("x/b", &b, 0o644)).unwrap(), None);
        // Same bytes, other mode: an inode's mode is shared by its links, so not linked.
        assert_eq!(d.carrier(&cand("x/c", &a, 0o755)).unwrap(), None);
        assert_eq!(
            d.carrier(&cand("y/a", &a, 0o644)).unwrap().as_deref(),
            Some("x/a")
        );
        assert_eq!(
            d.carrier(&cand("y/b", &b, 0o644)).unwrap().as_deref(),
            Some("x/b")
        );
        assert_eq!(
            d.carrier(&cand("z/c", &a, 0o755)).unwrap().as_deref(),
            Some("x/c")
        );
        // Small files stay files.
        assert_eq!(d.carrier(&cand("s1", &small, 0o644)).unwrap(), None);
        assert_eq!(d.carrier(&cand("s2", &small, 0o644)).unwrap(), None);
        assert_eq!(d.link_target("y/a"), "x/a");
        assert_eq!(d.link_target("x/a"), "x/a");
        assert_eq!(
            d.linked().into_iter().collect::<Vec<_>>(),
            [
                ("y/a".to_string(), 5000),
                ("y/b".to_string(), 5000),
                ("z/c".to_string(), 5000)
            ]
        );
    }
}
