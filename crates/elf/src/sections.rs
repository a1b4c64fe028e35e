//! The one reader of an ELF64 little-endian file's section header table: the header fields
//! that place the program and section headers ([`Elf64Head`]), every section header
//! ([`SectionHeader`]) and the section-name table ([`SectionTable::name`]). `fatbin` finds its
//! containers through it and `strip` (sections cut for `debug-symbols`) plans with it; each
//! keeps its own rule on what it accepts (which sections must lie inside the file, how many
//! there may be).
//!
//! Must never follow an offset without a bounds check against the file's size, nor read
//! more than the table itself (at most 65,535 headers of 64 bytes) and a name table of the
//! caller's bound.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;

use super::{u16_at, u32_at, u64_at};

/// `sh_type` of a section that holds no bytes in the file (`.bss`).
pub const SHT_NOBITS: u32 = 8;
/// `sh_type` of relocation sections, whose `sh_info` is a section index.
pub const SHT_REL: u32 = 9;
pub const SHT_RELA: u32 = 4;
/// `sh_flags`: the section occupies memory at run time.
pub const SHF_ALLOC: u64 = 0x2;
/// `sh_flags`: `sh_info` holds a section index.
pub const SHF_INFO_LINK: u64 = 0x40;

/// The ELF64 header fields that place the program and section headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elf64Head {
    pub phoff: u64,
    pub shoff: u64,
    pub phentsize: u16,
    pub phnum: u16,
    pub shentsize: u16,
    pub shnum: u16,
    pub shstrndx: u16,
}

/// The [`Elf64Head`] of a 64-bit little-endian ELF file from its first 64 bytes; `None` for
/// anything else.
pub fn elf64_head(b: &[u8]) -> Option<Elf64Head> {
    if b.get(..4)? != b"\x7fELF" || *b.get(4)? != 2 || *b.get(5)? != 1 || b.len() < 64 {
        return None;
    }
    Some(Elf64Head {
        phoff: u64_at(b, 32)?,
        shoff: u64_at(b, 40)?,
        phentsize: u16_at(b, 54)?,
        phnum: u16_at(b, 56)?,
        shentsize: u16_at(b, 58)?,
        shnum: u16_at(b, 60)?,
        shstrndx: u16_at(b, 62)?,
    })
}

/// One section header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionHeader {
    /// `sh_name`: where the name starts in the section-name table.
    pub name_at: u32,
    pub kind: u32,
    pub flags: u64,
    pub offset: u64,
    pub size: u64,
    pub link: u32,
    pub info: u32,
    pub align: u64,
    /// The header's 64 bytes as read (a writer copies them, with its changes).
    pub raw: [u8; 64],
}

impl SectionHeader {
    /// The bytes the section holds in the file (none for `SHT_NOBITS`).
    pub fn in_file(&self) -> u64 {
        if self.kind == SHT_NOBITS {
            0
        } else {
            self.size
        }
    }

    /// Whether its bytes lie inside a file of `file_size` bytes.
    pub fn within(&self, file_size: u64) -> bool {
        self.offset
            .checked_add(self.in_file())
            .is_some_and(|e| e <= file_size)
    }
}

/// A file's section headers, in table order, and its section-name table.
#[derive(Debug, Clone, Default)]
pub struct SectionTable {
    pub head: Option<Elf64Head>,
    pub sections: Vec<SectionHeader>,
    names: Vec<u8>,
}

impl SectionTable {
    /// The name of `s`: the bytes from its `sh_name` to the next NUL; `None` when it starts
    /// outside the name table or is not terminated inside it.
    pub fn name(&self, s: &SectionHeader) -> Option<&[u8]> {
        let rest = self.names.get(s.name_at as usize..)?;
        let end = rest.iter().position(|c| *c == 0)?;
        Some(&rest[..end])
    }
}

/// Why a section table was not read.
#[derive(Debug, thiserror::Error)]
pub enum SectionsError {
    #[error("not a 64-bit little-endian ELF file")]
    NotElf,
    #[error("section headers out of bounds or too many")]
    Table,
    #[error("reading: {0}")]
    Io(#[from] io::Error),
}

fn read_at<R: Read + Seek>(f: &mut R, at: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut b = vec![0u8; len];
    f.seek(SeekFrom::Start(at))?;
    f.read_exact(&mut b)?;
    Ok(b)
}

/// The section table of the `file_size` bytes of `f`, with a section-name table of at most
/// `max_names` bytes. A file without section headers (`e_shnum` 0: none, or extended
/// numbering) has an empty table. `Table` when the headers' size or place, the name table's
/// index, place or size are out of bounds, or the name table holds no bytes in the file.
pub fn read<R: Read + Seek>(
    f: &mut R,
    file_size: u64,
    max_names: u64,
) -> Result<SectionTable, SectionsError> {
    read_with(&mut |at, len| read_at(f, at, len), file_size, max_names)
}

/// [`read`] from `file` by positioned reads: the file's position (which its clones share)
/// stays where it was.
pub fn read_file(
    file: &File,
    file_size: u64,
    max_names: u64,
) -> Result<SectionTable, SectionsError> {
    let mut at = |at: u64, len: usize| {
        let mut b = vec![0u8; len];
        file.read_exact_at(&mut b, at)?;
        Ok(b)
    };
    read_with(&mut at, file_size, max_names)
}

fn read_with(
    read_at: &mut dyn FnMut(u64, usize) -> io::Result<Vec<u8>>,
    file_size: u64,
    max_names: u64,
) -> Result<SectionTable, SectionsError> {
    if file_size < 64 {
        return Err(SectionsError::NotElf);
    }
    let head = elf64_head(&read_at(0, 64)?).ok_or(SectionsError::NotElf)?;
    if head.shnum == 0 {
        return Ok(SectionTable {
            head: Some(head),
            ..SectionTable::default()
        });
    }
    let shnum = usize::from(head.shnum);
    if head.shentsize != 64 || head.shstrndx >= head.shnum {
        return Err(SectionsError::Table);
    }
    let table_len = 64 * shnum as u64;
    if head
        .shoff
        .checked_add(table_len)
        .is_none_or(|e| e > file_size)
    {
        return Err(SectionsError::Table);
    }
    let raw = read_at(head.shoff, table_len as usize)?;
    let mut sections = Vec::with_capacity(shnum);
    for b in raw.chunks_exact(64) {
        let field = |v: Option<u64>| v.ok_or(SectionsError::Table);
        sections.push(SectionHeader {
            name_at: field(u32_at(b, 0).map(u64::from))? as u32,
            kind: field(u32_at(b, 4).map(u64::from))? as u32,
            flags: field(u64_at(b, 8))?,
            offset: field(u64_at(b, 24))?,
            size: field(u64_at(b, 32))?,
            link: field(u32_at(b, 40).map(u64::from))? as u32,
            info: field(u32_at(b, 44).map(u64::from))? as u32,
            align: field(u64_at(b, 48))?,
            raw: b.try_into().map_err(|_| SectionsError::Table)?,
        });
    }
    let names_at = &sections[usize::from(head.shstrndx)];
    if names_at.kind == SHT_NOBITS || names_at.size > max_names || !names_at.within(file_size) {
        return Err(SectionsError::Table);
    }
    let names = read_at(names_at.offset, names_at.size as usize)?;
    Ok(SectionTable {
        head: Some(head),
        sections,
        names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// An ELF64 file with a null section, `.text` and the name table, in that order.
    fn elf(names: &[u8], name_size: u64) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let names_off = 64u64;
        let shoff = 64 + names.len() as u64;
        b.extend_from_slice(names);
        b[40..48].copy_from_slice(&shoff.to_le_bytes());
        b[58..60].copy_from_slice(&64u16.to_le_bytes());
        b[60..62].copy_from_slice(&3u16.to_le_bytes());
        b[62..64].copy_from_slice(&2u16.to_le_bytes());
        let mut sh = |name: u32, kind: u32, off: u64, size: u64| {
            let mut h = [0u8; 64];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[24..32].copy_from_slice(&off.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            b.extend_from_slice(&h);
        };
        sh(0, 0, 0, 0);
        sh(1, 1, 0, 0);
        sh(7, 3, names_off, name_size);
        b
    }

    #[test]
    fn reads_headers_and_names() {
        let b = elf(b"\0.text\0.shstrtab\0", 17);
        let t = read(&mut Cursor::new(&b), b.len() as u64, 1 << 20).unwrap();
        assert_eq!(t.sections.len(), 3);
        assert_eq!(t.name(&t.sections[1]), Some(&b".text"[..]));
        assert_eq!(t.name(&t.sections[2]), Some(&b".shstrtab"[..]));
        assert_eq!(t.sections[2].offset, 64);
    }

    #[test]
    fn refuses_what_lies_outside_the_file_or_its_bounds() {
        let b = elf(b"\0.text\0.shstrtab\0", 17);
        // The table runs past the end.
        assert!(matches!(
            read(
                &mut Cursor::new(&b[..b.len() - 1]),
                b.len() as u64 - 1,
                1 << 20
            ),
            Err(SectionsError::Table)
        ));
        // The name table is larger than the caller allows, or than the file.
        assert!(matches!(
            read(&mut Cursor::new(&b), b.len() as u64, 16),
            Err(SectionsError::Table)
        ));
        let big = elf(b"\0.text\0.shstrtab\0", 1 << 30);
        assert!(matches!(
            read(&mut Cursor::new(&big), big.len() as u64, u64::MAX),
            Err(SectionsError::Table)
        ));
        // A name without its NUL inside the table has none.
        let cut = elf(b"\0.text\0.shstrtab", 16);
        let t = read(&mut Cursor::new(&cut), cut.len() as u64, 1 << 20).unwrap();
        assert_eq!(t.name(&t.sections[2]), None);
        // Not ELF64 little-endian.
        let mut be = b.clone();
        be[5] = 2;
        assert!(matches!(
            read(&mut Cursor::new(&be), be.len() as u64, 1 << 20),
            Err(SectionsError::NotElf)
        ));
    }

    #[test]
    fn a_file_is_read_in_place_and_keeps_its_position() {
        use std::io::Write;
        let b = elf(b"\0.text\0.shstrtab\0", 17);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&b).unwrap();
        f.seek(SeekFrom::Start(5)).unwrap();
        let t = read_file(&f, b.len() as u64, 1 << 20).unwrap();
        assert_eq!(t.name(&t.sections[1]), Some(&b".text"[..]));
        assert_eq!(f.stream_position().unwrap(), 5);
    }
}
