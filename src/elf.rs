//! Just enough ELF to index shared libraries: class, machine and `DT_SONAME` (the apt
//! installer's ld.so.cache uses it; the ELF-closure strip will too). A leaf.
//!
//! Reads headers from a byte slice; must never trust an offset without bounds checks.

/// What `ld.so.cache` needs to know about a shared object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SharedObject {
    pub is_64: bool,
    pub machine: u16,
    pub soname: Option<String>,
}

// Offsets come from the file: every sum is checked (an overflow is "not an ELF we read").
fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(o..o.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(o..o.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(o..o.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Parse a little-endian ELF shared object (`ET_DYN`); `None` for anything else.
pub fn parse(b: &[u8]) -> Option<SharedObject> {
    if b.get(..4)? != b"\x7fELF" || *b.get(5)? != 1 {
        return None;
    }
    let is_64 = match b.get(4)? {
        2 => true,
        1 => false,
        _ => return None,
    };
    if u16_at(b, 16)? != 3 {
        return None;
    }
    let machine = u16_at(b, 18)?;
    let word = |o: usize| {
        if is_64 {
            u64_at(b, o)
        } else {
            u32_at(b, o).map(u64::from)
        }
    };
    let (phoff, phentsize, phnum) = if is_64 {
        (u64_at(b, 32)?, u16_at(b, 54)?, u16_at(b, 56)?)
    } else {
        (u64::from(u32_at(b, 28)?), u16_at(b, 42)?, u16_at(b, 44)?)
    };
    let mut loads = Vec::new();
    let mut dynamic = None;
    for i in 0..usize::from(phnum) {
        let o = usize::try_from(phoff)
            .ok()?
            .checked_add(i * usize::from(phentsize))?;
        let at = |d: usize| o.checked_add(d);
        let typ = u32_at(b, o)?;
        let (offset, vaddr, filesz) = if is_64 {
            (u64_at(b, at(8)?)?, u64_at(b, at(16)?)?, u64_at(b, at(32)?)?)
        } else {
            (word(at(4)?)?, word(at(8)?)?, word(at(16)?)?)
        };
        match typ {
            1 => loads.push((offset, vaddr, filesz)),
            2 => dynamic = Some((offset, filesz)),
            _ => {}
        }
    }
    let mut so = SharedObject {
        is_64,
        machine,
        soname: None,
    };
    let Some((doff, dsize)) = dynamic else {
        return Some(so);
    };
    let ent = if is_64 { 16 } else { 8 };
    let (mut strtab, mut soname_off) = (None, None);
    for i in 0..usize::try_from(dsize).ok()? / ent {
        let o = usize::try_from(doff).ok()?.checked_add(i * ent)?;
        let (tag, val) = (word(o)?, word(o.checked_add(ent / 2)?)?);
        match tag {
            0 => break,
            5 => strtab = Some(val),
            14 => soname_off = Some(val),
            _ => {}
        }
    }
    if let (Some(strtab), Some(off)) = (strtab, soname_off) {
        // DT_STRTAB is a virtual address: map it through the PT_LOAD segments.
        let file_off = loads
            .iter()
            .find(|(_, v, s)| strtab >= *v && strtab - v < *s)
            .and_then(|(o, v, _)| (strtab - v).checked_add(*o))?;
        let start = usize::try_from(file_off.checked_add(off)?).ok()?;
        let tail = b.get(start..)?;
        let end = tail.iter().position(|&c| c == 0)?;
        so.soname = Some(String::from_utf8_lossy(&tail[..end]).into_owned());
    }
    Some(so)
}

/// Bytes of program headers, dynamic section and SONAME string a stream read takes at most.
const MAX_STREAM_PART: u64 = 1 << 20;

/// Skip forward to `offset` in `r` (already at `*pos`) and read `len` bytes; `None` when the
/// offset lies behind or past the end.
fn read_forward(
    r: &mut dyn std::io::Read,
    pos: &mut u64,
    offset: u64,
    len: u64,
) -> Option<Vec<u8>> {
    if offset < *pos || len > MAX_STREAM_PART {
        return None;
    }
    let skip = offset - *pos;
    if std::io::copy(
        &mut std::io::Read::take(&mut *r, skip),
        &mut std::io::sink(),
    )
    .ok()?
        != skip
    {
        return None;
    }
    let mut out = Vec::with_capacity(len as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(&mut *r, len), &mut out).ok()?;
    *pos = offset + out.len() as u64;
    Some(out)
}

/// The NUL-terminated string at `offset` of a stream read from its first byte (at most 4 KiB).
pub fn string_at(r: &mut dyn std::io::Read, offset: u64) -> Option<String> {
    let mut pos = 0;
    let tail = read_forward(r, &mut pos, offset, 4096)?;
    let end = tail.iter().position(|&c| c == 0)?;
    Some(String::from_utf8_lossy(&tail[..end]).into_owned())
}

/// [`parse`] over a stream read front to back (a zip member being decompressed), without
/// holding the file. `again` reads the string at an offset from a fresh stream of the same
/// bytes ([`string_at`]), for a SONAME that lies before the dynamic section (as it usually
/// does). Reads at most [`MAX_STREAM_PART`] bytes of each part; `None` for anything that is
/// not a little-endian shared object or does not read.
pub fn parse_stream(
    r: &mut dyn std::io::Read,
    again: &mut dyn FnMut(u64) -> Option<String>,
) -> Option<SharedObject> {
    let mut pos = 0u64;
    let head = read_forward(r, &mut pos, 0, 64)?;
    if head.get(..4)? != b"\x7fELF" || *head.get(5)? != 1 || u16_at(&head, 16)? != 3 {
        return None;
    }
    let is_64 = match head.get(4)? {
        2 => true,
        1 => false,
        _ => return None,
    };
    let machine = u16_at(&head, 18)?;
    let (phoff, phentsize, phnum) = if is_64 {
        (u64_at(&head, 32)?, u16_at(&head, 54)?, u16_at(&head, 56)?)
    } else {
        (
            u64::from(u32_at(&head, 28)?),
            u16_at(&head, 42)?,
            u16_at(&head, 44)?,
        )
    };
    let mut so = SharedObject {
        is_64,
        machine,
        soname: None,
    };
    let ph_len = u64::from(phentsize) * u64::from(phnum);
    let ph = read_forward(r, &mut pos, phoff, ph_len)?;
    let word = |b: &[u8], o: usize| {
        if is_64 {
            u64_at(b, o)
        } else {
            u32_at(b, o).map(u64::from)
        }
    };
    let mut loads = Vec::new();
    let mut dynamic = None;
    for i in 0..usize::from(phnum) {
        let o = i * usize::from(phentsize);
        let at = |d: usize| o.checked_add(d);
        let typ = u32_at(&ph, o)?;
        let (offset, vaddr, filesz) = if is_64 {
            (
                u64_at(&ph, at(8)?)?,
                u64_at(&ph, at(16)?)?,
                u64_at(&ph, at(32)?)?,
            )
        } else {
            (word(&ph, at(4)?)?, word(&ph, at(8)?)?, word(&ph, at(16)?)?)
        };
        match typ {
            1 => loads.push((offset, vaddr, filesz)),
            2 => dynamic = Some((offset, filesz)),
            _ => {}
        }
    }
    let Some((doff, dsize)) = dynamic else {
        return Some(so);
    };
    let dynamic = read_forward(r, &mut pos, doff, dsize.min(MAX_STREAM_PART))?;
    let ent = if is_64 { 16 } else { 8 };
    let (mut strtab, mut soname_off) = (None, None);
    for i in 0..dynamic.len() / ent {
        let o = i * ent;
        let (tag, val) = (word(&dynamic, o)?, word(&dynamic, o + ent / 2)?);
        match tag {
            0 => break,
            5 => strtab = Some(val),
            14 => soname_off = Some(val),
            _ => {}
        }
    }
    let (Some(strtab), Some(off)) = (strtab, soname_off) else {
        return Some(so);
    };
    let file_off = loads
        .iter()
        .find(|(_, v, s)| strtab >= *v && strtab - v < *s)
        .and_then(|(o, v, _)| (strtab - v).checked_add(*o))?
        .checked_add(off)?;
    so.soname = Some(if file_off < pos {
        again(file_off)?
    } else {
        let tail = read_forward(r, &mut pos, file_off, 4096)?;
        let end = tail.iter().position(|&c| c == 0)?;
        String::from_utf8_lossy(&tail[..end]).into_owned()
    });
    Some(so)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared object of this host (the C library this test links), read whole and as a
    /// stream: the same facts.
    #[test]
    fn stream_reads_what_the_whole_file_says() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let lib = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .expect("this test links the C library");
        let bytes = std::fs::read(lib).unwrap();
        let whole = parse(&bytes).unwrap();
        assert!(whole
            .soname
            .as_deref()
            .is_some_and(|s| s.starts_with("libc.so")));
        let streamed = parse_stream(&mut &bytes[..], &mut |off| string_at(&mut &bytes[..], off));
        assert_eq!(streamed, Some(whole));
        // Not an ELF at all.
        assert_eq!(parse_stream(&mut &b"#!/bin/sh\n"[..], &mut |_| None), None);
    }
}
