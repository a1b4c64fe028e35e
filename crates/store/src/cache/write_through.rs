//! Writing a large file without keeping it in the page cache: [`WriteThrough`] starts the
//! write-back of each window of bytes as soon as it is written, and drops the pages of the
//! windows before it that are on disk by then. A layer blob is written once and not read again
//! during the build (outputs hard-link it), so its gigabytes of page cache only push other
//! data out, and each page taken for it costs the kernel a fresh allocation: in a virtual
//! machine that hands freed memory back to its host, touching a fresh page is several times
//! dearer than reusing one just freed (see BENCHMARKS.md). Here the pages of one window are
//! freed and taken again by the next.
//!
//! Never waits for the disk: a window still being written back is skipped and tried again at
//! the next few windows, so a slow disk leaves dirty pages in the cache as a plain write would,
//! and the writer is never slower than one. Must never change a byte written, nor fail a write
//! because of the page cache: where the file system refuses the hints (`EINVAL`, `ENOSYS`,
//! `ESPIPE`), the file is written as usual.

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd};

/// Bytes in one window: big enough that starting write-back is cheap per byte, small enough
/// that the pages reused stay few.
const WINDOW: u64 = 8 << 20;
/// How far behind the window being started pages are dropped (again): what was still being
/// written back at one window is dropped at a later one.
const LAG: u64 = 4 * WINDOW;

/// A writer that writes through `inner` (a file, from offset 0): where the disk keeps up, about
/// five windows of it stay in the page cache.
#[derive(Debug)]
pub struct WriteThrough<W: Write + AsFd> {
    inner: W,
    /// Bytes written so far (the file's size).
    written: u64,
    /// Where the window whose write-back is not yet started begins.
    started: u64,
    /// The file system refused a hint: write as usual from then on.
    plain: bool,
}

impl<W: Write + AsFd> WriteThrough<W> {
    /// Write through `inner`, dropping what is on disk from the page cache.
    pub fn new(inner: W) -> Self {
        WriteThrough {
            inner,
            written: 0,
            started: 0,
            plain: false,
        }
    }

    /// Write to `inner` as usual (for files read again soon).
    pub fn plain(inner: W) -> Self {
        WriteThrough {
            plain: true,
            ..WriteThrough::new(inner)
        }
    }

    pub fn into_inner(self) -> W {
        self.inner
    }

    /// Start the write-back of the bytes since `started`, and drop the pages of the windows
    /// before them that are written back by now.
    fn advance(&mut self) {
        let fd = self.inner.as_fd();
        let from = self.started;
        if sync_range(
            fd.as_raw_fd(),
            from,
            self.written - from,
            libc::SYNC_FILE_RANGE_WRITE,
        )
        .is_err()
        {
            self.plain = true;
            return;
        }
        self.started = self.written;
        let lo = from.saturating_sub(LAG);
        if let Some(n) = std::num::NonZeroU64::new(from - lo) {
            // Dirty pages and pages under write-back are skipped, not waited for.
            if rustix::fs::fadvise(fd, lo, Some(n), rustix::fs::Advice::DontNeed).is_err() {
                self.plain = true;
            }
        }
    }
}

/// `sync_file_range(2)` on `fd`.
fn sync_range(fd: i32, offset: u64, len: u64, flags: libc::c_uint) -> io::Result<()> {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    // SAFETY: `fd` is a descriptor this writer owns open for the whole call; the call reads no
    // memory of this process.
    let r = unsafe { libc::sync_file_range(fd, offset, len, flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl<W: Write + AsFd> Write for WriteThrough<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        if !self.plain && self.written - self.started >= WINDOW {
            self.advance();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn every_byte_arrives_in_order_across_many_windows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = std::fs::File::create(&path).unwrap();
        let mut w = WriteThrough::new(file);
        // Odd-sized writes straddle the window boundaries.
        let mut expect = Vec::new();
        let mut i = 0u32;
        while expect.len() < (3 * WINDOW as usize + 12345) {
            let chunk: Vec<u8> = (0..(70_001 + i % 5000)).map(|j| (j ^ i) as u8).collect();
            w.write_all(&chunk).unwrap();
            expect.extend_from_slice(&chunk);
            i += 1;
        }
        w.flush().unwrap();
        // Past the first window, write-back was started and the windows behind it dropped.
        assert!(
            w.started >= 2 * WINDOW || w.plain,
            "no window was written through"
        );
        drop(w.into_inner());
        let mut got = Vec::new();
        std::fs::File::open(&path)
            .unwrap()
            .read_to_end(&mut got)
            .unwrap();
        assert_eq!(got.len(), expect.len());
        assert!(got == expect, "the bytes read back differ");
    }

    #[test]
    fn a_file_without_hints_is_written_as_usual() {
        // A pipe refuses `sync_file_range` (ESPIPE): the writer falls back and loses nothing.
        let (mut r, w) = std::io::pipe().unwrap();
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).unwrap();
            v
        });
        let mut wt = WriteThrough::new(w);
        let data = vec![7u8; WINDOW as usize * 2 + 3];
        wt.write_all(&data).unwrap();
        assert!(wt.plain);
        drop(wt.into_inner());
        assert_eq!(reader.join().unwrap(), data);
    }
}
