//! [`super::parse_stream`] turned around: a shared object's bytes are pushed through
//! [`Capture::feed`] by a pass that reads them anyway (the layer writer inflating a wheel's
//! library), and the capture keeps only what the facts are read from: the ELF header, the
//! program headers, the dynamic section and, when it lies behind that section (where
//! `patchelf` moves a table it grows), the span of the string table the names lie in, each
//! at most [`MAX_STREAM_PART`]. A string table before the dynamic section is read again from
//! the file's start, as `parse_stream` does. Every byte also passes through a
//! [`NameScan`] for the library names the file's strings hold. [`Capture::finish`]
//! then gives what `parse_stream_named` gives over the same bytes, or says it cannot (a
//! layout the front-to-back pass does not cover, or bytes it never saw), so the caller reads
//! the file itself. Holds no more than those parts and the scan's names; never trusts an
//! offset without bounds checks.

use super::names::NameScan;
use super::{facts, header, segments, string_span, Header, SharedObject, MAX_STREAM_PART};

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

    /// Whether it holds what it wants, the stream having reached it (`seen`: how far the
    /// stream went): an empty part past the end is never complete, as reading forward to it
    /// fails.
    fn complete(&self, seen: u64) -> bool {
        self.bytes.len() as u64 == self.want && seen >= self.start
    }

    /// Take from `piece` (the stream's bytes from `at`) what continues the part.
    fn take(&mut self, at: u64, piece: &[u8]) {
        if self.bytes.len() as u64 == self.want {
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
    /// Reading the span of the string table the names lie in, which lies behind the dynamic
    /// section (where `patchelf` moves a table it grows): `parse_stream` reads on to it.
    Strings(Vec<(u64, u64, u64)>),
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
    strings: Option<Part>,
    /// How far the stream went (the end of the furthest piece fed).
    seen: u64,
    /// The library names of every byte fed in order; `None` after a gap.
    names: Option<NameScan>,
}

impl Default for Capture {
    fn default() -> Self {
        Capture {
            stage: Stage::Head,
            head: Part::new(0, HEAD),
            programs: None,
            dynamic: None,
            strings: None,
            seen: 0,
            names: Some(NameScan::new()),
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
        // A piece that does not continue what was seen (a gap) takes the stream no further.
        if at <= self.seen {
            self.seen = self.seen.max(at.saturating_add(piece.len() as u64));
        }
        if let Some(scan) = &mut self.names {
            match usize::try_from(scan.scanned().saturating_sub(at)) {
                Ok(done) if at <= scan.scanned() => scan.feed(piece.get(done..).unwrap_or(&[])),
                // A gap: the names are not known.
                _ => self.names = None,
            }
        }
        let seen = self.seen;
        // Finishing one part may want more of this same piece.
        while let Some(part) = self.reading() {
            part.take(at, piece);
            if !part.complete(seen) {
                return;
            }
            self.advance();
        }
    }

    /// The part the stage reads (`None` once nothing more is read, or for a stage whose part
    /// is missing, which `finish` then leaves to the caller).
    fn reading(&mut self) -> Option<&mut Part> {
        match self.stage {
            Stage::Head => Some(&mut self.head),
            Stage::Programs => self.programs.as_mut(),
            Stage::Dynamic(_) => self.dynamic.as_mut(),
            Stage::Strings(_) => self.strings.as_mut(),
            Stage::Held(_) | Stage::NotElf | Stage::Other => None,
        }
    }

    /// The stage after the one whose part just completed, with the part it reads.
    fn advance(&mut self) {
        let h = header(&self.head.bytes);
        self.stage = match (std::mem::replace(&mut self.stage, Stage::Other), h) {
            (Stage::Head, None) => Stage::NotElf,
            (Stage::Head, Some(h)) => {
                let len = u64::from(h.phentsize) * u64::from(h.phnum);
                if h.phoff < HEAD || len > MAX_STREAM_PART {
                    Stage::Other
                } else {
                    self.programs = Some(Part::new(h.phoff, len));
                    Stage::Programs
                }
            }
            (Stage::Programs, Some(h)) => {
                let Some(p) = &self.programs else {
                    return;
                };
                match segments(&h, &p.bytes) {
                    None => Stage::NotElf,
                    Some((loads, None)) => Stage::Held(loads),
                    // `parse_stream` reads only forward: a dynamic section before the program
                    // headers' end is no answer.
                    Some((_, Some((doff, _)))) if doff < p.start + p.want => Stage::NotElf,
                    Some((loads, Some((doff, dsize)))) => {
                        self.dynamic = Some(Part::new(doff, dsize.min(MAX_STREAM_PART)));
                        Stage::Dynamic(loads)
                    }
                }
            }
            (Stage::Dynamic(loads), Some(h)) => {
                let Some(d) = &self.dynamic else {
                    return;
                };
                let span =
                    string_span(&h, &loads, &d.bytes).filter(|(off, _)| *off >= d.start + d.want);
                match span {
                    Some((off, len)) => {
                        self.strings = Some(Part::new(off, len));
                        Stage::Strings(loads)
                    }
                    None => Stage::Held(loads),
                }
            }
            (Stage::Strings(loads), Some(_)) => Stage::Held(loads),
            (_, _) => Stage::Other,
        };
    }

    /// Bytes it holds.
    pub fn held(&self) -> u64 {
        [
            Some(&self.head),
            self.programs.as_ref(),
            self.dynamic.as_ref(),
            self.strings.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(|p| p.bytes.len() as u64)
        .sum::<u64>()
            + self.names.as_ref().map_or(0, NameScan::held)
    }

    /// Hold nothing more and leave the answer to the caller.
    pub fn give_up(&mut self) {
        *self = Capture {
            stage: Stage::Other,
            head: Part::new(0, 0),
            names: None,
            ..Capture::default()
        };
    }

    fn header(&self) -> Option<Header> {
        header(&self.head.bytes)
    }

    /// What [`super::parse_stream_named`] says of the same `len` bytes (`Some(None)`: not a
    /// shared object gpuimg reads), with `again` reading a range from a fresh stream of them
    /// ([`super::range_at`]) for the string table; `None` when the capture cannot say (a
    /// layout it does not take, or bytes it did not see: a part's, or any for the names).
    pub fn finish(
        &self,
        len: u64,
        again: &mut dyn FnMut(u64, u64) -> Option<Vec<u8>>,
    ) -> Option<Option<SharedObject>> {
        match &self.stage {
            Stage::NotElf => Some(None),
            Stage::Head | Stage::Programs | Stage::Dynamic(_) | Stage::Other => None,
            // The string span unseen in full is read again: the same bytes either way.
            Stage::Held(loads) | Stage::Strings(loads) => {
                let names = self.names.clone().filter(|n| n.scanned() == len)?;
                let h = self.header()?;
                let dynamic = self.dynamic.as_ref().map_or(&[][..], |d| &d.bytes[..]);
                let held = self.strings.as_ref().filter(|p| p.complete(self.seen));
                let mut strings = |off: u64, len: u64| match held {
                    Some(p) if p.start == off && p.want == len => Some(p.bytes.clone()),
                    _ => again(off, len),
                };
                // Without a dynamic section `parse_stream` reads no strings either.
                let so = facts(&h, loads, dynamic, &mut strings);
                Some(so.map(|so| so.with_names(names.finish())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, parse_stream, parse_stream_named, range_at};
    use super::*;

    use super::super::tests::host_libc as libc;

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
        let streamed = parse_stream_named(&mut &bytes[..], &mut again.clone());
        assert!(streamed.as_ref().is_some_and(|s| s.soname.is_some()));
        // The C library names the libraries it loads by name (its name-service modules').
        assert!(streamed.as_ref().is_some_and(|s| !s.named.is_empty()));
        let plain = parse_stream(&mut &bytes[..], &mut again.clone());
        assert_eq!(plain, parse(&bytes));
        assert_eq!(streamed.clone().map(|s| s.with_names(Vec::new())), plain);
        let len = bytes.len() as u64;
        for piece in [1, 7, 64, 4096, 256 << 10, bytes.len()] {
            let c = fed(&bytes, piece);
            assert_eq!(
                c.finish(len, &mut again.clone()),
                Some(streamed.clone()),
                "pieces of {piece}"
            );
            // It holds the parts, not the file.
            let held = c.held();
            assert!(held < 64 << 10, "{held} bytes held");
        }
        // A second pass over the same bytes changes nothing.
        let mut c = fed(&bytes, 4096);
        for (i, p) in bytes.chunks(1000).enumerate() {
            c.feed((i * 1000) as u64, p);
        }
        assert_eq!(c.finish(len, &mut again.clone()), Some(streamed));
    }

    #[test]
    fn bytes_it_did_not_see_leave_the_answer_to_the_caller() {
        let bytes = libc();
        let mut again = |off: u64, len: u64| range_at(&mut &bytes[..], off, len);
        let len = bytes.len() as u64;
        // Nothing, or the stream stopped before its end (the names need every byte).
        assert_eq!(Capture::new().finish(len, &mut again), None);
        let half = fed(&bytes[..bytes.len() / 2], 4096);
        assert_eq!(half.finish(len, &mut again), None);
        // A piece skipped (a gap) is never papered over.
        let mut gap = Capture::new();
        gap.feed(0, &bytes[..32]);
        gap.feed(40, &bytes[40..]);
        assert_eq!(gap.finish(len, &mut again), None);
        // All of it, but said to be longer: the same.
        assert_eq!(fed(&bytes, 4096).finish(len + 1, &mut again), None);
    }

    /// A shared object laid out as `patchelf` leaves one: its string table at the end, behind
    /// the dynamic section and `filler` bytes (device code, say).
    fn patched(filler: usize) -> Vec<u8> {
        let strings = b"libfake.so.1\0libc.so.6\0/opt/x:$ORIGIN\0".to_vec();
        let dynamic_at = 4096u64;
        let strtab_at = dynamic_at + 6 * 16 + filler as u64;
        let total = strtab_at + strings.len() as u64;
        let mut b = super::super::test_elf64(2, 4096);
        let mut ph = |at: usize, typ: u32, off: u64, size: u64| {
            b[at..at + 4].copy_from_slice(&typ.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&off.to_le_bytes());
            b[at + 16..at + 24].copy_from_slice(&off.to_le_bytes());
            b[at + 32..at + 40].copy_from_slice(&size.to_le_bytes());
            b[at + 40..at + 48].copy_from_slice(&size.to_le_bytes());
        };
        ph(64, 1, 0, total);
        ph(120, 2, dynamic_at, 6 * 16);
        for (tag, val) in [
            (1u64, 13u64),
            (14, 0),
            (29, 23),
            (5, strtab_at),
            (10, strings.len() as u64),
            (0, 0),
        ] {
            b.extend_from_slice(&tag.to_le_bytes());
            b.extend_from_slice(&val.to_le_bytes());
        }
        b.extend((0..filler).map(|i| (i * 31 % 253) as u8));
        b.extend_from_slice(&strings);
        b
    }

    #[test]
    fn a_string_table_behind_the_dynamic_section_is_kept_on_the_way() {
        for filler in [0, 5000, 3 << 20] {
            let bytes = patched(filler);
            let whole = parse(&bytes).expect("the test's ELF parses");
            assert_eq!(whole.soname.as_deref(), Some("libfake.so.1"));
            assert_eq!(whole.needed, ["libc.so.6"]);
            assert_eq!(whole.runpath, ["/opt/x", "$ORIGIN"]);
            let again = |off: u64, len: u64| range_at(&mut &bytes[..], off, len);
            assert_eq!(
                parse_stream(&mut &bytes[..], &mut again.clone()),
                Some(whole.clone())
            );
            let len = bytes.len() as u64;
            for piece in [1, 100, 4096, 1 << 20] {
                // No second read: the strings were kept as they went by.
                let c = fed(&bytes, piece);
                let mut none = |_: u64, _: u64| -> Option<Vec<u8>> { None };
                assert_eq!(
                    c.finish(len, &mut none),
                    Some(Some(whole.clone())),
                    "{filler} {piece}"
                );
            }
            // Stopped before the strings: the names are not known, the caller reads the file.
            let c = fed(&bytes[..bytes.len() - 10], 4096);
            assert_eq!(c.finish(len, &mut again.clone()), None);
        }
    }

    #[test]
    fn not_an_elf_and_unusual_layouts() {
        let mut none = |_: u64, _: u64| -> Option<Vec<u8>> { None };
        let script = b"#!/bin/sh\n".repeat(20);
        assert_eq!(fed(&script, 16).finish(200, &mut none), Some(None));
        // Program headers said to start inside the ELF header: not taken, the caller reads.
        let mut bytes = libc();
        let len = bytes.len() as u64;
        bytes[32..40].copy_from_slice(&16u64.to_le_bytes());
        assert_eq!(fed(&bytes, 4096).finish(len, &mut none), None);
        // Too many program headers for the cap: the same.
        let mut bytes = libc();
        bytes[56..58].copy_from_slice(&u16::MAX.to_le_bytes());
        bytes[54..56].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(fed(&bytes, 4096).finish(len, &mut none), None);
    }
}
