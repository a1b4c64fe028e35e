//! Test support: a minimal ELF64 little-endian relocatable file made of named sections (and an
//! optional symbol table), for the unit tests of the readers that real modules cannot reach
//! (the extended version table of kernels newer than Debian's). Compiled only for tests.

/// `(name, sh_type, bytes)` of each section after the null one; the section-name table is
/// added last. A section named `.symtab` gets `sh_link` to the one named `.strtab` and 24-byte
/// entries.
pub(crate) fn object(sections: &[(&str, u32, Vec<u8>)]) -> Vec<u8> {
    let mut names = vec![0u8];
    let mut name_at = Vec::new();
    for (n, _, _) in sections.iter().chain([(".shstrtab", 3, Vec::new())].iter()) {
        name_at.push(names.len() as u32);
        names.extend_from_slice(n.as_bytes());
        names.push(0);
    }
    let mut b = vec![0u8; 64];
    b[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
    b[16..18].copy_from_slice(&1u16.to_le_bytes());
    b[18..20].copy_from_slice(&62u16.to_le_bytes());
    let mut placed = Vec::new();
    for (_, _, bytes) in sections {
        placed.push((b.len() as u64, bytes.len() as u64));
        b.extend_from_slice(bytes);
    }
    placed.push((b.len() as u64, names.len() as u64));
    b.extend_from_slice(&names);
    let shoff = b.len() as u64;
    let count = sections.len() + 2;
    b[40..48].copy_from_slice(&shoff.to_le_bytes());
    b[58..60].copy_from_slice(&64u16.to_le_bytes());
    b[60..62].copy_from_slice(&(count as u16).to_le_bytes());
    b[62..64].copy_from_slice(&((count - 1) as u16).to_le_bytes());
    b.extend_from_slice(&[0u8; 64]);
    let strtab = sections.iter().position(|(n, _, _)| *n == ".strtab");
    let kinds = sections
        .iter()
        .map(|(n, k, _)| (*n, *k))
        .chain([(".shstrtab", 3)]);
    for (i, (name, kind)) in kinds.enumerate() {
        let mut h = [0u8; 64];
        h[0..4].copy_from_slice(&name_at[i].to_le_bytes());
        h[4..8].copy_from_slice(&kind.to_le_bytes());
        h[24..32].copy_from_slice(&placed[i].0.to_le_bytes());
        h[32..40].copy_from_slice(&placed[i].1.to_le_bytes());
        if name == ".symtab" {
            let link = strtab.map_or(0, |s| s + 1) as u32;
            h[40..44].copy_from_slice(&link.to_le_bytes());
            h[56..64].copy_from_slice(&24u64.to_le_bytes());
        }
        b.extend_from_slice(&h);
    }
    b
}

/// A symbol table entry: name offset, binding, section index, value.
pub(crate) fn symbol(name_at: u32, bind: u8, section: u16, value: u64) -> Vec<u8> {
    let mut e = vec![0u8; 24];
    e[0..4].copy_from_slice(&name_at.to_le_bytes());
    e[4] = bind << 4;
    e[6..8].copy_from_slice(&section.to_le_bytes());
    e[8..16].copy_from_slice(&value.to_le_bytes());
    e
}
