//! Edits of a zip's directory for the targets that read wheels (`wheel`, `pypi`), at the sizes
//! byte edits never reach: end records claiming millions of entries or gigabytes of directory
//! (written as zip64 records), an entry repeated or renamed to another's name (local header
//! too); and a directory of millions of real entries, for a seed. An input that is no zip this
//! module can lay out is left as it is.

use arbitrary::{Arbitrary, Result, Unstructured};

use crate::common::zip64_end;

/// Entry counts an end record may claim: past the cap (500,000), past 16 and 32 bits.
const COUNTS: &[u64] = &[
    0,
    1,
    0xffff,
    0x1_0000,
    500_000,
    500_001,
    2_000_000,
    0xffff_ffff,
    u64::MAX / 46,
    u64::MAX,
];

/// Directory sizes an end record may claim: past the cap (64 MiB), 3 GiB, past 32 bits.
const SIZES: &[u64] = &[
    0,
    45,
    46,
    64 << 20,
    (64 << 20) + 1,
    3 << 30,
    0xffff_ffff,
    u64::MAX,
];

/// One edit of a zip's directory.
#[derive(Debug, Arbitrary)]
pub enum ZipOp {
    /// The end records claim this many entries (one of [`COUNTS`], or `exact`).
    ClaimEntries { which: usize, exact: Option<u64> },
    /// The end records claim a directory of this many bytes.
    ClaimSize { which: usize, exact: Option<u64> },
    /// Entry `entry`'s header appears again at the end of the directory.
    Repeat { entry: usize },
    /// Entry `entry` takes entry `like`'s name, in both headers (when the names are as long).
    Rename { entry: usize, like: usize },
    /// Entry `entry`'s name loses or gains its trailing `/` (a file and a directory of one name).
    Slash { entry: usize },
}

/// Where a zip's directory and its entries' headers lie.
struct Layout {
    cd_offset: usize,
    /// (start in the file, length) of each central header.
    entries: Vec<(usize, usize)>,
}

fn u16_at(b: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as usize)
}

fn u32_at(b: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
}

fn u64_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)).ok()
}

/// The layout of `z` when its end record (without a comment) ends it, with the zip64 end
/// record when a locator precedes it.
fn layout(z: &[u8]) -> Option<Layout> {
    let end = z.len().checked_sub(22)?;
    if z[end..end + 4] != *b"PK\x05\x06" {
        return None;
    }
    let (mut cd_offset, mut cd_size, mut records) =
        (u32_at(z, end + 16)?, u32_at(z, end + 12)?, end);
    if let Some(loc) = end
        .checked_sub(20)
        .filter(|&l| z[l..l + 4] == *b"PK\x06\x07")
    {
        let rec = u64_at(z, loc + 8)?;
        if z.get(rec..rec.checked_add(4)?) == Some(&b"PK\x06\x06"[..]) {
            (cd_size, cd_offset, records) = (u64_at(z, rec + 40)?, u64_at(z, rec + 48)?, rec);
        }
    }
    let cd_end = cd_offset.checked_add(cd_size).filter(|e| *e <= records)?;
    let mut entries = Vec::new();
    let mut at = cd_offset;
    while at + 46 <= cd_end && z[at..at + 4] == *b"PK\x01\x02" {
        let len = 46 + u16_at(z, at + 28)? + u16_at(z, at + 30)? + u16_at(z, at + 32)?;
        if at + len > cd_end {
            break;
        }
        entries.push((at, len));
        at += len;
    }
    Some(Layout { cd_offset, entries })
}

/// `z`'s bytes before the directory, then `cd`, then zip64 end records claiming `count` entries
/// in `size` bytes (and a saturated end record).
fn rebuild(z: &[u8], l: &Layout, cd: &[u8], count: u64, size: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(l.cd_offset + cd.len() + 98);
    out.extend_from_slice(&z[..l.cd_offset]);
    out.extend_from_slice(cd);
    zip64_end::push_zip64_end(&mut out, count, size, l.cd_offset as u64);
    out
}

/// `z` with `op` applied (unchanged when `z` is no zip laid out as [`layout`] reads).
pub fn apply(op: &ZipOp, z: &[u8]) -> Vec<u8> {
    let Some(l) = layout(z) else {
        return z.to_vec();
    };
    let mut cd: Vec<u8> = l
        .entries
        .iter()
        .flat_map(|&(at, len)| z[at..at + len].to_vec())
        .collect();
    let (mut count, mut size) = (l.entries.len() as u64, cd.len() as u64);
    let n = l.entries.len().max(1);
    let name_of = |i: usize| {
        let (at, _) = *l.entries.get(i % n)?;
        Some((at, u16_at(z, at + 28)?))
    };
    let mut local = z.to_vec();
    match *op {
        ZipOp::ClaimEntries { which, exact } => {
            count = exact.unwrap_or(COUNTS[which % COUNTS.len()])
        }
        ZipOp::ClaimSize { which, exact } => size = exact.unwrap_or(SIZES[which % SIZES.len()]),
        ZipOp::Repeat { entry } => {
            if let Some(&(at, len)) = l.entries.get(entry % n) {
                cd.extend_from_slice(&z[at..at + len]);
                count += 1;
                size += len as u64;
            }
        }
        ZipOp::Rename { entry, like } => {
            if let (Some((at, len)), Some((from, len2))) = (name_of(entry), name_of(like)) {
                if len == len2 {
                    let name = z[from + 46..from + 46 + len].to_vec();
                    let in_cd = at - l.cd_offset + 46;
                    cd[in_cd..in_cd + len].copy_from_slice(&name);
                    // The local header too, so the entry is not refused for the difference.
                    if let Some(h) = u32_at(z, at + 42) {
                        if local.get(h + 30..h + 30 + len).is_some()
                            && u16_at(z, h + 26) == Some(len)
                        {
                            local[h + 30..h + 30 + len].copy_from_slice(&name);
                        }
                    }
                }
            }
        }
        ZipOp::Slash { entry } => {
            if let Some((at, len)) = name_of(entry) {
                let in_cd = at - l.cd_offset + 46;
                if len > 1 && cd[in_cd + len - 1] == b'/' {
                    cd[in_cd + len - 1] = b'_';
                } else if len > 0 {
                    cd[in_cd + len - 1] = b'/';
                }
            }
        }
    }
    rebuild(&local, &l, &cd, count, size)
}

/// `z` with `n` more entries after its directory's own (empty stored files named by their
/// number, each pointing at the first local header), counted by zip64 end records.
pub fn with_more_entries(z: &[u8], n: u32) -> Vec<u8> {
    let Some(l) = layout(z) else {
        return z.to_vec();
    };
    let own: Vec<u8> = l
        .entries
        .iter()
        .flat_map(|&(at, len)| z[at..at + len].to_vec())
        .collect();
    let mut cd = Vec::with_capacity(own.len() + n as usize * 53);
    cd.extend_from_slice(&own);
    for i in 0..n {
        cd.extend_from_slice(b"PK\x01\x02\x14\x00\x14\x00");
        cd.extend_from_slice(&[0u8; 20]);
        cd.extend_from_slice(&7u16.to_le_bytes());
        cd.extend_from_slice(&[0u8; 16]);
        cd.extend_from_slice(format!("{i:07}").as_bytes());
    }
    let count = l.entries.len() as u64 + u64::from(n);
    let size = cd.len() as u64;
    rebuild(z, &l, &cd, count, size)
}

/// An edit decoded from the fuzz bytes, applied to `z`.
pub fn edit(u: &mut Unstructured<'_>, z: &[u8]) -> Result<Vec<u8>> {
    let op: ZipOp = u.arbitrary()?;
    Ok(apply(&op, z))
}

/// The names of `z`'s central directory as laid out (none when it is not), for properties.
pub fn names(z: &[u8]) -> Vec<Vec<u8>> {
    let Some(l) = layout(z) else {
        return Vec::new();
    };
    l.entries
        .iter()
        .filter_map(|&(at, _)| Some(z.get(at + 46..at + 46 + u16_at(z, at + 28)?)?.to_vec()))
        .collect()
}
