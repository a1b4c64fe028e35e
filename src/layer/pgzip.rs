//! Parallel gzip in the manner of pigz: the stream is cut into fixed 1 MiB blocks, each
//! compressed on a worker by libdeflate as a complete raw deflate stream, made non-final and
//! byte-aligned by an empty stored block (`final_block.rs`), and the blocks are joined into one
//! gzip member with one CRC-32.
//!
//! The output depends only on the input bytes and the level: block boundaries are fixed by
//! input offsets, never by write sizes or thread count, so layers stay reproducible.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use libdeflater::{CompressionLvl, Compressor};

use super::final_block;

const BLOCK: usize = 1 << 20;

struct Job {
    seq: u64,
    data: Vec<u8>,
    last: bool,
}

type Done = (u64, io::Result<Vec<u8>>);

pub struct ParGzEncoder<W: Write> {
    inner: Option<W>,
    buf: Vec<u8>,
    crc: crc32fast::Hasher,
    total: u64,
    next_seq: u64,
    next_out: u64,
    pending: BTreeMap<u64, Vec<u8>>,
    in_flight: usize,
    max_in_flight: usize,
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
}

impl<W: Write> ParGzEncoder<W> {
    pub fn new(mut inner: W, level: i32, threads: usize) -> io::Result<Self> {
        let level = CompressionLvl::new(level)
            .map_err(|_| io::Error::other(format!("no gzip level {level}")))?;
        // Fixed header: no name, mtime 0, XFL 0, OS 255 (unknown).
        inner.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255])?;
        let threads = threads.max(1);
        let (job_tx, job_rx) = mpsc::sync_channel::<Job>(threads * 2);
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let workers = (0..threads)
            .map(|_| {
                let rx = Arc::clone(&job_rx);
                let tx = done_tx.clone();
                std::thread::spawn(move || {
                    let mut c = Compressor::new(level);
                    loop {
                        let job = match rx.lock() {
                            Ok(guard) => guard.recv(),
                            Err(_) => return,
                        };
                        let Ok(job) = job else { return };
                        let out = deflate_block(&mut c, &job);
                        if tx.send((job.seq, out)).is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        Ok(ParGzEncoder {
            inner: Some(inner),
            buf: Vec::with_capacity(BLOCK),
            crc: crc32fast::Hasher::new(),
            total: 0,
            next_seq: 0,
            next_out: 0,
            pending: BTreeMap::new(),
            in_flight: 0,
            max_in_flight: threads * 3,
            jobs: Some(job_tx),
            done: done_rx,
            workers,
        })
    }

    fn submit(&mut self, last: bool) -> io::Result<()> {
        while self.in_flight >= self.max_in_flight {
            self.receive_one()?;
        }
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(BLOCK));
        let job = Job {
            seq: self.next_seq,
            data,
            last,
        };
        self.next_seq += 1;
        self.jobs
            .as_ref()
            .ok_or_else(|| io::Error::other("gzip workers already stopped"))?
            .send(job)
            .map_err(|_| io::Error::other("gzip worker stopped"))?;
        self.in_flight += 1;
        Ok(())
    }

    fn receive_one(&mut self) -> io::Result<()> {
        let (seq, out) = self
            .done
            .recv()
            .map_err(|_| io::Error::other("gzip worker stopped"))?;
        self.in_flight -= 1;
        self.pending.insert(seq, out?);
        let inner = self
            .inner
            .as_mut()
            .ok_or_else(|| io::Error::other("gzip stream already finished"))?;
        while let Some(block) = self.pending.remove(&self.next_out) {
            inner.write_all(&block)?;
            self.next_out += 1;
        }
        Ok(())
    }

    /// Write the last block and the trailer; return the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.submit(true)?;
        while self.in_flight > 0 {
            self.receive_one()?;
        }
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        let mut inner = self
            .inner
            .take()
            .ok_or_else(|| io::Error::other("gzip stream already finished"))?;
        let crc = std::mem::replace(&mut self.crc, crc32fast::Hasher::new()).finalize();
        inner.write_all(&crc.to_le_bytes())?;
        inner.write_all(&(self.total as u32).to_le_bytes())?;
        Ok(inner)
    }
}

impl<W: Write> Write for ParGzEncoder<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(BLOCK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        self.crc.update(&data[..n]);
        self.total += n as u64;
        if self.buf.len() == BLOCK {
            self.submit(false)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        // Blocks are cut by size only (flushing early would change the output).
        Ok(())
    }
}

impl<W: Write> Drop for ParGzEncoder<W> {
    fn drop(&mut self) {
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Raw deflate of one block, ended by an empty stored block (as zlib's sync flush ends one)
/// unless it is the stream's last.
fn deflate_block(c: &mut Compressor, job: &Job) -> io::Result<Vec<u8>> {
    let mut out = vec![0; c.deflate_compress_bound(job.data.len()) + 5];
    let n = c
        .deflate_compress(&job.data, &mut out)
        .map_err(io::Error::other)?;
    out.truncate(n);
    if !job.last {
        final_block::make_non_final(&mut out).map_err(io::Error::other)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn compress(data: &[u8], threads: usize, chunk: usize) -> Vec<u8> {
        let mut e = ParGzEncoder::new(Vec::new(), super::super::GZIP_LEVEL, threads).unwrap();
        for c in data.chunks(chunk.max(1)) {
            e.write_all(c).unwrap();
        }
        e.finish().unwrap()
    }

    #[test]
    fn round_trips_and_is_independent_of_threads_and_write_sizes() {
        let mut data = Vec::new();
        let mut x: u32 = 1;
        while data.len() < 3 * BLOCK + 12345 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let word = ["alpha ", "beta ", "gamma ", "delta\n"][(x >> 29) as usize % 4];
            data.extend_from_slice(word.as_bytes());
            data.push((x >> 16) as u8);
        }
        let a = compress(&data, 1, 4096);
        let b = compress(&data, 4, 999_983);
        assert_eq!(a, b);
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(a.as_slice())
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, data);
        // Empty input is a valid gzip stream too.
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(compress(&[], 2, 1).as_slice())
            .read_to_end(&mut back)
            .unwrap();
        assert!(back.is_empty());
    }
}
