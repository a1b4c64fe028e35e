//! [`super::parse_stream`] turned around: a shared object's bytes are pushed through
//! [`Capture::feed`] by a pass that reads them anyway (the layer writer inflating a wheel's
//! library), and the capture keeps only what the facts are read from: the ELF header, the
//! program headers and the dynamic section, each at most [`MAX_STREAM_PART`]. [`Capture::finish`]
//! then gives what `parse_stream` gives over the same bytes, or says it cannot (a layout the
//! front-to-back pass does not cover, or bytes it never saw), so the caller reads the file
//! itself. Holds no more than those parts; never trusts an offset without bounds checks.

use super::{facts, header, segments, Header, SharedObject, MAX_STREAM_PART};

/// The ELF header's bytes `parse_stream` reads first.
const HEAD: u64 = 64;

/// One byte range wanted from the stream, filled front to back.
#[derive(Debug, Clone)]
struct Part {
    start: u64,
    want: u64,
    bytes: Vec<u8>,
}

impl Part {
    fn new(start: u64, want: u64) -> Self {
        Part {
            start,
            want,
            bytes: Vec::new(),
        }
    }

    fn complete(&self) -> bool {
        self.bytes.len() as u64 == self.want
    }

    /// Take from `piece` (the stream's bytes from `at`) what continues the part.
    fn take(&mut self, at: u64, piece: &[u8]) {
        if self.complete() {
            return;
        }
        let next = self.start + self.bytes.len() as u64;
        let end = at.saturating_add(piece.len() as u64);
        if at > next || end <= next {
            return;
        }
        let from = (next - at) as usize;
        let room = (self.want - self.bytes.len() as u64) as usize;
        let to = piece.len().min(from.saturating_add(room));
        self.bytes.extend_from_slice(&piece[from..to]);
    }
}

/// What is settled about the stream so far.
#[derive(Debug, Clone)]
enum Stage {
    /// Reading the ELF header.
    Head,
    /// Reading the program headers.
    Programs,
    /// Reading the dynamic section (the load segments are known).
    Dynamic(Vec<(u64, u64, u64)>),
    /// Everything needed is held: the facts follow from the parts (and the string table).
    Held(Vec<(u64, u64, u64)>),
    /// The answer is known without more bytes: not a shared object gpuimg reads.
    NotElf,
    /// A layout the front-to-back capture does not take (program headers before byte 64, a
    /// part larger than the cap): the caller reads the file itself.
    Other,
}

/// The parts of one shared object pushed through [`Capture::feed`] (see the module doc).
#[derive(Debug, Clone)]
pub struct Capture {
    stage: Stage,
    head: Part,
    programs: Option<Part>,
    dynamic: Option<Part>,
}

impl Default for Capture {
    fn default() -> Self {
        Capture {
            stage: Stage::Head,
            head: Part::new(0, HEAD),
            programs: None,
            dynamic: None,
        }
    }
}

impl Capture {
    pub fn new() -> Self {
        Self::default()
    }

    /// The stream's bytes from offset `at`. A pass goes front to back; a second pass over the
    /// same bytes changes nothing.
    pub fn feed(&mut self, at: u64, piece: &[u8]) {
        // Finishing one part may want more of this same piece.
        loop {
            match &self.stage {
                Stage::Head => {
                    self.head.take(at, piece);
                    if !self.head.complete() {
                        return;
                    }
                    self.stage = match header(&self.head.bytes) {
                        None => Stage::NotElf,
                        Some(h) => {
                            let len = u64::from(h.phentsize) * u64::from(h.phnum);
                            if h.phoff < HEAD || len > MAX_STREAM_PART {
                                Stage::Other
                            } else {
                                self.programs = Some(Part::new(h.phoff, len));
                                Stage::Programs
                            }
                        }
                    };
                }
                Stage::Programs => {
                    let Some(p) = self.programs.as_mut() else {
                        self.stage = Stage::Other;
                        return;
                    };
                    p.take(at, piece);
                    if !p.complete() {
                        return;
                    }
                    let end = p.start + p.want;
                    let read = header(&self.head.bytes).and_then(|h| segments(&h, &p.bytes));
                    self.stage = match read {
                        None => Stage::NotElf,
                        Some((loads, None)) => Stage::Held(loads),
                        // `parse_stream` reads only forward: a dynamic section before the
                        // program headers' end is no answer.
                        Some((_, Some((doff, _)))) if doff < end => Stage::NotElf,
                        Some((loads, Some((doff, dsize)))) => {
                            self.dynamic = Some(Part::new(doff, dsize.min(MAX_STREAM_PART)));
                            Stage::Dynamic(loads)
                        }
                    };
                }
                Stage::Dynamic(loads) => {
                    let Some(d) = self.dynamic.as_mut() else {
                        self.stage = Stage::Other;
                        return;
                    };
                    d.take(at, piece);
                    if !d.complete() {
                        return;
                    }
                    self.stage = Stage::Held(loads.clone());
                }
                Stage::Held(_) | Stage::NotElf | Stage::Other => return,
            }
        }
    }

    fn header(&self) -> Option<Header> {
        header(&self.head.bytes)
    }

    /// What [`super::parse_stream`] says of the same bytes (`Some(None)`: not a shared object
    /// gpuimg reads), with `again` reading a range from a fresh stream of them
    /// ([`super::range_at`]) for the string table; `None` when the capture cannot say (a
    /// layout it does not take, or a part whose bytes it did not see in full).
    pub fn finish(
        &self,
        again: &mut dyn FnMut(u64, u64) -> Option<Vec<u8>>,
    ) -> Option<Option<SharedObject>> {
        match &self.stage {
            Stage::NotElf => Some(None),
            Stage::Head | Stage::Programs | Stage::Dynamic(_) | Stage::Other => None,
            Stage::Held(loads) => {
                let h = self.header()?;
                let dynamic = self.dynamic.as_ref().map_or(&[][..], |d| &d.bytes[..]);
                // Without a dynamic section `parse_stream` reads no strings either.
                Some(facts(&h, loads, dynamic, again))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, parse_stream, range_at};
    use super::*;

    /// This process's C library, whole.
    fn libc() -> Vec<u8> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let lib = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .expect("this test links the C library");
        std::fs::read(lib).unwrap()
    }

    fn fed(bytes: &[u8], piece: usize) -> Capture {
        let mut c = Capture::new();
        let mut at = 0;
        for p in bytes.chunks(piece) {
            c.feed(at as u64, p);
            at += p.len();
        }
        c
    }

    #[test]
    fn fed_in_any_pieces_it_says_what_the_stream_parser_says() {
        let bytes = libc();
        let again = |off: u64, len: u64| range_at(&mut &bytes[..], off, len);
        let streamed = parse_stream(&mut &bytes[..], &mut again.clone());
        assert!(streamed.as_ref().is_some_and(|s| s.soname.is_some()));
        assert_eq!(streamed, parse(&bytes));
        for piece in [1, 7, 64, 4096, 256 << 10, bytes.len()] {
            let c = fed(&bytes, piece);
            assert_eq!(
                c.finish(&mut again.clone()),
                Some(streamed.clone()),
                "pieces of {piece}"
            );
            // It holds the parts, not the file.
            let held = c.head.bytes.len()
                + c.programs.as_ref().map_or(0, |p| p.bytes.len())
                + c.dynamic.as_ref().map_or(0, |p| p.bytes.len());
            assert!(held < 64 << 10, "{held} bytes held");
        }
        // A second pass over the same bytes changes nothing.
        let mut c = fed(&bytes, 4096);
        for (i, p) in bytes.chunks(1000).enumerate() {
            c.feed((i * 1000) as u64, p);
        }
        assert_eq!(c.finish(&mut again.clone()), Some(streamed));
    }

    #[test]
    fn bytes_it_did_not_see_leave_the_answer_to_the_caller() {
        let bytes = libc();
        let mut again = |off: u64, len: u64| range_at(&mut &bytes[..], off, len);
        // Nothing, or the stream stopped before the dynamic section.
        assert_eq!(Capture::new().finish(&mut again), None);
        let half = fed(&bytes[..bytes.len() / 2], 4096);
        assert_eq!(half.finish(&mut again), None);
        // A piece skipped (a gap) is never papered over.
        let mut gap = Capture::new();
        gap.feed(0, &bytes[..32]);
        gap.feed(40, &bytes[40..]);
        assert_eq!(gap.finish(&mut again), None);
    }

    #[test]
    fn not_an_elf_and_unusual_layouts() {
        let mut none = |_: u64, _: u64| -> Option<Vec<u8>> { None };
        let script = b"#!/bin/sh\n".repeat(20);
        assert_eq!(fed(&script, 16).finish(&mut none), Some(None));
        // Program headers said to start inside the ELF header: not taken, the caller reads.
        let mut bytes = libc();
        bytes[32..40].copy_from_slice(&16u64.to_le_bytes());
        assert_eq!(fed(&bytes, 4096).finish(&mut none), None);
        // Too many program headers for the cap: the same.
        let mut bytes = libc();
        bytes[56..58].copy_from_slice(&u16::MAX.to_le_bytes());
        bytes[54..56].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(fed(&bytes, 4096).finish(&mut none), None);
    }
}
