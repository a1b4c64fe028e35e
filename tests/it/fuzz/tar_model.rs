//! Structure-aware tar mutations: a tarball as a list of (512-byte header, data) entries whose
//! fields (name, link, type, size, mode, owners) are rewritten with hostile values, with PAX and
//! GNU long-name records, then re-serialised with valid checksums, so that mutations reach the
//! code behind the header checks. Also the compressors, and a zstd decompression bomb.

use arbitrary::{Arbitrary, Result, Unstructured};

use super::mutate::INTERESTING;

#[derive(Debug, Clone)]
pub struct Entry {
    pub header: [u8; 512],
    pub data: Vec<u8>,
}

fn octal(field: &[u8]) -> u64 {
    let s: String = field
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    u64::from_str_radix(s.trim(), 8).unwrap_or(0)
}

/// The entries of a well-formed tarball (stops at the first zero block or at the end).
pub fn parse(tar: &[u8]) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 512 <= tar.len() {
        let mut header = [0u8; 512];
        header.copy_from_slice(&tar[at..at + 512]);
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let size = usize::try_from(octal(&header[124..136])).unwrap_or(0);
        let start = at + 512;
        let end = (start + size).min(tar.len());
        out.push(Entry {
            header,
            data: tar[start..end].to_vec(),
        });
        at = start + size.div_ceil(512) * 512;
    }
    out
}

/// Serialise entries, padding data to blocks; `end_blocks` zero blocks close the archive.
pub fn build(entries: &[Entry], end_blocks: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        out.extend_from_slice(&e.header);
        out.extend_from_slice(&e.data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 512 * end_blocks, 0);
    out
}

/// Write `v` into a numeric header field: octal when it fits, else GNU base-256.
pub fn set_number(field: &mut [u8], v: u64) {
    let digits = field.len() - 1;
    let text = format!("{v:0digits$o}");
    field.fill(0);
    if text.len() <= digits {
        field[..digits].copy_from_slice(text.as_bytes());
    } else {
        field[0] = 0x80;
        let be = v.to_be_bytes();
        let n = (field.len() - 1).min(8);
        let l = field.len();
        field[l - n..].copy_from_slice(&be[8 - n..]);
    }
}

fn set_bytes(field: &mut [u8], v: &[u8]) {
    field.fill(0);
    let n = v.len().min(field.len());
    field[..n].copy_from_slice(&v[..n]);
}

pub fn fix_checksum(h: &mut [u8; 512]) {
    h[148..156].fill(b' ');
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
}

/// A fresh ustar header.
pub fn header(kind: u8, path: &[u8], link: &[u8], size: u64, mode: u32) -> [u8; 512] {
    let mut h = [0u8; 512];
    set_bytes(&mut h[0..100], path);
    set_number(&mut h[100..108], u64::from(mode));
    set_number(&mut h[108..116], 0);
    set_number(&mut h[116..124], 0);
    set_number(&mut h[124..136], size);
    set_number(&mut h[136..148], 0);
    h[156] = kind;
    set_bytes(&mut h[157..257], link);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    fix_checksum(&mut h);
    h
}

/// Paths that probe the rules about where an entry may point (for parsers that only index:
/// some name host paths).
pub const PATHS: &[&[u8]] = &[
    b"",
    b".",
    b"./",
    b"..",
    b"../",
    b"../x",
    b"../../../../outside/x",
    b"./../outside",
    b"a/../../x",
    b"a/./b",
    b"a//b",
    b"/",
    b"/etc/passwd",
    b"/../../x",
    b"etc",
    b"etc/",
    b"etc/passwd",
    b"usr/bin/sh",
    b"usr/lib",
    b"lib",
    b"bin",
    b"var/lib/dpkg/info",
    b"./usr/share/doc/x",
    b"x\0y",
    b"\xff\xfe",
    b"a\\..\\b",
    b" ",
    b"a\nb",
];

/// A path for a header field.
#[derive(Debug, Arbitrary)]
pub enum PathPick {
    Dict(usize),
    /// The path of another entry (hard links and overwrites need real names).
    Entry(usize),
    Raw(Vec<u8>),
    /// `count` components of `len` bytes (long names and long components).
    Long {
        count: u8,
        len: u8,
    },
}

impl PathPick {
    pub fn bytes(&self, entries: &[Entry], paths: &[Vec<u8>]) -> Vec<u8> {
        match self {
            PathPick::Dict(_) if paths.is_empty() => Vec::new(),
            PathPick::Dict(i) => paths[i % paths.len()].clone(),
            PathPick::Entry(i) if !entries.is_empty() => {
                let h = &entries[i % entries.len()].header;
                h[..100].iter().take_while(|&&b| b != 0).copied().collect()
            }
            PathPick::Entry(_) => b"x".to_vec(),
            PathPick::Raw(b) => b.clone(),
            PathPick::Long { count, len } => {
                let comp = vec![b'a'; usize::from(*len) + 200];
                vec![comp; usize::from(*count % 24) + 1].join(&b'/')
            }
        }
    }
}

#[derive(Debug, Arbitrary)]
pub enum TarOp {
    Name {
        entry: usize,
        path: PathPick,
    },
    Link {
        entry: usize,
        path: PathPick,
    },
    Type {
        entry: usize,
        flag: u8,
    },
    /// The size field lies about the data that follows.
    Size {
        entry: usize,
        which: usize,
    },
    Mode {
        entry: usize,
        mode: u32,
    },
    Owner {
        entry: usize,
        which: usize,
        gid: bool,
    },
    Data {
        entry: usize,
        bytes: Vec<u8>,
    },
    /// A PAX record (`path`, `linkpath`, `size`, ...) for the entry at `before`.
    Pax {
        before: usize,
        key: u8,
        value: PathPick,
    },
    /// A GNU `././@LongLink` record for the next entry's name or link.
    GnuLong {
        before: usize,
        link: bool,
        path: PathPick,
    },
    Duplicate {
        entry: usize,
    },
    Remove {
        entry: usize,
    },
    Swap {
        a: usize,
        b: usize,
    },
    New {
        flag: u8,
        path: PathPick,
        link: PathPick,
        data: Vec<u8>,
    },
    /// Raw bytes anywhere in a header (the checksum is fixed afterwards).
    Field {
        entry: usize,
        offset: u16,
        bytes: [u8; 4],
    },
}

/// Type flags: files, links, directories, devices, FIFOs, PAX and GNU records, and junk.
const FLAGS: &[u8] = b"0123456\0xgLKSVM7A";

const PAX_KEYS: &[&str] = &[
    "path",
    "linkpath",
    "size",
    "uid",
    "gid",
    "mode",
    "mtime",
    "uname",
    "SCHILY.xattr.security.capability",
    "GNU.sparse.size",
    "",
];

fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    // "<len> <key>=<value>\n", where <len> counts itself.
    let body = key.len() + value.len() + 3;
    let mut len = body + 1;
    while body + len.to_string().len() != len {
        len = body + len.to_string().len();
    }
    let mut r = format!("{len} {key}=").into_bytes();
    r.extend_from_slice(value);
    r.push(b'\n');
    r
}

impl TarOp {
    /// Apply the op; `paths` is the dictionary `PathPick::Dict` chooses from.
    pub fn apply(&self, es: &mut Vec<Entry>, paths: &[Vec<u8>]) {
        let n = es.len();
        let pick = |i: usize| if n == 0 { None } else { Some(i % n) };
        match self {
            TarOp::Name { entry, path } => {
                let p = path.bytes(es, paths);
                if let Some(i) = pick(*entry) {
                    set_bytes(&mut es[i].header[0..100], &p);
                    if p.len() > 100 {
                        set_bytes(&mut es[i].header[345..500], &p[100..]);
                    }
                }
            }
            TarOp::Link { entry, path } => {
                let p = path.bytes(es, paths);
                if let Some(i) = pick(*entry) {
                    set_bytes(&mut es[i].header[157..257], &p);
                }
            }
            TarOp::Type { entry, flag } => {
                if let Some(i) = pick(*entry) {
                    es[i].header[156] = FLAGS[usize::from(*flag) % FLAGS.len()];
                }
            }
            TarOp::Size { entry, which } => {
                if let Some(i) = pick(*entry) {
                    let v = INTERESTING[which % INTERESTING.len()];
                    set_number(&mut es[i].header[124..136], v);
                }
            }
            TarOp::Mode { entry, mode } => {
                if let Some(i) = pick(*entry) {
                    set_number(&mut es[i].header[100..108], u64::from(*mode));
                }
            }
            TarOp::Owner { entry, which, gid } => {
                if let Some(i) = pick(*entry) {
                    let v = INTERESTING[which % INTERESTING.len()];
                    let f = if *gid { 116..124 } else { 108..116 };
                    set_number(&mut es[i].header[f], v);
                }
            }
            TarOp::Data { entry, bytes } => {
                if let Some(i) = pick(*entry) {
                    set_number(&mut es[i].header[124..136], bytes.len() as u64);
                    es[i].data = bytes.clone();
                }
            }
            TarOp::Pax { before, key, value } => {
                let v = value.bytes(es, paths);
                let key = PAX_KEYS[usize::from(*key) % PAX_KEYS.len()];
                let data = pax_record(key, &v);
                let h = header(b'x', b"PaxHeaders/x", b"", data.len() as u64, 0o644);
                es.insert(before % (n + 1), Entry { header: h, data });
            }
            TarOp::GnuLong { before, link, path } => {
                let mut data = path.bytes(es, paths);
                data.push(0);
                let flag = if *link { b'K' } else { b'L' };
                let mut h = header(flag, b"././@LongLink", b"", data.len() as u64, 0o644);
                h[257..265].copy_from_slice(b"ustar  \0");
                fix_checksum(&mut h);
                es.insert(before % (n + 1), Entry { header: h, data });
            }
            TarOp::Duplicate { entry } => {
                if let Some(i) = pick(*entry) {
                    let e = es[i].clone();
                    es.insert(i, e);
                }
            }
            TarOp::Remove { entry } => {
                if let Some(i) = pick(*entry) {
                    es.remove(i);
                }
            }
            TarOp::Swap { a, b } => {
                if let (Some(a), Some(b)) = (pick(*a), pick(*b)) {
                    es.swap(a, b);
                }
            }
            TarOp::New {
                flag,
                path,
                link,
                data,
            } => {
                let flag = FLAGS[usize::from(*flag) % FLAGS.len()];
                let data = if flag == b'0' {
                    data.clone()
                } else {
                    Vec::new()
                };
                let h = header(
                    flag,
                    &path.bytes(es, paths),
                    &link.bytes(es, paths),
                    data.len() as u64,
                    0o755,
                );
                es.push(Entry { header: h, data });
            }
            TarOp::Field {
                entry,
                offset,
                bytes,
            } => {
                if let Some(i) = pick(*entry) {
                    let o = usize::from(*offset) % (512 - 4);
                    es[i].header[o..o + 4].copy_from_slice(bytes);
                }
            }
        }
    }
}

/// Mutate a tarball: 1 to `max` entry-level ops, checksums fixed (mostly), then a chosen end.
pub fn mutate(
    u: &mut Unstructured<'_>,
    tar: &[u8],
    max: usize,
    paths: &[Vec<u8>],
) -> Result<Vec<u8>> {
    let mut es = parse(tar);
    let n = u.int_in_range(1..=max)?;
    for _ in 0..n {
        let op: TarOp = u.arbitrary()?;
        op.apply(&mut es, paths);
    }
    let keep_bad = u.ratio(1, 16)?;
    if !keep_bad {
        for e in &mut es {
            fix_checksum(&mut e.header);
        }
    }
    let end = [2, 2, 2, 1, 0][u.choose_index(5)?];
    Ok(build(&es, end))
}

#[derive(Debug, Clone, Copy, Arbitrary, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    Xz,
}

impl Compression {
    pub fn apply(self, data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        match self {
            Compression::None => data.to_vec(),
            Compression::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                let _ = e.write_all(data);
                e.finish().unwrap_or_default()
            }
            Compression::Zstd => zstd::encode_all(data, 1).unwrap_or_default(),
            Compression::Xz => {
                let mut e = liblzma::write::XzEncoder::new(Vec::new(), 0);
                let _ = e.write_all(data);
                e.finish().unwrap_or_default()
            }
        }
    }

    /// The member-name suffix a .deb uses for it.
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Zstd => ".zst",
            Compression::Xz => ".xz",
        }
    }
}

/// A zstd frame that decompresses to `prefix` followed by zeros, `total` bytes in all, built
/// from raw and RLE blocks (4 bytes of input per 128 KiB of output).
pub fn zstd_bomb(prefix: &[u8], total: u64) -> Vec<u8> {
    const BLOCK: u64 = 128 << 10;
    // Magic; frame header descriptor 0 (no content size, a window descriptor follows);
    // window 2^17 (exponent 7).
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3];
    let mut left = total;
    let block_header = |size: u64, kind: u64, last: bool| {
        let v = u64::from(last) | (kind << 1) | (size << 3);
        [v as u8, (v >> 8) as u8, (v >> 16) as u8]
    };
    for chunk in prefix.chunks(BLOCK as usize) {
        let size = chunk.len() as u64;
        left = left.saturating_sub(size);
        out.extend_from_slice(&block_header(size, 0, left == 0));
        out.extend_from_slice(chunk);
    }
    while left > 0 {
        let size = left.min(BLOCK);
        left -= size;
        out.extend_from_slice(&block_header(size, 1, left == 0));
        out.push(0);
    }
    out
}

#[test]
fn the_zstd_bomb_decodes_to_what_it_claims() {
    use std::io::Read;
    let bomb = zstd_bomb(b"head", 1 << 20);
    let mut d = zstd::Decoder::new(&bomb[..]).unwrap();
    let mut out = Vec::new();
    d.read_to_end(&mut out).unwrap();
    assert_eq!(out.len(), 1 << 20);
    assert_eq!(&out[..4], b"head");
    assert!(out[4..].iter().all(|&b| b == 0));
    assert!(bomb.len() < 64, "{} bytes", bomb.len());
}

#[test]
fn a_parsed_tarball_rebuilds_byte_for_byte() {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_ustar();
    h.set_size(3);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, "a/b", &b"abc"[..]).unwrap();
    let t = b.into_inner().unwrap();
    let es = parse(&t);
    assert_eq!(es.len(), 1);
    assert_eq!(es[0].data, b"abc");
    assert_eq!(build(&es, 2), t);
}
