//! Compressed gzip blocks found again: a layer written anew (a new `SOURCE_DATE_EPOCH`, one
//! more file beside the others, another strip class) compresses only the blocks whose bytes
//! it has not compressed before.
//!
//! The data of every regular file of at least [`MIN_FILE`] bytes is cut into blocks of its own,
//! starting at the file's first byte (`TarTracker` follows the tar stream's headers to know
//! where that is), so how those blocks fall depends on the file alone and not on what precedes
//! it in the layer. Each such block is keyed by the sha256 of its uncompressed bytes; after a
//! gzip layer blob is committed, `fragments-v1/<blob digest>.json` records each key with the
//! block's place in the blob. A later layer that holds a block with a recorded key reads those
//! bytes from the blob. They are used as they are when the cache's trust rule vouches for both
//! the record and the blob (their stamps match, and the blob file opened still has the stamped
//! identity: the bytes are what this compressor wrote for a block of that sha256); otherwise
//! only after inflating them and comparing the result with the block, byte for byte. Anything
//! else (a missing blob, a changed one, a record from another compressor) is compressed
//! afresh.
//!
//! Must never change a layer's bytes: a reused block is the block compressing it again gives,
//! since libdeflate's output is a function of its input and level, and each record names the
//! compressor's fingerprint ([`fingerprint`]: the digest of what it makes of a fixed probe), so
//! records from another libdeflate or level are never read.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use libdeflater::{CompressionLvl, Compressor, Decompressor};
use serde::{Deserialize, Serialize};
use tar::EntryType;

use gpuimg_store::cache::{trust, Bucket, Cache, Identity};
use gpuimg_store::digest::Digest;

/// Files at least this large have their data cut into blocks of their own.
pub const MIN_FILE: u64 = 1 << 20;

const BUCKET: Bucket = Bucket::Fragments;

/// At most this many recorded blocks are held in memory for one layer (about 150 MB; past
/// it, the records read last, in blob digest order, are left out).
const MAX_INDEXED: usize = 1 << 20;

/// The empty final stored block that turns a recorded (non-final) block into a whole raw
/// deflate stream for checking: BFINAL=1, BTYPE=00, aligned, LEN=0, NLEN=0xffff.
const FINAL_EMPTY: [u8; 5] = [0x01, 0x00, 0x00, 0xff, 0xff];

/// Where a file's aligned data begins and ends in the tar stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    None,
    /// The bytes just fed completed a header whose file data (≥ [`MIN_FILE`]) follows.
    DataStarts,
    /// The bytes just fed ended that file's data.
    DataEnds,
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// Collecting a 512-byte header (`filled` bytes so far).
    Header,
    /// Data of an entry not cut on its own, and padding, still to pass.
    Skip(u64),
    /// Data of a large file still to pass, then its padding.
    Aligned { left: u64, pad: u64 },
    /// A GNU long-name record's data (the next entry's path) still to pass, then its padding.
    LongName { left: u64, pad: u64 },
    /// The stream stopped looking like tar: no more cuts.
    Off,
}

/// Longest GNU long name kept (a longer one leaves its entry without a name here).
const MAX_NAME: u64 = 64 << 10;

/// Follows a tar stream's headers as its bytes go by.
pub struct TarTracker {
    state: State,
    header: Box<[u8; 512]>,
    filled: usize,
    /// The last GNU long-name record's data, for the header that follows it.
    long_name: Vec<u8>,
    /// The path and size of the large file whose data [`Event::DataStarts`] announced last.
    file: Option<(String, u64)>,
}

impl Default for TarTracker {
    fn default() -> Self {
        TarTracker {
            state: State::Header,
            header: Box::new([0; 512]),
            filled: 0,
            long_name: Vec::new(),
            file: None,
        }
    }
}

impl TarTracker {
    /// How many bytes may be fed before the next possible event (at least 1).
    pub fn span(&self) -> u64 {
        match self.state {
            State::Header => (512 - self.filled) as u64,
            State::Skip(n) => n,
            State::Aligned { left, .. } | State::LongName { left, .. } => left,
            State::Off => u64::MAX,
        }
    }

    /// The path (as the tar stream names it) and size of the large file whose data
    /// [`Event::DataStarts`] announced last; `None` when its name was not valid UTF-8.
    pub fn file(&self) -> Option<(&str, u64)> {
        self.file.as_ref().map(|(p, n)| (p.as_str(), *n))
    }

    /// Whether the next byte is a large file's data.
    pub fn aligned(&self) -> bool {
        matches!(self.state, State::Aligned { .. })
    }

    /// Take `data` (at most [`TarTracker::span`] bytes).
    pub fn feed(&mut self, data: &[u8]) -> Event {
        let n = data.len() as u64;
        match &mut self.state {
            State::Off => Event::None,
            State::Header => {
                self.header[self.filled..self.filled + data.len()].copy_from_slice(data);
                self.filled += data.len();
                if self.filled < 512 {
                    return Event::None;
                }
                self.filled = 0;
                self.parse()
            }
            State::Skip(left) => {
                *left -= n;
                if *left == 0 {
                    self.state = State::Header;
                }
                Event::None
            }
            State::LongName { left, pad } => {
                *left -= n;
                let pad = *pad;
                let done = *left == 0;
                self.long_name.extend_from_slice(data);
                if done {
                    self.state = if pad == 0 {
                        State::Header
                    } else {
                        State::Skip(pad)
                    };
                }
                Event::None
            }
            State::Aligned { left, pad } => {
                *left -= n;
                if *left > 0 {
                    return Event::None;
                }
                let pad = *pad;
                self.state = if pad == 0 {
                    State::Header
                } else {
                    State::Skip(pad)
                };
                Event::DataEnds
            }
        }
    }

    fn parse(&mut self) -> Event {
        if self.header.iter().all(|b| *b == 0) {
            // End-of-archive blocks.
            self.state = State::Header;
            return Event::None;
        }
        let h = tar::Header::from_byte_slice(&self.header[..]);
        let Ok(size) = h.entry_size() else {
            self.state = State::Off;
            return Event::None;
        };
        let Some(padded) = size.checked_next_multiple_of(512) else {
            self.state = State::Off;
            return Event::None;
        };
        if h.entry_type() == EntryType::GNULongName && size > 0 && size <= MAX_NAME {
            self.long_name.clear();
            self.state = State::LongName {
                left: size,
                pad: padded - size,
            };
            return Event::None;
        }
        let long = std::mem::take(&mut self.long_name);
        if matches!(h.entry_type(), EntryType::Regular | EntryType::Continuous) && size >= MIN_FILE
        {
            let name = if long.is_empty() {
                h.path_bytes().into_owned()
            } else {
                long
            };
            let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
            self.file = String::from_utf8(name[..end].to_vec())
                .ok()
                .map(|p| (p, size));
            self.state = State::Aligned {
                left: size,
                pad: padded - size,
            };
            return Event::DataStarts;
        }
        self.state = if padded == 0 {
            State::Header
        } else {
            State::Skip(padded)
        };
        Event::None
    }
}

/// What the compressor makes of a fixed probe: records made under another fingerprint are
/// not read.
pub fn fingerprint(level: i32) -> String {
    // Text and binary-looking bytes, so literal, match and block-type choices all show
    // (about a millisecond: computed where records are read or written, once per layer).
    let mut probe = Vec::with_capacity(96 << 10);
    let mut x: u32 = 0x9e37_79b9;
    for i in 0..(96u32 << 10) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        probe.push(match i % 3 {
            0 => b"the quick brown fox jumps over the lazy dog "[(i as usize / 3) % 44],
            1 => (x % 16) as u8,
            _ => (x >> 24) as u8,
        });
    }
    let Ok(l) = CompressionLvl::new(level) else {
        return String::new();
    };
    let mut c = Compressor::new(l);
    let mut out = vec![0; c.deflate_compress_bound(probe.len())];
    match c.deflate_compress(&probe, &mut out) {
        Ok(n) => format!("level{level}-{}", &Digest::of(&out[..n]).hex()[..32]),
        Err(_) => String::new(),
    }
}

/// One block of a blob: its key, where it starts in the blob, how long it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    pub key: Digest,
    pub offset: u64,
    pub len: u32,
}

#[derive(Serialize, Deserialize)]
struct Record {
    compressor: String,
    /// (key, offset, length) per block.
    blocks: Vec<(String, u64, u32)>,
}

#[derive(Debug, Clone)]
struct Place {
    blob: Arc<PathBuf>,
    offset: u64,
    len: u32,
    /// The blob's identity when the cache's trust rule vouched for it and its record.
    vouched: Option<Identity>,
}

/// The recorded blocks of the cache's gzip blobs, by key.
#[derive(Debug, Default)]
pub struct FragmentIndex {
    places: HashMap<Digest, Place>,
    /// Longest a recorded block may be (anything longer is not read).
    max_len: usize,
}

impl FragmentIndex {
    /// Every record of `cache` made by this compressor at `level`. Unreadable records are
    /// passed over: they are hints, checked on use.
    pub fn load(cache: &Cache, level: i32, max_block: usize) -> FragmentIndex {
        let print = fingerprint(level);
        let max_len = max_block + max_block / 8 + 1024;
        let mut places = HashMap::new();
        let names = cache.record_names(BUCKET).unwrap_or_default();
        for name in names {
            if places.len() >= MAX_INDEXED {
                break;
            }
            let Some(blob) = name
                .strip_suffix(".json")
                .and_then(|h| Digest::from_hex(h).ok())
            else {
                continue;
            };
            let Ok(Some(read)) = cache.read_record(BUCKET, &blob) else {
                continue;
            };
            let Ok(rec) = serde_json::from_slice::<Record>(&read.bytes) else {
                continue;
            };
            if rec.compressor != print || print.is_empty() {
                continue;
            }
            let path = Arc::new(cache.blob_path(&blob));
            let vouched = read.trusted.then(|| cache.vouched_blob(&blob)).flatten();
            for (key, offset, len) in rec.blocks {
                let Ok(key) = Digest::from_hex(&key) else {
                    continue;
                };
                if len as usize > max_len {
                    continue;
                }
                places.insert(
                    key,
                    Place {
                        blob: Arc::clone(&path),
                        offset,
                        len,
                        vouched,
                    },
                );
            }
        }
        FragmentIndex { places, max_len }
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// The recorded compressed bytes of the block `data` (keyed `key`): as read when the
    /// blob is still the one the cache vouched for, else once inflating them gave `data`
    /// back; `scratch` is the caller's buffer for that.
    pub fn find(
        &self,
        key: &Digest,
        data: &[u8],
        d: &mut Decompressor,
        scratch: &mut Vec<u8>,
    ) -> Option<Vec<u8>> {
        let place = self.places.get(key)?;
        let len = place.len as usize;
        if len > self.max_len {
            return None;
        }
        let file = std::fs::File::open(place.blob.as_path()).ok()?;
        let mut bytes = vec![0; len + FINAL_EMPTY.len()];
        file.read_exact_at(&mut bytes[..len], place.offset).ok()?;
        if let Some(id) = place.vouched {
            if file.metadata().is_ok_and(|m| trust::identity(&m) == id) {
                bytes.truncate(len);
                return Some(bytes);
            }
        }
        bytes[len..].copy_from_slice(&FINAL_EMPTY);
        scratch.resize(data.len(), 0);
        let n = d.deflate_decompress(&bytes, scratch).ok()?;
        if n != data.len() || scratch[..n] != *data {
            return None;
        }
        bytes.truncate(len);
        Some(bytes)
    }
}

#[cfg(test)]
impl FragmentIndex {
    /// The blocks `fragments` of the blob at `blob`.
    pub fn of_blob(blob: PathBuf, fragments: &[Fragment], max_block: usize) -> FragmentIndex {
        let blob = Arc::new(blob);
        FragmentIndex {
            places: fragments
                .iter()
                .map(|f| {
                    let place = Place {
                        blob: Arc::clone(&blob),
                        offset: f.offset,
                        len: f.len,
                        vouched: None,
                    };
                    (f.key, place)
                })
                .collect(),
            max_len: max_block + max_block / 8 + 1024,
        }
    }
}

/// Record the blocks of the committed gzip blob `blob`.
pub fn remember(
    cache: &Cache,
    blob: &Digest,
    level: i32,
    blocks: &[Fragment],
) -> std::io::Result<()> {
    if blocks.is_empty() {
        return Ok(());
    }
    let print = fingerprint(level);
    if print.is_empty() {
        return Ok(());
    }
    let rec = Record {
        compressor: print,
        blocks: blocks
            .iter()
            .map(|f| (f.key.hex(), f.offset, f.len))
            .collect(),
    };
    cache.put_record(BUCKET, blob, &rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(EntryType::Regular);
            b.append_data(&mut h, name, data.as_slice()).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn events(stream: &[u8], step: usize) -> Vec<(u64, Event)> {
        let mut t = TarTracker::default();
        let mut out = Vec::new();
        let mut at = 0usize;
        while at < stream.len() {
            let n = (stream.len() - at).min(step).min(t.span() as usize);
            let e = t.feed(&stream[at..at + n]);
            at += n;
            if e != Event::None {
                out.push((at as u64, e));
            }
        }
        out
    }

    #[test]
    fn large_files_data_is_found_whatever_the_write_sizes() {
        let long = "d/".repeat(80) + "big"; // a GNU long-name record before the header
        let stream = tar_of(&[
            ("small", vec![1; 1000]),
            (&long, vec![2; (MIN_FILE + 7) as usize]),
            ("exact", vec![3; MIN_FILE as usize]),
            ("under", vec![4; (MIN_FILE - 1) as usize]),
        ]);
        // Where the large files' data sits, from the tar crate's own reading.
        let mut want = Vec::new();
        let mut a = tar::Archive::new(stream.as_slice());
        for e in a.entries().unwrap() {
            let e = e.unwrap();
            if e.size() >= MIN_FILE {
                let start = e.raw_file_position();
                want.push((start, Event::DataStarts));
                want.push((start + e.size(), Event::DataEnds));
            }
        }
        assert_eq!(want.len(), 4);
        for step in [1, 7, 512, 8192, 1 << 20] {
            assert_eq!(events(&stream, step), want, "step {step}");
        }
    }

    #[test]
    fn a_stream_that_is_not_tar_gives_no_events() {
        let junk: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 1) as u8).collect();
        assert!(events(&junk, 100).is_empty());
    }

    #[test]
    fn the_fingerprint_depends_on_the_level() {
        assert_ne!(fingerprint(5), fingerprint(6));
        assert_eq!(fingerprint(5), fingerprint(5));
        assert!(!fingerprint(5).is_empty());
    }
}
