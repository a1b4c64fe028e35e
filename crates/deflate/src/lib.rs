//! Walk a raw deflate stream's blocks to find where its final block starts and where the stream
//! ends, so that a complete stream can be made non-final and joined to the next one: gpuimg's
//! gzip layer writer joins its own blocks this way, and copies a wheel's deflated member into
//! a layer without compressing its bytes again. Decodes symbols only to find block ends: it
//! never produces output, reads its input through a bounded window, and a malformed stream is
//! an error, never a panic or a read out of bounds. A leaf: depends on no other crate.
//!
//! The walk is compiled here once, for `&[u8]` and `&mut dyn Read` (the public entries are thin
//! and not generic over the reader): a debug build optimises this crate (the workspace's
//! `[profile.dev.package.gpuimg-deflate]`), and a generic walk would be compiled, unoptimised,
//! in every caller instead.

use std::fmt;
use std::io::{self, Read, Write};

/// Bit positions in a raw deflate stream (bit `n` is bit `n % 8` of byte `n / 8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ends {
    /// The first bit of the final block's header: its BFINAL bit.
    pub final_block: u64,
    /// The bit after the final block's end-of-block code.
    pub end: u64,
    /// How many bytes the stream inflates to (what its literals, matches and stored blocks
    /// add up to): a stream the walk reads otherwise than the inflater that wrote the file
    /// shows here.
    pub inflated: u64,
}

impl Ends {
    /// The stream's length in whole bytes.
    pub fn bytes(&self) -> u64 {
        self.end.div_ceil(8)
    }
}

/// Why a stream could not be walked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(&'static str);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed deflate stream: {}", self.0)
    }
}

impl std::error::Error for Malformed {}

/// Make `stream`, one complete raw deflate stream, non-final, and end it on a byte boundary with
/// an empty stored block (as zlib's sync flush does), so that another stream can follow it.
pub fn make_non_final(stream: &mut Vec<u8>) -> Result<(), Malformed> {
    let ends = find_ends(stream)?;
    if ends.bytes() != stream.len() as u64 {
        return Err(Malformed("bytes after the final block"));
    }
    let whole = std::mem::take(stream);
    stream.reserve(whole.len() + 5);
    copy_non_final(whole.as_slice(), ends, stream)
        .map_err(|_| Malformed("the stream could not be copied"))?;
    Ok(())
}

/// Copy the stream that `src` starts with (`ends` from walking it) to `out`, made non-final and
/// ended by an empty stored block as [`make_non_final`] does, reading exactly
/// [`Ends::bytes`] bytes; returns the bytes written.
pub fn copy_non_final(mut src: impl Read, ends: Ends, out: &mut impl Write) -> io::Result<u64> {
    copy_non_final_dyn(&mut src, ends, out)
}

fn copy_non_final_dyn(src: &mut dyn Read, ends: Ends, out: &mut dyn Write) -> io::Result<u64> {
    let len = ends.bytes();
    let mut buf = vec![0u8; (1usize << 20).min(len as usize)];
    let mut at: u64 = 0;
    while at < len {
        let n = buf.len().min((len - at) as usize);
        let chunk = &mut buf[..n];
        src.read_exact(chunk)?;
        // The final block's BFINAL bit, cleared.
        let fb = ends.final_block / 8;
        if (at..at + n as u64).contains(&fb) {
            chunk[(fb - at) as usize] &= !(1 << (ends.final_block % 8));
        }
        // Bits past the end of the last block (padding) zeroed.
        if at + n as u64 == len && !ends.end.is_multiple_of(8) {
            chunk[n - 1] &= (1u8 << (ends.end % 8)) - 1;
        }
        out.write_all(chunk)?;
        at += n as u64;
    }
    // The empty stored block: BFINAL 0 and BTYPE 00 (three zero bits), zeros up to the byte
    // boundary, LEN 0 and NLEN 0xffff.
    let pad = (ends.end + 3).div_ceil(8) - len;
    out.write_all(&[0u8; 1][..pad as usize])?;
    out.write_all(&[0, 0, 0xff, 0xff])?;
    Ok(len + pad + 4)
}

/// Walk `data`, one complete raw deflate stream, block by block.
pub fn find_ends(data: &[u8]) -> Result<Ends, Malformed> {
    let mut r = Bits::new(data, data.len() as u64);
    walk(&mut r)
}

/// Walk the raw deflate stream that `src` yields (`len` bytes), block by block, reading it
/// through a window of at most [`WINDOW`] bytes.
pub fn find_ends_in(mut src: impl Read, len: u64) -> io::Result<Ends> {
    find_ends_dyn(&mut src, len)
}

fn find_ends_dyn(src: &mut dyn Read, len: u64) -> io::Result<Ends> {
    let mut r = Bits::new(src, len);
    let ends = walk(&mut r);
    if let Some(e) = r.error.take() {
        return Err(e);
    }
    ends.map_err(|m| io::Error::new(io::ErrorKind::InvalidData, m))
}

fn walk<R: Read>(r: &mut Bits<R>) -> Result<Ends, Malformed> {
    let mut lit = Table::new(Alphabet::LitLen);
    let mut dist = Table::new(Alphabet::Dist);
    let mut lens = Table::new(Alphabet::Lengths);
    loop {
        let start = r.pos();
        let last = r.take(1)? == 1;
        match r.take(2)? {
            0 => {
                r.take(r.have % 8)?;
                let len = r.take(16)?;
                if len != !r.take(16)? & 0xffff {
                    return Err(Malformed("stored block length check"));
                }
                r.skip_bytes(u64::from(len))?;
                r.out += u64::from(len);
            }
            1 => {
                lit.build(&FIXED_LIT)?;
                dist.build(&[5; 30])?;
                r.symbols(&lit, &dist)?;
            }
            2 => {
                dynamic_tables(r, &mut lens, &mut lit, &mut dist)?;
                r.symbols(&lit, &dist)?;
            }
            _ => return Err(Malformed("reserved block type")),
        }
        if last {
            return Ok(Ends {
                final_block: start,
                end: r.pos(),
                inflated: r.out,
            });
        }
    }
}

const LEN_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const LEN_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];
const LEN_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];
const FIXED_LIT: [u8; 288] = {
    let mut l = [8u8; 288];
    let mut i = 144;
    while i < 256 {
        l[i] = 9;
        i += 1;
    }
    while i < 280 {
        l[i] = 7;
        i += 1;
    }
    l
};

fn dynamic_tables<R: Read>(
    r: &mut Bits<R>,
    lens: &mut Table,
    lit: &mut Table,
    dist: &mut Table,
) -> Result<(), Malformed> {
    let hlit = r.take(5)? as usize + 257;
    let hdist = r.take(5)? as usize + 1;
    let hclen = r.take(4)? as usize + 4;
    if hlit > 286 || hdist > 30 {
        return Err(Malformed("too many codes"));
    }
    let mut cl = [0u8; 19];
    for &i in &LEN_ORDER[..hclen] {
        cl[i] = r.take(3)? as u8;
    }
    lens.build(&cl)?;
    let mut l = [0u8; 286 + 30];
    let mut n = 0;
    while n < hlit + hdist {
        let (value, repeat) = match r.symbol(lens)? {
            s @ 0..=15 => (s as u8, 1),
            16 => {
                let prev = *l[..n]
                    .last()
                    .ok_or(Malformed("repeat with no previous length"))?;
                (prev, 3 + r.take(2)? as usize)
            }
            17 => (0, 3 + r.take(3)? as usize),
            _ => (0, 11 + r.take(7)? as usize),
        };
        let to = n + repeat;
        if to > hlit + hdist {
            return Err(Malformed("code lengths overrun"));
        }
        l[n..to].fill(value);
        n = to;
    }
    lit.build(&l[..hlit])?;
    dist.build(&l[hlit..hlit + hdist])
}

/// What a code's symbols mean to the walk.
#[derive(Clone, Copy)]
enum Alphabet {
    /// Literal/length: literals, end of block, and lengths followed by extra bits.
    LitLen,
    /// Distances followed by extra bits.
    Dist,
    /// The code-length code of a dynamic block (its symbols' values are needed).
    Lengths,
}

const LITERAL: u32 = 1;
const MATCH: u32 = 2;
const END: u32 = 3;

/// A decoded symbol: `symbol << 16 | kind << 8 | bits`, where `bits` counts its code and the
/// extra bits that follow it (the walk skips both at once); 0 is no code. A length symbol has
/// its base length in place of the symbol, and its count of extra bits in `kind`'s high four
/// bits (the walk adds up what the stream inflates to).
type Entry = u32;

impl Alphabet {
    fn entry(self, sym: usize, code_len: u32) -> Entry {
        let (kind, extra) = match (self, sym) {
            (Alphabet::LitLen, 0..=255) => (LITERAL, 0),
            (Alphabet::LitLen, 256) => (END, 0),
            (Alphabet::LitLen, 257..=285) => {
                // A length keeps its base where others keep their symbol, and its extra bits.
                let extra = LEN_EXTRA[sym - 257];
                let base = u32::from(LEN_BASE[sym - 257]);
                let kind = MATCH | u32::from(extra) << 4;
                return base << 16 | kind << 8 | (code_len + u32::from(extra));
            }
            (Alphabet::Dist, 0..=29) => (MATCH, DIST_EXTRA[sym]),
            (Alphabet::Lengths, _) => (LITERAL, 0),
            _ => return 0,
        };
        (sym as u32) << 16 | kind << 8 | (code_len + u32::from(extra))
    }
}

/// A canonical Huffman code (deflate codes are at most 15 bits): codes up to `FAST` bits are
/// looked up directly on the next `FAST` bits; longer ones (rare by construction) are decoded
/// bit by bit from the counts per length.
struct Table {
    alphabet: Alphabet,
    fast: Vec<Entry>,
    count: [u16; 16],
    symbols: Vec<u16>,
}

const FAST: u32 = 11;

impl Table {
    fn new(alphabet: Alphabet) -> Self {
        Table {
            alphabet,
            fast: vec![0; 1 << FAST],
            count: [0; 16],
            symbols: Vec::new(),
        }
    }

    fn build(&mut self, lengths: &[u8]) -> Result<(), Malformed> {
        self.count = [0; 16];
        for &l in lengths {
            if l > 15 {
                return Err(Malformed("code longer than 15 bits"));
            }
            self.count[usize::from(l)] += 1;
        }
        self.count[0] = 0;
        let mut next = [0u32; 16];
        let mut offset = [0usize; 16];
        let mut code = 0;
        for b in 1..16 {
            code = (code + u32::from(self.count[b - 1])) << 1;
            next[b] = code;
            offset[b] = offset[b - 1] + usize::from(self.count[b - 1]);
        }
        self.fast.fill(0);
        self.symbols.clear();
        self.symbols.resize(lengths.len(), 0);
        for (sym, &l) in lengths.iter().enumerate() {
            let l = usize::from(l);
            if l == 0 {
                continue;
            }
            let c = next[l];
            next[l] += 1;
            if c >= 1 << l {
                return Err(Malformed("over-subscribed code"));
            }
            self.symbols[offset[l]] = sym as u16;
            offset[l] += 1;
            if l as u32 <= FAST {
                let entry = self.alphabet.entry(sym, l as u32);
                let mut i = (c.reverse_bits() >> (32 - l)) as usize;
                while i < self.fast.len() {
                    self.fast[i] = entry;
                    i += 1 << l;
                }
            }
        }
        Ok(())
    }

    /// The entry for the code at the start of `bits` (deflate's order: a code's first bit is
    /// the lowest).
    #[inline(always)]
    fn decode(&self, bits: u32) -> Result<Entry, Malformed> {
        match self.fast[(bits & ((1 << FAST) - 1)) as usize] {
            0 => self.decode_long(bits),
            e => Ok(e),
        }
    }

    #[cold]
    fn decode_long(&self, bits: u32) -> Result<Entry, Malformed> {
        let (mut code, mut first, mut index) = (0u32, 0u32, 0usize);
        for len in 1..16 {
            code |= (bits >> (len - 1)) & 1;
            let count = u32::from(self.count[len as usize]);
            if code < first + count {
                let sym = self.symbols[index + (code - first) as usize];
                return match self.alphabet.entry(usize::from(sym), len) {
                    0 => Err(Malformed("reserved symbol")),
                    e => Ok(e),
                };
            }
            index += count as usize;
            first = (first + count) << 1;
            code <<= 1;
        }
        Err(Malformed("no such code"))
    }
}

/// Bytes of the stream held at once.
pub const WINDOW: usize = 256 << 10;

/// A reader of deflate's bit order (each byte's lowest bit first), with up to 63 bits at hand,
/// over a window of the stream. Past the end of its input it reads zeros: every caller checks
/// the position against the end. A read error ends the input; it is kept in `error`.
struct Bits<R> {
    src: R,
    /// The stream's length in bytes.
    len: u64,
    /// Bytes read from `src` and still held: `win[0]` is byte `base` of the stream.
    win: Vec<u8>,
    base: u64,
    /// The next byte to load into `buf`, as an index into `win` (it may point past it after
    /// a stored block was skipped).
    next: usize,
    /// Bits loaded but not consumed, the next one lowest.
    buf: u64,
    /// How many bits of `buf` are loaded.
    have: u32,
    /// Whether `src` has nothing more (or failed).
    done: bool,
    /// Bytes the symbols walked so far inflate to.
    out: u64,
    error: Option<io::Error>,
}

impl<R: Read> Bits<R> {
    fn new(src: R, len: u64) -> Self {
        Bits {
            src,
            len,
            win: Vec::new(),
            base: 0,
            next: 0,
            buf: 0,
            have: 0,
            done: false,
            out: 0,
            error: None,
        }
    }

    /// The absolute position of the next byte to load.
    fn next_abs(&self) -> u64 {
        self.base + self.next as u64
    }

    /// The bit position of the next bit to consume.
    fn pos(&self) -> u64 {
        self.next_abs() * 8 - u64::from(self.have)
    }

    fn check(&self) -> Result<(), Malformed> {
        match self.pos() <= self.len * 8 {
            true => Ok(()),
            false => Err(Malformed("truncated")),
        }
    }

    /// Load whole bytes until at least 56 bits are at hand.
    #[inline(always)]
    fn refill(&mut self) {
        if !self.refill_fast() {
            self.refill_slow();
        }
    }

    #[inline(always)]
    fn refill_fast(&mut self) -> bool {
        if let Some(&[a, b, c, d, e, f, g, h]) = self.win.get(self.next..self.next + 8) {
            self.buf |= u64::from_le_bytes([a, b, c, d, e, f, g, h]) << self.have;
            self.next += ((63 - self.have) / 8) as usize;
            self.have |= 56;
            return true;
        }
        false
    }

    #[cold]
    fn refill_slow(&mut self) {
        self.slide();
        if self.refill_fast() {
            return;
        }
        while self.have <= 56 {
            let byte = self.win.get(self.next).copied().unwrap_or(0);
            self.buf |= u64::from(byte) << self.have;
            self.next += 1;
            self.have += 8;
        }
    }

    /// Drop what was consumed (keeping the 8 bytes before `next`, which `buf` may hold),
    /// skip what a stored block jumped over, and read up to a full window.
    fn slide(&mut self) {
        if self.done {
            return;
        }
        let drop = self.next.saturating_sub(8).min(self.win.len());
        self.win.drain(..drop);
        self.base += drop as u64;
        self.next -= drop;
        let mut scratch = [0u8; 4096];
        while self.next > self.win.len() && !self.done {
            // Bytes of a skipped stored block that were never read: read past them.
            let want = (self.next - self.win.len()).min(scratch.len());
            match self.src.read(&mut scratch[..want]) {
                Ok(0) => self.done = true,
                Ok(n) => {
                    self.base += n as u64;
                    self.next -= n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.fail(e),
            }
        }
        let cap = WINDOW.max(self.win.len() + 64);
        let mut at = self.win.len();
        self.win.resize(cap, 0);
        while at < cap && !self.done {
            match self.src.read(&mut self.win[at..]) {
                Ok(0) => self.done = true,
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.fail(e),
            }
        }
        self.win.truncate(at);
    }

    fn fail(&mut self, e: io::Error) {
        self.error = Some(e);
        self.done = true;
    }

    /// Drop `n` bits (at most the bits at hand).
    #[inline(always)]
    fn consume(&mut self, n: u32) {
        self.buf >>= n;
        self.have -= n;
    }

    /// The next `n` bits (at most 16) as a number, first bit lowest.
    fn take(&mut self, n: u32) -> Result<u32, Malformed> {
        if self.have < n {
            self.refill();
        }
        let v = (self.buf & ((1u64 << n) - 1)) as u32;
        self.consume(n);
        self.check()?;
        Ok(v)
    }

    /// Skip `n` whole bytes from a byte boundary.
    fn skip_bytes(&mut self, n: u64) -> Result<(), Malformed> {
        let to = self.pos() / 8 + n;
        // `slide` keeps the bytes `buf` was loaded from, so `to` is never before `base`.
        self.next = usize::try_from(to - self.base).map_err(|_| Malformed("truncated"))?;
        self.buf = 0;
        self.have = 0;
        self.check()
    }

    /// The next symbol of a code-length code.
    fn symbol(&mut self, t: &Table) -> Result<u32, Malformed> {
        self.refill();
        let e = t.decode(self.buf as u32)?;
        self.consume(e & 0xff);
        self.check()?;
        Ok(e >> 16)
    }

    /// Walk literal/length and distance codes, with their extra bits, up to the end of block.
    fn symbols(&mut self, lit: &Table, dist: &Table) -> Result<(), Malformed> {
        // A stream cut short reads zeros, which may decode as literals: stop soon after the end.
        let far = self.len + 16;
        loop {
            // 56 bits cover a length code with its extra bits (20) and a distance's (28).
            self.refill();
            let e = lit.decode(self.buf as u32)?;
            let bits = e & 0xff;
            match e >> 8 & 0xf {
                LITERAL => {
                    self.consume(bits);
                    self.out += 1;
                }
                MATCH => {
                    // A length: its base, then `extra` bits after its code (both in `e`).
                    let extra = e >> 12 & 0xf;
                    let v = (self.buf >> (bits - extra)) as u32 & ((1u32 << extra) - 1);
                    self.out += u64::from(e >> 16) + u64::from(v);
                    self.consume(bits);
                    let d = dist.decode(self.buf as u32)?;
                    self.consume(d & 0xff);
                }
                _ => {
                    self.consume(bits);
                    return self.check();
                }
            }
            if self.next_abs() > far {
                return Err(Malformed("truncated"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Decompress, FlushDecompress, Status};
    use libdeflater::{CompressionLvl, Compressor};
    use proptest::prelude::*;

    fn deflate(data: &[u8], level: i32) -> Vec<u8> {
        let mut c = Compressor::new(CompressionLvl::new(level).unwrap());
        let mut out = vec![0; c.deflate_compress_bound(data.len())];
        let n = c.deflate_compress(data, &mut out).unwrap();
        out.truncate(n);
        out
    }

    fn inflate(stream: &[u8], size: usize) -> Vec<u8> {
        let mut d = Decompress::new(false);
        let mut out = Vec::with_capacity(size + 1);
        let status = d
            .decompress_vec(stream, &mut out, FlushDecompress::Finish)
            .unwrap();
        assert_eq!(status, Status::StreamEnd);
        assert_eq!(
            d.total_in() as usize,
            stream.len(),
            "bytes left after the end"
        );
        out
    }

    /// Text-like bytes (dynamic Huffman blocks), or noise (stored blocks) when `noise`.
    fn sample(len: usize, seed: u32, noise: bool) -> Vec<u8> {
        let mut x = seed | 1;
        let mut v = Vec::with_capacity(len);
        while v.len() < len {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if noise {
                v.push(x as u8);
            } else {
                let w = ["usr/lib/", "libc.so.6 ", "\0\0\0\0", "0000644\0", "debian "];
                v.extend_from_slice(w[(x % 5) as usize].as_bytes());
            }
        }
        v.truncate(len);
        v
    }

    #[test]
    fn joined_streams_inflate_to_the_joined_inputs() {
        let inputs = [
            Vec::new(),
            b"a".to_vec(),
            sample(100, 1, false),     // a fixed-Huffman block
            sample(1 << 20, 2, false), // several dynamic blocks
            sample(200_000, 3, true),  // stored blocks
            sample((1 << 20) + 7, 4, false),
        ];
        for level in [0, 1, 6, 12] {
            let mut joined = Vec::new();
            let mut want = Vec::new();
            for (i, data) in inputs.iter().enumerate() {
                let mut s = deflate(data, level);
                let ends = find_ends(&s).unwrap();
                assert_eq!(ends.bytes(), s.len() as u64, "level {level}, input {i}");
                assert_eq!(ends.inflated, data.len() as u64, "level {level}, input {i}");
                assert_eq!(
                    s[(ends.final_block / 8) as usize] >> (ends.final_block % 8) & 1,
                    1
                );
                // Each stream alone, made non-final, is a valid prefix; the last stays final.
                make_non_final(&mut s).unwrap();
                joined.extend_from_slice(&s);
                want.extend_from_slice(data);
            }
            joined.extend_from_slice(&deflate(b"end", level));
            want.extend_from_slice(b"end");
            assert!(inflate(&joined, want.len()) == want, "level {level}");
        }
    }

    /// A reader that hands out at most `step` bytes a call.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.step).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn streams_longer_than_the_window_are_walked_through_it_and_copied_non_final() {
        // Stored blocks (noise) of 64 kB jump across window ends; text makes dynamic blocks.
        let mut data = sample(3 * WINDOW + 999, 7, true);
        data.extend_from_slice(&sample(2 * WINDOW, 8, false));
        data.extend_from_slice(&sample(WINDOW / 3, 9, true));
        for level in [0, 1, 6] {
            let s = deflate(&data, level);
            let whole = find_ends(&s).unwrap();
            for step in [1 << 20, 65_537, 4093] {
                let got = find_ends_in(Trickle { data: &s, step }, s.len() as u64).unwrap();
                assert_eq!(got, whole, "level {level}, reads of {step}");
            }
            // Copied through a reader with bytes after the stream (a zip's next entry).
            let mut src = s.clone();
            src.extend_from_slice(b"PK\x03\x04 next entry");
            let mut out = Vec::new();
            let n = copy_non_final(
                Trickle {
                    data: &src,
                    step: 70_001,
                },
                whole,
                &mut out,
            )
            .unwrap();
            assert_eq!(n, out.len() as u64);
            let mut again = s.clone();
            make_non_final(&mut again).unwrap();
            assert_eq!(out, again, "level {level}");
            out.extend_from_slice(&deflate(b"tail", level));
            let mut want = data.clone();
            want.extend_from_slice(b"tail");
            assert!(inflate(&out, want.len()) == want, "level {level}");
        }
        // A read error is the walk's error, not a malformed stream.
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk gone"))
            }
        }
        let e = find_ends_in(Broken, 100).unwrap_err();
        assert_eq!(e.to_string(), "disk gone");
    }

    #[test]
    fn zlib_streams_are_walked_too() {
        let data = sample(3 << 20, 9, false);
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(9));
        std::io::Write::write_all(&mut z, &data).unwrap();
        let mut s = z.finish().unwrap();
        assert_eq!(find_ends(&s).unwrap().inflated, data.len() as u64);
        make_non_final(&mut s).unwrap();
        s.extend_from_slice(&deflate(b"!", 6));
        assert!(inflate(&s, data.len() + 1) == [&data[..], b"!"].concat());
    }

    #[test]
    fn a_truncated_or_padded_stream_is_refused() {
        let s = deflate(&sample(300_000, 5, false), 6);
        for cut in [0, 1, 2, s.len() / 2, s.len() - 1] {
            assert!(find_ends(&s[..cut]).is_err(), "cut at {cut}");
        }
        let mut padded = s.clone();
        padded.push(0);
        assert_eq!(
            make_non_final(&mut padded),
            Err(Malformed("bytes after the final block"))
        );
    }

    #[test]
    fn more_codes_than_deflate_has_are_an_error_before_any_length_is_read() {
        // BFINAL 1, BTYPE 2 (dynamic), HLIT 31 (288 codes), HDIST 31 (32 codes): the code
        // lengths would overrun the table the walk keeps for them (found by the property test).
        assert_eq!(
            find_ends(&[0xfd, 0xff, 0xff, 0xff, 0xff, 0xff]),
            Err(Malformed("too many codes"))
        );
    }

    proptest! {
        #[test]
        fn any_bytes_are_an_error_or_ends_within_them(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            if let Ok(e) = find_ends(&bytes) {
                prop_assert!(e.final_block < e.end && e.end <= bytes.len() as u64 * 8);
            }
        }

        /// Real streams (fixed, dynamic and stored blocks) with bytes changed: random bytes
        /// rarely get past the first block header, these reach the tables and symbols.
        #[test]
        fn changed_real_streams_are_an_error_or_end_within_them(
            seed in 1u32..1000,
            level in 0i32..13,
            changes in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        ) {
            let mut s = deflate(&sample(4000 + seed as usize * 7, seed, seed % 4 == 0), level);
            let len = s.len();
            for (at, b) in changes {
                s[at % len] ^= b | 1;
            }
            let whole = find_ends(&s);
            if let Ok(e) = whole {
                prop_assert!(e.final_block < e.end && e.end <= s.len() as u64 * 8);
                // What zlib makes of the same bytes, up to the same end: the same length.
                let mut d = Decompress::new(false);
                let mut out = Vec::with_capacity(1 << 20);
                if let Ok(Status::StreamEnd) =
                    d.decompress_vec(&s[..e.bytes() as usize], &mut out, FlushDecompress::Finish)
                {
                    prop_assert_eq!(out.len() as u64, e.inflated);
                }
            }
            // Read in small pieces through the window: the same answer.
            let step = 1 + seed as usize % 5000;
            let got = find_ends_in(Trickle { data: &s, step }, s.len() as u64);
            prop_assert_eq!(got.ok(), whole.ok());
        }
    }
}
