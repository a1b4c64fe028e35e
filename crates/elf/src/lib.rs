//! `gpuimg-elf`: just enough ELF to index shared libraries and follow their links: class,
//! machine, `DT_SONAME`, `DT_NEEDED`, `DT_RPATH` and `DT_RUNPATH` (the apt installer's
//! ld.so.cache, the one-provider rule and the ELF closure use them), and the CUDA device code
//! inside them (`fatbin`). Depends on no other crate of the workspace; must never know about
//! images, layers or packages.
//!
//! Reads headers, the dynamic section and its string table only, from a byte slice or a
//! stream read front to back; must never trust an offset without bounds checks, and never
//! reads more than [`MAX_STREAM_PART`] of any part. `sections` is the one reader of section
//! header tables (`fatbin` and `strip` use it); `strip` is the one writer: it copies a file
//! without its DWARF and symbol table (`strip: [debug-symbols]`).

pub mod fatbin;

pub mod capture;
pub mod closure;
pub mod keep;
pub mod machine;
pub mod names;
pub mod reach;
pub mod sections;
pub mod startable;
pub mod strip;

/// What the loader needs to know about a shared object.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SharedObject {
    pub is_64: bool,
    pub machine: u16,
    pub soname: Option<String>,
    /// `DT_NEEDED`, in order: the names the loader looks up for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needed: Vec<String>,
    /// `DT_RPATH`'s directories (searched before `LD_LIBRARY_PATH`, only without a RUNPATH).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpath: Vec<String>,
    /// `DT_RUNPATH`'s directories (searched after `LD_LIBRARY_PATH`, for its own needs only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runpath: Vec<String>,
    /// The library names its bytes hold as strings besides its own and `DT_NEEDED`'s
    /// (`names`): what it may load by name with `dlopen`. Filled where the whole file passes
    /// by ([`parse_stream_named`], `capture`); empty from [`parse`] and [`parse_stream`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub named: Vec<String>,
}

impl SharedObject {
    /// Set [`SharedObject::named`] from the names a scan of the whole file found.
    pub fn with_names(mut self, names: Vec<String>) -> Self {
        self.named = names
            .into_iter()
            .filter(|n| self.soname.as_ref() != Some(n) && !self.needed.contains(n))
            .collect();
        self
    }
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

/// Bytes of program headers, dynamic section and string table a read takes at most.
pub const MAX_STREAM_PART: u64 = 1 << 20;
/// Bytes of one string (a name or a search path) read at most.
const MAX_STRING: u64 = 4096;

const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;
const DT_SONAME: u64 = 14;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;

/// The ELF header fields the rest needs.
struct Header {
    is_64: bool,
    machine: u16,
    phoff: u64,
    phentsize: u16,
    phnum: u16,
}

fn header(b: &[u8]) -> Option<Header> {
    if b.get(..4)? != b"\x7fELF" || *b.get(5)? != 1 || u16_at(b, 16)? != 3 {
        return None;
    }
    let is_64 = match b.get(4)? {
        2 => true,
        1 => false,
        _ => return None,
    };
    let (phoff, phentsize, phnum) = if is_64 {
        (u64_at(b, 32)?, u16_at(b, 54)?, u16_at(b, 56)?)
    } else {
        (u64::from(u32_at(b, 28)?), u16_at(b, 42)?, u16_at(b, 44)?)
    };
    Some(Header {
        is_64,
        machine: u16_at(b, 18)?,
        phoff,
        phentsize,
        phnum,
    })
}

fn word(is_64: bool, b: &[u8], o: usize) -> Option<u64> {
    if is_64 {
        u64_at(b, o)
    } else {
        u32_at(b, o).map(u64::from)
    }
}

/// `PT_LOAD` segments as (offset, vaddr, filesz), and `PT_DYNAMIC` as (offset, filesz).
type Segments = (Vec<(u64, u64, u64)>, Option<(u64, u64)>);

/// The program headers `ph` (the table itself, from its first byte).
fn segments(h: &Header, ph: &[u8]) -> Option<Segments> {
    let mut loads = Vec::new();
    let mut dynamic = None;
    for i in 0..usize::from(h.phnum) {
        let o = i.checked_mul(usize::from(h.phentsize))?;
        let at = |d: usize| o.checked_add(d);
        let typ = u32_at(ph, o)?;
        let (offset, vaddr, filesz) = if h.is_64 {
            (
                u64_at(ph, at(8)?)?,
                u64_at(ph, at(16)?)?,
                u64_at(ph, at(32)?)?,
            )
        } else {
            (
                word(false, ph, at(4)?)?,
                word(false, ph, at(8)?)?,
                word(false, ph, at(16)?)?,
            )
        };
        match typ {
            1 => loads.push((offset, vaddr, filesz)),
            2 => dynamic = Some((offset, filesz)),
            _ => {}
        }
    }
    Some((loads, dynamic))
}

/// What a dynamic section says of its strings: `DT_STRTAB`, `DT_STRSZ` and the entries
/// that name a string (tag, offset in the table), in order; `None` for a torn entry.
type DynamicRefs = (Option<u64>, Option<u64>, Vec<(u64, u64)>);

fn dynamic_refs(h: &Header, dynamic: &[u8]) -> Option<DynamicRefs> {
    let ent = if h.is_64 { 16 } else { 8 };
    let (mut strtab, mut strsz) = (None, None);
    let mut refs: Vec<(u64, u64)> = Vec::new();
    for i in 0..dynamic.len() / ent {
        let o = i * ent;
        let (tag, val) = (
            word(h.is_64, dynamic, o)?,
            word(h.is_64, dynamic, o + ent / 2)?,
        );
        match tag {
            DT_NULL => break,
            DT_STRTAB => strtab = Some(val),
            DT_STRSZ => strsz = Some(val),
            DT_NEEDED | DT_SONAME | DT_RPATH | DT_RUNPATH => refs.push((tag, val)),
            _ => {}
        }
    }
    Some((strtab, strsz, refs))
}

/// Where the strings `refs` name lie: the string table's file offset (`DT_STRTAB`, a virtual
/// address, mapped through the `PT_LOAD` segments), its usable size, and the one span
/// `[first, end)` of it that holds them all when that is at most [`MAX_STREAM_PART`]
/// (a big C++ library's table is many MiB, its names usually close together).
struct StringPlace {
    file_off: u64,
    size: u64,
    first: u64,
    span: Option<u64>,
}

fn string_place(
    loads: &[(u64, u64, u64)],
    strtab: u64,
    strsz: Option<u64>,
    refs: &[(u64, u64)],
) -> Option<StringPlace> {
    let (file_off, room) = loads
        .iter()
        .find(|(_, v, s)| strtab >= *v && strtab - v < *s)
        .and_then(|(o, v, s)| Some(((strtab - v).checked_add(*o)?, s - (strtab - v))))?;
    let size = strsz.unwrap_or(room).min(room);
    let first = refs.iter().map(|r| r.1).min()?;
    let last = refs.iter().map(|r| r.1).max()?;
    let span_end = last.saturating_add(MAX_STRING).min(size);
    // `first < size` first: `span_end - first` is only taken then (the offsets are the
    // file's).
    let span = if first < size && span_end - first <= MAX_STREAM_PART {
        Some(span_end - first)
    } else {
        None
    };
    Some(StringPlace {
        file_off,
        size,
        first,
        span,
    })
}

/// The one read of the string table [`facts`] makes first (file offset, length), when the
/// strings lie close together: what a pass over the file may keep for it.
fn string_span(h: &Header, loads: &[(u64, u64, u64)], dynamic: &[u8]) -> Option<(u64, u64)> {
    let (strtab, strsz, refs) = dynamic_refs(h, dynamic)?;
    let place = string_place(loads, strtab?, strsz, &refs)?;
    Some((place.file_off.checked_add(place.first)?, place.span?))
}

/// Interpret a dynamic section: `strings(file_offset, len)` reads the string table.
fn facts(
    h: &Header,
    loads: &[(u64, u64, u64)],
    dynamic: &[u8],
    strings: &mut dyn FnMut(u64, u64) -> Option<Vec<u8>>,
) -> Option<SharedObject> {
    let mut so = SharedObject {
        is_64: h.is_64,
        machine: h.machine,
        soname: None,
        needed: Vec::new(),
        rpath: Vec::new(),
        runpath: Vec::new(),
        named: Vec::new(),
    };
    let (strtab, strsz, refs) = dynamic_refs(h, dynamic)?;
    let (Some(strtab), false) = (strtab, refs.is_empty()) else {
        return Some(so);
    };
    let StringPlace {
        file_off,
        size,
        first,
        span,
    } = string_place(loads, strtab, strsz, &refs)?;
    // One read of the span the strings lie in, else one read per string.
    let span = span.and_then(|len| strings(file_off.checked_add(first)?, len));
    let mut string = |off: u64| -> Option<String> {
        let bytes = match &span {
            Some(b) => b.get(usize::try_from(off - first).ok()?..)?.to_vec(),
            None => strings(
                file_off.checked_add(off)?,
                MAX_STRING.min(size.checked_sub(off)?),
            )?,
        };
        let end = bytes.iter().position(|&c| c == 0)?;
        Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
    };
    let dirs = |s: String| -> Vec<String> {
        s.split(':')
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .collect()
    };
    for (tag, off) in refs {
        let s = string(off)?;
        match tag {
            DT_NEEDED => so.needed.push(s),
            DT_SONAME => so.soname = Some(s),
            DT_RPATH => so.rpath.extend(dirs(s)),
            _ => so.runpath.extend(dirs(s)),
        }
    }
    Some(so)
}

/// For tests (this crate's, and others' through the feature `test-support`): `len` zero bytes
/// opening with the header of a little-endian 64-bit x86-64 shared object whose `phnum`
/// program headers follow it (at byte 64).
#[cfg(any(test, feature = "test-support"))]
pub fn test_elf64(phnum: u16, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len.max(64)];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[6] = 1;
    b[16..18].copy_from_slice(&3u16.to_le_bytes());
    b[18..20].copy_from_slice(&62u16.to_le_bytes());
    b[32..40].copy_from_slice(&64u64.to_le_bytes());
    b[54..56].copy_from_slice(&56u16.to_le_bytes());
    b[56..58].copy_from_slice(&phnum.to_le_bytes());
    b
}

/// Parse a little-endian ELF shared object (`ET_DYN`); `None` for anything else.
pub fn parse(b: &[u8]) -> Option<SharedObject> {
    let h = header(b)?;
    let ph_len = usize::from(h.phentsize).checked_mul(usize::from(h.phnum))?;
    let ph_start = usize::try_from(h.phoff).ok()?;
    let ph = b.get(ph_start..ph_start.checked_add(ph_len)?)?;
    let (loads, dynamic) = segments(&h, ph)?;
    let Some((doff, dsize)) = dynamic else {
        return facts(&h, &loads, &[], &mut |_, _| None);
    };
    let range = |off: u64, len: u64| -> Option<&[u8]> {
        let start = usize::try_from(off).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        b.get(start..end.min(b.len()))
    };
    let dynamic = range(doff, dsize.min(MAX_STREAM_PART))?;
    facts(&h, &loads, dynamic, &mut |off, len| {
        range(off, len).map(<[u8]>::to_vec)
    })
}

/// Skip forward to `offset` in `r` (already at `*pos`) and read `len` bytes (fewer at the
/// end); `None` when the offset lies behind or past the end.
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

/// `len` bytes at `offset` of a stream read from its first byte (at most
/// [`MAX_STREAM_PART`]).
pub fn range_at(r: &mut dyn std::io::Read, offset: u64, len: u64) -> Option<Vec<u8>> {
    read_forward(r, &mut 0, offset, len)
}

/// [`parse`] over a stream read front to back (a zip member being decompressed), without
/// holding the file. `again` reads a range from a fresh stream of the same bytes
/// ([`range_at`]), for a string table that lies before the dynamic section (as it usually
/// does). `None` for anything that is not a little-endian shared object or does not read.
pub fn parse_stream(
    r: &mut dyn std::io::Read,
    again: &mut dyn FnMut(u64, u64) -> Option<Vec<u8>>,
) -> Option<SharedObject> {
    let mut pos = 0u64;
    let head = read_forward(r, &mut pos, 0, 64)?;
    let h = header(&head)?;
    let ph_len = u64::from(h.phentsize) * u64::from(h.phnum);
    let ph = if h.phoff >= pos {
        read_forward(r, &mut pos, h.phoff, ph_len)?
    } else {
        again(h.phoff, ph_len)?
    };
    let (loads, dynamic) = segments(&h, &ph)?;
    let Some((doff, dsize)) = dynamic else {
        return facts(&h, &loads, &[], &mut |_, _| None);
    };
    let dynamic = read_forward(r, &mut pos, doff, dsize.min(MAX_STREAM_PART))?;
    let mut strings = |off: u64, len: u64| {
        if off >= pos {
            read_forward(r, &mut pos, off, len)
        } else {
            again(off, len)
        }
    };
    facts(&h, &loads, &dynamic, &mut strings)
}

/// [`parse_stream`] that reads on to the stream's end, with [`SharedObject::named`] filled
/// from every byte (`names`); `again` as there.
pub fn parse_stream_named(
    r: &mut dyn std::io::Read,
    again: &mut dyn FnMut(u64, u64) -> Option<Vec<u8>>,
) -> Option<SharedObject> {
    let mut scan = names::NameScan::new();
    let mut scanning = names::Scanning {
        inner: r,
        scan: &mut scan,
    };
    let so = parse_stream(&mut scanning, again)?;
    std::io::copy(&mut scanning, &mut std::io::sink()).ok()?;
    Some(so.with_names(scan.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of a shared object of this host: the C library this test links.
    pub(super) fn host_libc() -> Vec<u8> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let lib = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .expect("this test links the C library");
        std::fs::read(lib).unwrap()
    }

    /// A shared object of this host, read whole and as a stream: the same facts.
    #[test]
    fn stream_reads_what_the_whole_file_says() {
        let bytes = host_libc();
        let whole = parse(&bytes).unwrap();
        assert!(whole
            .soname
            .as_deref()
            .is_some_and(|s| s.starts_with("libc.so")));
        assert!(whole.needed.iter().any(|n| n.starts_with("ld-linux")));
        let streamed = parse_stream(&mut &bytes[..], &mut |off, len| {
            range_at(&mut &bytes[..], off, len)
        });
        assert_eq!(streamed, Some(whole));
        // Not an ELF at all.
        assert_eq!(
            parse_stream(&mut &b"#!/bin/sh\n"[..], &mut |_, _| None),
            None
        );
    }
}
