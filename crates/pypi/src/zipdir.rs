//! The one zip reader: a zip's central directory, read bounded, its local headers
//! ([`local_data_offset`]), and a wheel's `*.dist-info/METADATA` through them,
//! from any source of byte ranges: HTTP range requests (an index without PEP 658 files), a
//! local file (find-links), or the wheel the installer opens (`gpuimg-wheel`'s `archive`,
//! which lists its entries with [`directory`] before reading any of
//! them: one reader of the directory for resolution and install, so both see the same
//! entries).
//! The end record (and the zip64 one, which must agree with it) gives the entry count and the
//! directory's size, which are capped ([`MAX_ENTRIES`], [`MAX_DIRECTORY_BYTES`]) before the
//! directory is read; the directory must hold exactly that many entries, fill exactly that many
//! bytes, end where the end records begin, and name no path twice.
//! Must never read more than [`MAX_DIRECTORY_BYTES`] of directory or inflate more than
//! [`MAX_METADATA_BYTES`]; every offset is checked against the file's size.

use std::collections::HashSet;
use std::io::Read;

/// The most central directory bytes read (a torch wheel's is about 2 MiB).
pub const MAX_DIRECTORY_BYTES: u64 = 64 << 20;
/// The most entries a wheel's directory may hold (the largest real wheels hold tens of
/// thousands).
pub const MAX_ENTRIES: usize = 500_000;
/// The most bytes a METADATA file may inflate to.
pub const MAX_METADATA_BYTES: u64 = 8 << 20;
/// The tail read first: the end record and, for most wheels, the directory with it.
pub const TAIL_BYTES: u64 = 64 << 10;

/// Why a zip's directory is refused: each reads after "the wheel is not valid: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZipDirError {
    #[error("{0}")]
    Read(String),
    #[error("it is not a zip file (no end record)")]
    NoEndRecord,
    #[error("its {0} is truncated")]
    Truncated(&'static str),
    #[error("its end record is followed by {extra} bytes that are not its comment")]
    AfterEndRecord { extra: u64 },
    #[error("it spans several disks")]
    MultiDisk,
    #[error("its zip64 end record is missing")]
    NoZip64Record,
    #[error("its zip64 end record lies outside the file")]
    Zip64Outside,
    #[error("its end record says {field} is {end}, but its zip64 end record says {zip64}")]
    EndRecordsDisagree {
        field: &'static str,
        end: u64,
        zip64: u64,
    },
    #[error("its central directory has {count} entries, over the cap of {cap}")]
    TooManyEntries { count: u64, cap: usize },
    #[error("its central directory is {size} bytes, over the cap of {cap} bytes")]
    DirectoryTooLarge { size: u64, cap: u64 },
    #[error("its central directory of {size} bytes is too small for {count} entries")]
    DirectoryTooSmall { size: u64, count: u64 },
    #[error("its central directory lies outside the file")]
    DirectoryOutside,
    #[error("its central directory ends at byte {end}, not where its end record begins (byte {records})")]
    DirectoryNotBeforeEnd { end: u64, records: u64 },
    #[error("its central directory holds {found} bytes of entries, not the {declared} its end record says")]
    DirectorySize { found: u64, declared: u64 },
    #[error("its central directory entry {index} is not an entry header")]
    NotAnEntry { index: u64 },
    #[error("its central directory entry {index} is truncated")]
    EntryTruncated { index: u64 },
    #[error("its entry name `{name}` is not UTF-8, or not marked as UTF-8")]
    NameEncoding { name: String },
    #[error("`{name}` appears twice in its central directory")]
    Duplicate { name: String },
}

/// Byte ranges of one file.
pub trait Ranged {
    /// The file's size.
    fn size(&self) -> u64;
    /// Exactly `len` bytes from `start`.
    fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, String>;
}

/// A source that serves what lies in `tail` (the file's last bytes) from memory.
pub struct WithTail<'a> {
    pub inner: &'a mut dyn Ranged,
    pub tail: Vec<u8>,
}

impl Ranged for WithTail<'_> {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, String> {
        let tail_start = self.size() - self.tail.len() as u64;
        if start >= tail_start && start.checked_add(len).is_some_and(|e| e <= self.size()) {
            let s = (start - tail_start) as usize;
            return Ok(self.tail[s..s + len as usize].to_vec());
        }
        self.inner.read(start, len)
    }
}

/// A local file.
pub struct LocalFile {
    pub file: std::fs::File,
    pub size: u64,
}

impl Ranged for LocalFile {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, String> {
        use std::io::Seek;
        self.file
            .seek(std::io::SeekFrom::Start(start))
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; len as usize];
        self.file.read_exact(&mut buf).map_err(|e| e.to_string())?;
        Ok(buf)
    }
}

fn u16_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u16::from_le_bytes(b.get(i..i + 2)?.try_into().ok()?) as u64)
}
fn u32_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?) as u64)
}
fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?))
}

/// One central-directory entry, as its header says.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The name, UTF-8 (a directory's ends in `/`).
    pub name: String,
    /// The general purpose flags (bit 0: encrypted).
    pub flags: u16,
    /// The compression method (0 stored, 8 deflate).
    pub method: u16,
    pub crc32: u32,
    pub compressed: u64,
    pub size: u64,
    /// Where its local header begins.
    pub offset: u64,
    /// "Version made by": its high byte is the host system (3: unix).
    pub made_by: u16,
    /// The external attributes (on unix, the mode in the high 16 bits).
    pub external: u32,
}

impl Entry {
    /// The unix mode its attributes give (0 when made on another system).
    pub fn unix_mode(&self) -> u32 {
        if self.made_by >> 8 == 3 {
            self.external >> 16
        } else {
            0
        }
    }
}

/// A zip's central directory: its entries, in order, and where it begins (where the entries'
/// data must end).
#[derive(Debug, Clone)]
pub struct Directory {
    pub entries: Vec<Entry>,
    pub offset: u64,
}

/// The central directory of the zip `src` holds, read bounded (the module doc's rules).
pub fn directory(src: &mut dyn Ranged) -> Result<Directory, ZipDirError> {
    let mut src = with_tail(src)?;
    directory_in(&mut src)
}

fn with_tail(src: &mut dyn Ranged) -> Result<WithTail<'_>, ZipDirError> {
    let size = src.size();
    let tail_len = size.min(TAIL_BYTES);
    let tail = src
        .read(size - tail_len, tail_len)
        .map_err(ZipDirError::Read)?;
    Ok(WithTail { inner: src, tail })
}

/// The bytes of a local header before its name.
pub const LOCAL_HEADER_BYTES: u64 = 30;
const LOCAL: [u8; 4] = [0x50, 0x4b, 0x03, 0x04];

/// Where an entry's data begins, counted from its local header's first byte, when `head`
/// (the bytes from that header on, at least [`LOCAL_HEADER_BYTES`] and the name) is a local
/// header naming `name`, as the central directory does: so no tool reading local headers
/// sees a different file. `None` when it is not. The one reader of local headers (the
/// installer, `gpuimg-wheel`'s `archive`, and [`metadata`]).
pub fn local_data_offset(head: &[u8], name: &[u8]) -> Option<u64> {
    if head.get(..4)? != LOCAL {
        return None;
    }
    let len = u16_at(head, 26)?;
    let extra = u16_at(head, 28)?;
    let start = LOCAL_HEADER_BYTES as usize;
    if len != name.len() as u64 || head.get(start..start + name.len())? != name {
        return None;
    }
    Some(LOCAL_HEADER_BYTES + len + extra)
}

/// The METADATA of the wheel `src` holds.
pub fn metadata(src: &mut dyn Ranged) -> Result<Vec<u8>, String> {
    let size = src.size();
    let mut src = with_tail(src).map_err(|e| e.to_string())?;
    let dir = directory_in(&mut src).map_err(|e| e.to_string())?;
    let found: Vec<&Entry> = dir
        .entries
        .iter()
        .filter(|e| {
            e.name
                .split_once('/')
                .is_some_and(|(d, f)| d.ends_with(".dist-info") && f == "METADATA")
        })
        .collect();
    let e = match found.as_slice() {
        [e] => *e,
        [] => return Err("it has no `*.dist-info/METADATA`".into()),
        _ => return Err("it has more than one `*.dist-info/METADATA`".into()),
    };
    if e.size > MAX_METADATA_BYTES || e.compressed > MAX_METADATA_BYTES + (1 << 16) {
        return Err(format!(
            "its METADATA is larger than {MAX_METADATA_BYTES} bytes"
        ));
    }
    // One read for the local header and the data: the local name is the central one and its
    // extra field rarely longer than the slack; else a second read.
    const SLACK: u64 = 1024;
    if e.offset >= size {
        return Err("its METADATA's local header lies outside the file".into());
    }
    let guess = (30 + e.name.len() as u64 + SLACK)
        .saturating_add(e.compressed)
        .min(size - e.offset);
    let local = src.read(e.offset, guess)?;
    let skip = local_data_offset(&local, e.name.as_bytes())
        .ok_or("its METADATA has no local header naming it as the central directory does")?;
    let start = e.offset + skip;
    if start.checked_add(e.compressed).is_none_or(|end| end > size) {
        return Err("its METADATA lies outside the file".into());
    }
    let data = match local.get(skip as usize..(skip + e.compressed) as usize) {
        Some(d) => d.to_vec(),
        None => src.read(start, e.compressed)?,
    };
    let mut out = Vec::new();
    match e.method {
        0 => out = data,
        8 => {
            flate2::read::DeflateDecoder::new(&data[..])
                .take(MAX_METADATA_BYTES + 1)
                .read_to_end(&mut out)
                .map_err(|err| format!("its METADATA does not inflate: {err}"))?;
        }
        m => return Err(format!("its METADATA uses compression method {m}")),
    }
    if out.len() as u64 != e.size {
        return Err(format!(
            "its METADATA is {} bytes, not the {} its directory says",
            out.len(),
            e.size
        ));
    }
    Ok(out)
}

const END: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
const LOCATOR: [u8; 4] = [0x50, 0x4b, 0x06, 0x07];
const END64: [u8; 4] = [0x50, 0x4b, 0x06, 0x06];
const CENTRAL: [u8; 4] = [0x50, 0x4b, 0x01, 0x02];

/// What the end records say: the entry count, the directory's size and offset, and where the
/// records begin (the zip64 one when there is one).
struct End {
    count: u64,
    size: u64,
    offset: u64,
    records: u64,
}

/// The end record (the last one in the tail, which must end the file with its comment) and,
/// when a zip64 locator sits right before it, the zip64 end record, which must agree with it
/// wherever the end record's field is not saturated.
fn end_records(src: &mut WithTail<'_>) -> Result<End, ZipDirError> {
    let size = src.inner.size();
    let tail_start = size - src.tail.len() as u64;
    let tail = &src.tail;
    let pos = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..i + 4] == END)
        .ok_or(ZipDirError::NoEndRecord)?;
    let bad = || ZipDirError::Truncated("end record");
    let field16 = |i: usize| u16_at(tail, pos + i).ok_or_else(bad);
    let field32 = |i: usize| u32_at(tail, pos + i).ok_or_else(bad);
    let (disk, cd_disk) = (field16(4)?, field16(6)?);
    let (here, count) = (field16(8)?, field16(10)?);
    let (cd_size, cd_offset) = (field32(12)?, field32(16)?);
    let comment = field16(20)?;
    let at = tail_start + pos as u64;
    let end = at + 22 + comment;
    if end != size {
        return Err(match size.checked_sub(end) {
            Some(extra) => ZipDirError::AfterEndRecord { extra },
            None => ZipDirError::Truncated("end record's comment"),
        });
    }
    let locator = match at.checked_sub(20) {
        Some(l) => Some((l, src.read(l, 20).map_err(ZipDirError::Read)?)),
        None => None,
    };
    let Some((loc_at, loc)) = locator.filter(|(_, b)| b[..4] == LOCATOR) else {
        if disk != 0 || cd_disk != 0 || here != count {
            return Err(ZipDirError::MultiDisk);
        }
        return Ok(End {
            count,
            size: cd_size,
            offset: cd_offset,
            records: at,
        });
    };
    let bad64 = || ZipDirError::Truncated("zip64 end record");
    let rec_at = u64_at(&loc, 8).ok_or_else(bad64)?;
    if u32_at(&loc, 4) != Some(0) || u32_at(&loc, 16).is_none_or(|n| n > 1) {
        return Err(ZipDirError::MultiDisk);
    }
    if rec_at.checked_add(56).is_none_or(|e| e > loc_at) {
        return Err(ZipDirError::Zip64Outside);
    }
    let rec = src.read(rec_at, 56).map_err(ZipDirError::Read)?;
    if rec.get(..4) != Some(&END64[..]) {
        return Err(ZipDirError::NoZip64Record);
    }
    let f32 = |i: usize| u32_at(&rec, i).ok_or_else(bad64);
    let f64 = |i: usize| u64_at(&rec, i).ok_or_else(bad64);
    let (here64, count64) = (f64(24)?, f64(32)?);
    if f32(16)? != 0 || f32(20)? != 0 || here64 != count64 {
        return Err(ZipDirError::MultiDisk);
    }
    let (size64, offset64) = (f64(40)?, f64(48)?);
    for (field, end, zip64, saturated) in [
        ("the entry count", count, count64, 0xFFFF),
        ("the directory's size", cd_size, size64, 0xFFFF_FFFF),
        ("the directory's offset", cd_offset, offset64, 0xFFFF_FFFF),
    ] {
        if end != saturated && end != zip64 {
            return Err(ZipDirError::EndRecordsDisagree { field, end, zip64 });
        }
    }
    Ok(End {
        count: count64,
        size: size64,
        offset: offset64,
        records: rec_at,
    })
}

/// The directory, its count and size capped before a byte of it is read.
fn directory_in(src: &mut WithTail<'_>) -> Result<Directory, ZipDirError> {
    let end = end_records(src)?;
    if end.count > MAX_ENTRIES as u64 {
        return Err(ZipDirError::TooManyEntries {
            count: end.count,
            cap: MAX_ENTRIES,
        });
    }
    if end.size > MAX_DIRECTORY_BYTES {
        return Err(ZipDirError::DirectoryTooLarge {
            size: end.size,
            cap: MAX_DIRECTORY_BYTES,
        });
    }
    if end.size < end.count * 46 {
        return Err(ZipDirError::DirectoryTooSmall {
            size: end.size,
            count: end.count,
        });
    }
    match end.offset.checked_add(end.size) {
        Some(e) if e == end.records => {}
        Some(e) if e < end.records => {
            return Err(ZipDirError::DirectoryNotBeforeEnd {
                end: e,
                records: end.records,
            })
        }
        _ => return Err(ZipDirError::DirectoryOutside),
    }
    let cd = src.read(end.offset, end.size).map_err(ZipDirError::Read)?;
    let entries = entries(&cd, end.count)?;
    let mut seen = HashSet::with_capacity(entries.len());
    for e in &entries {
        if !seen.insert(e.name.trim_end_matches('/')) {
            return Err(ZipDirError::Duplicate {
                name: e.name.clone(),
            });
        }
    }
    Ok(Directory {
        entries,
        offset: end.offset,
    })
}

/// Exactly `count` entries, which must fill `cd`.
fn entries(cd: &[u8], count: u64) -> Result<Vec<Entry>, ZipDirError> {
    let mut out = Vec::with_capacity(count as usize);
    let mut i = 0;
    for index in 0..count {
        let cut = || ZipDirError::EntryTruncated { index };
        let h = cd.get(i..i + 46).ok_or_else(cut)?;
        if h[..4] != CENTRAL {
            return Err(ZipDirError::NotAnEntry { index });
        }
        let f16 = |k: usize| u16_at(h, k).ok_or_else(cut);
        let f32 = |k: usize| u32_at(h, k).ok_or_else(cut);
        let (n, x, c) = (f16(28)? as usize, f16(30)? as usize, f16(32)? as usize);
        let name = cd.get(i + 46..i + 46 + n).ok_or_else(cut)?;
        let extra = cd.get(i + 46 + n..i + 46 + n + x).ok_or_else(cut)?;
        if i + 46 + n + x + c > cd.len() {
            return Err(cut());
        }
        let flags = f16(8)? as u16;
        let (mut compressed, mut size, mut offset) = (f32(20)?, f32(24)?, f32(42)?);
        // The zip64 extra field holds, in order, whichever of the three were saturated.
        let mut j = 0;
        while j + 4 <= extra.len() {
            let id = u16_at(extra, j).ok_or_else(cut)?;
            let len = u16_at(extra, j + 2).ok_or_else(cut)? as usize;
            let body = extra.get(j + 4..j + 4 + len).ok_or_else(cut)?;
            if id == 1 {
                let mut k = 0;
                for field in [&mut size, &mut compressed, &mut offset] {
                    if *field == 0xFFFF_FFFF {
                        *field = u64_at(body, k).ok_or_else(cut)?;
                        k += 8;
                    }
                }
            }
            j += 4 + len;
        }
        // Marked UTF-8, or plain ASCII: what every reader decodes alike.
        let name = (flags & 0x800 != 0 || name.is_ascii())
            .then(|| std::str::from_utf8(name).ok())
            .flatten()
            .ok_or_else(|| ZipDirError::NameEncoding {
                name: String::from_utf8_lossy(name).into_owned(),
            })?;
        out.push(Entry {
            name: name.to_string(),
            flags,
            method: f16(10)? as u16,
            crc32: f32(16)? as u32,
            compressed,
            size,
            offset,
            made_by: f16(4)? as u16,
            external: f32(38)? as u32,
        });
        i += 46 + n + x + c;
    }
    if i != cd.len() {
        return Err(ZipDirError::DirectorySize {
            found: i as u64,
            declared: cd.len() as u64,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip of `(name, bytes, deflate)` members, as wheels are laid out.
    fn zip(members: &[(&str, &[u8], bool)]) -> Vec<u8> {
        use std::io::Write;
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, data, deflate) in members {
            let body = if *deflate {
                let mut e =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            } else {
                data.to_vec()
            };
            let method: u16 = if *deflate { 8 } else { 0 };
            let offset = out.len() as u32;
            let crc = crc32fast::hash(data);
            let mut h = vec![0x50, 0x4b, 0x03, 0x04, 20, 0, 0, 0];
            h.extend(method.to_le_bytes());
            h.extend([0u8; 4]);
            h.extend(crc.to_le_bytes());
            h.extend((body.len() as u32).to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((name.len() as u16).to_le_bytes());
            h.extend(0u16.to_le_bytes());
            h.extend(name.as_bytes());
            out.extend(h);
            out.extend(&body);
            let mut c = vec![0x50, 0x4b, 0x01, 0x02, 20, 0, 20, 0, 0, 0];
            c.extend(method.to_le_bytes());
            c.extend([0u8; 4]);
            c.extend(crc.to_le_bytes());
            c.extend((body.len() as u32).to_le_bytes());
            c.extend((data.len() as u32).to_le_bytes());
            c.extend((name.len() as u16).to_le_bytes());
            c.extend([0u8; 12]);
            c.extend(offset.to_le_bytes());
            c.extend(name.as_bytes());
            central.extend(c);
        }
        let cd_offset = out.len() as u32;
        out.extend(&central);
        let mut e = vec![0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0];
        e.extend((members.len() as u16).to_le_bytes());
        e.extend((members.len() as u16).to_le_bytes());
        e.extend((central.len() as u32).to_le_bytes());
        e.extend(cd_offset.to_le_bytes());
        e.extend(0u16.to_le_bytes());
        out.extend(e);
        out
    }

    struct Mem(Vec<u8>, usize);
    impl Ranged for Mem {
        fn size(&self) -> u64 {
            self.0.len() as u64
        }
        fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, String> {
            self.1 += 1;
            self.0
                .get(start as usize..(start + len) as usize)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| "out of range".into())
        }
    }

    #[test]
    fn metadata_from_a_large_wheel_in_few_reads() {
        let big = vec![7u8; 300_000];
        let meta = b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n";
        let z = zip(&[
            ("demo/big.bin", &big, false),
            ("demo-1.0.dist-info/METADATA", meta, true),
            ("demo-1.0.dist-info/RECORD", b"", false),
        ]);
        let mut m = Mem(z, 0);
        assert_eq!(metadata(&mut m).unwrap(), meta);
        assert_eq!(
            m.1, 1,
            "tail read only: the directory and METADATA lie in it"
        );
        let z = zip(&[
            ("demo-1.0.dist-info/METADATA", meta, false),
            ("demo/big.bin", &big, false),
        ]);
        let mut m = Mem(z, 0);
        assert_eq!(metadata(&mut m).unwrap(), meta);
        assert_eq!(m.1, 2, "the tail, then METADATA at the front");
    }

    #[test]
    fn a_local_header_must_name_the_central_entry() {
        let meta = b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n";
        let z = zip(&[("demo-1.0.dist-info/METADATA", meta, false)]);
        let name = b"demo-1.0.dist-info/METADATA";
        assert_eq!(local_data_offset(&z, name), Some(30 + name.len() as u64));
        assert_eq!(local_data_offset(&z, b"demo-1.0.dist-info/METADATB"), None);
        assert_eq!(
            local_data_offset(&z[..40], name),
            None,
            "cut before the name ends"
        );
        assert_eq!(local_data_offset(&z[1..], name), None, "not a local header");
        // The resolver refuses a METADATA whose local header names another file, as the
        // installer does.
        let mut renamed = z.clone();
        renamed[30 + name.len() - 1] = b'B';
        let err = metadata(&mut Mem(renamed, 0)).unwrap_err();
        assert!(err.contains("no local header naming it"), "{err}");
    }

    #[test]
    fn broken_wheels_are_errors() {
        let mut m = Mem(b"not a zip at all".to_vec(), 0);
        assert!(metadata(&mut m).unwrap_err().contains("not a zip"));
        let z = zip(&[("demo/__init__.py", b"", false)]);
        assert!(metadata(&mut Mem(z, 0))
            .unwrap_err()
            .contains("no `*.dist-info/METADATA`"));
        let mut z = zip(&[("a-1.dist-info/METADATA", b"Name: a\n", false)]);
        let n = z.len();
        // Point the directory past the end.
        z[n - 6] = 0xff;
        z[n - 5] = 0xff;
        assert!(metadata(&mut Mem(z, 0)).is_err());
    }

    /// `z` (one end record, no comment) with a zip64 end record and locator claiming `count`
    /// entries and a directory of `size` bytes, the end record saturated.
    fn as_zip64(z: &[u8], count: u64, size: u64) -> Vec<u8> {
        let end = &z[z.len() - 22..];
        let offset = u32_at(end, 16).unwrap();
        let mut out = z[..z.len() - 22].to_vec();
        let rec_at = out.len() as u64;
        out.extend([0x50, 0x4b, 0x06, 0x06]);
        out.extend(44u64.to_le_bytes());
        out.extend([45, 3, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        for v in [count, count, size, offset] {
            out.extend(v.to_le_bytes());
        }
        out.extend([0x50, 0x4b, 0x06, 0x07, 0, 0, 0, 0]);
        out.extend(rec_at.to_le_bytes());
        out.extend(1u32.to_le_bytes());
        out.extend([0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0]);
        out.extend([0xff; 12]);
        out.extend([0, 0]);
        out
    }

    /// Counts the reads that reach the file and the longest.
    struct Counted(Vec<u8>, usize, u64);
    impl Ranged for Counted {
        fn size(&self) -> u64 {
            self.0.len() as u64
        }
        fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, String> {
            self.1 += 1;
            self.2 = self.2.max(len);
            Mem(self.0.clone(), 0).read(start, len)
        }
    }

    #[test]
    fn the_entry_count_and_the_directory_size_are_capped_before_the_directory_is_read() {
        // 3,000 entries: a directory of 160 KB, more than the tail.
        let names: Vec<String> = (0..3000).map(|i| format!("demo/m{i:05}.py")).collect();
        let members: Vec<(&str, &[u8], bool)> = names
            .iter()
            .map(|n| (n.as_str(), &b""[..], false))
            .collect();
        let z = zip(&members);
        let real = u32_at(&z, z.len() - 10).unwrap();
        let mut ok = Counted(as_zip64(&z, 3000, real), 0, 0);
        assert_eq!(directory(&mut ok).unwrap().entries.len(), 3000);
        assert_eq!((ok.1, ok.2), (2, real), "the tail, then the directory");

        let mut many = Counted(as_zip64(&z, 2_000_000, real), 0, 0);
        assert_eq!(
            directory(&mut many).unwrap_err(),
            ZipDirError::TooManyEntries {
                count: 2_000_000,
                cap: MAX_ENTRIES
            }
        );
        assert_eq!(many.1, 1, "only the tail was read");
        let mut huge = Counted(as_zip64(&z, 3000, 3 << 30), 0, 0);
        assert_eq!(
            directory(&mut huge).unwrap_err(),
            ZipDirError::DirectoryTooLarge {
                size: 3 << 30,
                cap: MAX_DIRECTORY_BYTES
            }
        );
        assert_eq!(huge.1, 1, "only the tail was read");
        let e = metadata(&mut Mem(as_zip64(&z, 2_000_000, real), 0)).unwrap_err();
        assert!(e.contains("2000000 entries, over the cap of 500000"), "{e}");
    }

    #[test]
    fn a_name_twice_is_refused_even_as_a_file_and_a_directory() {
        for (a, b) in [("demo/x.py", "demo/x.py"), ("demo/", "demo")] {
            let z = zip(&[
                ("demo-1.0.dist-info/METADATA", b"Name: demo\n", false),
                (a, b"1", false),
                (b, b"", true),
            ]);
            assert_eq!(
                directory(&mut Mem(z.clone(), 0)).unwrap_err(),
                ZipDirError::Duplicate { name: b.into() }
            );
            let e = metadata(&mut Mem(z, 0)).unwrap_err();
            assert!(e.contains(&format!("`{b}` appears twice")), "{e}");
        }
    }

    #[test]
    fn the_end_records_and_the_directory_must_agree() {
        let z = zip(&[("a/x.py", b"x", false), ("a/y.py", b"y", false)]);
        let n = z.len();
        let size = u32_at(&z, n - 10).unwrap();
        assert!(directory(&mut Mem(as_zip64(&z, 2, size), 0)).is_ok());
        let err = |z: Vec<u8>| directory(&mut Mem(z, 0)).unwrap_err();

        // The end record says 1 entry where the zip64 one says 2.
        let mut one = as_zip64(&z, 2, size);
        let m = one.len();
        one[m - 12..m - 10].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(
            err(one),
            ZipDirError::EndRecordsDisagree {
                field: "the entry count",
                end: 1,
                zip64: 2
            }
        );
        // Both say 1: the second entry would be hidden from a reader that counts.
        let mut fewer = z.clone();
        fewer[n - 14..n - 10].copy_from_slice(&[1, 0, 1, 0]);
        assert_eq!(
            err(fewer),
            ZipDirError::DirectorySize {
                found: size / 2,
                declared: size
            }
        );
        let mut trailing = z.clone();
        trailing.extend(b"abc");
        assert_eq!(err(trailing), ZipDirError::AfterEndRecord { extra: 3 });
        let mut prefixed = b"#!sh\n".to_vec();
        prefixed.extend(&z);
        assert!(matches!(
            err(prefixed),
            ZipDirError::DirectoryNotBeforeEnd { .. }
        ));
        // A name that is not marked UTF-8 and not ASCII (cp437 to some readers).
        let mut latin = zip(&[("a/caf?.py", b"x", false)]);
        for i in 0..latin.len() - 9 {
            if &latin[i..i + 9] == b"a/caf?.py" {
                latin[i + 5] = 0xe9;
            }
        }
        assert!(matches!(err(latin), ZipDirError::NameEncoding { .. }));
    }
}
