//! The one content-addressed cache shared by all builds on a machine, in named buckets.
//!
//! ```text
//! <root>  (the CLI's settings pick it: --cache, $GPUIMG_CACHE, $XDG_CACHE_HOME/gpuimg, ~/.cache/gpuimg)
//! ├── CACHEDIR.TAG                    the one tag (backup tools skip the whole cache)
//! ├── lock                            flock: shared by builds and locks, exclusive for prune
//! ├── blobs-v1/sha256/<hex>           Blobs: compressed layer blobs and rewritten library
//! │                                   copies (`copies-v1`), named by their digest
//! ├── layers-v2/<key>.json            Layers: layer key (`Key`) → digest, size, diff_id,
//! │                                   uncompressed size, compression
//! ├── listings-v1/<diff_id>.json      Listings: a layer's non-directory paths (`layer::listing`)
//! ├── machines-v1/<diff_id>.json      Machines: a layer's ELF files' machines and types and its
//! │                                   loader configuration (`driver::machines`)
//! ├── fragments-v1/<digest>.json      Fragments: a gzip layer blob → the key (sha256 of the
//! │                                   uncompressed bytes) and place of each block of its large
//! │                                   files, reused once inflated back (`layer::fragments`)
//! ├── controls-v1/<key>.json          Controls: an apt package set → each package's control
//! │                                   fields that place it in a component, and its
//! │                                   `Maintainer` (the SBOM's supplier)
//! ├── resolutions-v1/<key>.json       Resolutions: an apt request + its signed indexes' digests
//! │                                   → the package set (no index parsed on an unchanged build)
//! ├── sketches-v1/<key>.json          Sketches: a `.deb`'s sha256 → its entries without the
//! │                                   file bytes no metadata step reads (`gpuimg_apt`)
//! ├── index-maps-v1/<key>.json        Index maps: a decompressed package index's sha256 and an
//! │                                   architecture → where each stanza lies, the names it
//! │                                   provides (a changed request resolves without a scan)
//! ├── debs-v1/sha256/<hex>            Debs: downloaded `.deb` packages, named by their sha256
//! ├── indexes-v1/sha256/<hex>         Indexes: package indexes as downloaded (compressed) and
//! │                                   decompressed, each named by the sha256 its Release gives
//! ├── wheels-v1/sha256/<hex>          Wheels: downloaded Python wheels, named by their sha256
//! ├── wheel-metadata-v1/<key>.json    WheelMetadata: a wheel (its sha256) and what its METADATA
//! │                                   was read from (the PEP 658 file's announced sha256, or
//! │                                   the wheel's URL for range reads) → METADATA and size
//! │                                   (`gpuimg-pypi`);
//! │                                   and → its shared libraries' paths and ELF facts
//! │                                   (`gpuimg_wheel::library_reads`, `ops`); and → its
//! │                                   SBOM supplier and licence (`sources::wheel_facts`)
//! ├── pushed-v1/<key>.json            Pushed: a registry and a blob digest → the repository
//! │                                   gpuimg pushed it to (the hint for a cross-repository
//! │                                   mount, `registry::known`)
//! ├── copies-v1/<key>.json            Copies: a library's identity, a rewrite (device code
//! │                                   pruned, debug sections stripped: `passes`) and its
//! │                                   parameters → the blob in `blobs-v1` holding the rewritten
//! │                                   copy; derived data `cache prune` removes
//! ├── roots-v1/<sha256 of url>        Roots: last copy of each unpinned root (InRelease, Release,
//! │                                   Release.gpg, a Python index's project pages), for `--offline`
//! ├── trust-v2/<bucket>/<hex>.json    Trust: one stamp per entry of a stamped bucket (blobs-v1,
//! │                                   layers-v2, listings-v1, machines-v1, fragments-v1, controls-v1,
//! │                                   resolutions-v1, sketches-v1, index-maps-v1, debs-v1,
//! │                                   indexes-v1, wheels-v1, wheel-metadata-v1, pushed-v1,
//! │                                   copies-v1)
//! └── tmp/                            Tmp: staging files (`crate::staging`), every partial write
//! ```
//! [`Bucket`] declares exactly these directories (tests/cache_layout.rs checks a real build
//! against this drawing and the enum). Only `tmp/` is made by [`Cache::open`]; every other
//! bucket appears on its first write. Buckets carry a version in their name: bump it rather
//! than migrate. `tmp/` is unversioned so that any version
//! reclaims what a killed build of another left there. Directories of earlier layouts
//! ([`RETIRED`]: `apt-v1/`, `bases-v1/`, `layers-v1/`, `trust-v1/`) are never read; `gpuimg cache prune`
//! removes them.
//!
//! Trust (see `trust.rs`), the same rule in every stamped bucket: an entry is used without
//! re-hashing only while its file identity (dev, inode, size, mtime, ctime) equals the stamp
//! written when it was committed or last verified in full. Any other entry is checked in full
//! before use (a blob, deb or index hashed against its name and size; a layer record checked
//! against its blob, which is hashed and decompressed; a listing rebuilt from its blob);
//! whatever fails is a miss: removed with a warning and rebuilt or downloaded again. Roots are
//! not stamped: their user verifies each one's signature at every use. `gpuimg cache verify`
//! checks every entry in full regardless of stamps.
//!
//! Entries are never modified in place: every write goes to a staging file under `tmp/` and is
//! renamed over the old name, and nothing opens an entry for writing, so an output that
//! hard-links a blob keeps its bytes whatever later happens to the cache entry.
//! Must never hand out an entry whose bytes were not checked, either now or under an unchanged
//! identity.
//!
//! Size: [`Cache::usage`] counts what each bucket holds (`usage.rs`); the downloads (`debs-v1`,
//! `indexes-v1`, `wheels-v1`) are listed with their last use and chosen for removal by a
//! [`DownloadPolicy`] (`downloads.rs`: age, total size, the locks that pin them), for
//! `gpuimg cache prune` under the exclusive lock. `cache verify` and `cache prune` themselves
//! are the cache's (`maintain.rs`), told what a layer record names by `layer::Records`.

mod copies;
pub use copies::Derived;
mod downloads;
mod key;
pub mod maintain;
mod record;
mod store;
pub mod trust;
mod usage;
mod write_through;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use downloads::{Download, DownloadPolicy, Pinned, Why, DOWNLOADS};
pub use key::{serde_name, Key, KEY_FORMAT};
pub use record::RecordRead;
pub use store::{BlobWriter, Store};
pub use trust::{BlobFacts, Identity};
pub use usage::Usage;

/// A named part of the cache. Each maps to one directory under the root ([`Bucket::dir`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bucket {
    /// Compressed layer blobs: `blobs-v1/sha256/<hex>`.
    Blobs,
    /// Layer records: `layers-v2/<key>.json`.
    Layers,
    /// Layer listings: `listings-v1/<diff_id>.json`.
    Listings,
    /// A layer's ELF files' machines and its loader configuration:
    /// `machines-v1/<diff_id>.json`.
    Machines,
    /// Compressed blocks of large files in gzip blobs: `fragments-v1/<blob digest>.json`.
    Fragments,
    /// Apt control fields: a package set → each package's Essential, Priority and Section
    /// (what places it in a component) and Maintainer, `controls-v1/<key>.json`.
    Controls,
    /// Apt resolutions: the request and the signed indexes' digests → the package set,
    /// `resolutions-v1/<key>.json`.
    Resolutions,
    /// Apt package sketches: a `.deb`'s sha256 → its entries and the bytes the metadata
    /// layer's steps read, `sketches-v1/<key>.json`.
    Sketches,
    /// Apt index maps: a decompressed index's sha256 and an architecture → each stanza's
    /// place, name, provided names and `Essential`, `index-maps-v1/<key>.json`.
    IndexMaps,
    /// Downloaded packages: `debs-v1/sha256/<hex>`.
    Debs,
    /// Package indexes, compressed and decompressed: `indexes-v1/sha256/<hex>`.
    Indexes,
    /// Downloaded Python wheels: `wheels-v1/sha256/<hex>`.
    Wheels,
    /// A wheel's METADATA and size, its shared libraries and its SBOM facts, keyed by the wheel:
    /// `wheel-metadata-v1/<key>.json`.
    WheelMetadata,
    /// Which repository of a registry a pushed blob is in (mount hints):
    /// `pushed-v1/<key>.json`, keyed by registry and digest.
    Pushed,
    /// Rewritten library copies: a library's identity, the rewrite and its parameters → the
    /// blob holding the copy, `copies-v1/<key>.json`.
    Copies,
    /// Unpinned roots, verified by signature at each use: `roots-v1/<sha256 of url>`.
    Roots,
    /// Stamps of the stamped buckets: `trust-v2/<bucket dir>/<hex>.json`.
    Trust,
    /// Staging files of partial writes: `tmp/`.
    Tmp,
}

/// How a bucket names its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `sha256/<hex>`, named by the sha256 of the content (see [`Store`]).
    Content,
    /// `<hex>.json`, named by a key (see [`Cache::read_record`]).
    Records,
    /// Anything else: roots, stamps, staging.
    Other,
}

/// The top-level directories of earlier layouts; never read, removed by `cache prune`.
pub const RETIRED: [&str; 4] = ["apt-v1", "bases-v1", "layers-v1", "trust-v1"];

/// The device-code pruner's version, in its copies' keys (`copies-v1`) and in the layer keys;
/// also the directory under `roots-v1/` where earlier versions kept the pruned copies (never
/// read; `cache prune` removes it).
pub const DEVICE_CODE_COPIES: &str = "device-code-v1";
/// The section stripper's version (`strip: [debug-symbols]` inside files), in its copies'
/// keys and in the layer keys; also the directory under `roots-v1/` where earlier versions kept
/// the stripped copies (never read; `cache prune` removes it).
pub const SECTION_STRIP_COPIES: &str = "section-strip-v3";

/// The bucket of layer records.
pub const LAYERS: Bucket = Bucket::Layers;

impl Bucket {
    /// Every bucket, in the order the layout drawing lists them.
    pub const ALL: [Bucket; 18] = [
        Bucket::Blobs,
        Bucket::Layers,
        Bucket::Listings,
        Bucket::Machines,
        Bucket::Fragments,
        Bucket::Controls,
        Bucket::Resolutions,
        Bucket::Sketches,
        Bucket::IndexMaps,
        Bucket::Debs,
        Bucket::Indexes,
        Bucket::Wheels,
        Bucket::WheelMetadata,
        Bucket::Pushed,
        Bucket::Copies,
        Bucket::Roots,
        Bucket::Trust,
        Bucket::Tmp,
    ];

    /// The bucket's directory under the cache root, version included.
    pub const fn dir(self) -> &'static str {
        match self {
            Bucket::Blobs => "blobs-v1",
            Bucket::Layers => "layers-v2",
            Bucket::Listings => "listings-v1",
            Bucket::Machines => "machines-v1",
            Bucket::Fragments => "fragments-v1",
            Bucket::Controls => "controls-v1",
            Bucket::Resolutions => "resolutions-v1",
            Bucket::Sketches => "sketches-v1",
            Bucket::IndexMaps => "index-maps-v1",
            Bucket::Debs => "debs-v1",
            Bucket::Indexes => "indexes-v1",
            Bucket::Wheels => "wheels-v1",
            Bucket::WheelMetadata => "wheel-metadata-v1",
            Bucket::Pushed => "pushed-v1",
            Bucket::Copies => "copies-v1",
            Bucket::Roots => "roots-v1",
            Bucket::Trust => "trust-v2",
            Bucket::Tmp => "tmp",
        }
    }

    pub const fn shape(self) -> Shape {
        match self {
            Bucket::Blobs | Bucket::Debs | Bucket::Indexes | Bucket::Wheels => Shape::Content,
            Bucket::Layers
            | Bucket::Listings
            | Bucket::Machines
            | Bucket::Fragments
            | Bucket::Controls
            | Bucket::Resolutions
            | Bucket::Sketches
            | Bucket::IndexMaps
            | Bucket::WheelMetadata
            | Bucket::Pushed
            | Bucket::Copies => Shape::Records,
            Bucket::Roots | Bucket::Trust | Bucket::Tmp => Shape::Other,
        }
    }

    /// Whether each entry carries a stamp under `trust-v2/<dir>/`.
    pub const fn stamped(self) -> bool {
        !matches!(self.shape(), Shape::Other)
    }

    /// What the bucket holds, in a few words (`cache verify` and `cache prune` print it).
    pub const fn holds(self) -> &'static str {
        match self {
            Bucket::Blobs => "compressed layer blobs",
            Bucket::Layers => "layer records (key to blob)",
            Bucket::Listings => "layer listings",
            Bucket::Machines => "layer ELF machines",
            Bucket::Fragments => "gzip block records",
            Bucket::Controls => "apt control fields",
            Bucket::Resolutions => "apt resolutions",
            Bucket::Sketches => "apt package sketches",
            Bucket::IndexMaps => "apt index maps",
            Bucket::Debs => "downloaded .deb packages",
            Bucket::Indexes => "downloaded package indexes",
            Bucket::Wheels => "downloaded Python wheels",
            Bucket::WheelMetadata => "wheel metadata and facts",
            Bucket::Pushed => "push mount hints",
            Bucket::Copies => "library copy records",
            Bucket::Roots => "unpinned roots",
            Bucket::Trust => "trust stamps",
            Bucket::Tmp => "staging files",
        }
    }
}

impl std::fmt::Display for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.dir())
    }
}

const CACHEDIR_TAG: &str =
    "Signature: 8a477f597d28d172789f06886806bc55\n# This directory is a cache made by gpuimg.\n";

#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
    /// The open `lock` file, holding a shared or exclusive flock for this handle's lifetime.
    _lock: Arc<File>,
}

impl Cache {
    /// Open (creating when needed) the cache at `root` for building: takes the shared lock,
    /// waiting while a prune holds it exclusively.
    pub fn open(root: &Path) -> io::Result<Cache> {
        Cache::open_locked(root, rustix::fs::FlockOperation::LockShared)
    }

    /// Open the cache for a prune: takes the lock exclusively, and fails at once with
    /// `ErrorKind::WouldBlock` while any build holds it.
    pub fn open_exclusive(root: &Path) -> io::Result<Cache> {
        Cache::open_locked(root, rustix::fs::FlockOperation::NonBlockingLockExclusive)
    }

    fn open_locked(root: &Path, op: rustix::fs::FlockOperation) -> io::Result<Cache> {
        fs_err::create_dir_all(root.join(Bucket::Tmp.dir()))?;
        let tag = root.join("CACHEDIR.TAG");
        if !tag.exists() {
            fs_err::write(&tag, CACHEDIR_TAG)?;
        }
        let lock_path = root.join("lock");
        let with_path = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("Failed to lock `{}`: {e}", lock_path.display()),
            )
        };
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(with_path)?;
        rustix::fs::flock(&lock, op).map_err(|e| with_path(e.into()))?;
        Ok(Cache {
            root: root.to_path_buf(),
            _lock: Arc::new(lock),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of `bucket` (which may not exist yet: buckets appear on first write).
    pub fn dir(&self, bucket: Bucket) -> PathBuf {
        self.root.join(bucket.dir())
    }

    /// The stamp of entry `d` of the stamped `bucket` (`trust-v2/<dir>/<hex>.json`), whether
    /// or not there is one.
    pub fn stamp_path(&self, bucket: Bucket, d: &crate::digest::Digest) -> PathBuf {
        self.stamp_dir(bucket).join(format!("{}.json", d.hex()))
    }

    /// The directory holding the stamps of `bucket`'s entries.
    fn stamp_dir(&self, bucket: Bucket) -> PathBuf {
        self.dir(Bucket::Trust).join(bucket.dir())
    }

    /// A scratch directory for partial writes, on the same file system as every bucket.
    pub fn tmp_dir(&self) -> PathBuf {
        self.dir(Bucket::Tmp)
    }

    /// Remove the stamps whose entry is gone, in every stamped bucket; returns how many.
    pub fn sweep_stamps(&self) -> io::Result<usize> {
        let mut n = 0;
        for bucket in Bucket::ALL.into_iter().filter(|b| b.stamped()) {
            let stamps = self.stamp_dir(bucket);
            for name in store::list(&stamps)? {
                let entry = name
                    .strip_suffix(".json")
                    .and_then(|h| crate::digest::Digest::from_hex(h).ok())
                    .map(|d| match bucket.shape() {
                        Shape::Content => self.store(bucket).path(&d),
                        _ => self.record_path(bucket, &d),
                    });
                if entry.is_none_or(|p| std::fs::symlink_metadata(p).is_err()) {
                    trust::remove_if_present(&stamps.join(&name))?;
                    n += 1;
                }
            }
        }
        Ok(n)
    }
}

/// One bad entry found by a full check (`gpuimg cache verify`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// The entry's path relative to the cache root, e.g. `blobs-v1/sha256/<hex>`.
    pub entry: String,
    pub problem: String,
    /// Whether the entry was removed (`--repair`).
    pub removed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_lock_excludes_builds_and_builds_share() {
        let dir = tempfile::tempdir().unwrap();
        let a = Cache::open(dir.path()).unwrap();
        let b = Cache::open(dir.path()).unwrap();
        let e = Cache::open_exclusive(dir.path()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        drop((a, b));
        let x = Cache::open_exclusive(dir.path()).unwrap();
        let clone = x.clone();
        drop(x);
        assert!(
            Cache::open_exclusive(dir.path()).is_err(),
            "a clone holds it"
        );
        drop(clone);
        assert!(Cache::open_exclusive(dir.path()).is_ok());
    }

    #[test]
    fn bucket_dirs_are_distinct_versioned_and_clear_of_retired_names() {
        let dirs: std::collections::BTreeSet<&str> = Bucket::ALL.iter().map(|b| b.dir()).collect();
        assert_eq!(dirs.len(), Bucket::ALL.len());
        for b in Bucket::ALL {
            assert!(
                b == Bucket::Tmp
                    || b.dir()
                        .rsplit_once("-v")
                        .is_some_and(|(_, v)| v.parse::<u32>().is_ok()),
                "{b:?}"
            );
            assert!(!RETIRED.contains(&b.dir()), "{b:?}");
        }
        assert!(Bucket::Debs.stamped() && Bucket::Indexes.stamped() && !Bucket::Roots.stamped());
    }

    #[test]
    fn open_makes_only_tmp_tag_and_lock() {
        let dir = tempfile::tempdir().unwrap();
        let _c = Cache::open(dir.path()).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["CACHEDIR.TAG", "lock", "tmp"]);
    }
}
