//! Write a `Tree` as a deterministic tar stream: sorted entries, numeric owners, fixed mtime,
//! no user/group names, no atime/ctime, GNU long-name records for long paths, extended
//! attributes as PAX `SCHILY.xattr.*` records (sorted) before their entry. A regular file
//! identical to one already written to the layer is written as a hard link to it (`dedup.rs`).

use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Arc;

use tar::{EntryType, Header};

use super::dedup::{Candidate, Dedup};
use gpuimg_assemble::{DataSource, Entry, EntryKind, Tree};

/// Stream `tree` as tar into `w`; `tick` is called with the data bytes written so far. Returns
/// the writer and what was stored once ([`Dedup`]).
pub fn write_tar<W: Write>(
    tree: &Tree,
    epoch: u64,
    w: W,
    tick: &mut dyn FnMut(u64),
) -> io::Result<(W, Dedup)> {
    let mut b = tar::Builder::new(w);
    b.follow_symlinks(false);
    let mut done: u64 = 0;
    let mut dedup = Dedup::default();
    append(&mut b, tree, epoch, &mut done, tick, &mut dedup)?;
    Ok((b.into_inner()?, dedup))
}

/// Append `tree`'s entries, in its order, to the archive `b` (not finished: more may follow);
/// `done` counts the data bytes written, and `tick` is called with it. `dedup` holds the
/// layer's files written so far (over every append to one archive).
pub fn append<W: Write>(
    b: &mut tar::Builder<W>,
    tree: &Tree,
    epoch: u64,
    done: &mut u64,
    tick: &mut dyn FnMut(u64),
    dedup: &mut Dedup,
) -> io::Result<()> {
    let mut open: HashMap<Arc<PathBuf>, fs_err::File> = HashMap::new();
    let mut buf = vec![0u8; COPY_BUF];
    for e in tree.iter() {
        let attrs = tree.xattrs(&e.path);
        if let EntryKind::File { size, data } = &e.kind {
            let found = dedup.carrier(&Candidate {
                path: &e.path,
                size: *size,
                data,
                mode: e.mode,
                uid: e.uid,
                gid: e.gid,
                xattrs: attrs,
            })?;
            if let Some(carrier) = found {
                // The carrier's header holds the attributes: the link has none of its own.
                let mut h = header(e, epoch);
                h.set_entry_type(EntryType::Link);
                b.append_link(&mut h, &e.path, &carrier)?;
                *done += size;
                tick(*done);
                continue;
            }
        }
        if !attrs.is_empty() {
            let keys: Vec<String> = attrs
                .iter()
                .map(|(k, _)| format!("{}{k}", gpuimg_assemble::xattr::PAX_PREFIX))
                .collect();
            b.append_pax_extensions(
                keys.iter()
                    .zip(attrs)
                    .map(|(k, (_, v))| (k.as_str(), v.as_slice())),
            )?;
        }
        let mut h = header(e, epoch);
        match &e.kind {
            EntryKind::Dir => {
                h.set_entry_type(EntryType::Directory);
                b.append_data(&mut h, format!("{}/", e.path), io::empty())?;
            }
            EntryKind::File { size, data } => {
                h.set_entry_type(EntryType::Regular);
                h.set_size(*size);
                match data {
                    DataSource::Path { path, identity, .. } => {
                        let f = gpuimg_assemble::open_same_file(path, identity)?;
                        let mut r = ExactReader::new(f.take(*size), *size, path.display());
                        append_file(b, &mut h, &e.path, &mut r, &mut buf)?;
                    }
                    DataSource::TarSpan {
                        tarball, offset, ..
                    } => {
                        let f = match open.get_mut(tarball) {
                            Some(f) => f,
                            None => {
                                let f = fs_err::File::open(tarball.as_path())?;
                                open.entry(tarball.clone()).or_insert(f)
                            }
                        };
                        f.seek(SeekFrom::Start(*offset))?;
                        let mut r =
                            ExactReader::new((&mut *f).take(*size), *size, tarball.display());
                        append_file(b, &mut h, &e.path, &mut r, &mut buf)?;
                    }
                    DataSource::Bytes(bytes) => {
                        b.append_data(&mut h, &e.path, bytes.as_slice())?;
                    }
                    DataSource::Archived(a) => {
                        let mut r = ExactReader::new(
                            a.open()?.take(*size),
                            *size,
                            format!("`{}` of `{}`", a.member, a.label),
                        );
                        append_file(b, &mut h, &e.path, &mut r, &mut buf)?;
                    }
                }
                *done += size;
                tick(*done);
            }
            EntryKind::Symlink { target } => {
                h.set_entry_type(EntryType::Symlink);
                b.append_link(&mut h, &e.path, target)?;
            }
            EntryKind::Hardlink { target } => {
                h.set_entry_type(EntryType::Link);
                b.append_link(&mut h, &e.path, dedup.link_target(target))?;
            }
            EntryKind::CharDevice { major, minor } | EntryKind::BlockDevice { major, minor } => {
                h.set_entry_type(if matches!(e.kind, EntryKind::CharDevice { .. }) {
                    EntryType::Char
                } else {
                    EntryType::Block
                });
                h.set_device_major(*major)?;
                h.set_device_minor(*minor)?;
                b.append_data(&mut h, &e.path, io::empty())?;
            }
            EntryKind::Fifo => {
                h.set_entry_type(EntryType::Fifo);
                b.append_data(&mut h, &e.path, io::empty())?;
            }
        }
    }
    Ok(())
}

/// Bytes a file's data is copied in. `tar::Builder::append_data` copies through an 8 KiB
/// buffer behind `dyn` references (a read, a hash update and a compressor call per 8 KiB).
const COPY_BUF: usize = 256 * 1024;

/// Append a regular file whose header `h` holds its size: the header (and any long-name
/// record) as `append_data` writes it for no data, then the data through `buf`, then the
/// zeros that fill its last 512-byte record: the bytes `append_data` would write.
fn append_file<W: Write>(
    b: &mut tar::Builder<W>,
    h: &mut Header,
    path: &str,
    r: &mut dyn Read,
    buf: &mut [u8],
) -> io::Result<()> {
    b.append_data(h, path, io::empty())?;
    let w = b.get_mut();
    let mut len: u64 = 0;
    loop {
        let n = match r.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        w.write_all(&buf[..n])?;
        len += n as u64;
    }
    let pad = (512 - len % 512) % 512;
    w.write_all(&[0u8; 512][..pad as usize])
}

fn header(e: &Entry, epoch: u64) -> Header {
    let mut h = Header::new_gnu();
    h.set_mode(e.mode);
    h.set_uid(e.uid as u64);
    h.set_gid(e.gid as u64);
    h.set_mtime(epoch);
    h.set_size(0);
    h
}

/// A reader that fails if its source yields fewer bytes than promised (a file that shrank
/// while we read it would otherwise make a corrupt tar).
struct ExactReader<R, D> {
    inner: R,
    left: u64,
    what: D,
}

impl<R: Read, D: std::fmt::Display> ExactReader<R, D> {
    fn new(inner: R, size: u64, what: D) -> Self {
        ExactReader {
            inner,
            left: size,
            what,
        }
    }
}

impl<R: Read, D: std::fmt::Display> Read for ExactReader<R, D> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && self.left > 0 && !buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("`{}` changed while it was being read", self.what),
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}
