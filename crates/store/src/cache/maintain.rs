//! `gpuimg cache verify` and `gpuimg cache prune` over every bucket of the cache: the full
//! check of every layer blob, layer record and download (debs and indexes), ignoring stamps,
//! and the removal of what nothing references.
//!
//! Verify reads every layer blob once: hashed against its name, and, when records reference
//! it, decompressed to check their diff_id and uncompressed size; every deb and index is
//! hashed against its name. Without `repair` it removes and stamps nothing. With `repair` it
//! removes what is bad (a corrupt blob together with the records that name it) and re-stamps
//! what is good. It runs beside builds: removal only takes the inode that was checked, so a
//! fresh copy a build renamed in meanwhile stays. Listings are not checked: one whose stamp
//! does not vouch for it is rebuilt from its blob at its next use.
//! Prune needs the cache's exclusive lock (no build running; the caller takes it). It removes
//! layer blobs no layer record references, listings of layers no record names, the block
//! records of blobs it removes (`fragments-v1/`), the stamps of
//! entries that are gone, and the directories of earlier layouts (`cache::RETIRED`, e.g. the
//! old `apt-v1/` download cache, and the library copies earlier versions kept under
//! `roots-v1/device-code-v1/` and `roots-v1/section-strip-v3/`), the rewritten library
//! copies (`copies-v1/` records, and their blobs as no layer record references them: derived
//! from wheels; the next build that needs one makes it again) and the push mount hints
//! (`pushed-v1/`; the next push records what it pushes). Downloads and the other roots stay:
//! they serve `--offline` (the download policies of
//! `cache prune` are the caller's, `cache::DownloadPolicy`). A dry run removes nothing and
//! reports the same, with what each bucket would lose. Verify checks that each copy record
//! names a blob that is there (the blob is hashed with the others).
//!
//! These are the cache's own commands: it walks its buckets, removes and stamps. What a layer
//! record says (the blob it names, its layer, its compression) and how a blob decompresses are
//! `layer`'s, which writes them: the caller hands them in as [`LayerRecords`] (`layer::Records`).
//! Must never parse a layer record or decode a blob itself.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;

use super::{
    trust, BlobFacts, Bucket, Cache, Finding, Identity, RecordRead, Usage, LAYERS, RETIRED,
};
use crate::digest::Digest;

/// What the maintenance needs to know of the layer records it keeps, from the module that
/// writes them (`layer::Records`).
pub trait LayerRecords {
    /// A parsed record.
    type Record;
    /// How a record says its blob is compressed.
    type Compression: Copy + PartialEq;
    /// A blob's decompression: its layer digest and size, or why it failed.
    type Decoded;

    /// The record of these bytes, or why they are none.
    fn parse(&self, bytes: &[u8]) -> Result<Self::Record, String>;
    /// The blob a record names.
    fn blob(&self, rec: &Self::Record) -> Digest;
    /// The layer (diff_id) a record names.
    fn layer(&self, rec: &Self::Record) -> Digest;
    fn compression(&self, rec: &Self::Record) -> Self::Compression;
    /// What the stamp of a record's blob vouches for.
    fn facts(&self, rec: &Self::Record) -> BlobFacts;
    /// Read a blob once: its sha256 and size and, with a compression, its decompression.
    fn read_blob(
        &self,
        file: std::fs::File,
        compression: Option<Self::Compression>,
    ) -> io::Result<(Digest, u64, Option<Self::Decoded>)>;
    /// What is wrong with `rec` against its blob of `size` bytes as decompressed (`None`: good).
    fn problem(&self, rec: &Self::Record, size: u64, decoded: &Self::Decoded) -> Option<String>;
    /// `rec`'s own full check against its blob (`None`: good), for a record whose compression
    /// is not the one the blob was read with.
    fn check(&self, cache: &Cache, rec: &Self::Record) -> io::Result<Option<String>>;
}

/// What `verify` checked and what it found bad.
#[derive(Debug, Default)]
pub struct Verified {
    pub blobs: usize,
    pub records: usize,
    /// Debs and indexes checked.
    pub downloads: usize,
    /// Library copy records checked (`copies-v1`).
    pub derived: usize,
    pub bad: Vec<Finding>,
}

/// What `prune` removed.
#[derive(Debug, Default)]
pub struct Pruned {
    /// (entry, size in bytes, whether an output still hard-links it so no space came free).
    pub removed: Vec<(String, u64, bool)>,
    /// Blobs kept because a record references them.
    pub kept: usize,
    /// Stamps removed because their entry is gone.
    pub stamps: usize,
    /// Listings and machine records removed because no layer record names their layer.
    pub listings: usize,
    /// Block records (`fragments-v1/`) removed because their blob is gone.
    pub fragments: usize,
    /// Directories of earlier layouts removed, with the bytes they held.
    pub retired: Vec<(String, u64)>,
    /// Derived data removed (library copy records, earlier versions' copies), with the bytes
    /// it held.
    pub derived: Vec<(String, u64)>,
    /// Mount hints removed (`pushed-v1/`).
    pub hints: usize,
    /// What each bucket lost (or would lose, in a dry run), the stamps of removed entries
    /// under `trust-v2`.
    pub gone: BTreeMap<Bucket, Usage>,
}

impl Pruned {
    /// Bytes actually given back to the file system.
    pub fn freed(&self) -> u64 {
        let blobs: u64 = self
            .removed
            .iter()
            .filter(|(_, _, linked)| !linked)
            .map(|(_, n, _)| n)
            .sum();
        blobs
            + self.retired.iter().map(|(_, n)| n).sum::<u64>()
            + self.derived.iter().map(|(_, n)| n).sum::<u64>()
    }
}

/// A blob after its full read.
enum BlobState<C, D> {
    /// Intact; `decoded` under the compression its first record claims.
    Good {
        size: u64,
        decoded: Option<(C, D)>,
        id: Option<Identity>,
    },
    Bad,
}

fn blob_entry(d: &Digest) -> String {
    blob_name(&d.hex())
}

fn blob_name(name: &str) -> String {
    format!("{}/sha256/{name}", Bucket::Blobs.dir())
}

/// Check every layer record and blob in full. `repair`: remove the bad ones.
pub fn verify<L: LayerRecords>(cache: &Cache, layers: &L, repair: bool) -> io::Result<Verified> {
    let mut out = Verified::default();
    let found = |entry: String, problem: String, removed: io::Result<()>| {
        (entry, problem, repair && removed.is_ok())
    };
    let mut bad: Vec<(String, String, bool)> = Vec::new();

    let mut records: Vec<(Digest, RecordRead, L::Record)> = Vec::new();
    for name in cache.record_names(LAYERS)? {
        out.records += 1;
        let entry = format!("{}/{name}", LAYERS.dir());
        let Some(key) = name
            .strip_suffix(".json")
            .and_then(|h| Digest::from_hex(h).ok())
        else {
            let r = if repair {
                cache.remove_stray(LAYERS, &name)
            } else {
                Ok(())
            };
            bad.push(found(entry, "is not named `<sha256 hex>.json`".into(), r));
            continue;
        };
        let read = match cache.read_record(LAYERS, &key) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                let r = if repair {
                    cache.remove_record(LAYERS, &key, None)
                } else {
                    Ok(())
                };
                bad.push(found(entry, format!("cannot be read ({e})"), r));
                continue;
            }
        };
        match layers.parse(&read.bytes) {
            Ok(rec) => records.push((key, read, rec)),
            Err(e) => {
                let r = if repair {
                    cache.remove_record(LAYERS, &key, Some(&read))
                } else {
                    Ok(())
                };
                bad.push(found(
                    entry,
                    format!("is not a valid layer record ({e})"),
                    r,
                ));
            }
        }
    }

    let mut claims: BTreeMap<Digest, L::Compression> = BTreeMap::new();
    for (_, _, rec) in &records {
        claims
            .entry(layers.blob(rec))
            .or_insert(layers.compression(rec));
    }
    let mut blobs: BTreeMap<Digest, BlobState<L::Compression, L::Decoded>> = BTreeMap::new();
    for name in cache.blob_names()? {
        out.blobs += 1;
        let Ok(d) = Digest::from_hex(&name) else {
            let entry = blob_name(&name);
            let r = if repair {
                trust::remove_if_present(&cache.root().join(&entry))
            } else {
                Ok(())
            };
            bad.push(found(entry, "is not named by a sha256 digest".into(), r));
            continue;
        };
        let state = match cache.open_blob(&d) {
            Ok(None) => continue,
            Ok(Some((file, id))) => {
                let comp = claims.get(&d).copied();
                let read = file.try_clone().and_then(|after| {
                    let got = layers.read_blob(file, comp)?;
                    Ok((got, trust::identity(&after.metadata()?) == id))
                });
                let (got, stable) = match read {
                    Ok(r) => r,
                    Err(e) => {
                        let r = if repair {
                            cache.remove_blob(&d, Some(&id))
                        } else {
                            Ok(())
                        };
                        bad.push(found(blob_entry(&d), format!("cannot be read ({e})"), r));
                        blobs.insert(d, BlobState::Bad);
                        continue;
                    }
                };
                let (digest, size, decoded) = got;
                if digest == d {
                    BlobState::Good {
                        size,
                        decoded: comp.zip(decoded),
                        id: stable.then_some(id),
                    }
                } else {
                    let r = if repair {
                        cache.remove_blob(&d, Some(&id))
                    } else {
                        Ok(())
                    };
                    let why = format!("its content hashes to `{digest}`");
                    bad.push(found(blob_entry(&d), why, r));
                    BlobState::Bad
                }
            }
            Err(e) => {
                let r = if repair {
                    cache.remove_blob(&d, None)
                } else {
                    Ok(())
                };
                bad.push(found(blob_entry(&d), e.to_string(), r));
                BlobState::Bad
            }
        };
        blobs.insert(d, state);
    }

    for (key, read, rec) in &records {
        let blob = layers.blob(rec);
        let problem = match blobs.get(&blob) {
            None => Some(format!("names blob `{blob}`, which is missing")),
            Some(BlobState::Bad) => Some(format!("names blob `{blob}`, which is corrupt")),
            Some(BlobState::Good { size, decoded, id }) => {
                let problem = match decoded {
                    Some((c, result)) if *c == layers.compression(rec) => {
                        layers.problem(rec, *size, result)
                    }
                    // A record claiming another compression than the first: its own check.
                    _ => layers.check(cache, rec)?,
                };
                if problem.is_none() && repair {
                    if let Some(id) = id {
                        cache.stamp_blob(&blob, *id, &layers.facts(rec))?;
                    }
                    cache.stamp_record(LAYERS, key, read)?;
                }
                problem
            }
        };
        if let Some(p) = problem {
            let r = if repair {
                cache.remove_record(LAYERS, key, Some(read))
            } else {
                Ok(())
            };
            bad.push(found(Cache::record_name(LAYERS, key), p, r));
        }
    }
    let mut bad: Vec<Finding> = bad
        .into_iter()
        .map(|(entry, problem, removed)| Finding {
            entry,
            problem,
            removed,
        })
        .collect();
    for bucket in [Bucket::Debs, Bucket::Indexes, Bucket::Wheels] {
        let (n, found) = cache.store(bucket).verify_all(repair)?;
        out.downloads += n;
        bad.extend(found);
    }
    bad.sort();
    out.bad = bad;
    let (n, found) = cache.verify_copies(repair)?;
    out.derived += n;
    out.bad.extend(found);
    out.bad.sort();
    Ok(out)
}

/// Count entry `name` of `bucket` (of `bytes`) and its stamp, if it has one, as gone.
fn note(cache: &Cache, gone: &mut BTreeMap<Bucket, Usage>, bucket: Bucket, name: &str, bytes: u64) {
    gone.entry(bucket).or_default().add(bytes);
    let hex = name.strip_suffix(".json").unwrap_or(name);
    if let (true, Ok(d)) = (bucket.stamped(), Digest::from_hex(hex)) {
        if let Ok(m) = std::fs::symlink_metadata(cache.stamp_path(bucket, &d)) {
            gone.entry(Bucket::Trust).or_default().add(m.len());
        }
    }
}

/// Remove every blob no layer record references (records that do not parse reference
/// nothing), then the stamps whose entry is gone. The caller holds the exclusive lock;
/// `dry_run`: remove nothing, report what would go (the shared lock is enough).
pub fn prune<L: LayerRecords>(cache: &Cache, records: &L, dry_run: bool) -> io::Result<Pruned> {
    use std::os::unix::fs::MetadataExt;
    let mut referenced = BTreeSet::new();
    let mut layers = BTreeSet::new();
    for name in cache.record_names(LAYERS)? {
        let Some(key) = name
            .strip_suffix(".json")
            .and_then(|h| Digest::from_hex(h).ok())
        else {
            continue;
        };
        if let Ok(Some(read)) = cache.read_record(LAYERS, &key) {
            if let Ok(rec) = records.parse(&read.bytes) {
                referenced.insert(records.blob(&rec));
                layers.insert(records.layer(&rec));
            }
        }
    }
    let mut out = Pruned::default();
    for name in cache.blob_names()? {
        let digest = Digest::from_hex(&name).ok();
        if digest.is_some_and(|d| referenced.contains(&d)) {
            out.kept += 1;
            continue;
        }
        let entry = blob_name(&name);
        let path = cache.root().join(&entry);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        note(cache, &mut out.gone, Bucket::Blobs, &name, meta.len());
        match digest {
            _ if dry_run => {}
            Some(d) => cache.remove_blob(&d, None)?,
            None if meta.is_dir() => fs_err::remove_dir_all(&path)?,
            None => trust::remove_if_present(&path)?,
        }
        out.removed.push((entry, meta.len(), meta.nlink() > 1));
    }
    let gone = &mut out.gone;
    out.listings = remove_records(cache, Bucket::Listings, dry_run, gone, |d| {
        layers.contains(d)
    })?;
    out.listings += remove_records(cache, Bucket::Machines, dry_run, gone, |d| {
        layers.contains(d)
    })?;
    out.fragments = remove_records(cache, Bucket::Fragments, dry_run, gone, |d| {
        referenced.contains(d)
    })?;
    for old in RETIRED {
        let path = cache.root().join(old);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            let size = disk_usage(&path).bytes;
            if !dry_run {
                fs_err::remove_dir_all(&path)?;
            }
            out.retired.push((format!("{old}/"), size));
        }
    }
    // Mount hints name blobs gpuimg pushed; a blob pruned here may be gone from the
    // registries too, and a later push records again what it pushes.
    out.hints = remove_records(cache, Bucket::Pushed, dry_run, gone, |_| false)?;
    // Library copies are derived data; their blobs went above, as no layer record names them.
    let copies = remove_records(cache, Bucket::Copies, dry_run, gone, |_| false)?;
    if copies > 0 {
        let bytes = out.gone.get(&Bucket::Copies).map_or(0, |u| u.bytes);
        out.derived
            .push((format!("{}/", Bucket::Copies.dir()), bytes));
    }
    for kind in COPIES {
        let copies = copies_dir(cache, kind);
        if std::fs::symlink_metadata(&copies).is_ok_and(|m| m.is_dir()) {
            let size = disk_usage(&copies);
            if !dry_run {
                fs_err::remove_dir_all(&copies)?;
            }
            let roots = out.gone.entry(Bucket::Roots).or_default();
            roots.entries += size.entries;
            roots.bytes += size.bytes;
            out.derived.push((copies_entry(kind, ""), size.bytes));
        }
    }
    if !dry_run {
        out.stamps = cache.sweep_stamps()?;
    }
    Ok(out)
}

/// Where earlier versions kept rewritten library copies, under `roots-v1/`: `device-code`'s
/// pruned ones and `debug-symbols`' stripped ones (now in `copies-v1` and `blobs-v1`).
const COPIES: [&str; 2] = [super::DEVICE_CODE_COPIES, super::SECTION_STRIP_COPIES];

fn copies_dir(cache: &Cache, kind: &str) -> std::path::PathBuf {
    cache.dir(Bucket::Roots).join(kind)
}

fn copies_entry(kind: &str, rest: &str) -> String {
    format!("{}/{kind}/{rest}", Bucket::Roots.dir())
}

/// The regular files under `dir` and their bytes (not following symlinks); unreadable parts
/// count as nothing.
fn disk_usage(dir: &Path) -> Usage {
    let mut u = Usage::default();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return u;
    };
    for e in rd.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                let inner = disk_usage(&e.path());
                u.entries += inner.entries;
                u.bytes += inner.bytes;
            }
            Ok(t) if t.is_file() => u.add(e.metadata().map_or(0, |m| m.len())),
            _ => {}
        }
    }
    u
}

/// Remove the records of `bucket` whose key `keep` rejects, and files not named like a
/// record (`dry_run`: only count them); how many went, each noted in `gone`.
fn remove_records(
    cache: &Cache,
    bucket: Bucket,
    dry_run: bool,
    gone: &mut BTreeMap<Bucket, Usage>,
    keep: impl Fn(&Digest) -> bool,
) -> io::Result<usize> {
    let mut removed = 0;
    for name in cache.record_names(bucket)? {
        let key = name
            .strip_suffix(".json")
            .and_then(|h| Digest::from_hex(h).ok());
        if key.as_ref().is_some_and(&keep) {
            continue;
        }
        let size = std::fs::symlink_metadata(cache.dir(bucket).join(&name)).map_or(0, |m| m.len());
        note(cache, gone, bucket, &name, size);
        match key {
            _ if dry_run => {}
            Some(d) => cache.remove_record(bucket, &d, None)?,
            None => cache.remove_stray(bucket, &name)?,
        }
        removed += 1;
    }
    Ok(removed)
}
