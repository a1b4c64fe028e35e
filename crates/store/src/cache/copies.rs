//! Rewritten library copies (device code pruned, debug sections stripped: `passes`) in the
//! cache.
//!
//! A copy's bytes are a blob of the content-addressed store (`blobs-v1/sha256/<hex>`, named
//! by their sha256, stamped like every blob); a record `copies-v1/<key>.json` says which blob
//! is the copy for a [`Key`] over the rewrite's kind and version, the original's identity and
//! the rewrite's parameters (the GPUs). Trust is the cache's: a copy is used without
//! re-hashing only while both the record's stamp and the blob's vouch for them; a blob whose
//! stamp does not is hashed in full against its name first (removed when it differs); a
//! record whose stamp does not vouch for it is not followed (the copy is written again).
//! `cache prune` removes the records and, as no layer record references them, the blobs:
//! copies are derived data, made again by the next build that needs one.
//! Must never write into an entry in place, nor hand out a copy whose bytes were not checked,
//! now or under an unchanged identity.

use std::fs;
use std::io;
use std::path::PathBuf;

use super::{BlobFacts, Bucket, Cache, Finding, Key};
use crate::digest::{hash_reader, Digest};

/// The purpose of the copies' keys (`cache::Key`); bump it when what a key covers changes.
const COPY_KEY: &str = "library-copy-v1";

/// What a copy record says: the blob holding the copy.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct CopyRecord {
    pub sha256: Digest,
    pub size: u64,
}

/// The key of the copy of kind `kind` (the rewrite and its version) of the original with
/// `identity`, rewritten with `params`.
fn copy_key(kind: &str, identity: &[u64; 5], params: &str) -> Digest {
    let mut k = Key::new(COPY_KEY);
    k.str(kind);
    for v in identity {
        k.u64(*v);
    }
    k.str(params);
    k.finish()
}

impl Cache {
    /// The copy of `kind` of the original with `identity` rewritten with `params`, `size`
    /// bytes: an earlier build's when the cache vouches for it (see the module doc); otherwise
    /// `write` writes it now (returning the sha256 of what it wrote). Returns its path and
    /// sha256.
    pub fn copy(
        &self,
        kind: &str,
        identity: &[u64; 5],
        params: &str,
        size: u64,
        write: impl FnOnce(&mut fs::File) -> io::Result<[u8; 32]>,
    ) -> io::Result<(PathBuf, [u8; 32])> {
        let key = copy_key(kind, identity, params);
        if let Some((d, _)) = find(self, &key, Some(size))? {
            return Ok((self.blob_path(&d), *d.as_bytes()));
        }
        let staged = self.temp_file("copy")?;
        let mut file = staged.file_handle().try_clone()?;
        let d = Digest::from_bytes(write(&mut file)?);
        file.sync_all()?;
        let path = self.store(Bucket::Blobs).commit(staged, &d)?;
        self.put_record(Bucket::Copies, &key, &CopyRecord { sha256: d, size })?;
        Ok((path, *d.as_bytes()))
    }

    /// The derived bytes of kind `kind` (the derivation and its version) whose inputs `inputs`
    /// names in full (a [`Key`] over everything that decides the bytes): an earlier build's
    /// when the cache vouches for them, as [`Cache::copy`] does; otherwise `write` writes them
    /// now (returning the sha256 of what it wrote). Returns the blob's path, its sha256, its size
    /// and whether it was found.
    pub fn derived(
        &self,
        kind: &str,
        inputs: &Digest,
        write: impl FnOnce(&mut fs::File) -> io::Result<[u8; 32]>,
    ) -> io::Result<Derived> {
        let key = copy_key(kind, &[0; 5], &inputs.hex());
        if let Some((d, size)) = find(self, &key, None)? {
            return Ok(Derived {
                path: self.blob_path(&d),
                sha256: d,
                size,
                found: true,
            });
        }
        let staged = self.temp_file("derived")?;
        let mut file = staged.file_handle().try_clone()?;
        let d = Digest::from_bytes(write(&mut file)?);
        file.sync_all()?;
        let size = file.metadata()?.len();
        let path = self.store(Bucket::Blobs).commit(staged, &d)?;
        self.put_record(Bucket::Copies, &key, &CopyRecord { sha256: d, size })?;
        Ok(Derived {
            path,
            sha256: d,
            size,
            found: false,
        })
    }

    /// Check every copy record in full, ignoring stamps (`gpuimg cache verify`): each must be
    /// a copy record naming a blob that is there (the blob's bytes are hashed with the other
    /// blobs). Returns how many were checked and the bad ones; with `repair`, a bad one is
    /// removed (the next build that needs the copy writes it again).
    pub fn verify_copies(&self, repair: bool) -> io::Result<(usize, Vec<Finding>)> {
        let names = self.record_names(Bucket::Copies)?;
        let mut bad = Vec::new();
        for name in &names {
            let entry = format!("{}/{name}", Bucket::Copies.dir());
            let key = name
                .strip_suffix(".json")
                .and_then(|h| Digest::from_hex(h).ok());
            let (problem, removed) = match key {
                None => (
                    "is not named `<sha256 hex>.json`".to_string(),
                    repair && self.remove_stray(Bucket::Copies, name).is_ok(),
                ),
                Some(key) => {
                    let problem = match self.read_record(Bucket::Copies, &key) {
                        Ok(None) => continue,
                        Err(e) => format!("cannot be read ({e})"),
                        Ok(Some(read)) => match serde_json::from_slice::<CopyRecord>(&read.bytes) {
                            Err(e) => format!("is not a valid copy record ({e})"),
                            Ok(rec) => {
                                let blob = self.blob_path(&rec.sha256);
                                match std::fs::symlink_metadata(&blob) {
                                    Ok(m) if m.is_file() && m.len() == rec.size => continue,
                                    Ok(m) => format!(
                                        "its blob `{}` is {} bytes, not {}",
                                        rec.sha256,
                                        m.len(),
                                        rec.size
                                    ),
                                    Err(_) => format!("its blob `{}` is missing", rec.sha256),
                                }
                            }
                        },
                    };
                    (
                        problem,
                        repair && self.remove_record(Bucket::Copies, &key, None).is_ok(),
                    )
                }
            };
            bad.push(Finding {
                entry,
                problem,
                removed,
            });
        }
        Ok((names.len(), bad))
    }
}

/// Derived bytes in the cache ([`Cache::derived`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub path: PathBuf,
    pub sha256: Digest,
    pub size: u64,
    /// Whether an earlier build's bytes were found (else they were written now).
    pub found: bool,
}

/// The blob of copy `key` and its size, when its record and its bytes are vouched for or
/// checked now; of the size `expected` where one is given.
fn find(cache: &Cache, key: &Digest, expected: Option<u64>) -> io::Result<Option<(Digest, u64)>> {
    // A record that cannot be read is replaced by the write that follows a miss.
    let Ok(Some(read)) = cache.read_record(Bucket::Copies, key) else {
        return Ok(None);
    };
    if !read.trusted {
        return Ok(None);
    }
    let Ok(rec) = serde_json::from_slice::<CopyRecord>(&read.bytes) else {
        return Ok(None);
    };
    let size = rec.size;
    if expected.is_some_and(|e| e != size) {
        return Ok(None);
    }
    let store = cache.store(Bucket::Blobs);
    if store.trusted(&rec.sha256).is_some_and(|f| f.size == size) {
        return Ok(Some((rec.sha256, size)));
    }
    let Ok(Some((file, id))) = store.open(&rec.sha256) else {
        return Ok(None);
    };
    let (got, n) = hash_reader(file)?;
    if got == rec.sha256 && n == size {
        store.stamp(&got, id, &BlobFacts::sized(size))?;
        return Ok(Some((got, size)));
    }
    store.remove(&rec.sha256, Some(&id))?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write_bytes(b: &'static [u8]) -> impl FnOnce(&mut fs::File) -> io::Result<[u8; 32]> {
        move |f| {
            f.write_all(b)?;
            Ok(*Digest::of(b).as_bytes())
        }
    }

    #[test]
    fn a_copy_is_written_once_and_found_again_under_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let id = [1, 2, 3, 4, 5];
        let (p, h) = cache
            .copy("k-v1", &id, ";sm_90", 5, write_bytes(b"abcde"))
            .unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"abcde");
        assert_eq!(p, cache.blob_path(&Digest::of(b"abcde")));
        assert_eq!(h, *Digest::of(b"abcde").as_bytes());
        let again = cache
            .copy("k-v1", &id, ";sm_90", 5, |_| panic!("written again"))
            .unwrap();
        assert_eq!(again, (p, h));
        // Another kind, original or parameter is another copy.
        let other = cache
            .copy("k-v1", &id, ";sm_80", 5, write_bytes(b"fghij"))
            .unwrap();
        assert_eq!(fs::read(other.0).unwrap(), b"fghij");
    }

    #[test]
    fn derived_bytes_are_found_by_their_inputs_alone() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let inputs = Digest::of(b"the inputs");
        let first = cache
            .derived("d-v1", &inputs, write_bytes(b"derived!"))
            .unwrap();
        assert!(!first.found);
        assert_eq!(first.size, 8);
        let again = cache
            .derived("d-v1", &inputs, |_| panic!("written again"))
            .unwrap();
        assert!(again.found);
        assert_eq!(
            (&again.path, again.sha256, again.size),
            (&first.path, first.sha256, 8)
        );
        // Other inputs, or another kind, are other bytes.
        let other = cache
            .derived("d-v1", &Digest::of(b"other"), write_bytes(b"other"))
            .unwrap();
        assert!(!other.found);
        assert!(
            !cache
                .derived("d-v2", &inputs, write_bytes(b"v2"))
                .unwrap()
                .found
        );
        // Changed behind the cache's back: written again.
        fs::remove_file(&first.path).unwrap();
        fs::write(&first.path, b"Derived!").unwrap();
        let mended = cache
            .derived("d-v1", &inputs, write_bytes(b"derived!"))
            .unwrap();
        assert!(!mended.found);
        assert_eq!(fs::read(&mended.path).unwrap(), b"derived!");
    }

    #[test]
    fn a_copy_whose_bytes_changed_is_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let id = [9; 5];
        let (p, _) = cache
            .copy("k-v1", &id, "", 5, write_bytes(b"abcde"))
            .unwrap();
        // Changed behind the cache's back: the stamp no longer vouches, the full check fails.
        fs::remove_file(&p).unwrap();
        fs::write(&p, b"xbcde").unwrap();
        let (p2, h) = cache
            .copy("k-v1", &id, "", 5, write_bytes(b"abcde"))
            .unwrap();
        assert_eq!(p2, p);
        assert_eq!(fs::read(&p2).unwrap(), b"abcde");
        assert_eq!(h, *Digest::of(b"abcde").as_bytes());
        // Unvouched but intact: checked in full, restamped and used.
        let bytes = fs::read(&p).unwrap();
        fs::remove_file(&p).unwrap();
        fs::write(&p, &bytes).unwrap();
        assert!(cache.trusted_blob(&Digest::of(b"abcde")).is_none());
        cache
            .copy("k-v1", &id, "", 5, |_| panic!("written again"))
            .unwrap();
        assert!(cache.trusted_blob(&Digest::of(b"abcde")).is_some());
    }

    #[test]
    fn an_edited_record_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let id = [7; 5];
        cache
            .copy("k-v1", &id, "", 5, write_bytes(b"abcde"))
            .unwrap();
        cache
            .copy("k-v1", &[8; 5], "", 5, write_bytes(b"vwxyz"))
            .unwrap();
        let key = copy_key("k-v1", &id, "");
        let rec = dir
            .path()
            .join(Bucket::Copies.dir())
            .join(format!("{}.json", key.hex()));
        let other = serde_json::to_vec(&CopyRecord {
            sha256: Digest::of(b"vwxyz"),
            size: 5,
        })
        .unwrap();
        fs::remove_file(&rec).unwrap();
        fs::write(&rec, other).unwrap();
        let (p, _) = cache
            .copy("k-v1", &id, "", 5, write_bytes(b"abcde"))
            .unwrap();
        assert_eq!(fs::read(p).unwrap(), b"abcde");
    }

    #[test]
    fn verify_finds_records_whose_copy_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let (p, _) = cache
            .copy("k-v1", &[1; 5], "", 5, write_bytes(b"abcde"))
            .unwrap();
        cache
            .copy("k-v1", &[2; 5], "", 5, write_bytes(b"fghij"))
            .unwrap();
        assert_eq!(cache.verify_copies(false).unwrap(), (2, vec![]));
        fs::remove_file(&p).unwrap();
        let (n, bad) = cache.verify_copies(true).unwrap();
        assert_eq!(n, 2);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(
            bad[0].problem.contains("is missing") && bad[0].removed,
            "{bad:?}"
        );
        assert_eq!(cache.verify_copies(false).unwrap(), (1, vec![]));
    }
}
