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
