//! A file left in its archive: a wheel's large deflated member is not unpacked into the
//! staging root; the tree points at the raw deflate stream in the wheel, and the layer writer
//! inflates it as the tar goes by. That saves writing gigabytes to scratch and reading them
//! back (for the PyTorch stack, most of the image).
//!
//! The bytes are read back only through [`ArchivedFile::open`], which refuses an archive that
//! is no longer the file that was listed (its identity), never yields more than the recorded
//! size, and checks what it inflated against the archive's CRC-32 and the wheel's `RECORD`
//! sha256 before handing out the last piece: a stream that inflates to anything else is an
//! error naming the archive and the member, never a layer with other bytes. Inflating runs on
//! a thread of its own, up to 2 MiB ahead of the reader, so it overlaps the tar's hashing and
//! compression. Writes nothing.

use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

use sha2::{Digest as _, Sha256};

use super::Deflated;
use gpuimg_store::digest::Digest;

/// Size of the pieces inflated ahead, and how many may wait: 2 MiB, so the inflater keeps
/// going while the layer writer waits for the compressor. More (8 MiB) was no clearer a gain
/// and each inflating thread's freed pieces stay with its malloc arena: a PyTorch build's
/// peak memory grew by 40 MB (BENCHMARKS.md).
const PIECE: usize = 256 << 10;
const AHEAD: usize = 8;

/// Something that sees a file's bytes as a read inflates them ([`ArchivedFile::tap`]): the
/// facts of a wheel's library are taken this way while its layer is written, instead of
/// inflating it once more. `feed` gets each checked piece with its offset in the file; a
/// second read of the file feeds the same bytes again. It must be quick: the inflater waits.
pub trait Tap: Send + Sync {
    fn feed(&self, at: u64, piece: &[u8]);
}

/// A [`Tap`] held by a file. It is no part of what the file is: two files that differ only in
/// their taps are equal.
#[derive(Clone)]
pub struct TapRef(pub Arc<dyn Tap>);

impl std::fmt::Debug for TapRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TapRef")
    }
}

impl PartialEq for TapRef {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for TapRef {}

/// Where a file's bytes lie as one raw deflate stream inside another file, and what they must
/// inflate to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedFile {
    /// The archive, with its identity when it was listed: another file there is not read.
    pub archive: Arc<PathBuf>,
    pub identity: [u64; 5],
    /// The archive's name and the member's name in it, for messages.
    pub label: String,
    pub member: String,
    /// The stream's first byte in `archive`, and its compressed length.
    pub offset: u64,
    pub compressed: u64,
    /// What it inflates to: the length, the archive's CRC-32 and the sha256 the wheel records.
    pub size: u64,
    pub crc32: u32,
    pub sha256: Digest,
    /// Where the stream's final block starts and where it ends, when it was walked (for a
    /// gzip layer to copy it: [`ArchivedFile::deflated`]).
    pub ends: Option<gpuimg_deflate::Ends>,
    /// What sees the bytes each time they are read, checked (see [`Tap`]).
    pub tap: Option<TapRef>,
}

impl ArchivedFile {
    /// The walked stream as a gzip layer copies it (`layer::pgzip`): the same archive, place
    /// and checks as this file's.
    pub fn deflated(&self) -> Option<Deflated> {
        Some(Deflated {
            archive: Arc::clone(&self.archive),
            identity: self.identity,
            offset: self.offset,
            ends: self.ends?,
            size: self.size,
            crc32: self.crc32,
        })
    }

    /// The file's bytes, inflated and checked as they are read (see the module doc).
    pub fn open(&self) -> io::Result<ArchivedReader> {
        let mut f = super::open_same_file(&self.archive, &self.identity)?;
        // Inode numbers are reused: its size and times must be the listed file's too.
        if gpuimg_store::file_identity::identity(&f.metadata()?) != self.identity {
            return Err(self.error("is in an archive that changed since it was listed"));
        }
        f.seek(SeekFrom::Start(self.offset))?;
        // A file that fits in one piece is inflated and checked here, at once: no thread, and
        // buffers of its own size (a wheel leaves thousands of small files in place).
        let small = self.size < PIECE as u64;
        let capacity = if small {
            usize::try_from(self.compressed).map_or(PIECE, |c| c.clamp(1, PIECE))
        } else {
            PIECE
        };
        let inflate = flate2::bufread::DeflateDecoder::new(BufReader::with_capacity(
            capacity,
            f.take(self.compressed),
        ));
        if small {
            let (tx, rx) = sync_channel::<io::Result<Vec<u8>>>(1);
            // The channel has room for the one message, and its reader is `rx`.
            let _ = tx.send(self.inflate_small(inflate));
            return Ok(ArchivedReader {
                rx,
                piece: Vec::new(),
                at: 0,
                done: false,
            });
        }
        let (tx, rx) = sync_channel::<io::Result<Vec<u8>>>(AHEAD);
        let me = self.clone();
        std::thread::Builder::new()
            .name("inflate".into())
            .spawn(move || {
                let mut check = Check::new(&me);
                let mut r = inflate;
                loop {
                    let mut piece = vec![0u8; PIECE];
                    let got = match fill(&mut r, &mut piece) {
                        Ok(n) => n,
                        Err(e) => {
                            let _ = tx.send(Err(me.error(&format!("does not inflate ({e})"))));
                            return;
                        }
                    };
                    piece.truncate(got);
                    let mut last = got < PIECE;
                    // A full piece that reaches the recorded size: the stream must end here,
                    // and this piece waits until that is known (a reader taking exactly the
                    // recorded length gets the verdict with it).
                    if !last && check.n + got as u64 >= me.size {
                        let mut probe = [0u8; 1];
                        match fill(&mut r, &mut probe) {
                            Ok(0) => last = true,
                            Ok(_) => piece.push(probe[0]),
                            Err(e) => {
                                let _ = tx.send(Err(me.error(&format!("does not inflate ({e})"))));
                                return;
                            }
                        }
                    }
                    let at = check.n;
                    let verdict = check.update(&piece, last);
                    if let (Ok(()), Some(t)) = (&verdict, &me.tap) {
                        t.0.feed(at, &piece);
                    }
                    let stop = last || verdict.is_err();
                    let sent = match verdict {
                        Ok(()) if piece.is_empty() => Ok(()),
                        Ok(()) => tx.send(Ok(piece)).map_err(|_| ()),
                        Err(e) => tx.send(Err(e)).map_err(|_| ()),
                    };
                    // A reader that went away wants no more.
                    if stop || sent.is_err() {
                        return;
                    }
                }
            })?;
        Ok(ArchivedReader {
            rx,
            piece: Vec::new(),
            at: 0,
            done: false,
        })
    }

    /// All of a file smaller than one piece, checked: one byte more than recorded is read, so
    /// a longer stream is refused as one of any size is.
    fn inflate_small(&self, mut r: impl Read) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.size as usize + 1];
        let got =
            fill(&mut r, &mut buf).map_err(|e| self.error(&format!("does not inflate ({e})")))?;
        buf.truncate(got);
        Check::new(self).update(&buf, true)?;
        if let Some(t) = &self.tap {
            t.0.feed(0, &buf);
        }
        Ok(buf)
    }

    fn error(&self, what: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("`{}` of `{}` {what}", self.member, self.label),
        )
    }
}

/// Read until `buf` is full or the input ends.
fn fill(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The running checks of one inflation.
struct Check<'a> {
    file: &'a ArchivedFile,
    n: u64,
    crc: crc32fast::Hasher,
    sha: Sha256,
}

impl<'a> Check<'a> {
    fn new(file: &'a ArchivedFile) -> Self {
        Check {
            file,
            n: 0,
            crc: crc32fast::Hasher::new(),
            sha: Sha256::new(),
        }
    }

    /// Count and hash `piece`; at the end (`last`), every recorded fact must hold. A stream
    /// longer than recorded is refused as soon as it is.
    fn update(&mut self, piece: &[u8], last: bool) -> io::Result<()> {
        self.n += piece.len() as u64;
        if self.n > self.file.size {
            return Err(self.file.error(&format!(
                "inflates to more than the {} bytes its archive records",
                self.file.size
            )));
        }
        self.crc.update(piece);
        self.sha.update(piece);
        if !last {
            return Ok(());
        }
        if self.n != self.file.size {
            return Err(self.file.error(&format!(
                "inflates to {} bytes, not the {} its archive records",
                self.n, self.file.size
            )));
        }
        let crc = std::mem::take(&mut self.crc).finalize();
        if crc != self.file.crc32 {
            return Err(self.file.error(&format!(
                "inflates to bytes whose CRC-32 is {crc:08x}, not the archive's {:08x}",
                self.file.crc32
            )));
        }
        let sha = Digest::from_bytes(std::mem::take(&mut self.sha).finalize().into());
        if sha != self.file.sha256 {
            return Err(self.file.error(&format!(
                "inflates to bytes whose sha256 is {}, not the {} the wheel's RECORD lists",
                sha.hex(),
                self.file.sha256.hex()
            )));
        }
        Ok(())
    }
}

/// The reading end of [`ArchivedFile::open`].
pub struct ArchivedReader {
    rx: Receiver<io::Result<Vec<u8>>>,
    piece: Vec<u8>,
    at: usize,
    done: bool,
}

impl Read for ArchivedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.piece.len() {
            if self.done {
                return Ok(0);
            }
            match self.rx.recv() {
                Ok(Ok(p)) => {
                    self.piece = p;
                    self.at = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                // The inflating thread ends after the last piece (checked) or an error.
                Err(_) => {
                    self.done = true;
                    return Ok(0);
                }
            }
        }
        let k = buf.len().min(self.piece.len() - self.at);
        buf[..k].copy_from_slice(&self.piece[self.at..self.at + k]);
        self.at += k;
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn deflate(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(6));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// `data` deflated at offset 100 of a new file in `dir`, described as its wheel would.
    fn archived(dir: &std::path::Path, data: &[u8]) -> ArchivedFile {
        let stream = deflate(data);
        let path = dir.join("a.whl");
        let mut bytes = vec![7u8; 100];
        bytes.extend_from_slice(&stream);
        bytes.extend_from_slice(b"central directory follows");
        std::fs::write(&path, &bytes).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        ArchivedFile {
            archive: Arc::new(path),
            identity: gpuimg_store::file_identity::identity(&meta),
            label: "pkg-1.0-py3-none-any.whl".into(),
            member: "pkg/lib/libbig.so".into(),
            offset: 100,
            compressed: stream.len() as u64,
            size: data.len() as u64,
            crc32: crc32fast::hash(data),
            sha256: Digest::of(data),
            ends: None,
            tap: None,
        }
    }

    fn read_all(a: &ArchivedFile) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        a.open()?.read_to_end(&mut out)?;
        Ok(out)
    }

    fn sample(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| (i * 7 % 251) as u8 ^ (i >> 12) as u8)
            .collect()
    }

    #[test]
    fn inflates_to_the_recorded_bytes_at_every_piece_boundary() {
        let t = tempfile::tempdir().unwrap();
        for n in [0, 1, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE, 5 * PIECE + 17] {
            let data = sample(n);
            assert_eq!(
                read_all(&archived(t.path(), &data)).unwrap(),
                data,
                "{n} bytes"
            );
        }
    }

    /// Collects what it is fed, by offset.
    #[derive(Default)]
    struct Seen(std::sync::Mutex<Vec<(u64, Vec<u8>)>>);

    impl Tap for Seen {
        fn feed(&self, at: u64, piece: &[u8]) {
            self.0.lock().unwrap().push((at, piece.to_vec()));
        }
    }

    #[test]
    fn a_tap_sees_every_checked_byte_in_order_and_nothing_unchecked() {
        let t = tempfile::tempdir().unwrap();
        for n in [1, PIECE - 1, PIECE, 3 * PIECE + 17] {
            let data = sample(n);
            let seen = Arc::new(Seen::default());
            let mut a = archived(t.path(), &data);
            a.tap = Some(TapRef(seen.clone()));
            assert_eq!(read_all(&a).unwrap(), data);
            let mut joined = Vec::new();
            for (at, p) in seen.0.lock().unwrap().iter() {
                assert_eq!(*at, joined.len() as u64, "{n} bytes: pieces in order");
                joined.extend_from_slice(p);
            }
            assert_eq!(joined, data, "{n} bytes");
            // A file that fails its checks feeds nothing of the failing piece.
            let seen = Arc::new(Seen::default());
            a.sha256 = Digest::of(b"other");
            a.tap = Some(TapRef(seen.clone()));
            assert!(read_all(&a).is_err());
            let fed: usize = seen.0.lock().unwrap().iter().map(|(_, p)| p.len()).sum();
            assert!(fed < n, "{n} bytes: {fed} fed from a file that failed");
        }
    }

    #[test]
    fn anything_else_than_what_is_recorded_is_an_error_naming_the_member() {
        let t = tempfile::tempdir().unwrap();
        // Inflated on a thread, piece by piece, and (smaller than a piece) at once.
        for n in [3 * PIECE + 5, 5000, PIECE - 1] {
            wrong_facts_fail(t.path(), n);
        }
        // Reading only the recorded length also ends in the check (the last piece is held
        // back until it passes).
        for n in [3 * PIECE + 5, 2 * PIECE, 5000] {
            let mut a = archived(t.path(), &sample(n));
            a.sha256 = Digest::of(b"other");
            let mut r = a.open().unwrap().take(a.size);
            assert!(io::copy(&mut r, &mut io::sink()).is_err(), "{n} bytes");
        }
    }

    fn wrong_facts_fail(dir: &std::path::Path, n: usize) {
        let data = sample(n);
        let good = archived(dir, &data);
        let mut cases = Vec::new();
        let mut a = good.clone();
        a.size -= 1;
        cases.push((a, "more than"));
        let mut a = good.clone();
        a.size += 1;
        cases.push((a, "inflates to"));
        let mut a = good.clone();
        a.crc32 ^= 1;
        cases.push((a, "CRC-32"));
        let mut a = good.clone();
        a.sha256 = Digest::of(b"other");
        cases.push((a, "RECORD"));
        let mut a = good.clone();
        a.compressed /= 2;
        cases.push((a, "inflate"));
        for (a, says) in cases {
            let e = read_all(&a).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains("pkg/lib/libbig.so") && msg.contains(says),
                "{n} bytes: {msg}"
            );
        }
    }

    #[test]
    fn another_file_in_the_archives_place_is_not_read() {
        let t = tempfile::tempdir().unwrap();
        let a = archived(t.path(), &sample(1000));
        std::fs::remove_file(a.archive.as_path()).unwrap();
        std::fs::write(a.archive.as_path(), b"x").unwrap();
        assert!(a.open().is_err());
    }
}
