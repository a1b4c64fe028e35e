//! Parallel gzip in the manner of pigz: the stream is cut into blocks of at most 1 MiB, each
//! compressed on a worker by libdeflate as a complete raw deflate stream, made non-final and
//! byte-aligned by an empty stored block (`gpuimg-deflate`), and the blocks are joined into one
//! gzip member with one CRC-32.
//!
//! Blocks are cut every 1 MiB, and also where a large file's data begins and ends in the tar
//! stream (`fragments.rs`), so that a large file's blocks are the same in every layer that
//! holds it and their compressed bytes can be found again in the cache.
//!
//! A large file whose bytes are also one raw deflate stream (`gpuimg_assemble::Deflated`: a wheel's
//! deflated member it was written from) is not compressed at all: its data is that stream,
//! copied from the wheel and made non-final (`gpuimg_deflate::copy_non_final`), after the file's
//! bytes as they went by were checked against the stream's CRC-32. Gzip's CRC-32 of the whole
//! stays one, combined.
//!
//! The output depends only on the input bytes, the level and the streams given: boundaries
//! are fixed by the stream's content and offsets, never by write sizes, thread count or what
//! the cache holds, so layers stay reproducible.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Seek, SeekFrom, Write};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use libdeflater::{CompressionLvl, Compressor, Decompressor};

use super::fragments::{Event, Fragment, FragmentIndex, TarTracker};
use gpuimg_assemble::Deflated;
use gpuimg_store::digest::Digest;

/// The deflate streams of large files, by their path in the tar stream.
pub type Streams = HashMap<String, Arc<Deflated>>;

pub const BLOCK: usize = 1 << 20;

/// Bytes of the fixed gzip header.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

struct Job {
    seq: u64,
    data: Vec<u8>,
    last: bool,
    /// A large file's block: keyed, looked up and recorded.
    keyed: bool,
}

/// A compressed block: its bytes, its key when keyed, whether they were found in the cache,
/// and how many input bytes it holds; or a file's deflate stream, copied when its turn comes.
struct Block {
    bytes: Vec<u8>,
    key: Option<Digest>,
    found: bool,
    input: usize,
    stream: Option<(Arc<Deflated>, u64)>,
}

/// A large file's data going by while its deflate stream stands for it.
struct Copying {
    path: String,
    size: u64,
    stream: Arc<Deflated>,
    crc: crc32fast::Hasher,
}

type Done = (u64, io::Result<Block>);

/// What a finished stream leaves besides its bytes.
#[derive(Debug, Default)]
pub struct GzipOutcome {
    /// The keyed blocks, where they sit in the output.
    pub fragments: Vec<Fragment>,
    /// Input bytes whose compressed blocks came from the cache.
    pub reused_bytes: u64,
    /// Input bytes written as their files' deflate streams.
    pub streamed_bytes: u64,
}

pub struct ParGzEncoder<W: Write> {
    inner: Option<W>,
    buf: Vec<u8>,
    crc: crc32fast::Hasher,
    total: u64,
    tar: TarTracker,
    next_seq: u64,
    next_out: u64,
    /// Bytes written to `inner` so far.
    out_offset: u64,
    outcome: GzipOutcome,
    pending: BTreeMap<u64, Block>,
    in_flight: usize,
    max_in_flight: usize,
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    streams: Streams,
    copying: Option<Copying>,
}

impl<W: Write> ParGzEncoder<W> {
    /// `index`: the cache's recorded blocks, looked up for each keyed block; `streams`: the
    /// large files written as their deflate streams.
    pub fn new(
        mut inner: W,
        level: i32,
        threads: usize,
        index: Option<Arc<FragmentIndex>>,
        streams: Streams,
    ) -> io::Result<Self> {
        let level = CompressionLvl::new(level)
            .map_err(|_| io::Error::other(format!("no gzip level {level}")))?;
        // Fixed header: no name, mtime 0, XFL 0, OS 255 (unknown).
        inner.write_all(&HEADER)?;
        let index = index.filter(|i| !i.is_empty());
        let threads = threads.max(1);
        let (job_tx, job_rx) = mpsc::sync_channel::<Job>(threads * 2);
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let workers = (0..threads)
            .map(|_| {
                let rx = Arc::clone(&job_rx);
                let tx = done_tx.clone();
                let index = index.clone();
                std::thread::spawn(move || {
                    let mut c = Compressor::new(level);
                    let mut d = Decompressor::new();
                    let mut scratch = Vec::new();
                    loop {
                        let job = match rx.lock() {
                            Ok(guard) => guard.recv(),
                            Err(_) => return,
                        };
                        let Ok(job) = job else { return };
                        let out = block(&mut c, &mut d, &mut scratch, index.as_deref(), &job);
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
            tar: TarTracker::default(),
            next_seq: 0,
            next_out: 0,
            out_offset: HEADER.len() as u64,
            outcome: GzipOutcome::default(),
            pending: BTreeMap::new(),
            in_flight: 0,
            max_in_flight: threads * 2,
            jobs: Some(job_tx),
            done: done_rx,
            workers,
            streams,
            copying: None,
        })
    }

    fn submit(&mut self, last: bool, keyed: bool) -> io::Result<()> {
        while self.in_flight >= self.max_in_flight {
            self.receive_one()?;
        }
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(BLOCK));
        let job = Job {
            seq: self.next_seq,
            data,
            last,
            keyed: keyed && !last,
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
        self.drain()
    }

    /// Write the finished blocks that are next in order.
    fn drain(&mut self) -> io::Result<()> {
        let inner = self
            .inner
            .as_mut()
            .ok_or_else(|| io::Error::other("gzip stream already finished"))?;
        while let Some(b) = self.pending.remove(&self.next_out) {
            if let Some((d, size)) = &b.stream {
                let n = copy_stream(d, inner)?;
                self.outcome.streamed_bytes += size;
                self.out_offset += n;
                self.next_out += 1;
                continue;
            }
            inner.write_all(&b.bytes)?;
            if let Some(key) = b.key {
                self.outcome.fragments.push(Fragment {
                    key,
                    offset: self.out_offset,
                    len: b.bytes.len() as u32,
                });
            }
            if b.found {
                self.outcome.reused_bytes += b.input as u64;
            }
            self.out_offset += b.bytes.len() as u64;
            self.next_out += 1;
        }
        Ok(())
    }

    /// Write the last block and the trailer; return the inner writer and what the stream's
    /// keyed blocks were.
    pub fn finish(mut self) -> io::Result<(W, GzipOutcome)> {
        if let Some(c) = &self.copying {
            return Err(io::Error::other(format!(
                "the tar stream ended inside the data of `{}`",
                c.path
            )));
        }
        self.submit(true, false)?;
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
        Ok((inner, std::mem::take(&mut self.outcome)))
    }
}

impl<W: Write> ParGzEncoder<W> {
    /// Take `data` while a large file's deflate stream stands for its bytes: they are only
    /// counted and checked.
    fn copying(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = usize::try_from(self.tar.span()).map_or(data.len(), |s| s.min(data.len()));
        let taken = &data[..n];
        self.total += n as u64;
        let event = self.tar.feed(taken);
        let Some(c) = self.copying.as_mut() else {
            return Err(io::Error::other("gzip stream copy state lost"));
        };
        c.crc.update(taken);
        if event != Event::DataEnds {
            return Ok(n);
        }
        let Some(c) = self.copying.take() else {
            return Ok(n);
        };
        if c.crc.clone().finalize() != c.stream.crc32 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "`{}` is not what its deflate stream in `{}` inflates to (CRC-32 differs)",
                    c.path,
                    c.stream.archive.display()
                ),
            ));
        }
        self.crc.combine(&c.crc);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending.insert(
            seq,
            Block {
                bytes: Vec::new(),
                key: None,
                found: false,
                input: 0,
                stream: Some((c.stream, c.size)),
            },
        );
        self.drain()?;
        Ok(n)
    }

    /// After a header that starts a large file's data: copy its stream, if it has one.
    fn start_copying(&mut self) {
        let Some((path, size)) = self.tar.file() else {
            return;
        };
        // A stream of another length stands for other bytes.
        if let Some(d) = self.streams.get(path).filter(|d| d.size == size) {
            self.copying = Some(Copying {
                path: path.to_string(),
                size,
                stream: Arc::clone(d),
                crc: crc32fast::Hasher::new(),
            });
        }
    }
}

/// Copy `d`'s stream, made non-final, from its archive (when that still is the file that was
/// walked) to `out`; returns the bytes written.
fn copy_stream(d: &Deflated, out: &mut impl Write) -> io::Result<u64> {
    let mut f = gpuimg_assemble::open_same_file(&d.archive, &d.identity)?;
    // The same inode is not enough: its size and times must be those it had when walked.
    if gpuimg_assemble::identity(&f.metadata()?) != d.identity {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` changed while the image was being built (it is no longer the file whose \
                 deflate stream was walked)",
                d.archive.display()
            ),
        ));
    }
    f.seek(SeekFrom::Start(d.offset))?;
    gpuimg_deflate::copy_non_final(f, d.ends, out)
}

impl<W: Write> Write for ParGzEncoder<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        if self.copying.is_some() {
            return self.copying(data);
        }
        let room = (BLOCK - self.buf.len()).min(data.len());
        let n = usize::try_from(self.tar.span()).map_or(room, |span| room.min(span));
        let taken = &data[..n];
        self.buf.extend_from_slice(taken);
        self.crc.update(taken);
        self.total += n as u64;
        match self.tar.feed(taken) {
            // The header (and what preceded it) is a block of its own.
            Event::DataStarts => {
                self.submit(false, false)?;
                self.start_copying();
            }
            Event::DataEnds => {
                self.submit(false, true)?;
                return Ok(n);
            }
            Event::None => {}
        }
        if self.buf.len() == BLOCK {
            let keyed = self.tar.aligned();
            self.submit(false, keyed)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        // Blocks are cut by content and size only (flushing early would change the output).
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

/// One job's block: for a keyed block, the cache's recorded bytes when they inflate back to
/// it, else its own compression.
fn block(
    c: &mut Compressor,
    d: &mut Decompressor,
    scratch: &mut Vec<u8>,
    index: Option<&FragmentIndex>,
    job: &Job,
) -> io::Result<Block> {
    let key = job.keyed.then(|| Digest::of(&job.data));
    if let (Some(key), Some(index)) = (&key, index) {
        if let Some(bytes) = index.find(key, &job.data, d, scratch) {
            return Ok(Block {
                bytes,
                key: Some(*key),
                found: true,
                input: job.data.len(),
                stream: None,
            });
        }
    }
    Ok(Block {
        bytes: deflate_block(c, job)?,
        key,
        found: false,
        input: job.data.len(),
        stream: None,
    })
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
        gpuimg_deflate::make_non_final(&mut out).map_err(io::Error::other)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn compress(data: &[u8], threads: usize, chunk: usize) -> Vec<u8> {
        compress_with(data, threads, chunk, None).0
    }

    fn compress_with(
        data: &[u8],
        threads: usize,
        chunk: usize,
        index: Option<Arc<FragmentIndex>>,
    ) -> (Vec<u8>, GzipOutcome) {
        let mut e = ParGzEncoder::new(
            Vec::new(),
            super::super::GZIP_LEVEL,
            threads,
            index,
            Streams::new(),
        )
        .unwrap();
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

    /// A tar of `files` (name, size, seed) with every mtime `mtime`.
    fn tar_of(files: &[(&str, usize, u32)], mtime: u64) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, size, seed) in files {
            let mut data = Vec::with_capacity(*size);
            let mut x = *seed | 1;
            while data.len() < *size {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let word = ["cuda ", "kernel ", "sm_90 ", "\n", "libcublas "][(x % 5) as usize];
                data.extend_from_slice(word.as_bytes());
                data.push((x >> 24) as u8 & 0x0f);
            }
            data.truncate(*size);
            let mut h = tar::Header::new_gnu();
            h.set_size(*size as u64);
            h.set_mode(0o644);
            h.set_mtime(mtime);
            b.append_data(&mut h, name, data.as_slice()).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn gunzip(gz: &[u8]) -> Vec<u8> {
        let mut back = Vec::new();
        // One gzip member: a reader that stops after the first must see everything.
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut back)
            .unwrap();
        back
    }

    #[test]
    fn recorded_blocks_are_reused_and_the_output_is_what_compressing_gives() {
        let files = [
            ("a/small", 70_000, 1),
            ("b/big", 3 * BLOCK + 1000, 2),
            ("c/exact", BLOCK, 3),
            ("d/other", 2 * BLOCK - 3, 4),
        ];
        let first_tar = tar_of(&files, 1);
        let (first, done) = compress_with(&first_tar, 2, 65536, None);
        assert_eq!(gunzip(&first), first_tar);
        // 4 blocks of b, 1 of c, 2 of d; keys by content.
        assert_eq!(done.fragments.len(), 7);
        assert_eq!(done.reused_bytes, 0);
        let dir = tempfile::tempdir().unwrap();
        let blob = dir.path().join("blob");
        std::fs::write(&blob, &first).unwrap();
        let index = Arc::new(FragmentIndex::of_blob(blob.clone(), &done.fragments, BLOCK));

        // The same files behind other headers (another mtime) and a new file in front.
        let mut moved = vec![("0/new", 5000, 9)];
        moved.extend_from_slice(&files);
        let second_tar = tar_of(&moved, 2);
        let (fresh, _) = compress_with(&second_tar, 3, 8192, None);
        let (reused, got) = compress_with(&second_tar, 1, 1 << 20, Some(Arc::clone(&index)));
        assert_eq!(reused, fresh, "reuse changed the bytes");
        assert_eq!(
            got.reused_bytes,
            (3 * BLOCK + 1000 + BLOCK + 2 * BLOCK - 3) as u64
        );
        assert_eq!(gunzip(&reused), second_tar);

        // A changed blob: nothing it holds passes the check, the output is still the same.
        let mut bad = first.clone();
        for f in &done.fragments {
            bad[f.offset as usize + 40] ^= 0x55;
        }
        std::fs::write(&blob, &bad).unwrap();
        let (again, got) = compress_with(&second_tar, 2, 4096, Some(index));
        assert_eq!(again, fresh);
        assert_eq!(got.reused_bytes, 0);
    }

    /// `data` deflated by zlib (as wheels are) at `offset` in a new file, walked.
    fn deflated_in_file(dir: &std::path::Path, data: &[u8], offset: usize) -> Deflated {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(6));
        z.write_all(data).unwrap();
        let stream = z.finish().unwrap();
        let mut file = vec![0x55u8; offset];
        file.extend_from_slice(&stream);
        file.extend_from_slice(b"PK\x01\x02 what follows in a zip");
        let path = dir.join("archive.whl");
        std::fs::write(&path, &file).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        Deflated {
            archive: Arc::new(path),
            identity: gpuimg_assemble::identity(&meta),
            offset: offset as u64,
            ends: gpuimg_deflate::find_ends(&stream).unwrap(),
            size: data.len() as u64,
            crc32: crc32fast::hash(data),
        }
    }

    fn with_streams(tar: &[u8], streams: Streams) -> io::Result<(Vec<u8>, GzipOutcome)> {
        let mut e = ParGzEncoder::new(Vec::new(), super::super::GZIP_LEVEL, 2, None, streams)?;
        for c in tar.chunks(100_000) {
            e.write_all(c)?;
        }
        e.finish()
    }

    #[test]
    fn a_large_file_with_a_deflate_stream_is_that_stream() {
        // A long name (GNU long-name record) for the streamed file, a short one for the other.
        let long = format!(
            "usr/lib/python3/dist-packages/{}/libbig.so",
            "n".repeat(120)
        );
        let files = [
            ("a/small", 70_000, 1),
            (long.as_str(), 2 * BLOCK + 4321, 2),
            ("c/other", BLOCK + 5, 3),
        ];
        let tar = tar_of(&files, 7);
        let big = &gunzip(&compress(&tar, 1, 1 << 20))[..]; // the same tar, read back
        assert_eq!(big, tar.as_slice());
        let data = {
            let mut a = tar::Archive::new(tar.as_slice());
            let mut e = a
                .entries()
                .unwrap()
                .map(|e| e.unwrap())
                .find(|e| e.path().unwrap().to_str() == Some(long.as_str()))
                .unwrap();
            let mut v = Vec::new();
            e.read_to_end(&mut v).unwrap();
            v
        };
        let dir = tempfile::tempdir().unwrap();
        let d = deflated_in_file(dir.path(), &data, 37);
        let streams = Streams::from([(long.clone(), Arc::new(d.clone()))]);
        let (out, done) = with_streams(&tar, streams).unwrap();
        assert_eq!(gunzip(&out), tar);
        assert_eq!(done.streamed_bytes, data.len() as u64);
        // The other large file's blocks are still keyed; the streamed one has none.
        assert_eq!(done.fragments.len(), 2);
        // The stream's bytes up to its final block's header are in the output as they are.
        let file = std::fs::read(&*d.archive).unwrap();
        let head = &file[37..37 + (d.ends.final_block / 8) as usize];
        assert!(out.windows(head.len()).any(|w| w == head));
        // Independent of write sizes and threads.
        let mut e = ParGzEncoder::new(
            Vec::new(),
            super::super::GZIP_LEVEL,
            3,
            None,
            Streams::from([(long.clone(), Arc::new(d.clone()))]),
        )
        .unwrap();
        for c in tar.chunks(4099) {
            e.write_all(c).unwrap();
        }
        assert_eq!(e.finish().unwrap().0, out);

        // A stream of another length is not used: the file is compressed.
        let other = Deflated {
            size: d.size + 1,
            ..d.clone()
        };
        let (plain, done) =
            with_streams(&tar, Streams::from([(long.clone(), Arc::new(other))])).unwrap();
        assert_eq!(done.streamed_bytes, 0);
        assert_eq!(plain, compress(&tar, 2, 65536));
        // A stream whose CRC-32 is not the file's: an error naming the file, no output.
        let wrong = Deflated {
            crc32: d.crc32 ^ 1,
            ..d.clone()
        };
        let err = with_streams(&tar, Streams::from([(long.clone(), Arc::new(wrong))]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("libbig.so") && err.contains("CRC-32"), "{err}");
        // An archive that changed since it was walked is not read.
        std::fs::write(&*d.archive, b"changed").unwrap();
        let err = with_streams(&tar, Streams::from([(long, Arc::new(d))])).unwrap_err();
        assert!(err.to_string().contains("changed"), "{err}");
    }

    #[test]
    fn large_files_start_blocks_of_their_own() {
        // The same big file after a 10 kB and after a 700 kB file: its blocks, keys and
        // compressed bytes are the same.
        let a = tar_of(&[("x", 10_000, 5), ("y", 2 * BLOCK + 77, 6)], 0);
        let b = tar_of(&[("x", 700_000, 7), ("y", 2 * BLOCK + 77, 6)], 0);
        let (ga, fa) = compress_with(&a, 2, 10_000, None);
        let (gb, fb) = compress_with(&b, 2, 10_000, None);
        let keys = |f: &GzipOutcome| f.fragments.iter().map(|f| f.key).collect::<Vec<_>>();
        assert_eq!(keys(&fa), keys(&fb));
        assert_eq!(fa.fragments.len(), 3);
        for (x, y) in fa.fragments.iter().zip(&fb.fragments) {
            assert_eq!(
                ga[x.offset as usize..][..x.len as usize],
                gb[y.offset as usize..][..y.len as usize]
            );
        }
    }
}
