//! Reading a wheel's zip archive with caps: entry count, directory size, bytes per entry and in
//! all. The directory is listed by the bounded reader resolution uses too
//! (`gpuimg_pypi::zipdir`: entry count and directory size capped from the end records
//! before the directory is read, no name twice), then every entry is checked: declared sizes
//! capped before anything is decompressed (and every entry must unpack to exactly its declared
//! size and CRC-32), no overlapping entries, the local header's name the central directory's,
//! only stored or deflate data, nothing encrypted.
//!
//! Every entry name is checked here: relative, no `..`, no `.` or empty components, no
//! backslash or NUL, and only regular files and directories (a symlink is refused). Reads go
//! through a positioned file handle shared by clones, so several threads read one archive.
//! Must never hold more of a wheel in memory than its directory and one metadata file.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use flate2::read::DeflateDecoder;

use crate::record::Hasher;
use crate::WheelError;
use gpuimg_assemble::{ArchivedFile, Deflated};
use gpuimg_pypi::zipdir::{self, Ranged, ZipDirError};

/// Bytes one entry may unpack to.
pub const MAX_ENTRY_BYTES: u64 = 16 << 30;
/// Bytes one wheel may unpack to.
pub const MAX_WHEEL_BYTES: u64 = 64 << 30;
/// Bytes of a metadata file (`WHEEL`, `RECORD`, `entry_points.txt`) read into memory.
pub const MAX_METADATA_BYTES: u64 = 64 << 20;

/// A file read at explicit offsets: clones share the handle, each with its own position.
#[derive(Debug, Clone)]
pub struct PosFile {
    file: Arc<File>,
    len: u64,
    pos: u64,
}

impl Read for PosFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for PosFile {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let new = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos =
            new.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before 0"))?;
        Ok(self.pos)
    }
}

/// The file as byte ranges, for the directory reader.
struct Ranges<'a>(&'a PosFile);

impl Ranged for Ranges<'_> {
    fn size(&self) -> u64 {
        self.0.len
    }

    fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, String> {
        if start.checked_add(len).is_none_or(|e| e > self.0.len) {
            return Err(format!("a read of {len} bytes at {start} is past its end"));
        }
        let mut buf = vec![0u8; len as usize];
        self.0
            .file
            .read_exact_at(&mut buf, start)
            .map_err(|e| e.to_string())?;
        Ok(buf)
    }
}

/// One entry of the archive.
#[derive(Debug, Clone)]
pub struct Member {
    /// The entry name, checked; a directory's ends in `/`.
    pub name: String,
    /// Declared uncompressed size.
    pub size: u64,
    /// The zip's unix mode has an execute bit.
    pub executable: bool,
    /// Where a deflated entry's compressed bytes lie: (first byte, length, the zip's CRC-32).
    pub deflated: Option<(u64, u64, u32)>,
    /// Where its bytes lie as stored or deflated: (first byte, length, the zip's CRC-32).
    data: (u64, u64, u32),
}

impl Member {
    pub fn is_dir(&self) -> bool {
        self.name.ends_with('/')
    }
}

/// An open wheel.
#[derive(Debug, Clone)]
pub struct Archive {
    /// The wheel's file name, for messages.
    pub label: String,
    /// The file, as opened (its path and identity) and as read.
    path: Arc<std::path::PathBuf>,
    identity: [u64; 5],
    reader: PosFile,
}

/// An entry's bytes as they inflate (or as they lie, stored), never read past its data.
enum MemberReader {
    Stored(io::Take<PosFile>),
    Deflated(Box<DeflateDecoder<io::Take<PosFile>>>),
}

impl Read for MemberReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            MemberReader::Stored(r) => r.read(buf),
            MemberReader::Deflated(r) => r.read(buf),
        }
    }
}

/// A compression method's name, for messages.
fn method_name(method: u16) -> String {
    match method {
        1..=6 => "shrink/reduce/implode".into(),
        9 => "deflate64".into(),
        12 => "bzip2".into(),
        14 => "lzma".into(),
        93 => "zstd".into(),
        95 => "xz".into(),
        99 => "aes".into(),
        m => format!("method {m}"),
    }
}

impl Archive {
    /// Open the wheel at `path` and list its entries, refusing what the module doc lists.
    pub fn open(path: &Path, label: &str) -> Result<(Archive, Vec<Member>), WheelError> {
        let read_err = |source| WheelError::Read {
            wheel: label.to_string(),
            source,
        };
        let file = fs_err::File::open(path).map_err(read_err)?.into_parts().0;
        let meta = file.metadata().map_err(read_err)?;
        let (len, identity) = (meta.len(), gpuimg_assemble::identity(&meta));
        let reader = PosFile {
            file: Arc::new(file),
            len,
            pos: 0,
        };
        let dir = zipdir::directory(&mut Ranges(&reader)).map_err(|e| match e {
            ZipDirError::TooManyEntries { count, cap } => WheelError::TooManyEntries {
                wheel: label.into(),
                count,
                cap,
            },
            ZipDirError::Duplicate { name } => WheelError::Duplicate {
                wheel: label.into(),
                path: name,
            },
            source => WheelError::Zip {
                wheel: label.into(),
                source,
            },
        })?;
        let mut members = Vec::with_capacity(dir.entries.len());
        let mut spans = Vec::with_capacity(dir.entries.len());
        let mut total: u64 = 0;
        for (index, f) in dir.entries.into_iter().enumerate() {
            let mode = f.unix_mode();
            let name = f.name;
            let unsafe_path = |why| WheelError::UnsafePath {
                wheel: label.into(),
                path: name.clone(),
                why,
            };
            check_name(&name).map_err(unsafe_path)?;
            match mode & 0o170000 {
                0 | 0o100000 | 0o040000 => {}
                0o120000 => return Err(unsafe_path("is a symbolic link")),
                _ => return Err(unsafe_path("is not a regular file or a directory")),
            }
            // Bit 0: encrypted; bit 6: strong encryption.
            if f.flags & 0x41 != 0 {
                return Err(WheelError::Encrypted {
                    wheel: label.into(),
                    path: name,
                });
            }
            if !matches!(f.method, 0 | 8) {
                return Err(WheelError::Compression {
                    wheel: label.into(),
                    method: method_name(f.method),
                    path: name,
                });
            }
            let size = f.size;
            if size > MAX_ENTRY_BYTES {
                return Err(WheelError::EntryTooLarge {
                    wheel: label.into(),
                    path: name,
                    size,
                    cap: MAX_ENTRY_BYTES,
                });
            }
            total = total.saturating_add(size);
            if total > MAX_WHEEL_BYTES {
                return Err(WheelError::TooLarge {
                    wheel: label.into(),
                    cap: MAX_WHEEL_BYTES,
                });
            }
            if f.method == 0 && f.compressed != size {
                return Err(unsafe_path("is stored with two different sizes"));
            }
            let header = f.offset;
            let start = local_data_start(&reader, header, name.as_bytes())
                .map_err(read_err)?
                .ok_or_else(|| unsafe_path("has a different name in its local header"))?;
            let end = start
                .checked_add(f.compressed)
                .filter(|e| *e <= dir.offset)
                .ok_or_else(|| unsafe_path("has data past the start of the zip's directory"))?;
            spans.push((header, end, index));
            if name.ends_with('/') && size != 0 {
                return Err(unsafe_path("is a directory with data"));
            }
            let data = (start, f.compressed, f.crc32);
            members.push(Member {
                size,
                executable: mode & 0o111 != 0,
                name,
                deflated: (f.method == 8).then_some(data),
                data,
            });
        }
        spans.sort_unstable();
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 {
                let name = |i: usize| members[i].name.clone();
                return Err(WheelError::UnsafePath {
                    wheel: label.into(),
                    path: name(w[1].2),
                    why: "overlaps another entry's data",
                });
            }
        }
        Ok((
            Archive {
                label: label.to_string(),
                path: Arc::new(path.to_path_buf()),
                identity,
                reader,
            },
            members,
        ))
    }

    /// `m`'s bytes as they inflate.
    fn member(&self, m: &Member) -> MemberReader {
        let (start, len, _) = m.data;
        let raw = PosFile {
            pos: start,
            ..self.reader.clone()
        }
        .take(len);
        if m.deflated.is_some() {
            MemberReader::Deflated(Box::new(DeflateDecoder::new(raw)))
        } else {
            MemberReader::Stored(raw)
        }
    }

    /// The ELF facts of entry `m` (`None` when it is no shared object gpuimg reads), from
    /// its bytes decompressed as a stream (to its end, for the library names its strings
    /// hold), at most twice, never held whole.
    pub fn elf_facts(&self, m: &Member) -> Result<Option<gpuimg_elf::SharedObject>, WheelError> {
        let mut f = self.member(m);
        let mut again = |off: u64, len: u64| {
            let mut g = self.member(m);
            gpuimg_elf::range_at(&mut (&mut g).take(m.size), off, len)
        };
        Ok(gpuimg_elf::parse_stream_named(
            &mut (&mut f).take(m.size),
            &mut again,
        ))
    }

    /// [`Archive::elf_facts`] from what a capture took of `m` as it was read through (the
    /// string table read from the member again); `None` when the capture cannot say.
    pub fn elf_facts_from(
        &self,
        m: &Member,
        capture: &gpuimg_elf::capture::Capture,
    ) -> Result<Option<Option<gpuimg_elf::SharedObject>>, WheelError> {
        let mut again = |off: u64, len: u64| {
            let mut g = self.member(m);
            gpuimg_elf::range_at(&mut (&mut g).take(m.size), off, len)
        };
        Ok(capture.finish(m.size, &mut again))
    }

    /// Where `m`'s bytes also lie as one raw deflate stream (when the entry is deflated),
    /// walked to its end (`gpuimg-deflate`): what lets a gzip layer copy the stream instead of
    /// compressing the file written from it. `None` for a stored entry or a stream the walk
    /// does not take (the file is then compressed as any other).
    pub fn deflated(&self, m: &Member) -> Result<Option<Deflated>, WheelError> {
        let Some((offset, len, crc32)) = m.deflated else {
            return Ok(None);
        };
        let mut r = self.reader.clone();
        r.seek(SeekFrom::Start(offset))
            .map_err(|source| WheelError::Read {
                wheel: self.label.clone(),
                source,
            })?;
        match gpuimg_deflate::find_ends_in(r.take(len), len) {
            // A stream the walk reads as another length than the entry's is not copied.
            Ok(ends) if ends.inflated != m.size => Ok(None),
            Ok(ends) => Ok(Some(Deflated {
                archive: Arc::clone(&self.path),
                identity: self.identity,
                offset,
                ends,
                size: m.size,
                crc32,
            })),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Ok(None),
            Err(source) => Err(WheelError::Read {
                wheel: self.label.clone(),
                source,
            }),
        }
    }

    /// `m` left in the wheel rather than unpacked (`gpuimg_assemble::ArchivedFile`): a deflated
    /// entry only, read back checked against its size, the zip's CRC-32 and `sha256` (what
    /// `RECORD` lists), with where its stream ends when it was walked.
    pub fn archived(
        &self,
        m: &Member,
        sha256: gpuimg_store::digest::Digest,
        ends: Option<gpuimg_deflate::Ends>,
    ) -> Option<ArchivedFile> {
        let (offset, compressed, crc32) = m.deflated?;
        Some(ArchivedFile {
            archive: Arc::clone(&self.path),
            identity: self.identity,
            label: self.label.clone(),
            member: m.name.clone(),
            offset,
            compressed,
            size: m.size,
            crc32,
            sha256,
            ends,
            tap: None,
        })
    }

    /// The whole of a small entry (metadata), at most [`MAX_METADATA_BYTES`].
    pub fn read_small(&mut self, m: &Member) -> Result<Vec<u8>, WheelError> {
        if m.size > MAX_METADATA_BYTES {
            return Err(WheelError::EntryTooLarge {
                wheel: self.label.clone(),
                path: m.name.clone(),
                size: m.size,
                cap: MAX_METADATA_BYTES,
            });
        }
        let mut out = Vec::with_capacity(m.size as usize);
        let mut h = Hasher::new(crate::record::HashAlgo::Sha256);
        let mut buf = vec![0u8; 64 << 10];
        self.copy(m, &mut out, &mut h, Path::new(&m.name), &mut buf)?;
        Ok(out)
    }

    /// Decompress `m` into `out` through `buf`, hashing it with `hasher`; the entry must
    /// unpack to exactly its declared size and the zip's CRC-32. `dest` names `out` in write
    /// errors.
    pub fn copy(
        &mut self,
        m: &Member,
        out: &mut dyn Write,
        hasher: &mut Hasher,
        dest: &Path,
        buf: &mut [u8],
    ) -> Result<u64, WheelError> {
        let label = self.label.clone();
        let read_err = |source| WheelError::Read {
            wheel: label.clone(),
            source,
        };
        let mut limited = self.member(m).take(m.size.saturating_add(1));
        let mut crc = crc32fast::Hasher::new();
        let mut n: u64 = 0;
        loop {
            let k = match limited.read(buf) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_err(e)),
            };
            n += k as u64;
            if n > m.size {
                break;
            }
            hasher.update(&buf[..k]);
            crc.update(&buf[..k]);
            out.write_all(&buf[..k])
                .map_err(|source| WheelError::Write {
                    path: dest.to_path_buf(),
                    source,
                })?;
        }
        if n != m.size {
            return Err(WheelError::SizeMismatch {
                wheel: label,
                path: m.name.clone(),
                declared: m.size,
                actual: n,
            });
        }
        if crc.finalize() != m.data.2 {
            return Err(WheelError::Crc {
                wheel: label,
                path: m.name.clone(),
            });
        }
        Ok(n)
    }
}

/// Where the data of the entry whose local header is at `at` begins, when that header is one
/// and names `name` (as the central directory does), so no tool reading local headers sees a
/// different file.
fn local_data_start(r: &PosFile, at: u64, name: &[u8]) -> io::Result<Option<u64>> {
    let len = zipdir::LOCAL_HEADER_BYTES + name.len() as u64;
    if at.checked_add(len).is_none_or(|e| e > r.len) {
        return Ok(None);
    }
    let mut head = vec![0u8; len as usize];
    r.file.read_exact_at(&mut head, at)?;
    Ok(zipdir::local_data_offset(&head, name).map(|o| at + o))
}

/// Why an entry name is refused, if it is.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.starts_with('/') {
        return Err("is an absolute path");
    }
    if name.contains('\\') {
        return Err("contains a backslash");
    }
    if name.contains('\0') || name.chars().any(|c| c.is_control()) {
        return Err("contains a control character");
    }
    let body = name.strip_suffix('/').unwrap_or(name);
    for c in body.split('/') {
        match c {
            ".." => return Err("climbs out of its directory with `..`"),
            "" | "." => return Err("is not a clean relative path"),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_leave_the_root_are_refused() {
        for ok in [
            "a.py",
            "pkg/a.py",
            "pkg/",
            "pkg-1.0.data/scripts/x",
            "a..b/c",
        ] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("/etc/passwd", "absolute"),
            ("../x", "`..`"),
            ("pkg/../../x", "`..`"),
            ("pkg\\..\\x", "backslash"),
            ("pkg//x", "clean"),
            ("./x", "clean"),
            ("", "clean"),
            ("a\nb", "control"),
        ] {
            let e = check_name(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
