//! Measures the candidates for gzip layers' 1 MiB block compressor on one input file (a rootfs
//! tar): zlib-rs primed with the previous block's 32 KiB as `pgzip.rs` did before, and libdeflate
//! at each level on independent blocks, each made joinable by the crate's own
//! `gpuimg-deflate` as `pgzip.rs` does now. One thread; prints the raw deflate bytes and the
//! fastest of `REPS` passes. `cargo run --release --example block_compressors -- FILE [REPS] [LEVELS]`

use std::time::{Duration, Instant};

use flate2::{Compress, Compression, FlushCompress};
use libdeflater::{CompressionLvl, Compressor};

use gpuimg_deflate as final_block;

const BLOCK: usize = 1 << 20;
const DICT: usize = 32 << 10;

fn zlib_rs(data: &[u8], level: u32) -> usize {
    let mut total = 0;
    let mut out = Vec::with_capacity(BLOCK + BLOCK / 2);
    for (i, block) in data.chunks(BLOCK).enumerate() {
        let mut c = Compress::new(Compression::new(level), false);
        if i > 0 {
            let prev = &data[i * BLOCK - DICT..i * BLOCK];
            c.set_dictionary(prev).expect("dictionary");
        }
        out.clear();
        c.compress_vec(block, &mut out, FlushCompress::Sync)
            .expect("deflate");
        assert_eq!(
            c.total_in() as usize,
            block.len(),
            "output buffer too small"
        );
        total += out.len();
    }
    total
}

fn libdeflate(data: &[u8], level: i32) -> usize {
    let mut c = Compressor::new(CompressionLvl::new(level).expect("level"));
    let blocks = data.len().div_ceil(BLOCK);
    let mut total = 0;
    for (i, block) in data.chunks(BLOCK).enumerate() {
        let mut out = vec![0; c.deflate_compress_bound(block.len()) + 5];
        let n = c.deflate_compress(block, &mut out).expect("deflate");
        out.truncate(n);
        if i + 1 < blocks {
            final_block::make_non_final(&mut out).expect("own output");
        }
        total += out.len();
    }
    total
}

fn best_of(reps: usize, mut f: impl FnMut() -> usize) -> (usize, Duration) {
    let mut best = Duration::MAX;
    let mut size = 0;
    for _ in 0..reps {
        let t = Instant::now();
        size = std::hint::black_box(f());
        best = best.min(t.elapsed());
    }
    (size, best)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: block_compressors FILE [REPS] [LEVELS]");
        std::process::exit(2);
    };
    let reps = args.next().and_then(|r| r.parse().ok()).unwrap_or(3);
    // Optional third argument: the libdeflate levels to time, e.g. `5,9,12` (default 1-7).
    let levels: Vec<i32> = match args.next() {
        Some(list) => match list.split(',').map(str::parse).collect() {
            Ok(l) => l,
            Err(_) => {
                eprintln!("levels must be a comma-separated list of integers: {list}");
                std::process::exit(2);
            }
        },
        None => (1..=7).collect(),
    };
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(2);
        }
    };
    let mb = data.len() as f64 / 1e6;
    println!(
        "input: {path}, {} bytes, 1 MiB blocks, best of {reps}",
        data.len()
    );
    println!("| compressor | output bytes | vs zlib-rs 6 | s (1 thread) | MB/s |");
    println!("|---|---|---|---|---|");
    let (base, t) = best_of(reps, || zlib_rs(&data, 6));
    let row = |name: &str, size: usize, t: Duration| {
        println!(
            "| {name} | {size} | {:.4} | {:.3} | {:.0} |",
            size as f64 / base as f64,
            t.as_secs_f64(),
            mb / t.as_secs_f64()
        );
    };
    row("zlib-rs 6, primed (before)", base, t);
    for level in levels {
        let (size, t) = best_of(reps, || libdeflate(&data, level));
        row(&format!("libdeflate {level}"), size, t);
    }
}
