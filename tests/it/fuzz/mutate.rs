//! Mutations shared by the targets, decoded from fuzz bytes with `arbitrary`: byte edits,
//! line edits, tokens from a per-target dictionary, numbers on the edges parsers get wrong,
//! and splices between seeds.

use arbitrary::{Arbitrary, Result, Unstructured};

/// Integers where bounds checks, casts and size arithmetic go wrong.
pub const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    7,
    8,
    100,
    255,
    256,
    511,
    512,
    4095,
    4096,
    0x7fff,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX - 1,
    u64::MAX,
];

/// One edit of a byte string. Positions and indexes wrap around what they index.
#[derive(Debug, Arbitrary)]
pub enum ByteOp {
    Flip {
        at: usize,
        bit: u8,
    },
    Set {
        at: usize,
        value: u8,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Remove {
        at: usize,
        len: u8,
    },
    Duplicate {
        from: usize,
        len: u8,
        at: usize,
    },
    /// Insert a dictionary token, replacing `replace` bytes.
    Token {
        at: usize,
        token: usize,
        replace: u8,
    },
    /// An interesting number in decimal (or negative), replacing `replace` bytes.
    Number {
        at: usize,
        which: usize,
        negative: bool,
        replace: u8,
    },
    /// An interesting number as a little- or big-endian integer of 2, 4 or 8 bytes, in place.
    Word {
        at: usize,
        width: u8,
        which: usize,
        big_endian: bool,
    },
    /// Bytes from another seed.
    Splice {
        seed: usize,
        from: usize,
        len: u16,
        at: usize,
    },
    Truncate {
        at: usize,
    },
    DeleteLine {
        line: usize,
    },
    DuplicateLine {
        line: usize,
    },
    SwapLines {
        a: usize,
        b: usize,
    },
    IndentLine {
        line: usize,
        spaces: u8,
    },
}

fn wrap(at: usize, len: usize) -> usize {
    if len == 0 {
        0
    } else {
        at % (len + 1)
    }
}

/// Byte ranges of the lines of `data` (each with its `\n`).
fn lines(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &b) in data.iter().enumerate() {
        if b == b'\n' {
            out.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < data.len() {
        out.push((start, data.len()));
    }
    out
}

impl ByteOp {
    pub fn apply(&self, data: &mut Vec<u8>, dict: &[&[u8]], seeds: &[Vec<u8>]) {
        let len = data.len();
        match *self {
            ByteOp::Flip { at, bit } => {
                if len > 0 {
                    data[at % len] ^= 1 << (bit % 8);
                }
            }
            ByteOp::Set { at, value } => {
                if len > 0 {
                    data[at % len] = value;
                }
            }
            ByteOp::Insert { at, ref bytes } => {
                let at = wrap(at, len);
                data.splice(at..at, bytes.iter().copied());
            }
            ByteOp::Remove { at, len: n } => {
                let at = wrap(at, len);
                let end = (at + usize::from(n) + 1).min(len);
                data.drain(at..end);
            }
            ByteOp::Duplicate { from, len: n, at } => {
                let from = wrap(from, len);
                let end = (from + usize::from(n) + 1).min(len);
                let chunk = data[from..end].to_vec();
                let at = wrap(at, len);
                data.splice(at..at, chunk);
            }
            ByteOp::Token { at, token, replace } => {
                if dict.is_empty() {
                    return;
                }
                let t = dict[token % dict.len()];
                let at = wrap(at, len);
                let end = (at + usize::from(replace % 16)).min(len);
                data.splice(at..end, t.iter().copied());
            }
            ByteOp::Number {
                at,
                which,
                negative,
                replace,
            } => {
                let n = INTERESTING[which % INTERESTING.len()];
                let text = if negative {
                    format!("-{n}")
                } else {
                    n.to_string()
                };
                let at = wrap(at, len);
                let end = (at + usize::from(replace % 24)).min(len);
                data.splice(at..end, text.bytes());
            }
            ByteOp::Word {
                at,
                width,
                which,
                big_endian,
            } => {
                let n = INTERESTING[which % INTERESTING.len()];
                let w = [2usize, 4, 8][usize::from(width) % 3];
                if len < w {
                    return;
                }
                let at = at % (len - w + 1);
                let bytes = if big_endian {
                    n.to_be_bytes()[8 - w..].to_vec()
                } else {
                    n.to_le_bytes()[..w].to_vec()
                };
                data[at..at + w].copy_from_slice(&bytes);
            }
            ByteOp::Splice {
                seed,
                from,
                len: n,
                at,
            } => {
                if seeds.is_empty() {
                    return;
                }
                let s = &seeds[seed % seeds.len()];
                let from = wrap(from, s.len());
                let end = (from + usize::from(n)).min(s.len());
                let at = wrap(at, len);
                data.splice(at..at, s[from..end].iter().copied());
            }
            ByteOp::Truncate { at } => data.truncate(wrap(at, len)),
            ByteOp::DeleteLine { line } => {
                let ls = lines(data);
                if !ls.is_empty() {
                    let (a, b) = ls[line % ls.len()];
                    data.drain(a..b);
                }
            }
            ByteOp::DuplicateLine { line } => {
                let ls = lines(data);
                if !ls.is_empty() {
                    let (a, b) = ls[line % ls.len()];
                    let l = data[a..b].to_vec();
                    data.splice(a..a, l);
                }
            }
            ByteOp::SwapLines { a, b } => {
                let ls = lines(data);
                if ls.len() > 1 {
                    let (x, y) = (ls[a % ls.len()], ls[b % ls.len()]);
                    let (x, y) = if x.0 <= y.0 { (x, y) } else { (y, x) };
                    if x != y {
                        let mut out = data[..x.0].to_vec();
                        out.extend_from_slice(&data[y.0..y.1]);
                        out.extend_from_slice(&data[x.1..y.0]);
                        out.extend_from_slice(&data[x.0..x.1]);
                        out.extend_from_slice(&data[y.1..]);
                        *data = out;
                    }
                }
            }
            ByteOp::IndentLine { line, spaces } => {
                let ls = lines(data);
                if !ls.is_empty() {
                    let (a, _) = ls[line % ls.len()];
                    let pad = vec![b' '; usize::from(spaces % 9)];
                    data.splice(a..a, pad);
                }
            }
        }
    }
}

/// Apply 1 to `max` byte ops to `data`, mostly few (small edits get past a parser's first
/// checks more often).
pub fn havoc(
    u: &mut Unstructured<'_>,
    data: &mut Vec<u8>,
    max: usize,
    dict: &[&[u8]],
    seeds: &[Vec<u8>],
) -> Result<()> {
    let n = [1, 1, 1, 2, 2, 3, 4, 8, max][u.choose_index(9)?].clamp(1, max.max(1));
    for _ in 0..n {
        let op: ByteOp = u.arbitrary()?;
        op.apply(data, dict, seeds);
    }
    Ok(())
}

/// A seed, picked by the fuzz bytes.
pub fn pick_seed<'a>(u: &mut Unstructured<'_>, seeds: &'a [Vec<u8>]) -> Result<&'a [u8]> {
    Ok(&seeds[u.choose_index(seeds.len())?])
}

/// The usual text target's mutation: a seed, then byte, line and dictionary edits.
pub fn text(u: &mut Unstructured<'_>, seeds: &[Vec<u8>], dict: &[&[u8]]) -> Result<Vec<u8>> {
    let mut data = pick_seed(u, seeds)?.to_vec();
    havoc(u, &mut data, 12, dict, seeds)?;
    Ok(data)
}

/// Split a multi-part input (parts joined by [`SEP`]).
pub fn parts(input: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = input;
    while let Some(i) = rest.windows(SEP.len()).position(|w| w == SEP) {
        out.push(&rest[..i]);
        rest = &rest[i + SEP.len()..];
    }
    out.push(rest);
    out
}

/// Joins the parts of a multi-part input (e.g. a key, a release and its signature).
pub const SEP: &[u8] = b"\n--gpuimg-fuzz-part--\n";

pub fn join(parts: &[&[u8]]) -> Vec<u8> {
    parts.join(SEP)
}
