//! Layer records in the cache (`layers-v2/<key>.json` → [`LayerBlob`]): lookup under the
//! cache's trust rule, commit, and the full check of a record against its blob.
//!
//! Lookup, by what the stamps say:
//! - record and blob unchanged, and the blob's stamp agrees with the record: used as is;
//! - record unchanged, blob changed (e.g. an output that hard-linked it was deleted): the blob
//!   is hashed against its name and size — the record's diff_id was computed from exactly
//!   those bytes when the unchanged record was written;
//! - anything else (record changed, no stamps, stamps disagree): the blob is hashed and
//!   decompressed, and digest, size, diff_id and uncompressed size must all match the record.
//!
//! [`Records`] tells the cache's own maintenance (`cache verify`, `cache prune`) what a record
//! names and how its blob is checked.
//!
//! A failed check is a miss: the bad record (and a corrupt blob) is removed, never rewritten
//! in place, and a warning names it.

use std::io::{self, Read};

use super::{Compression, LayerBlob, LayerError};
use gpuimg_fetch::observe::Observer;
use gpuimg_store::cache::{BlobFacts, Cache, Identity, RecordRead, LAYERS};
use gpuimg_store::digest::{Digest, HashingWriter};

/// The diff_id and uncompressed size of a decompressed blob, or why decompressing failed.
pub(crate) type Decoded = Result<(Digest, u64), String>;

/// What a full read of a blob found.
pub(crate) struct Inspected {
    pub digest: Digest,
    pub size: u64,
    /// With a compression to try: the diff_id and uncompressed size, or why decoding failed.
    pub decoded: Option<Decoded>,
}

/// Read `file` once: hash the compressed bytes and, with `compression`, the decompressed ones.
pub(crate) fn inspect(
    file: std::fs::File,
    compression: Option<Compression>,
) -> io::Result<Inspected> {
    let mut src = HashingReader {
        inner: io::BufReader::with_capacity(1 << 20, file),
        hasher: HashingWriter::new(io::sink()),
    };
    let decoded = match compression {
        None => None,
        Some(c) => {
            let mut out = HashingWriter::new(io::sink());
            let r = match c {
                Compression::Gzip => {
                    io::copy(&mut flate2::read::MultiGzDecoder::new(&mut src), &mut out)
                }
                Compression::Zstd => zstd::stream::read::Decoder::new(&mut src)
                    .and_then(|mut d| io::copy(&mut d, &mut out)),
            };
            let (_, diff_id, n) = out.finish();
            Some(r.map(|_| (diff_id, n)).map_err(|e| e.to_string()))
        }
    };
    // Whatever the decoder left unread still counts towards the digest.
    io::copy(&mut src, &mut io::sink())?;
    let (_, digest, size) = src.hasher.finish();
    Ok(Inspected {
        digest,
        size,
        decoded,
    })
}

struct HashingReader<R> {
    inner: R,
    hasher: HashingWriter<io::Sink>,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        io::Write::write_all(&mut self.hasher, &buf[..n])?;
        Ok(n)
    }
}

/// The facts a blob stamp holds for a layer record.
pub(crate) fn facts_of(rec: &LayerBlob) -> BlobFacts {
    BlobFacts {
        size: rec.size,
        diff_id: Some(rec.diff_id),
        uncompressed_size: Some(rec.uncompressed_size),
    }
}

/// The outcome of checking a record against its blob.
pub(crate) enum Verdict {
    /// Everything agrees; the blob's bytes were read as the file with this identity (`None`
    /// when the file changed while it was read: good, but not to be stamped).
    Good(Option<Identity>),
    BlobMissing,
    /// The blob is not what its name says. `Identity`: the file that was read.
    BlobBad(String, Option<Identity>),
    /// The blob is intact but the record's claims about it are wrong.
    RecordWrong(String),
}

/// Check `rec` against its blob: always size and digest; with `decompress`, diff_id and
/// uncompressed size too. `Err` only for I/O failures other than a bad entry.
pub(crate) fn check(cache: &Cache, rec: &LayerBlob, decompress: bool) -> io::Result<Verdict> {
    #[cfg(test)]
    tests::count_check(decompress);
    let (file, id) = match cache.open_blob(&rec.digest) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(Verdict::BlobMissing),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            return Ok(Verdict::BlobBad(e.to_string(), None))
        }
        Err(e) => return Err(e),
    };
    let reopen = file.try_clone()?;
    let got = inspect(file, decompress.then_some(rec.compression))?;
    // The blob is judged by its name; only then are the record's claims judged by the blob.
    if got.digest != rec.digest {
        return Ok(Verdict::BlobBad(
            format!(
                "its content hashes to `{}` ({} bytes)",
                got.digest, got.size
            ),
            Some(id),
        ));
    }
    if got.size != rec.size {
        return Ok(Verdict::RecordWrong(format!(
            "it says {} bytes, its blob `{}` is {}",
            rec.size, rec.digest, got.size
        )));
    }
    match got.decoded {
        Some(Err(e)) => {
            return Ok(Verdict::RecordWrong(format!(
                "its blob does not decompress as {:?} ({e})",
                rec.compression
            )))
        }
        Some(Ok((diff_id, _))) if diff_id != rec.diff_id => {
            return Ok(Verdict::RecordWrong(format!(
                "it says diff_id `{}`, its blob decompresses to `{diff_id}`",
                rec.diff_id
            )))
        }
        Some(Ok((_, n))) if n != rec.uncompressed_size => {
            return Ok(Verdict::RecordWrong(format!(
                "it says {} bytes uncompressed, its blob decompresses to {n}",
                rec.uncompressed_size
            )))
        }
        _ => {}
    }
    let after = gpuimg_store::cache::trust::identity(&reopen.metadata()?);
    Ok(Verdict::Good((after == id).then_some(id)))
}

/// A cached layer recorded under `key`, used only after the trust rule (module doc) passes.
/// A bad entry is removed, reported through `obs.warn`, and looked up as absent.
pub fn lookup(cache: &Cache, key: &Digest, obs: &mut dyn Observer) -> Option<LayerBlob> {
    let name = Cache::record_name(LAYERS, key);
    let read = match cache.read_record(LAYERS, key) {
        Ok(None) => return None,
        Ok(Some(r)) => r,
        Err(e) => {
            heal(cache, key, None, obs, &format!("cannot be read ({e})"));
            return None;
        }
    };
    let rec: LayerBlob = match serde_json::from_slice(&read.bytes) {
        Ok(r) => r,
        Err(e) => {
            heal(
                cache,
                key,
                Some(&read),
                obs,
                &format!("is not a valid layer record ({e})"),
            );
            return None;
        }
    };
    let stamped = cache.trusted_blob(&rec.digest);
    if read.trusted && stamped.as_ref() == Some(&facts_of(&rec)) {
        return Some(rec);
    }
    // Decompress unless the record is unchanged and the blob merely lost its stamp.
    let decompress = !read.trusted || stamped.is_some();
    let verdict = match check(cache, &rec, decompress) {
        Ok(v) => v,
        Err(e) => {
            obs.warn(&format!(
                "Failed to read cache blob `{}` for `{name}` ({e}); treating it as a miss",
                rec.digest
            ));
            return None;
        }
    };
    match verdict {
        Verdict::Good(id) => {
            // Stamps are a shortcut only: failing to write one costs a check next time.
            if let Some(id) = id {
                let _ = cache.stamp_blob(&rec.digest, id, &facts_of(&rec));
            }
            if !read.trusted {
                let _ = cache.stamp_record(LAYERS, key, &read);
            }
            Some(rec)
        }
        Verdict::BlobMissing => {
            let why = format!("names blob `{}`, which is missing", rec.digest);
            heal(cache, key, Some(&read), obs, &why);
            None
        }
        Verdict::BlobBad(why, id) => {
            let removed = cache.remove_blob(&rec.digest, id.as_ref());
            obs.warn(&format!(
                "Cache blob `{}` (of `{name}`) is corrupt: {why}; {}",
                rec.digest,
                removed_or(removed, "removed it (a cache miss)")
            ));
            let _ = cache.remove_record(LAYERS, key, Some(&read));
            None
        }
        Verdict::RecordWrong(why) => {
            heal(cache, key, Some(&read), obs, &why);
            None
        }
    }
}

fn removed_or(r: io::Result<()>, done: &str) -> String {
    match r {
        Ok(()) => done.to_string(),
        Err(e) => format!("failed to remove it ({e}); treating it as a miss"),
    }
}

/// Remove a bad record, with a warning saying why.
fn heal(cache: &Cache, key: &Digest, read: Option<&RecordRead>, obs: &mut dyn Observer, why: &str) {
    let removed = cache.remove_record(LAYERS, key, read);
    obs.warn(&format!(
        "Cache record `{}` is bad: {why}; {}",
        Cache::record_name(LAYERS, key),
        removed_or(removed, "removed it (a cache miss)")
    ));
}

/// Record `blob` under `key` (the layer's own key, or an extra one such as an apt package
/// set), stamped, for [`lookup`].
pub fn remember(cache: &Cache, key: &Digest, blob: &LayerBlob) -> Result<(), LayerError> {
    cache
        .put_record(LAYERS, key, blob)
        .map_err(|source| LayerError::Write {
            component: "cache record".into(),
            source,
        })
}

/// Just before an export links `blob` into an output: confirm the blob is still the one this
/// build checked or wrote. An unchanged stamp is enough; otherwise it is hashed again. A blob
/// that changed while the build ran is removed and the build fails rather than export it.
pub fn ensure_intact(cache: &Cache, blob: &LayerBlob) -> Result<(), LayerError> {
    if cache.trusted_blob(&blob.digest).as_ref() == Some(&facts_of(blob)) {
        return Ok(());
    }
    let changed = |reason: String| LayerError::Changed {
        digest: blob.digest,
        reason,
    };
    match check(cache, blob, false).map_err(|e| changed(e.to_string()))? {
        Verdict::Good(id) => {
            if let Some(id) = id {
                let _ = cache.stamp_blob(&blob.digest, id, &facts_of(blob));
            }
            Ok(())
        }
        Verdict::BlobMissing => Err(changed("it was removed".into())),
        Verdict::BlobBad(why, id) => {
            let _ = cache.remove_blob(&blob.digest, id.as_ref());
            Err(changed(why))
        }
        Verdict::RecordWrong(why) => Err(changed(why)),
    }
}

/// The layer records as `gpuimg cache verify` and `cache prune` read them
/// ([`gpuimg_store::cache::maintain`]): what each names and how its blob is checked.
#[derive(Debug, Clone, Copy, Default)]
pub struct Records;

impl gpuimg_store::cache::maintain::LayerRecords for Records {
    type Record = LayerBlob;
    type Compression = Compression;
    type Decoded = Decoded;

    fn parse(&self, bytes: &[u8]) -> Result<LayerBlob, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }

    fn blob(&self, rec: &LayerBlob) -> Digest {
        rec.digest
    }

    fn layer(&self, rec: &LayerBlob) -> Digest {
        rec.diff_id
    }

    fn compression(&self, rec: &LayerBlob) -> Compression {
        rec.compression
    }

    fn facts(&self, rec: &LayerBlob) -> BlobFacts {
        facts_of(rec)
    }

    fn read_blob(
        &self,
        file: std::fs::File,
        compression: Option<Compression>,
    ) -> io::Result<(Digest, u64, Option<Decoded>)> {
        let got = inspect(file, compression)?;
        Ok((got.digest, got.size, got.decoded))
    }

    fn problem(&self, rec: &LayerBlob, size: u64, decoded: &Decoded) -> Option<String> {
        if size != rec.size {
            return Some(format!("it says {} bytes, its blob is {size}", rec.size));
        }
        match decoded {
            Err(e) => Some(format!(
                "its blob does not decompress as {:?} ({e})",
                rec.compression
            )),
            Ok((d, _)) if *d != rec.diff_id => Some(format!(
                "it says diff_id `{}`, its blob decompresses to `{d}`",
                rec.diff_id
            )),
            Ok((_, n)) if *n != rec.uncompressed_size => Some(format!(
                "it says {} bytes uncompressed, its blob decompresses to {n}",
                rec.uncompressed_size
            )),
            Ok(_) => None,
        }
    }

    fn check(&self, cache: &Cache, rec: &LayerBlob) -> io::Result<Option<String>> {
        Ok(match check(cache, rec, true)? {
            Verdict::Good(_) => None,
            Verdict::BlobMissing => Some("its blob vanished during the check".into()),
            Verdict::BlobBad(w, _) | Verdict::RecordWrong(w) => Some(w),
        })
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
