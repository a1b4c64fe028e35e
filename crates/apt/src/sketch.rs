//! A package's sketch: every entry of its data tarball (path, kind, mode, owner, link target)
//! and, of its files, only what a metadata step reads: the bytes of the files the fix-ups read
//! (`fixups::reads`, `dpkgdb::reads`) and of the package's conffiles (the dpkg database records
//! their checksums), and the ELF facts of what `ld.so.cache` indexes (`ldcache::is_candidate`).
//!
//! A sketch is taken while a package is unpacked in full, kept in the cache's `sketches-v1`
//! bucket under the `.deb`'s sha256, and lets a later build whose layer for that package is
//! cached rebuild the `metadata` layer without decompressing the package or writing its files
//! (`unpack::replay`). Used only while its stamp vouches for it (the cache's trust rule: the
//! full check of a sketch is unpacking the package again, so anything else is a miss). Must
//! never hold a path or link that is not valid UTF-8 (such a package is never sketched).

use serde::{Deserialize, Serialize};

use gpuimg_elf::SharedObject;
use gpuimg_store::cache::{Bucket, Cache, Key};
use gpuimg_store::digest::Digest;

/// The entries of one package's data tarball, in order.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Sketch {
    pub entries: Vec<SketchEntry>,
    /// Grown past [`MAX_SKETCH_BYTES`] while being taken: never recorded (the package is
    /// always unpacked in full).
    #[serde(skip)]
    pub abandoned: bool,
    /// Bytes the sketch holds, roughly (kept file bytes plus a fixed cost per entry).
    #[serde(skip)]
    pub weight: u64,
}

/// The most a sketch may hold (well under the cache's record size limit): a package whose
/// kept files or entries pass it is not sketched, so what a package supplies cannot grow a
/// sketch without bound.
pub const MAX_SKETCH_BYTES: u64 = 16 << 20;

impl Sketch {
    /// Add one entry; past [`MAX_SKETCH_BYTES`] the sketch is dropped and abandoned.
    pub fn push(&mut self, entry: SketchEntry) {
        if self.abandoned {
            return;
        }
        self.weight += 256
            + entry.header.path.len() as u64
            + match &entry.body {
                Body::Kept(b) => b.len() as u64,
                _ => 0,
            };
        if self.weight > MAX_SKETCH_BYTES {
            self.entries = Vec::new();
            self.abandoned = true;
        } else {
            self.entries.push(entry);
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SketchEntry {
    pub header: Header,
    pub body: Body,
}

/// One tar entry's header, as the unpacker applies it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Header {
    /// The path as the tarball names it (`./usr/bin/ls`).
    pub path: String,
    pub kind: Kind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// A symlink's target or a hard link's source, as stored.
    #[serde(with = "utf8")]
    pub link: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Dir,
    File,
    Symlink,
    HardLink,
    /// A device, FIFO or anything else the unpacker skips.
    Other,
}

/// What a sketch keeps of a regular file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Body {
    /// Not a regular file.
    None,
    /// A file a fix-up reads, whole.
    Kept(#[serde(with = "utf8_bytes")] Vec<u8>),
    /// A file `ld.so.cache` would index: its ELF facts (`None`: not a shared object it reads).
    Library(Option<SharedObject>),
    /// Anything else: left out.
    Elided,
}

/// The sketch's key: the package's bytes and this gpuimg (a change to what a metadata step
/// reads takes new sketches).
pub fn key(deb: &Digest) -> Digest {
    let mut k = Key::new("apt-sketch-v3").tool_version();
    k.digest(deb);
    k.finish()
}

/// The recorded sketch of the package whose `.deb` has sha256 `deb`, if trusted.
pub fn recorded(cache: &Cache, deb: &Digest) -> Option<Sketch> {
    let rec = cache.read_record(Bucket::Sketches, &key(deb)).ok()??;
    if !rec.trusted {
        return None;
    }
    serde_json::from_slice(&rec.bytes).ok()
}

/// Whether a sketch of the package is recorded at all (trusted or not: an untrusted one is
/// replaced the next time the package could be replayed).
pub fn exists(cache: &Cache, deb: &Digest) -> bool {
    cache.has_record(Bucket::Sketches, &key(deb))
}

/// Record a sketch (it only saves work next time: a failure is no error, and a package whose
/// paths are not UTF-8 cannot be written as one).
pub fn remember(cache: &Cache, deb: &Digest, sketch: &Sketch) {
    if sketch.abandoned {
        return;
    }
    let _ = cache.put_record(Bucket::Sketches, &key(deb), sketch);
}

/// Link targets as JSON strings; bytes that are not UTF-8 do not serialize.
mod utf8 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(b) => match std::str::from_utf8(b) {
                Ok(t) => s.serialize_some(t),
                Err(_) => Err(serde::ser::Error::custom("a link target is not UTF-8")),
            },
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.map(String::into_bytes))
    }
}

/// Kept file bytes as JSON strings (the files the fix-ups read are text); others do not
/// serialize.
mod utf8_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(b) {
            Ok(t) => s.serialize_str(t),
            Err(_) => Err(serde::ser::Error::custom("a kept file is not UTF-8")),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        Ok(String::deserialize(d)?.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(link: Option<&[u8]>, body: Body) -> Sketch {
        Sketch {
            entries: vec![SketchEntry {
                header: Header {
                    path: "./usr/lib/libx.so.1".into(),
                    kind: Kind::Symlink,
                    mode: 0o777,
                    uid: 0,
                    gid: 0,
                    link: link.map(<[u8]>::to_vec),
                },
                body,
            }],
            ..Sketch::default()
        }
    }

    #[test]
    fn a_sketch_round_trips_through_json() {
        let so = SharedObject {
            is_64: true,
            machine: 62,
            soname: Some("libx.so.1".into()),
            ..Default::default()
        };
        let s = entry(Some(b"libx.so.1.2"), Body::Library(Some(so.clone())));
        let back: Sketch = serde_json::from_slice(&serde_json::to_vec(&s).unwrap()).unwrap();
        assert_eq!(
            back.entries[0].header.link.as_deref(),
            Some(&b"libx.so.1.2"[..])
        );
        assert!(matches!(&back.entries[0].body, Body::Library(Some(x)) if *x == so));
        let kept = entry(None, Body::Kept(b"root:x:0:0\n".to_vec()));
        let back: Sketch = serde_json::from_slice(&serde_json::to_vec(&kept).unwrap()).unwrap();
        assert!(matches!(&back.entries[0].body, Body::Kept(b) if b == b"root:x:0:0\n"));
    }

    #[test]
    fn a_sketch_past_its_cap_is_abandoned_not_truncated() {
        let mut s = Sketch::default();
        let big = entry(
            None,
            Body::Kept(vec![b'x'; (MAX_SKETCH_BYTES / 2) as usize]),
        );
        s.push(big.entries[0].clone());
        assert!(!s.abandoned && s.entries.len() == 1);
        s.push(big.entries[0].clone());
        assert!(s.abandoned && s.entries.is_empty());
        s.push(entry(None, Body::None).entries[0].clone());
        assert!(s.abandoned && s.entries.is_empty());
    }

    #[test]
    fn bytes_that_are_not_utf8_are_never_sketched() {
        assert!(serde_json::to_vec(&entry(Some(b"\xff"), Body::None)).is_err());
        assert!(serde_json::to_vec(&entry(None, Body::Kept(vec![0xfe, 0xff]))).is_err());
    }
}
