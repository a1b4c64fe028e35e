//! Target `deflate`: the raw deflate walker (`gpuimg_deflate`) that finds where a wheel's
//! deflated entry ends, so that a gzip layer can copy it.
//!
//! Seeds are streams written in memory by zlib at levels 0, 1, 6 and 9 (stored, fixed and
//! dynamic blocks) of text and of noise; mutations are byte edits. Properties: reading through
//! the window in small pieces gives what reading the whole slice gives; an accepted stream ends
//! within the input, and zlib, given exactly those bytes, ends there too with as many bytes as
//! the walk counted; the stream made non-final and followed by another inflates to both.

use std::io::{Read, Write};

use arbitrary::{Result, Unstructured};
use flate2::{Decompress, FlushDecompress, Status};
use gpuimg_deflate::{copy_non_final, find_ends, find_ends_in};

use crate::fuzz::harness::{Target, Verdict};
use crate::fuzz::mutate;

pub static TARGET: Target = Target {
    name: "deflate",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 6_000,
};

fn seeds() -> Vec<Vec<u8>> {
    let mut text = Vec::new();
    let mut noise = Vec::new();
    let mut x: u32 = 0x1234_5678;
    while text.len() < 20_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let w = ["libcublas ", "sm_90 ", "\0\0\0", "kernel\n", "0000644 "][(x % 5) as usize];
        text.extend_from_slice(w.as_bytes());
        noise.push((x >> 8) as u8);
    }
    let mut out = Vec::new();
    for level in [0, 1, 6, 9] {
        for data in [&text[..], &noise[..], &text[..300]] {
            let mut z =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
            z.write_all(data).expect("in memory");
            out.push(z.finish().expect("in memory"));
        }
    }
    out
}

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let mut data = mutate::pick_seed(u, seeds)?.to_vec();
    mutate::havoc(u, &mut data, 6, &[], seeds)?;
    Ok(data)
}

/// A reader that hands out at most `step` bytes a call.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.1).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

/// zlib's inflation of `s` when it is one whole stream of at most 1 MiB.
fn zlib(s: &[u8]) -> Option<Vec<u8>> {
    let mut d = Decompress::new(false);
    let mut out = Vec::with_capacity(1 << 20);
    match d.decompress_vec(s, &mut out, FlushDecompress::Finish) {
        Ok(Status::StreamEnd) if d.total_in() == s.len() as u64 => Some(out),
        _ => None,
    }
}

fn check(b: &[u8]) -> Verdict {
    let whole = find_ends(b);
    let step = 1 + b.len() % 997;
    let windowed = find_ends_in(Trickle(b, step), b.len() as u64);
    if whole.clone().ok() != windowed.as_ref().ok().copied() {
        return Err(format!("slice says {whole:?}, the window {windowed:?}"));
    }
    let Ok(e) = whole else {
        return Ok("refused");
    };
    if e.final_block >= e.end || e.end > b.len() as u64 * 8 {
        return Err(format!("ends {e:?} outside {} bytes", b.len()));
    }
    let stream = &b[..e.bytes() as usize];
    let Some(inflated) = zlib(stream) else {
        // zlib checks more (distances against the window), or it is longer than read here.
        return Ok("walked, zlib refuses or reads more");
    };
    if inflated.len() as u64 != e.inflated {
        return Err(format!(
            "the walk counts {} bytes, zlib inflates {}",
            e.inflated,
            inflated.len()
        ));
    }
    let mut joined = Vec::new();
    copy_non_final(stream, e, &mut joined).map_err(|x| x.to_string())?;
    let mut tail = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(6));
    tail.write_all(b"tail").map_err(|x| x.to_string())?;
    joined.extend_from_slice(&tail.finish().map_err(|x| x.to_string())?);
    let mut want = inflated;
    want.extend_from_slice(b"tail");
    match zlib(&joined) {
        Some(got) if got == want => Ok("walked"),
        _ => Err("made non-final and joined, the stream no longer inflates to both".into()),
    }
}
