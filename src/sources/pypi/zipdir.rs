//! A wheel's `*.dist-info/METADATA` read through its zip central directory, from any source
//! of byte ranges: HTTP range requests (an index without PEP 658 files) or a local file
//! (find-links). Reads the end record (zip64 too), the central directory, then the one
//! member; stored or deflated.
//! Must never read more than [`MAX_DIRECTORY_BYTES`] of directory or inflate more than
//! [`MAX_METADATA_BYTES`]; every offset is checked against the file's size.

use std::io::Read;

/// The most central directory bytes read (a torch wheel's is about 2 MiB).
pub const MAX_DIRECTORY_BYTES: u64 = 64 << 20;
/// The most bytes a METADATA file may inflate to.
pub const MAX_METADATA_BYTES: u64 = 8 << 20;
/// The tail read first: the end record and, for most wheels, the directory with it.
pub const TAIL_BYTES: u64 = 64 << 10;

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

/// One central-directory entry.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    method: u64,
    compressed: u64,
    size: u64,
    offset: u64,
}

/// The METADATA of the wheel `src` holds.
pub fn metadata(src: &mut dyn Ranged) -> Result<Vec<u8>, String> {
    let size = src.size();
    let tail_len = size.min(TAIL_BYTES);
    let tail = src.read(size - tail_len, tail_len)?;
    let mut src = WithTail { inner: src, tail };
    let (cd_offset, cd_size) = directory(&mut src)?;
    if cd_size > MAX_DIRECTORY_BYTES {
        return Err(format!(
            "its central directory is larger than {MAX_DIRECTORY_BYTES} bytes"
        ));
    }
    if cd_offset.checked_add(cd_size).is_none_or(|e| e > size) {
        return Err("its central directory lies outside the file".into());
    }
    let cd = src.read(cd_offset, cd_size)?;
    let entries = entries(&cd)?;
    let found: Vec<&Entry> = entries
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
    if local.len() < 30 || local[..4] != [0x50, 0x4b, 0x03, 0x04] {
        return Err("its METADATA has no local header".into());
    }
    let skip = 30 + u16_at(&local, 26).unwrap_or(0) + u16_at(&local, 28).unwrap_or(0);
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

/// The central directory's (offset, size), from the end record (zip64 when marked).
fn directory(src: &mut WithTail<'_>) -> Result<(u64, u64), String> {
    let tail = &src.tail;
    let size = src.inner.size();
    let tail_start = size - tail.len() as u64;
    let pos = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .ok_or("it is not a zip file (no end record)")?;
    let bad = || "its end record is truncated".to_string();
    let entries = u16_at(tail, pos + 10).ok_or_else(bad)?;
    let cd_size = u32_at(tail, pos + 12).ok_or_else(bad)?;
    let cd_offset = u32_at(tail, pos + 16).ok_or_else(bad)?;
    if cd_offset != 0xFFFF_FFFF && cd_size != 0xFFFF_FFFF && entries != 0xFFFF {
        return Ok((cd_offset, cd_size));
    }
    // Zip64: the locator sits right before the end record.
    let loc = pos.checked_sub(20).ok_or("its zip64 locator is missing")?;
    if tail[loc..loc + 4] != [0x50, 0x4b, 0x06, 0x07] {
        return Err("its zip64 locator is missing".into());
    }
    let rec_at = u64_at(tail, loc + 8).ok_or_else(bad)?;
    if rec_at.checked_add(56).is_none_or(|e| e > size) {
        return Err("its zip64 end record lies outside the file".into());
    }
    let rec = if rec_at >= tail_start {
        let s = (rec_at - tail_start) as usize;
        tail.get(s..s + 56).ok_or_else(bad)?.to_vec()
    } else {
        src.read(rec_at, 56)?
    };
    if rec[..4] != [0x50, 0x4b, 0x06, 0x06] {
        return Err("its zip64 end record is missing".into());
    }
    Ok((
        u64_at(&rec, 48).ok_or_else(bad)?,
        u64_at(&rec, 40).ok_or_else(bad)?,
    ))
}

fn entries(cd: &[u8]) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    let bad = || "its central directory is truncated".to_string();
    while i + 46 <= cd.len() && cd[i..i + 4] == [0x50, 0x4b, 0x01, 0x02] {
        let method = u16_at(cd, i + 10).ok_or_else(bad)?;
        let mut compressed = u32_at(cd, i + 20).ok_or_else(bad)?;
        let mut size = u32_at(cd, i + 24).ok_or_else(bad)?;
        let n = u16_at(cd, i + 28).ok_or_else(bad)? as usize;
        let x = u16_at(cd, i + 30).ok_or_else(bad)? as usize;
        let c = u16_at(cd, i + 32).ok_or_else(bad)? as usize;
        let mut offset = u32_at(cd, i + 42).ok_or_else(bad)?;
        let name = cd.get(i + 46..i + 46 + n).ok_or_else(bad)?;
        let extra = cd.get(i + 46 + n..i + 46 + n + x).ok_or_else(bad)?;
        // The zip64 extra field holds, in order, whichever of the three were saturated.
        let mut j = 0;
        while j + 4 <= extra.len() {
            let id = u16_at(extra, j).ok_or_else(bad)?;
            let len = u16_at(extra, j + 2).ok_or_else(bad)? as usize;
            if id == 1 {
                let mut k = j + 4;
                for field in [&mut size, &mut compressed, &mut offset] {
                    if *field == 0xFFFF_FFFF {
                        *field = u64_at(extra, k).ok_or_else(bad)?;
                        k += 8;
                    }
                }
            }
            j += 4 + len;
        }
        out.push(Entry {
            name: String::from_utf8_lossy(name).into_owned(),
            method,
            compressed,
            size,
            offset,
        });
        i += 46 + n + x + c;
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
}
