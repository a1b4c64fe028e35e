//! The relocatable ELF file a `.ko` is, as far as the check reads it: the file type, the
//! section table (read by `gpuimg_elf::sections`, the workspace's one section-table reader), a
//! section's bytes by name or index, and the symbol table with its names.
//!
//! Must never index the file without a bounds check; a section the reader needs that lies
//! outside the file, a symbol table of the wrong entry size or a name without its NUL is
//! `Malformed`, never a guess.

use std::io::Cursor;

use gpuimg_elf::sections::{self, SectionHeader, SectionTable, SectionsError, SHT_NOBITS};

use crate::module::Malformed;

/// `e_type` of a relocatable object, which every kernel module is.
const ET_REL: u16 = 1;
/// `sh_type` of the symbol table.
const SHT_SYMTAB: u32 = 2;
/// Bytes of one ELF64 symbol.
const SYM_SIZE: usize = 24;
/// Bytes of the section-name table read at most.
const MAX_SECTION_NAMES: u64 = 1 << 20;
/// `st_shndx` of an undefined symbol and of an absolute one.
pub(crate) const SHN_UNDEF: u16 = 0;
pub(crate) const SHN_ABS: u16 = 0xfff1;
/// `st_info >> 4`: the binding.
pub(crate) const STB_GLOBAL: u8 = 1;
pub(crate) const STB_WEAK: u8 = 2;

/// One symbol of the symbol table.
#[derive(Debug, Clone)]
pub(crate) struct Symbol {
    pub name: String,
    pub bind: u8,
    pub section: u16,
    pub value: u64,
}

/// An ELF64 little-endian relocatable file: its bytes and its section table.
pub(crate) struct Object<'a> {
    bytes: &'a [u8],
    table: SectionTable,
    pub machine: u16,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The bytes from `at` to the next NUL of `b`; `None` when `at` is outside or no NUL follows.
pub(crate) fn c_string(b: &[u8], at: u64) -> Option<&[u8]> {
    let rest = b.get(usize::try_from(at).ok()?..)?;
    let end = rest.iter().position(|c| *c == 0)?;
    Some(&rest[..end])
}

/// A little-endian `u32` at `at` in `b`.
pub(crate) fn u32_in(b: &[u8], at: u64) -> Option<u32> {
    u32_at(b, usize::try_from(at).ok()?)
}

/// A little-endian `u64` at `at` in `b`.
pub(crate) fn u64_in(b: &[u8], at: usize) -> Option<u64> {
    u64_at(b, at)
}

impl<'a> Object<'a> {
    /// The section table of `bytes`, which must be an ELF64 little-endian relocatable file.
    pub fn parse(bytes: &'a [u8]) -> Result<Object<'a>, Malformed> {
        let table = sections::read(
            &mut Cursor::new(bytes),
            bytes.len() as u64,
            MAX_SECTION_NAMES,
        )
        .map_err(|e| match e {
            SectionsError::NotElf => Malformed::NotElf,
            SectionsError::Table | SectionsError::Io(_) => Malformed::SectionTable,
        })?;
        if u16_at(bytes, 16) != Some(ET_REL) {
            return Err(Malformed::NotRelocatable);
        }
        if table.sections.is_empty() {
            return Err(Malformed::SectionTable);
        }
        let machine = u16_at(bytes, 18).ok_or(Malformed::NotElf)?;
        Ok(Object {
            bytes,
            table,
            machine,
        })
    }

    /// The name of the section at `index`, when it has one.
    pub fn section_name(&self, index: u16) -> Option<&[u8]> {
        let s = self.table.sections.get(usize::from(index))?;
        self.table.name(s)
    }

    /// The file bytes of section `s` (none for `SHT_NOBITS`); `Outside` when they do not lie in
    /// the file.
    fn contents(&self, s: &SectionHeader) -> Result<&'a [u8], Malformed> {
        let name = || String::from_utf8_lossy(self.table.name(s).unwrap_or(b"?")).into_owned();
        if s.kind == SHT_NOBITS {
            return Ok(&[]);
        }
        let start = usize::try_from(s.offset).map_err(|_| Malformed::Outside(name()))?;
        let len = usize::try_from(s.size).map_err(|_| Malformed::Outside(name()))?;
        start
            .checked_add(len)
            .and_then(|end| self.bytes.get(start..end))
            .ok_or_else(|| Malformed::Outside(name()))
    }

    /// The bytes of the section at `index`.
    pub fn section_at(&self, index: u16) -> Result<&'a [u8], Malformed> {
        let s = self
            .table
            .sections
            .get(usize::from(index))
            .ok_or(Malformed::SectionTable)?;
        self.contents(s)
    }

    /// The bytes of the first section named `name`, if there is one.
    pub fn section(&self, name: &str) -> Result<Option<&'a [u8]>, Malformed> {
        match self
            .table
            .sections
            .iter()
            .find(|s| self.table.name(s) == Some(name.as_bytes()))
        {
            Some(s) => self.contents(s).map(Some),
            None => Ok(None),
        }
    }

    /// Every symbol of the symbol table (`SHT_SYMTAB`), index 0 included; none when the file has
    /// no symbol table. More than one table, an entry size other than 24 bytes, a string table
    /// that is not a section of the file, or a name outside it is `Symbols`.
    pub fn symbols(&self) -> Result<Vec<Symbol>, Malformed> {
        let mut tables = self.table.sections.iter().filter(|s| s.kind == SHT_SYMTAB);
        let Some(symtab) = tables.next() else {
            return Ok(Vec::new());
        };
        if tables.next().is_some() {
            return Err(Malformed::Symbols("more than one symbol table"));
        }
        if u64_at(&symtab.raw, 56) != Some(SYM_SIZE as u64) || symtab.size % SYM_SIZE as u64 != 0 {
            return Err(Malformed::Symbols("entries are not 24 bytes"));
        }
        let entries = self.contents(symtab)?;
        let strtab = self
            .table
            .sections
            .get(symtab.link as usize)
            .filter(|s| s.kind != SHT_NOBITS)
            .ok_or(Malformed::Symbols("no string table"))?;
        let names = self.contents(strtab)?;
        entries
            .chunks_exact(SYM_SIZE)
            .map(|e| {
                let field = |v: Option<u64>| v.ok_or(Malformed::Symbols("short entry"));
                let name_at = field(u32_at(e, 0).map(u64::from))?;
                let name = c_string(names, name_at)
                    .ok_or(Malformed::Symbols("a name outside the string table"))?;
                Ok(Symbol {
                    name: String::from_utf8_lossy(name).into_owned(),
                    bind: e[4] >> 4,
                    section: field(u16_at(e, 6).map(u64::from))? as u16,
                    value: field(u64_at(e, 8))?,
                })
            })
            .collect()
    }
}
