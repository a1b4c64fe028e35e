//! Content-addressed buckets (`blobs-v1`, `debs-v1`, `indexes-v1`): a [`Store`] names each
//! entry `<bucket>/sha256/<hex>` by the sha256 of its bytes and keeps its stamp under
//! `trust-v2/<bucket>/<hex>.json`; [`BlobWriter`] hashes while writing to a staging file and
//! renames it into place on commit. Also the one function that creates the cache's temp files.
//!
//! An entry is never opened for writing once it has its name: replacing one is always a new
//! file renamed over it, so hard links to the old inode (outputs) keep their bytes.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::staging::Staged;

use super::trust::{self, BlobFacts, Identity};
use super::write_through::WriteThrough;
use super::{Bucket, Cache, Finding, Shape};
use crate::digest::{hash_reader, Digest, HashingWriter};

impl Cache {
    /// A fresh temp file under `tmp/`. Every partial write into this cache (blobs, downloads,
    /// records, stamps, roots) starts here, and reaches its name only by a rename.
    /// A staging file (locked while it lives, reclaimed by the next build if this one dies),
    /// 0644 so that an output can hard-link the blob it becomes.
    pub fn temp_file(&self, stem: &str) -> io::Result<Staged> {
        Staged::file(&self.tmp_dir(), stem, 0o644)
    }

    /// The content-addressed bucket `bucket` (`Blobs`, `Debs` or `Indexes`).
    pub fn store(&self, bucket: Bucket) -> Store<'_> {
        debug_assert_eq!(bucket.shape(), Shape::Content, "{bucket:?}");
        Store {
            cache: self,
            bucket,
        }
    }

    /// The layer blob `d` (in `blobs-v1`).
    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        self.store(Bucket::Blobs).path(d)
    }

    /// Start writing a layer blob; it becomes visible under its digest on `commit`.
    pub fn blob_writer(&self) -> io::Result<BlobWriter> {
        self.store(Bucket::Blobs).writer()
    }

    /// [`Store::trusted`] for layer blobs.
    pub fn trusted_blob(&self, d: &Digest) -> Option<BlobFacts> {
        self.store(Bucket::Blobs).trusted(d)
    }

    /// The identity layer blob `d` was stamped with, while its file still has it (what
    /// [`Cache::trusted_blob`] vouches for, with the identity to check an opened file against).
    pub fn vouched_blob(&self, d: &Digest) -> Option<Identity> {
        self.store(Bucket::Blobs).vouched(d).map(|(id, _)| id)
    }

    /// [`Store::open`] for layer blobs.
    pub fn open_blob(&self, d: &Digest) -> io::Result<Option<(File, Identity)>> {
        self.store(Bucket::Blobs).open(d)
    }

    /// [`Store::stamp`] for layer blobs.
    pub fn stamp_blob(&self, d: &Digest, id: Identity, facts: &BlobFacts) -> io::Result<()> {
        self.store(Bucket::Blobs).stamp(d, id, facts)
    }

    /// [`Store::stamp_new`] for layer blobs.
    pub fn stamp_new_blob(&self, d: &Digest, facts: &BlobFacts) -> io::Result<()> {
        self.store(Bucket::Blobs).stamp_new(d, facts)
    }

    /// [`Store::restamp_linked`] for layer blobs.
    pub fn restamp_linked(&self, d: &Digest) -> io::Result<()> {
        self.store(Bucket::Blobs).restamp_linked(d)
    }

    /// [`Store::remove`] for layer blobs.
    pub fn remove_blob(&self, d: &Digest, checked: Option<&Identity>) -> io::Result<()> {
        self.store(Bucket::Blobs).remove(d, checked)
    }

    /// The file names under `blobs-v1/sha256/`, sorted: each should be a digest's hex.
    pub fn blob_names(&self) -> io::Result<Vec<String>> {
        self.store(Bucket::Blobs).names()
    }
}

/// One content-addressed bucket of a [`Cache`].
#[derive(Debug, Clone, Copy)]
pub struct Store<'a> {
    cache: &'a Cache,
    bucket: Bucket,
}

impl<'a> Store<'a> {
    pub fn bucket(&self) -> Bucket {
        self.bucket
    }

    fn dir(&self) -> PathBuf {
        self.cache.dir(self.bucket).join("sha256")
    }

    pub fn path(&self, d: &Digest) -> PathBuf {
        self.dir().join(d.hex())
    }

    /// How entry `name` is named in messages: `<bucket>/sha256/<name>`.
    pub fn entry_name(&self, name: &str) -> String {
        format!("{}/sha256/{name}", self.bucket.dir())
    }

    fn stamp_path(&self, d: &Digest) -> PathBuf {
        self.cache
            .stamp_dir(self.bucket)
            .join(format!("{}.json", d.hex()))
    }

    /// What entry `d` is known to be, if its file still has the identity it was stamped with.
    /// `None` (missing, never stamped, or changed since) means: check it before use.
    pub fn trusted(&self, d: &Digest) -> Option<BlobFacts> {
        self.vouched(d).map(|(_, facts)| facts)
    }

    /// [`Store::trusted`], with the stamped identity the file still has.
    pub fn vouched(&self, d: &Digest) -> Option<(Identity, BlobFacts)> {
        let meta = std::fs::symlink_metadata(self.path(d)).ok()?;
        if !meta.is_file() {
            return None;
        }
        let (id, facts) = trust::read_stamp::<BlobFacts>(&self.stamp_path(d))?;
        (id == trust::identity(&meta) && facts.size == meta.len()).then_some((id, facts))
    }

    /// Open entry `d` for a full check (never following a symlink), with the identity of the
    /// opened file. `Ok(None)` when there is no such entry; `InvalidData` when it is a symlink
    /// or not a regular file.
    pub fn open(&self, d: &Digest) -> io::Result<Option<(File, Identity)>> {
        let Some((file, meta)) = trust::open_entry(&self.path(d))? else {
            return Ok(None);
        };
        Ok(Some((file, trust::identity(&meta))))
    }

    /// [`Store::open`] for a check that is no use: the access time stays (see `downloads.rs`).
    pub fn open_unused(&self, d: &Digest) -> io::Result<Option<(File, Identity)>> {
        let Some((file, meta)) = trust::open_entry_unused(&self.path(d))? else {
            return Ok(None);
        };
        Ok(Some((file, trust::identity(&meta))))
    }

    /// Stamp entry `d` as checked: `id` is the identity of the file whose bytes were checked.
    pub fn stamp(&self, d: &Digest, id: Identity, facts: &BlobFacts) -> io::Result<()> {
        let path = self.stamp_path(d);
        ensure_parent(&path)?;
        trust::write_stamp(self.cache.temp_file("stamp")?, &path, id, facts)
    }

    /// Stamp the entry just committed under `d` (its identity is read now, after the rename).
    pub fn stamp_new(&self, d: &Digest, facts: &BlobFacts) -> io::Result<()> {
        let meta = std::fs::symlink_metadata(self.path(d))?;
        self.stamp(d, trust::identity(&meta), facts)
    }

    /// After an export hard-linked entry `d` (which moves its ctime, as does unlinking an old
    /// output's link), carry the stamp over to the new ctime — only when dev, inode, size and
    /// mtime are all still the stamped ones. Anything else stays for the next use to check.
    pub fn restamp_linked(&self, d: &Digest) -> io::Result<()> {
        let Some((then, facts)) = trust::read_stamp::<BlobFacts>(&self.stamp_path(d)) else {
            return Ok(());
        };
        let now = trust::identity(&std::fs::symlink_metadata(self.path(d))?);
        if now != then && trust::only_ctime_moved(&then, &now) {
            self.stamp(d, now, &facts)?;
        }
        Ok(())
    }

    /// Remove entry `d` (found bad) and its stamp — the entry only while its path still names
    /// the inode that was checked (`checked`), so a good copy renamed in meanwhile stays.
    pub fn remove(&self, d: &Digest, checked: Option<&Identity>) -> io::Result<()> {
        match checked {
            Some(id) => trust::remove_checked(&self.path(d), id)?,
            None => trust::remove_if_present(&self.path(d))?,
        }
        trust::remove_if_present(&self.stamp_path(d))
    }

    /// The file names under `<bucket>/sha256/`, sorted: each should be a digest's hex.
    pub fn names(&self) -> io::Result<Vec<String>> {
        list(&self.dir())
    }

    /// Start writing an entry; it becomes visible under its digest on `commit`.
    pub fn writer(&self) -> io::Result<BlobWriter> {
        let tmp = self.cache.temp_file(match self.bucket {
            Bucket::Blobs => "blob",
            _ => "download",
        })?;
        // Layer blobs are not read again while building; packages and indexes are.
        let file = match self.bucket {
            Bucket::Blobs => WriteThrough::new(tmp),
            _ => WriteThrough::plain(tmp),
        };
        Ok(BlobWriter {
            inner: HashingWriter::new(BufWriter::with_capacity(1 << 20, file)),
            dest_dir: self.dir(),
        })
    }

    /// Move a staging file whose bytes the caller hashed to `d` into place, and stamp it with
    /// its identity after the rename.
    pub fn commit(&self, tmp: Staged, d: &Digest) -> io::Result<PathBuf> {
        let path = self.path(d);
        ensure_parent(&path)?;
        let size = tmp.file_handle().metadata()?.len();
        tmp.persist(&path)?;
        self.stamp_new(d, &BlobFacts::sized(size))?;
        Ok(path)
    }

    /// Hash every entry against its name, ignoring stamps (`gpuimg cache verify`), leaving
    /// each one's access time (its last use) as it was. Returns how
    /// many were checked and the bad ones. With `repair`, bad entries are removed and good ones
    /// stamped. For buckets whose entries need no facts beyond their size (downloads).
    pub fn verify_all(&self, repair: bool) -> io::Result<(usize, Vec<Finding>)> {
        let names = self.names()?;
        let mut bad = Vec::new();
        for name in &names {
            let problem = match Digest::from_hex(name) {
                Err(_) => {
                    let r = if repair {
                        remove_any(&self.dir().join(name))
                    } else {
                        Ok(())
                    };
                    Some(("is not named by a sha256 digest".to_string(), r))
                }
                Ok(d) => self.check_one(&d, repair)?,
            };
            if let Some((problem, removed)) = problem {
                bad.push(Finding {
                    entry: self.entry_name(name),
                    problem,
                    removed: repair && removed.is_ok(),
                });
            }
        }
        Ok((names.len(), bad))
    }

    /// Hash entry `d` in full: `Some((problem, removal))` when it is bad. With `repair`, a
    /// good one is stamped and a bad one removed.
    fn check_one(&self, d: &Digest, repair: bool) -> io::Result<Option<(String, io::Result<()>)>> {
        let remove = |checked: Option<&Identity>| {
            if repair {
                self.remove(d, checked)
            } else {
                Ok(())
            }
        };
        let (file, id) = match self.open_unused(d) {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(None),
            Err(e) => return Ok(Some((e.to_string(), remove(None)))),
        };
        let after = file.try_clone()?;
        let (actual, size) = match hash_reader(io::BufReader::with_capacity(1 << 20, file)) {
            Ok(r) => r,
            Err(e) => return Ok(Some((format!("cannot be read ({e})"), remove(Some(&id))))),
        };
        if actual != *d {
            let why = format!("its content hashes to `{actual}`");
            return Ok(Some((why, remove(Some(&id)))));
        }
        if repair && trust::identity(&after.metadata()?) == id {
            self.stamp(d, id, &BlobFacts::sized(size))?;
        }
        Ok(None)
    }
}

/// Create the directory `path` goes in (buckets appear on first write).
pub(super) fn ensure_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(p) => fs_err::create_dir_all(p),
        None => Ok(()),
    }
}

/// Remove a file, or a directory with what it holds, where an entry should be.
fn remove_any(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs_err::remove_dir_all(path),
        Ok(_) => trust::remove_if_present(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The file names in `dir`, sorted; a missing directory lists as empty.
pub(super) fn list(dir: &Path) -> io::Result<Vec<String>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("Failed to list `{}`: {e}", dir.display()),
            ))
        }
    };
    let mut v = Vec::new();
    for e in rd {
        v.push(e?.file_name().to_string_lossy().into_owned());
    }
    v.sort();
    Ok(v)
}

pub struct BlobWriter {
    inner: HashingWriter<BufWriter<WriteThrough<Staged>>>,
    dest_dir: PathBuf,
}

impl BlobWriter {
    pub fn count(&self) -> u64 {
        self.inner.count()
    }

    /// Flush, name the file by its digest (a rename: an existing entry of that name is
    /// replaced, never rewritten) and return (digest, size, path). The caller stamps it.
    pub fn commit(self) -> io::Result<(Digest, u64, PathBuf)> {
        let (buf, digest, size) = self.inner.finish();
        let tmp = buf.into_inner().map_err(|e| e.into_error())?.into_inner();
        fs_err::create_dir_all(&self.dest_dir)?;
        let dest = self.dest_dir.join(digest.hex());
        tmp.persist(&dest)?;
        Ok((digest, size, dest))
    }
}

impl Write for BlobWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(store: &Store, data: &[u8]) -> (Digest, PathBuf) {
        let mut w = store.writer().unwrap();
        w.write_all(data).unwrap();
        let (d, n, p) = w.commit().unwrap();
        store.stamp_new(&d, &BlobFacts::sized(n)).unwrap();
        (d, p)
    }

    #[test]
    fn buckets_keep_their_entries_and_stamps_apart() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let (debs, idx) = (cache.store(Bucket::Debs), cache.store(Bucket::Indexes));
        let (d, p) = put(&debs, b"package");
        assert_eq!(p, dir.path().join("debs-v1/sha256").join(d.hex()));
        assert!(dir
            .path()
            .join("trust-v2/debs-v1")
            .join(format!("{}.json", d.hex()))
            .is_file());
        assert_eq!(debs.trusted(&d), Some(BlobFacts::sized(7)));
        assert_eq!(idx.trusted(&d), None, "another bucket knows nothing of it");
        assert!(idx.open(&d).unwrap().is_none());
        assert_eq!(cache.sweep_stamps().unwrap(), 0);
        std::fs::remove_file(&p).unwrap();
        assert_eq!(debs.trusted(&d), None);
        assert_eq!(cache.sweep_stamps().unwrap(), 1);
    }

    #[test]
    fn verify_all_reports_each_bad_entry_and_repair_removes_them() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let store = cache.store(Bucket::Indexes);
        let (good, _) = put(&store, b"good");
        let (flipped, p1) = put(&store, b"flip");
        std::fs::write(&p1, b"flop").unwrap();
        let (cut, p2) = put(&store, b"truncated");
        std::fs::write(&p2, b"trunc").unwrap();
        std::fs::write(dir.path().join("indexes-v1/sha256/stray"), b"x").unwrap();
        let (linked, p3) = put(&store, b"target");
        std::fs::remove_file(&p3).unwrap();
        std::os::unix::fs::symlink(&p1, &p3).unwrap();
        let (n, bad) = store.verify_all(false).unwrap();
        assert_eq!(n, 5);
        let entries: Vec<String> = bad.iter().map(|f| f.entry.clone()).collect();
        let e = |d: &Digest| format!("indexes-v1/sha256/{}", d.hex());
        let mut want = vec![
            e(&flipped),
            e(&cut),
            e(&linked),
            "indexes-v1/sha256/stray".to_string(),
        ];
        want.sort();
        let mut entries = entries;
        entries.sort();
        assert_eq!(entries, want);
        assert!(bad.iter().all(|f| !f.removed));
        let (_, bad) = store.verify_all(true).unwrap();
        assert!(bad.iter().all(|f| f.removed), "{bad:?}");
        let (n, bad) = store.verify_all(false).unwrap();
        assert_eq!((n, bad.len()), (1, 0));
        assert!(store.trusted(&good).is_some());
    }
}
