//! Section stripping for `strip: [debug-symbols]`: the parts of a shared object no program
//! loads and only debuggers and symbolizers read, the DWARF sections (`.debug_*`,
//! `.zdebug_*`) and the full symbol table (`.symtab` with its `.strtab`), are cut out. What
//! the loader reads (`.dynsym`, `.dynstr`, every loaded segment) stays byte for byte, at the
//! same addresses: a block of loaded bytes behind a removed part (`patchelf` appends a
//! segment at the file's end) moves down by a multiple of its alignment, and the program
//! headers say where it went.
//!
//! The plan reads only the ELF header, the program headers and the section headers. It says
//! "leave it" for anything it does not fully understand: not a little-endian ELF64, extended
//! section numbering, a removable section overlapping loaded bytes, a kept section
//! straddling them or linking to a removed one, or bytes outside the loaded blocks that no
//! section holds (a stripped file must not silently lose them). It never follows an offset without a bounds check.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};

use sha2::{Digest as _, Sha256};

use super::sections::{
    self, SectionHeader, SectionTable, SectionsError, SHF_ALLOC, SHF_INFO_LINK, SHT_REL, SHT_RELA,
};
use super::{u32_at, u64_at};

const PT_LOAD: u32 = 1;
/// Section headers are read whole; a file claiming more is left as it is.
const MAX_SECTIONS: usize = 65_000;
/// The most bytes of section names read.
const MAX_NAMES: u64 = 16 << 20;
/// The most a stretch past the loaded bytes may hold outside any section (alignment).
const MAX_GAP: u64 = 4096;

/// A section header with its name (`elf::sections` read both).
#[derive(Debug, Clone)]
struct Section {
    name: String,
    header: SectionHeader,
}

impl std::ops::Deref for Section {
    type Target = SectionHeader;
    fn deref(&self) -> &SectionHeader {
        &self.header
    }
}

/// What stripping one file does (see the module doc).
#[derive(Debug, Clone)]
pub struct Stripping {
    /// The original's size, checked again when writing.
    pub file_size: u64,
    /// The stripped file's size.
    pub new_size: u64,
    /// The names of the sections removed, in file order.
    pub removed: Vec<String>,
    /// (from, length, to): the blocks of loaded bytes and the kept sections outside them, in
    /// the order they are written.
    copies: Vec<(u64, u64, u64)>,
    /// Bytes written over what `copies` puts at an offset of the new file: the ELF header
    /// and the program headers with their new offsets.
    patches: Vec<(u64, Vec<u8>)>,
    /// The new section header table and where it goes.
    headers: Vec<u8>,
    headers_at: u64,
}

fn removable(name: &str) -> bool {
    name.starts_with(".debug_") || name.starts_with(".zdebug_") || name == ".symtab"
}

fn read_exact_at<R: Read + Seek>(f: &mut R, at: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut b = vec![0u8; len];
    f.seek(SeekFrom::Start(at))?;
    f.read_exact(&mut b)?;
    Ok(b)
}

/// What stripping `f` would do: `Ok(None)` when there is nothing to strip or the file is not
/// one this module fully understands (it is then left as it is).
pub fn plan(f: &mut File) -> io::Result<Option<Stripping>> {
    let file_size = f.metadata()?.len();
    plan_reader(f, file_size)
}

/// [`plan`] of `file_size` bytes read from `f`.
pub fn plan_reader<R: Read + Seek>(f: &mut R, file_size: u64) -> io::Result<Option<Stripping>> {
    if file_size < 64 {
        return Ok(None);
    }
    let table = match sections::read(f, file_size, MAX_NAMES) {
        Ok(t) => t,
        Err(SectionsError::Io(e)) => return Err(e),
        Err(SectionsError::NotElf | SectionsError::Table) => return Ok(None),
    };
    Ok(plan_with(f, file_size, &table).ok().flatten())
}

/// `Err(())`: not understood.
fn plan_with<R: Read + Seek>(
    f: &mut R,
    file_size: u64,
    table: &SectionTable,
) -> Result<Option<Stripping>, ()> {
    let h = table.head.ok_or(())?;
    let (phoff, shoff) = (h.phoff, h.shoff);
    let phentsize = u64::from(h.phentsize);
    let phnum = u64::from(h.phnum);
    let shnum = table.sections.len();
    let shstrndx = usize::from(h.shstrndx);
    // Extended numbering (0 sections, or SHN_XINDEX) and odd entry sizes: left alone.
    if shnum == 0 || shnum > MAX_SECTIONS {
        return Err(());
    }
    if phnum > 0 && phentsize != 56 {
        return Err(());
    }
    let sh_end = shoff + 64 * shnum as u64;
    let ph_end = phoff
        .checked_add(phentsize * phnum)
        .filter(|e| *e <= file_size)
        .ok_or(())?;
    let head = read_exact_at(f, 0, 64).map_err(|_| ())?;
    let mut sections = Vec::with_capacity(shnum);
    for header in &table.sections {
        if !header.within(file_size) {
            return Err(());
        }
        let name = table.name(header).ok_or(())?;
        sections.push(Section {
            name: std::str::from_utf8(name).map_err(|_| ())?.to_string(),
            header: header.clone(),
        });
    }
    // What goes: DWARF and `.symtab`; `.strtab` too when only removed sections link to it.
    let mut remove = vec![false; shnum];
    for (i, s) in sections.iter().enumerate() {
        remove[i] = i != 0 && s.flags & SHF_ALLOC == 0 && removable(&s.name);
    }
    for (i, s) in sections.iter().enumerate() {
        if s.name == ".strtab" && s.flags & SHF_ALLOC == 0 && i != shstrndx {
            let users: Vec<usize> = (0..shnum)
                .filter(|j| sections[*j].link as usize == i)
                .collect();
            if !users.is_empty() && users.iter().all(|j| remove[*j]) {
                remove[i] = true;
            }
        }
    }
    if !remove.iter().any(|r| *r) {
        return Ok(None);
    }
    // A kept section must not refer to a removed one.
    for (i, s) in sections.iter().enumerate() {
        if remove[i] {
            continue;
        }
        if remove.get(s.link as usize).copied().unwrap_or(false) {
            return Err(());
        }
        let info_is_index = s.flags & SHF_INFO_LINK != 0 || s.kind == SHT_REL || s.kind == SHT_RELA;
        if info_is_index && remove.get(s.info as usize).copied().unwrap_or(false) {
            return Err(());
        }
    }
    // The loaded bytes, as blocks: every segment's file part, every allocated section, the
    // ELF header and the program headers, overlapping or touching spans merged. `patchelf`
    // leaves a block behind the symbol table (torch's libraries); each block after the first
    // moves down by a multiple of its segments' alignment, so the loader maps the same bytes
    // at the same addresses.
    let ph = read_exact_at(f, phoff, (phentsize * phnum) as usize).map_err(|_| ())?;
    let mut spans: Vec<(u64, u64)> = vec![(0, 64)];
    if phnum > 0 {
        spans.push((phoff, ph_end));
    }
    let mut loads: Vec<(u64, u64)> = Vec::new(); // (p_offset, p_align) of PT_LOAD
    for p in ph.chunks_exact(56) {
        let kind = u32_at(p, 0).ok_or(())?;
        let off = u64_at(p, 8).ok_or(())?;
        let filesz = u64_at(p, 32).ok_or(())?;
        let align = u64_at(p, 48).ok_or(())?;
        let end = off
            .checked_add(filesz)
            .filter(|e| *e <= file_size)
            .ok_or(())?;
        if filesz > 0 {
            spans.push((off, end));
        }
        if kind == PT_LOAD {
            loads.push((off, align.max(1)));
        }
    }
    for s in &sections {
        if s.flags & SHF_ALLOC != 0 && s.in_file() > 0 {
            spans.push((s.offset, s.offset + s.in_file()));
        }
    }
    spans.sort();
    let mut blocks: Vec<(u64, u64)> = Vec::new();
    for (a, b) in spans {
        match blocks.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => blocks.push((a, b)),
        }
    }
    let block_of = |off: u64, len: u64| -> Option<usize> {
        blocks
            .iter()
            .position(|(a, b)| off >= *a && off + len <= *b && (len > 0 || off <= *b))
    };
    let overlaps = |off: u64, len: u64| blocks.iter().any(|(a, b)| off < *b && off + len > *a);
    // Removed sections lie outside every block; a kept section and the header table lie
    // wholly inside one or wholly outside all.
    for (i, s) in sections.iter().enumerate() {
        let n = s.in_file();
        if n == 0 {
            continue;
        }
        if remove[i] && overlaps(s.offset, n) {
            return Err(());
        }
        if !remove[i] && overlaps(s.offset, n) && block_of(s.offset, n).is_none() {
            return Err(());
        }
    }
    // `patchelf` may leave the old table inside its new segment: those bytes stay (loaded,
    // unread), and the new table goes to the end like any other.
    if overlaps(shoff, sh_end - shoff) && block_of(shoff, sh_end - shoff).is_none() {
        return Err(());
    }
    // Outside the blocks, nothing but sections, the header table and small gaps.
    let mut outside: Vec<(u64, u64)> = sections
        .iter()
        .filter(|s| s.in_file() > 0 && !overlaps(s.offset, s.in_file()))
        .map(|s| (s.offset, s.offset + s.in_file()))
        .chain(std::iter::once((shoff, sh_end)))
        .chain(blocks.iter().copied())
        .collect();
    outside.sort();
    let mut covered = 0;
    for (a, b) in &outside {
        if *a > covered && *a - covered > MAX_GAP {
            return Err(());
        }
        covered = covered.max(*b);
    }
    if file_size > covered && file_size - covered > MAX_GAP {
        return Err(());
    }
    // The new layout: the first block where it was; each later one at the lowest offset past
    // the one before that keeps its offset modulo its segments' alignment; then the kept
    // sections that lay outside the blocks, in file order, each at its alignment; then the
    // header table.
    let mut copies: Vec<(u64, u64, u64)> = Vec::new(); // (from, len, to)
    let mut shift: Vec<u64> = Vec::new(); // per block: how far down it moves
    let mut at = 0u64;
    for (k, (a, b)) in blocks.iter().enumerate() {
        let align = loads
            .iter()
            .filter(|(off, _)| off >= a && off < b)
            .map(|(_, al)| *al)
            .max()
            .unwrap_or(1);
        if !align.is_power_of_two() || align > 1 << 30 {
            return Err(());
        }
        let to = if k == 0 {
            if *a != 0 {
                return Err(());
            }
            0
        } else {
            a - (a - at) / align * align
        };
        shift.push(a - to);
        copies.push((*a, b - a, to));
        at = to + (b - a);
    }
    let mut index = vec![0u32; shnum];
    let mut next = 0u32;
    for i in 0..shnum {
        if !remove[i] {
            index[i] = next;
            next += 1;
        }
    }
    let mut order: Vec<usize> = (0..shnum)
        .filter(|i| {
            let s = &sections[*i];
            !remove[*i] && s.in_file() > 0 && !overlaps(s.offset, s.in_file())
        })
        .collect();
    order.sort_by_key(|i| sections[*i].offset);
    let mut new_offset: Vec<u64> = Vec::with_capacity(shnum);
    for s in &sections {
        new_offset.push(match block_of(s.offset, s.in_file()) {
            Some(k) => s.offset - shift[k],
            None => s.offset,
        });
    }
    for i in order {
        let s = &sections[i];
        let align = s.align.clamp(1, 4096);
        at = at.div_ceil(align) * align;
        new_offset[i] = at;
        copies.push((s.offset, s.size, at));
        at += s.size;
    }
    let headers_at = at.div_ceil(8) * 8;
    let mut headers = Vec::with_capacity(64 * next as usize);
    let remap = |v: u32| -> u32 {
        if (v as usize) < shnum {
            index[v as usize]
        } else {
            v
        }
    };
    for (i, s) in sections.iter().enumerate() {
        if remove[i] {
            continue;
        }
        let mut b = s.raw;
        // Empty sections outside the blocks point at where the kept ones end.
        let off = if i != 0 && s.in_file() == 0 && block_of(s.offset, 0).is_none() {
            at
        } else {
            new_offset[i]
        };
        b[24..32].copy_from_slice(&off.to_le_bytes());
        if i != 0 {
            b[40..44].copy_from_slice(&remap(s.link).to_le_bytes());
            if s.flags & SHF_INFO_LINK != 0 || s.kind == SHT_REL || s.kind == SHT_RELA {
                b[44..48].copy_from_slice(&remap(s.info).to_le_bytes());
            }
        }
        headers.extend_from_slice(&b);
    }
    // The program headers, each offset moved with its block, written where the table lands.
    let mut patches: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut new_ph = ph.clone();
    for (j, p) in ph.chunks_exact(56).enumerate() {
        let off = u64_at(p, 8).ok_or(())?;
        let filesz = u64_at(p, 32).ok_or(())?;
        let k = block_of(off, filesz).ok_or(())?;
        new_ph[j * 56 + 8..j * 56 + 16].copy_from_slice(&(off - shift[k]).to_le_bytes());
    }
    let new_phoff = if phnum > 0 {
        let k = block_of(phoff, ph_end - phoff).ok_or(())?;
        phoff - shift[k]
    } else {
        phoff
    };
    let mut elf_header: [u8; 64] = head.try_into().map_err(|_| ())?;
    elf_header[32..40].copy_from_slice(&new_phoff.to_le_bytes());
    elf_header[40..48].copy_from_slice(&headers_at.to_le_bytes());
    elf_header[60..62].copy_from_slice(&(next as u16).to_le_bytes());
    elf_header[62..64].copy_from_slice(&(index[shstrndx] as u16).to_le_bytes());
    patches.push((0, elf_header.to_vec()));
    if phnum > 0 {
        patches.push((new_phoff, new_ph));
    }
    let removed = {
        let mut r: Vec<&Section> = (0..shnum)
            .filter(|i| remove[*i])
            .map(|i| &sections[i])
            .collect();
        r.sort_by_key(|s| s.offset);
        r.into_iter().map(|s| s.name.clone()).collect()
    };
    let new_size = headers_at + headers.len() as u64;
    // A block that cannot move down (its gap is smaller than its alignment) keeps its bytes,
    // and the sections written again after it can make a small file larger: leave it.
    if new_size >= file_size {
        return Ok(None);
    }
    Ok(Some(Stripping {
        file_size,
        new_size,
        removed,
        copies,
        patches,
        headers,
        headers_at,
    }))
}

/// A writer that hashes what it writes and counts it, laying the patches over what it is
/// given at their offsets.
struct Sink<'a, W: Write> {
    file: &'a mut W,
    hash: Sha256,
    written: u64,
    patches: &'a [(u64, Vec<u8>)],
}

impl<W: Write> Sink<'_, W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        let (from, to) = (self.written, self.written + b.len() as u64);
        let mut owned: Option<Vec<u8>> = None;
        for (at, bytes) in self.patches {
            let end = at + bytes.len() as u64;
            if *at < to && end > from {
                let buf = owned.get_or_insert_with(|| b.to_vec());
                let lo = (*at).max(from);
                let hi = end.min(to);
                buf[(lo - from) as usize..(hi - from) as usize]
                    .copy_from_slice(&bytes[(lo - at) as usize..(hi - at) as usize]);
            }
        }
        let b = owned.as_deref().unwrap_or(b);
        self.file.write_all(b)?;
        self.hash.update(b);
        self.written = to;
        Ok(())
    }
    fn zeros_to(&mut self, at: u64) -> io::Result<()> {
        while self.written < at {
            let n = (at - self.written).min(4096) as usize;
            self.put(&[0u8; 4096][..n])?;
        }
        Ok(())
    }
    fn copy<R: Read + Seek>(
        &mut self,
        src: &mut R,
        from: u64,
        len: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        src.seek(SeekFrom::Start(from))?;
        let mut left = len;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            src.read_exact(&mut buf[..n])?;
            self.put(&buf[..n])?;
            left -= n as u64;
        }
        Ok(())
    }
}

impl Stripping {
    /// Write the stripped file of `src` (the file planned) into `dst`; the sha256 of what was
    /// written.
    pub fn write(&self, src: &File, dst: &mut File) -> io::Result<[u8; 32]> {
        let size = src.metadata()?.len();
        if size != self.file_size {
            return Err(io::Error::other(format!(
                "the file changed size since it was read ({} → {size} bytes)",
                self.file_size
            )));
        }
        self.write_reader(&mut src.try_clone()?, dst)
    }

    /// [`Stripping::write`] from any reader of the planned bytes.
    pub fn write_reader<R: Read + Seek, W: Write>(
        &self,
        src: &mut R,
        dst: &mut W,
    ) -> io::Result<[u8; 32]> {
        let mut buf = vec![0u8; 1 << 20];
        let mut sink = Sink {
            file: dst,
            hash: Sha256::new(),
            written: 0,
            patches: &self.patches,
        };
        for (from, len, to) in &self.copies {
            sink.zeros_to(*to)?;
            sink.copy(src, *from, *len, &mut buf)?;
        }
        sink.zeros_to(self.headers_at)?;
        sink.put(&self.headers)?;
        sink.file.flush()?;
        Ok(sink.hash.finalize().into())
    }

    /// Bytes at the start of the file written as they were (the ELF header and program
    /// headers aside): the first block of loaded bytes.
    pub fn unchanged_prefix(&self) -> u64 {
        self.copies.first().map_or(0, |c| c.1)
    }
}

#[cfg(test)]
#[path = "strip_tests.rs"]
mod tests;
