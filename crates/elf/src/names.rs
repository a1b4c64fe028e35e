//! The library names a shared object holds as strings (`libcublasLt.so.12` in cuDNN's
//! read-only data): what it may load by name with `dlopen`, which no `DT_NEEDED` shows. A name
//! is a run of name bytes (letters, digits, `_ - + .`) between any other bytes (a path's `/`
//! too, so `/usr/lib/libibverbs.so.1` gives `libibverbs.so.1`) that reads `lib….so` or
//! `lib….so.N[.N…]`, trailing dots dropped.
//!
//! [`NameScan`] takes the file front to back in pieces of any size (the pass that inflates it
//! anyway) and finds the same names whatever the pieces; it holds at most [`MAX_NAMES`] names
//! of at most [`MAX_NAME`] bytes, and one unfinished run; never the file.

use std::collections::BTreeSet;

/// Bytes of one name at most (a longer run is no name).
pub const MAX_NAME: usize = 128;
/// Names kept of one file at most (the first found).
pub const MAX_NAMES: usize = 1024;

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'.')
}

/// The library name a whole run of name bytes is, if it is one.
fn library_name(run: &[u8]) -> Option<&str> {
    let run = std::str::from_utf8(run).ok()?.trim_end_matches('.');
    if run.len() > MAX_NAME || !run.starts_with("lib") {
        return None;
    }
    let mut s = run;
    while let Some((head, tail)) = s.rsplit_once('.') {
        if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        s = head;
    }
    let stem = s.strip_suffix(".so")?;
    (stem.len() > 3).then_some(run)
}

/// The library names of one file, fed front to back (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct NameScan {
    names: BTreeSet<String>,
    /// The run of name bytes the last piece ended in (at most `MAX_NAME + 1` bytes: a longer
    /// one is no name either way).
    run: Vec<u8>,
    /// Bytes fed so far.
    scanned: u64,
}

impl NameScan {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes fed so far (where the next piece starts).
    pub fn scanned(&self) -> u64 {
        self.scanned
    }

    /// Bytes it may hold: the names found and, once fed, room for the unfinished run. Starts
    /// at 0 and never shrinks as more is fed (the build's taps count what they hold by its
    /// growth).
    pub fn held(&self) -> u64 {
        let run = if self.scanned > 0 { MAX_NAME + 1 } else { 0 };
        (self.names.iter().map(String::len).sum::<usize>() + run) as u64
    }

    fn extend_run(&mut self, bytes: &[u8]) {
        let room = (MAX_NAME + 1).saturating_sub(self.run.len());
        self.run.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn check(&mut self, run: &[u8]) {
        if self.names.len() < MAX_NAMES {
            if let Some(name) = library_name(run) {
                self.names.insert(name.to_string());
            }
        }
    }

    fn end_run(&mut self) {
        let run = std::mem::take(&mut self.run);
        self.check(&run);
    }

    /// The file's next bytes.
    pub fn feed(&mut self, piece: &[u8]) {
        self.scanned += piece.len() as u64;
        // The run the last piece ended in goes on into this one.
        let lead = piece
            .iter()
            .position(|b| !is_name_byte(*b))
            .unwrap_or(piece.len());
        if lead == piece.len() {
            self.extend_run(piece);
            return;
        }
        self.extend_run(&piece[..lead]);
        self.end_run();
        // `piece[lead]` is no name byte: every run after it lies wholly in the piece, unless
        // it reaches the piece's end. A name holds `.so`: only runs around one are looked at.
        let mut next = lead;
        for hit in memchr::memmem::find_iter(&piece[lead..], b".so") {
            let i = lead + hit;
            if i < next {
                continue;
            }
            let window = i.saturating_sub(MAX_NAME + 1).max(lead);
            let start = piece[window..i]
                .iter()
                .rposition(|b| !is_name_byte(*b))
                .map_or(window, |p| window + p + 1);
            let Some(end) = piece[i..]
                .iter()
                .position(|b| !is_name_byte(*b))
                .map(|p| i + p)
            else {
                // The run reaches the piece's end: it is the trailing run, taken below.
                break;
            };
            self.check(&piece[start..end]);
            next = end;
        }
        let window = piece.len().saturating_sub(MAX_NAME + 1).max(lead);
        let start = piece[window..]
            .iter()
            .rposition(|b| !is_name_byte(*b))
            .map_or(window, |p| window + p + 1);
        self.extend_run(&piece[start..]);
    }

    /// The names found, sorted; the file's end ends its last run.
    pub fn finish(mut self) -> Vec<String> {
        self.end_run();
        self.names.into_iter().collect()
    }
}

/// A reader that passes `inner`'s bytes through `scan`.
pub struct Scanning<'a, R: ?Sized> {
    pub inner: &'a mut R,
    pub scan: &'a mut NameScan,
}

impl<R: std::io::Read + ?Sized> std::io::Read for Scanning<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.scan.feed(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(bytes: &[u8], piece: usize) -> Vec<String> {
        let mut s = NameScan::new();
        for p in bytes.chunks(piece.max(1)) {
            s.feed(p);
        }
        assert_eq!(s.scanned(), bytes.len() as u64);
        s.finish()
    }

    #[test]
    fn names_are_found_whatever_the_pieces() {
        let mut bytes =
            b"libfirst.so.1\0\x01\x02libcublasLt.so.12\0cannot load libcudnn_ops.so.9. \
            /usr/lib/x86_64-linux-gnu/libibverbs.so.1\0libstdc++.so.6\0xlibnot.so\0lib.so\0\
            libnot.so.x\0libnotso\0libfmt.so.%d\0libtoo"
                .to_vec();
        bytes.extend(std::iter::repeat_n(b'a', MAX_NAME));
        bytes.extend(b".so\0\xfflibend.so");
        let want = [
            "libcublasLt.so.12",
            "libcudnn_ops.so.9",
            "libend.so",
            "libfirst.so.1",
            // A format string's head: taken, as a name may be (more reached, never less).
            "libfmt.so",
            "libibverbs.so.1",
            "libstdc++.so.6",
        ];
        for piece in 1..=bytes.len() {
            assert_eq!(scan(&bytes, piece), want, "pieces of {piece}");
        }
    }

    #[test]
    fn it_holds_a_bounded_number_of_names() {
        let mut bytes = Vec::new();
        for i in 0..MAX_NAMES + 10 {
            bytes.extend(format!("\0lib{i}.so").as_bytes());
        }
        let mut s = NameScan::new();
        s.feed(&bytes);
        assert_eq!(s.finish().len(), MAX_NAMES);
        // A run of name bytes far longer than a name is held only in part; what it holds
        // never shrinks as more is fed.
        let mut s = NameScan::new();
        assert_eq!(s.held(), 0);
        let mut held = s.held();
        for piece in [&b"aaaa"[..], b"\0libx.so.1\0", b"libx"] {
            for _ in 0..100 {
                s.feed(piece);
                assert!(s.held() >= held && s.run.len() <= MAX_NAME + 1);
                held = s.held();
            }
        }
        assert_eq!(s.finish(), ["libx.so.1"]);
    }
}
