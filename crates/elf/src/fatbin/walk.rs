//! Reading a file's fatbin containers: the fatbin sections from the ELF section
//! headers (read by `elf::sections`), then every container and entry header in them,
//! bounds-checked ([`read`]).

use std::fs::File;
use std::os::unix::fs::FileExt;

use serde::Serialize;

use super::target::{Code, Target, Variant};
use super::{CONTAINER_MAGIC, SECTIONS};
use crate::sections::{self as elf_sections, SectionsError};

/// The most bytes of the section-name string table read.
const MAX_SHSTRTAB: u64 = 1 << 20;
/// The largest entry header accepted (the ones seen are 64–120 bytes).
const MAX_ENTRY_HEADER: u32 = 4096;
/// The most entries a file may hold (libtorch_cuda has about 2,800): a file that declares
/// more is not read on, so a crafted one cannot make the listing grow with its size.
const MAX_ENTRIES: usize = 1 << 20;
/// Bytes of a run of zeros between containers read at a time.
const ZERO_CHUNK: u64 = 1 << 20;
/// The entry header fields read: kind, version, header size, payload size, …, arch, flags.
const ENTRY_BASE: usize = 64;
/// Entry flags that say what a target is: `a` and `f`; other bits in this mask are unknown.
const VARIANT_MASK: u64 = 0x00f0_0000;
const FLAG_ARCH_SPECIFIC: u64 = 0x0010_0000;
const FLAG_FAMILY: u64 = 0x0020_0000;

/// One entry of a container: where its header starts (file offset), its header and payload
/// bytes together, and its target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub offset: u64,
    pub size: u64,
    #[serde(rename = "kind", serialize_with = "code_name")]
    pub code: Code,
    pub target: Target,
}

fn code_name<S: serde::Serializer>(c: &Code, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match c {
        Code::Cubin => "cubin",
        Code::Ptx => "ptx",
    })
}

/// One container: its file offset, its length (16-byte header included) and its entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Container {
    pub offset: u64,
    pub size: u64,
    pub entries: Vec<Entry>,
}

/// Every container of a file's fatbin sections, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Listing {
    pub file_size: u64,
    pub containers: Vec<Container>,
}

impl Listing {
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.containers.iter().flat_map(|c| c.entries.iter())
    }
}

/// Why a file's device code was not read (the file is then never pruned).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotUnderstood {
    #[error("not a 64-bit little-endian ELF file")]
    NotElf,
    #[error("reading: {0}")]
    Io(String),
    #[error("section headers out of bounds or too many")]
    Sections,
    #[error("at offset {offset:#x}: {what}")]
    Layout { offset: u64, what: String },
}

fn layout(offset: u64, what: impl Into<String>) -> NotUnderstood {
    NotUnderstood::Layout {
        offset,
        what: what.into(),
    }
}

fn at(file: &File, offset: u64, len: usize) -> Result<Vec<u8>, NotUnderstood> {
    let mut b = vec![0; len];
    file.read_exact_at(&mut b, offset)
        .map_err(|e| NotUnderstood::Io(format!("{len} bytes at {offset:#x}: {e}")))?;
    Ok(b)
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// The file ranges (offset, size) of the fatbin sections ([`SECTIONS`]); empty when the ELF
/// has none. The section table is `elf::sections`'.
fn sections(file: &File, file_size: u64) -> Result<Vec<(u64, u64)>, NotUnderstood> {
    let table = elf_sections::read_file(file, file_size, MAX_SHSTRTAB).map_err(|e| match e {
        SectionsError::NotElf => NotUnderstood::NotElf,
        SectionsError::Table => NotUnderstood::Sections,
        SectionsError::Io(e) => NotUnderstood::Io(e.to_string()),
    })?;
    let mut out = Vec::new();
    for s in &table.sections {
        let name = table.name(s).ok_or(NotUnderstood::Sections)?;
        if !SECTIONS.iter().any(|n| name == n.as_bytes()) {
            continue;
        }
        // SHT_NOBITS holds no bytes in the file.
        if s.kind == elf_sections::SHT_NOBITS {
            continue;
        }
        if !s.within(file_size) {
            return Err(layout(
                s.offset,
                "a fatbin section extends past the end of the file",
            ));
        }
        out.push((s.offset, s.size));
    }
    out.sort();
    Ok(out)
}

/// Every container and entry of `file`'s fatbin sections.
pub fn read(file: &File) -> Result<Listing, NotUnderstood> {
    let file_size = file
        .metadata()
        .map_err(|e| NotUnderstood::Io(e.to_string()))?
        .len();
    let mut listing = Listing {
        file_size,
        containers: Vec::new(),
    };
    // Containers count as entries too, so empty ones cannot grow the listing unbounded either.
    let mut entries = 0usize;
    for (start, size) in sections(file, file_size)? {
        let end = start + size;
        let mut p = start;
        while p < end {
            if end - p < 16 {
                trailing(file, p, end)?;
                break;
            }
            let h = at(file, p, 16)?;
            if u32_at(&h, 0) != CONTAINER_MAGIC {
                // Zero padding up to the next container (or the section's end) is accepted.
                p = skip_zeros(file, p, end)?;
                continue;
            }
            let c = container(file, p, &h, end, MAX_ENTRIES - entries)?;
            p = c.offset + c.size;
            entries += c.entries.len().max(1);
            listing.containers.push(c);
        }
    }
    Ok(listing)
}

fn trailing(file: &File, p: u64, end: u64) -> Result<(), NotUnderstood> {
    let rest = at(file, p, (end - p) as usize)?;
    if rest.iter().all(|&b| b == 0) {
        Ok(())
    } else {
        Err(layout(p, "bytes after the last container"))
    }
}

/// The offset of the next non-zero byte after `p` (where the next container must start), or
/// `end`. Pruned containers leave runs of zeros of any length behind them.
fn skip_zeros(file: &File, mut p: u64, end: u64) -> Result<u64, NotUnderstood> {
    let start = p;
    while p < end {
        let n = (end - p).min(ZERO_CHUNK);
        let b = at(file, p, n as usize)?;
        match b.iter().position(|&x| x != 0) {
            None => p += n,
            Some(0) if p == start => {
                return Err(layout(p, "not a fatbin container (bad magic)"));
            }
            Some(i) => return Ok(p + i as u64),
        }
    }
    Ok(end)
}

/// The container at `p` (its 16 header bytes `h`), holding at most `budget` entries.
fn container(
    file: &File,
    p: u64,
    h: &[u8],
    end: u64,
    budget: usize,
) -> Result<Container, NotUnderstood> {
    if budget == 0 {
        return Err(layout(p, format!("more than {MAX_ENTRIES} entries")));
    }
    let (version, header_size, body) = (u16_at(h, 4), u16_at(h, 6), u64_at(h, 8));
    if version != 1 || header_size != 16 {
        return Err(layout(
            p,
            format!("container version {version}, header size {header_size} (known: 1, 16)"),
        ));
    }
    let c_end = p
        .checked_add(16)
        .and_then(|x| x.checked_add(body))
        .filter(|e| *e <= end)
        .ok_or_else(|| layout(p, "container extends past its section"))?;
    let mut entries = Vec::new();
    let mut q = p + 16;
    while q < c_end {
        if entries.len() >= budget {
            return Err(layout(q, format!("more than {MAX_ENTRIES} entries")));
        }
        if c_end - q < ENTRY_BASE as u64 {
            return Err(layout(q, "entry header cut off by the container's end"));
        }
        let e = at(file, q, ENTRY_BASE)?;
        let (kind, ver, ehs, payload) =
            (u16_at(&e, 0), u16_at(&e, 2), u32_at(&e, 4), u64_at(&e, 8));
        let code = match kind {
            1 => Code::Ptx,
            2 => Code::Cubin,
            k => return Err(layout(q, format!("entry kind {k} (known: 1 PTX, 2 cubin)"))),
        };
        if ver != 0x0101 {
            return Err(layout(
                q,
                format!("entry header version {ver:#x} (known: 0x101)"),
            ));
        }
        if !(ENTRY_BASE as u32..=MAX_ENTRY_HEADER).contains(&ehs) {
            return Err(layout(q, format!("entry header size {ehs}")));
        }
        let size = u64::from(ehs)
            .checked_add(payload)
            .filter(|s| q.checked_add(*s).is_some_and(|x| x <= c_end))
            .ok_or_else(|| layout(q, "entry extends past its container"))?;
        let arch = u32_at(&e, 28);
        let flags = u64_at(&e, 40);
        let variant = match flags & VARIANT_MASK {
            0 => Variant::Plain,
            FLAG_ARCH_SPECIFIC => Variant::ArchSpecific,
            FLAG_FAMILY => Variant::Family,
            v => return Err(layout(q, format!("unknown target variant flags {v:#x}"))),
        };
        if !(10..=999).contains(&arch) {
            return Err(layout(q, format!("entry arch {arch}")));
        }
        entries.push(Entry {
            offset: q,
            size,
            code,
            target: Target {
                code,
                major: arch / 10,
                minor: arch % 10,
                variant,
            },
        });
        q += size;
    }
    Ok(Container {
        offset: p,
        size: c_end - p,
        entries,
    })
}
