//! The sandbox's log: what the command writes to stdout and stderr, written to the log file up
//! to its bound (then one line saying where it was cut), counted whole, and its last bytes kept
//! in memory for the last lines an error shows. Must never hold more than [`TAIL_BYTES`] of it
//! in memory, nor write past the bound.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use crate::error::SandboxError;
use crate::spec::Log;

/// How much of the log's end is kept for its last lines.
pub const TAIL_BYTES: usize = 64 * 1024;

pub struct LogWriter {
    file: File,
    path: PathBuf,
    max_bytes: u64,
    tail_lines: usize,
    written: u64,
    total: u64,
    cut: bool,
    tail: VecDeque<u8>,
}

impl LogWriter {
    /// Create (or truncate) the log file.
    pub fn create(log: &Log) -> Result<LogWriter, SandboxError> {
        let file = File::create(&log.path).map_err(|source| SandboxError::Log {
            path: log.path.clone(),
            source,
        })?;
        Ok(LogWriter {
            file,
            path: log.path.clone(),
            max_bytes: log.max_bytes,
            tail_lines: log.tail_lines,
            written: 0,
            total: 0,
            cut: false,
            tail: VecDeque::with_capacity(TAIL_BYTES),
        })
    }

    /// Take the next bytes the command wrote.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), SandboxError> {
        self.total += bytes.len() as u64;
        let room = self.max_bytes.saturating_sub(self.written);
        let keep = (bytes.len() as u64).min(room) as usize;
        let io = |source| SandboxError::Log {
            path: self.path.clone(),
            source,
        };
        if keep > 0 {
            self.file.write_all(&bytes[..keep]).map_err(io)?;
            self.written += keep as u64;
        }
        if keep < bytes.len() && !self.cut {
            self.cut = true;
            let note = format!(
                "\n[gpuimg: the log was cut at its bound of {} bytes]\n",
                self.max_bytes
            );
            self.file.write_all(note.as_bytes()).map_err(io)?;
        }
        let from = bytes.len().saturating_sub(TAIL_BYTES);
        for &b in &bytes[from..] {
            if self.tail.len() == TAIL_BYTES {
                self.tail.pop_front();
            }
            self.tail.push_back(b);
        }
        Ok(())
    }

    /// Every byte the command wrote, also past the bound.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether the file was cut at its bound.
    pub fn cut(&self) -> bool {
        self.cut
    }

    /// The last lines (at most `tail_lines`, lossily decoded, control characters but tabs
    /// shown as `?`): a first line cut by [`TAIL_BYTES`] is left out.
    pub fn last_lines(&self) -> Vec<String> {
        let (a, b) = self.tail.as_slices();
        let bytes = [a, b].concat();
        let text = String::from_utf8_lossy(&bytes);
        let mut lines: Vec<&str> = text.lines().collect();
        if self.total > self.tail.len() as u64 && !lines.is_empty() {
            lines.remove(0);
        }
        let from = lines.len().saturating_sub(self.tail_lines);
        lines[from..]
            .iter()
            .map(|l| {
                l.chars()
                    .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(dir: &std::path::Path, max_bytes: u64, tail_lines: usize) -> LogWriter {
        LogWriter::create(&Log {
            path: dir.join("log"),
            max_bytes,
            tail_lines,
        })
        .unwrap()
    }

    #[test]
    fn the_file_stops_at_its_bound_and_the_tail_goes_on() {
        let d = tempfile::tempdir().unwrap();
        let mut w = writer(d.path(), 10, 2);
        w.push(b"one\ntwo\n").unwrap();
        w.push(b"three\nfour\n").unwrap();
        assert!(w.cut());
        assert_eq!(w.total(), 19);
        assert_eq!(w.last_lines(), vec!["three", "four"]);
        let file = std::fs::read_to_string(d.path().join("log")).unwrap();
        assert!(
            file.starts_with("one\ntwo\nth\n[gpuimg: the log was cut"),
            "{file}"
        );
    }

    #[test]
    fn a_line_cut_by_the_kept_bytes_is_left_out() {
        let d = tempfile::tempdir().unwrap();
        let mut w = writer(d.path(), 1 << 30, 1000);
        let mut big = vec![b'x'; TAIL_BYTES];
        big.extend_from_slice(b"\nlast\x1b\n");
        w.push(&big).unwrap();
        assert_eq!(w.last_lines(), vec!["last?"]);
    }
}
