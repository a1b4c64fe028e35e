//! Whether a shared object's loadable segments lie inside its file, read from its ELF program
//! headers before `dlopen` maps it.
//!
//! The dynamic loader maps every `PT_LOAD` segment; a page of a segment that lies past the end
//! of a cut-short file (a broken layer, a partial copy) kills the process with SIGBUS when it is
//! touched, so the self-test would die instead of answering. Reads at most the first
//! `HEAD_BYTES` of the file; all arithmetic is checked. Hand-written over the ELF layout: the
//! self-test must never link the builder's `elf` module. Anything this reader does not
//! recognise (not ELF, a file that cannot be opened) is left to `dlopen`, which names it.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// How much of a file is read for its ELF header and program header table.
pub const HEAD_BYTES: u64 = 16 * 1024;

const PT_LOAD: u32 = 1;

/// Why a shared object must not be mapped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unmappable {
    #[error("Truncated: loadable segment {index} ends at byte {end}, the file has {size} bytes (a partial copy or a broken layer); not loaded")]
    SegmentPastEnd { index: usize, end: u64, size: u64 },
    #[error("Truncated: loadable segment {index} ends past byte 2^64 (a corrupt program header); not loaded")]
    SegmentOverflow { index: usize },
    #[error("Truncated: the program header table ends at byte {end}, the file has {size} bytes; not loaded")]
    TablePastEnd { end: u64, size: u64 },
    #[error("The program header table ends at byte {end}, past the first {HEAD_BYTES} bytes the self-test reads; not loaded")]
    TableTooFar { end: u64 },
    #[error("Program header entries of {got} bytes, ELF{bits} has {want}; not loaded")]
    EntrySize { got: u16, want: u16, bits: u8 },
    #[error("Cannot read its ELF header: {0}")]
    Read(String),
}

/// Check the file at `path`: `Ok` when every loadable segment lies inside it, or when it is
/// not an ELF file this reader knows (then `dlopen` reports what it is).
pub fn check(path: &Path) -> Result<(), Unmappable> {
    // Only a regular file is opened (a FIFO would block the open).
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let Ok(f) = File::open(path) else {
        return Ok(());
    };
    let size = match f.metadata() {
        Ok(meta) if meta.is_file() => meta.len(),
        _ => return Ok(()),
    };
    let mut head = Vec::new();
    f.take(HEAD_BYTES.min(size))
        .read_to_end(&mut head)
        .map_err(|e| Unmappable::Read(e.to_string()))?;
    check_bytes(&head, size)
}

/// The rule over the first bytes of a file of `size` bytes (`head` is at most `HEAD_BYTES`).
pub fn check_bytes(head: &[u8], size: u64) -> Result<(), Unmappable> {
    let Some(layout) = Layout::of(head) else {
        return Ok(());
    };
    let (phoff, entsize, count) = layout.table(head)?;
    if count == 0 {
        // Nothing to map: `dlopen` refuses it ("no loadable segments").
        return Ok(());
    }
    let table_end = u64::from(entsize)
        .checked_mul(u64::from(count))
        .and_then(|n| n.checked_add(phoff))
        .ok_or(Unmappable::TableTooFar { end: u64::MAX })?;
    if table_end > size {
        return Err(Unmappable::TablePastEnd {
            end: table_end,
            size,
        });
    }
    let read = u64::try_from(head.len()).unwrap_or(u64::MAX);
    if table_end > read {
        return Err(Unmappable::TableTooFar { end: table_end });
    }
    for index in 0..usize::from(count) {
        let at = usize::try_from(phoff)
            .ok()
            .and_then(|p| p.checked_add(index.checked_mul(usize::from(entsize))?))
            .ok_or(Unmappable::TableTooFar { end: table_end })?;
        let Some((p_type, offset, filesz)) = layout.entry(head, at) else {
            return Err(Unmappable::TableTooFar { end: table_end });
        };
        if p_type != PT_LOAD {
            continue;
        }
        let end = offset
            .checked_add(filesz)
            .ok_or(Unmappable::SegmentOverflow { index })?;
        if end > size {
            return Err(Unmappable::SegmentPastEnd { index, end, size });
        }
    }
    Ok(())
}

/// ELF class and byte order, from `e_ident`.
struct Layout {
    wide: bool,
    little: bool,
}

impl Layout {
    fn of(head: &[u8]) -> Option<Layout> {
        if head.get(..4)? != b"\x7fELF" {
            return None;
        }
        let wide = match head.get(4)? {
            1 => false,
            2 => true,
            _ => return None,
        };
        let little = match head.get(5)? {
            1 => true,
            2 => false,
            _ => return None,
        };
        Some(Layout { wide, little })
    }

    fn read(&self, head: &[u8], at: usize, len: usize) -> Option<u64> {
        let bytes = head.get(at..at.checked_add(len)?)?;
        let mut buf = [0u8; 8];
        if self.little {
            buf[..len].copy_from_slice(bytes);
            Some(u64::from_le_bytes(buf))
        } else {
            buf[8 - len..].copy_from_slice(bytes);
            Some(u64::from_be_bytes(buf))
        }
    }

    /// `e_phoff`, `e_phentsize`, `e_phnum`.
    fn table(&self, head: &[u8]) -> Result<(u64, u16, u16), Unmappable> {
        let (off, want, bits) = if self.wide {
            ((0x20, 8), 56u16, 64u8)
        } else {
            ((0x1c, 4), 32u16, 32u8)
        };
        let sizes = if self.wide { 0x36 } else { 0x2a };
        let short = || Unmappable::Read("the file ends inside its ELF header".into());
        let phoff = self.read(head, off.0, off.1).ok_or_else(short)?;
        let entsize = self.read(head, sizes, 2).ok_or_else(short)?;
        let count = self.read(head, sizes + 2, 2).ok_or_else(short)?;
        let (entsize, count) = (entsize as u16, count as u16);
        if count > 0 && entsize != want {
            return Err(Unmappable::EntrySize {
                got: entsize,
                want,
                bits,
            });
        }
        Ok((phoff, entsize, count))
    }

    /// `p_type`, `p_offset`, `p_filesz` of the entry at byte `at`.
    fn entry(&self, head: &[u8], at: usize) -> Option<(u32, u64, u64)> {
        let p_type = self.read(head, at, 4)? as u32;
        let (offset, filesz) = if self.wide {
            (
                self.read(head, at.checked_add(8)?, 8)?,
                self.read(head, at.checked_add(32)?, 8)?,
            )
        } else {
            (
                self.read(head, at.checked_add(4)?, 4)?,
                self.read(head, at.checked_add(16)?, 4)?,
            )
        };
        Some((p_type, offset, filesz))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF64 little-endian header with `loads` as (offset, filesz) PT_LOAD entries.
    fn elf64(loads: &[(u64, u64)]) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        h[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        h[0x38..0x3a].copy_from_slice(&(loads.len() as u16).to_le_bytes());
        for (offset, filesz) in loads {
            let mut e = vec![0u8; 56];
            e[..4].copy_from_slice(&PT_LOAD.to_le_bytes());
            e[8..16].copy_from_slice(&offset.to_le_bytes());
            e[32..40].copy_from_slice(&filesz.to_le_bytes());
            h.extend(e);
        }
        h
    }

    #[test]
    fn a_segment_past_the_end_of_the_file_is_refused_naming_both_sizes() {
        let h = elf64(&[(0, 4096), (4096, 8192)]);
        assert_eq!(check_bytes(&h, 12_288), Ok(()));
        let e = check_bytes(&h, 6_144).unwrap_err();
        assert_eq!(
            e,
            Unmappable::SegmentPastEnd {
                index: 1,
                end: 12_288,
                size: 6_144
            }
        );
        assert!(e.to_string().starts_with(
            "Truncated: loadable segment 1 ends at byte 12288, the file has 6144 bytes"
        ));
    }

    #[test]
    fn overflowing_and_misplaced_headers_are_refused_without_panicking() {
        let h = elf64(&[(u64::MAX, 2)]);
        assert_eq!(
            check_bytes(&h, 1 << 20),
            Err(Unmappable::SegmentOverflow { index: 0 })
        );
        let mut h = elf64(&[(0, 10)]);
        h[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            check_bytes(&h, 1 << 20),
            Err(Unmappable::TableTooFar { .. })
        ));
        // Cut inside the table: the table itself is past the end.
        let h = elf64(&[(0, 10), (0, 10)]);
        assert!(matches!(
            check_bytes(&h[..100], 100),
            Err(Unmappable::TablePastEnd {
                end: 176,
                size: 100
            })
        ));
        let mut h = elf64(&[(0, 10)]);
        h[0x36] = 40;
        assert!(matches!(
            check_bytes(&h, 1 << 20),
            Err(Unmappable::EntrySize { got: 40, .. })
        ));
        for short in 0..64 {
            let _ = check_bytes(&h[..short], short as u64);
        }
    }

    #[test]
    fn what_is_not_elf_is_left_to_dlopen() {
        assert_eq!(check_bytes(b"#!/bin/sh\n", 10), Ok(()));
        assert_eq!(check_bytes(b"", 0), Ok(()));
        let mut none = elf64(&[]);
        none[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(check_bytes(&none, 64), Ok(()));
        assert_eq!(check(Path::new("/dev/null")), Ok(()));
        assert_eq!(check(Path::new("/nonexistent/gpuimg/libx.so")), Ok(()));
    }
}
