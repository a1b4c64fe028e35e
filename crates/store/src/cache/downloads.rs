//! The downloads (`debs-v1`, `indexes-v1`, `wheels-v1`: [`DOWNLOADS`]) as `gpuimg cache prune`
//! sees them: each with its size, its last use and whether an output still hard-links it, and
//! the [`DownloadPolicy`] that chooses which go.
//!
//! Last use is the later of the entry's access time and its modification time (when it was
//! downloaded): the kernel records a read in the access time (under the usual `relatime`, at
//! most once a day, which is all an age counted in days needs) at no cost to the build. A
//! record written at each use would cost a build one write per download it reads, and setting
//! an entry's own times would move its ctime and void its trust stamp. On a file system mounted
//! `noatime` the age counts from the download. `cache verify` reads without moving the access
//! time (`trust::open_entry_unused`), so checking is no use.
//!
//! Listing and choosing remove nothing and open no entry; a download goes only through
//! [`Cache::remove_download`], called by `gpuimg cache prune` while it holds the cache's
//! exclusive lock (no build is running, none starts).

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime};

use super::{store, trust, Bucket, Cache};
use crate::digest::Digest;

/// The digests of the downloads some locks pin (`--keep-locked`).
pub type Pinned = BTreeSet<Digest>;

/// The buckets of downloads, which the download policies cover.
pub const DOWNLOADS: [Bucket; 3] = [Bucket::Debs, Bucket::Indexes, Bucket::Wheels];

/// One entry of a download bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    pub bucket: Bucket,
    /// The file name under `<bucket>/sha256/` (a sha256 hex, unless something else put it
    /// there).
    pub name: String,
    pub size: u64,
    /// The later of its access and modification times.
    pub last_use: SystemTime,
    /// An output still hard-links it: removing it frees no space.
    pub linked: bool,
}

impl Download {
    /// The entry's path relative to the cache root: `debs-v1/sha256/<hex>`.
    pub fn entry(&self) -> String {
        format!("{}/sha256/{}", self.bucket.dir(), self.name)
    }

    /// The digest it is named by, if it is.
    pub fn digest(&self) -> Option<Digest> {
        Digest::from_hex(&self.name).ok()
    }
}

/// Which downloads go. With none of the three set, none does.
#[derive(Debug, Clone, Default)]
pub struct DownloadPolicy {
    /// Those not used for longer than this go.
    pub older_than: Option<Duration>,
    /// Then the least recently used go until the downloads' bytes are at most this.
    pub max_size: Option<u64>,
    /// Only the downloads these digests name stay (the artifacts of the given locks): every
    /// other one goes, and none of these goes whatever the other rules say.
    pub keep_only: Option<Pinned>,
}

/// Why a download goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// No given lock pins it.
    Unpinned,
    /// Not used for longer than `--older-than` (its age).
    Unused(Duration),
    /// The least recently used past `--max-size`.
    OverSize,
}

impl DownloadPolicy {
    pub fn is_empty(&self) -> bool {
        self.older_than.is_none() && self.max_size.is_none() && self.keep_only.is_none()
    }

    /// The downloads that go, with why, in the order given (least recently used first, as
    /// [`Cache::downloads`] lists them), at time `now`.
    pub fn choose(&self, downloads: &[Download], now: SystemTime) -> Vec<(Download, Why)> {
        let mut out = Vec::new();
        let mut kept = Vec::new();
        for d in downloads {
            let age = now.duration_since(d.last_use).unwrap_or_default();
            let pinned =
                (self.keep_only.as_ref()).map(|keep| d.digest().is_some_and(|g| keep.contains(&g)));
            match (pinned, self.older_than) {
                (Some(true), _) => {}
                (Some(false), _) => out.push((d.clone(), Why::Unpinned)),
                (None, Some(limit)) if age > limit => out.push((d.clone(), Why::Unused(age))),
                (None, _) => kept.push(d),
            }
        }
        if let (Some(max), None) = (self.max_size, &self.keep_only) {
            let mut total: u64 = kept.iter().map(|d| d.size).sum();
            for d in kept {
                if total <= max {
                    break;
                }
                total -= d.size;
                out.push((d.clone(), Why::OverSize));
            }
        }
        out
    }
}

impl Cache {
    /// Every download, least recently used first (ties by bucket, then name). Only reads
    /// metadata.
    pub fn downloads(&self) -> io::Result<Vec<Download>> {
        let mut out = Vec::new();
        for bucket in DOWNLOADS {
            let dir = self.dir(bucket).join("sha256");
            for name in store::list(&dir)? {
                let Ok(meta) = std::fs::symlink_metadata(dir.join(&name)) else {
                    continue; // gone meanwhile
                };
                let at = |s: i64, ns: i64| {
                    let ns = u32::try_from(ns).unwrap_or(0);
                    match u64::try_from(s) {
                        Ok(s) => SystemTime::UNIX_EPOCH + Duration::new(s, ns),
                        Err(_) => SystemTime::UNIX_EPOCH,
                    }
                };
                let last_use =
                    at(meta.atime(), meta.atime_nsec()).max(at(meta.mtime(), meta.mtime_nsec()));
                out.push(Download {
                    bucket,
                    name,
                    size: meta.len(),
                    last_use,
                    linked: !meta.is_dir() && meta.nlink() > 1,
                });
            }
        }
        out.sort_by(|a, b| (a.last_use, a.bucket, &a.name).cmp(&(b.last_use, b.bucket, &b.name)));
        Ok(out)
    }

    /// Remove download `d` and its stamp. The caller holds the exclusive lock.
    pub fn remove_download(&self, d: &Download) -> io::Result<()> {
        let path = self.dir(d.bucket).join("sha256").join(&d.name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => fs_err::remove_dir_all(&path)?,
            _ => trust::remove_if_present(&path)?,
        }
        match d.digest() {
            Some(g) => trust::remove_if_present(&self.stamp_path(d.bucket, &g)),
            None => Ok(()),
        }
    }

    /// Store `data` as a download in `bucket`, stamped (unit tests).
    #[cfg(test)]
    pub(super) fn put_test(&self, bucket: Bucket, data: &[u8]) -> (Digest, std::path::PathBuf) {
        use std::io::Write;
        let store = self.store(bucket);
        let mut w = store.writer().unwrap();
        w.write_all(data).unwrap();
        let (d, n, p) = w.commit().unwrap();
        store.stamp_new(&d, &super::BlobFacts::sized(n)).unwrap();
        (d, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn at_age(cache: &Cache, bucket: Bucket, data: &[u8], days: u64, now: SystemTime) -> Digest {
        let (d, p) = cache.put_test(bucket, data);
        let t = now - DAY * days as u32;
        let f = std::fs::File::options().write(true).open(p).unwrap();
        f.set_times(std::fs::FileTimes::new().set_accessed(t).set_modified(t))
            .unwrap();
        d
    }

    #[test]
    fn policies_choose_by_age_by_size_and_by_lock() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let now = SystemTime::now();
        let old = at_age(&cache, Bucket::Debs, b"old deb", 40, now);
        let mid = at_age(&cache, Bucket::Wheels, b"a wheel", 20, now);
        let new = at_age(&cache, Bucket::Indexes, b"an index", 1, now);
        let all = cache.downloads().unwrap();
        let order: Vec<Option<Digest>> = all.iter().map(Download::digest).collect();
        assert_eq!(
            order,
            [Some(old), Some(mid), Some(new)],
            "least recently used first"
        );
        let names = |v: Vec<(Download, Why)>| -> Vec<(Option<Digest>, Why)> {
            v.into_iter().map(|(d, w)| (d.digest(), w)).collect()
        };

        assert!(DownloadPolicy::default().choose(&all, now).is_empty());
        let by_age = DownloadPolicy {
            older_than: Some(30 * DAY),
            ..Default::default()
        };
        assert_eq!(
            names(by_age.choose(&all, now)),
            [(Some(old), Why::Unused(40 * DAY))]
        );
        // 7 + 7 + 8 bytes; at most 10 keeps only the newest.
        let by_size = DownloadPolicy {
            max_size: Some(10),
            ..Default::default()
        };
        assert_eq!(
            names(by_size.choose(&all, now)),
            [(Some(old), Why::OverSize), (Some(mid), Why::OverSize)]
        );
        let both = DownloadPolicy {
            older_than: Some(30 * DAY),
            max_size: Some(8),
            ..Default::default()
        };
        assert_eq!(
            names(both.choose(&all, now)),
            [
                (Some(old), Why::Unused(40 * DAY)),
                (Some(mid), Why::OverSize)
            ]
        );
        // A pinned download stays whatever its age; every other one goes.
        let locked = DownloadPolicy {
            keep_only: Some(BTreeSet::from([old])),
            older_than: Some(DAY),
            max_size: Some(0),
        };
        assert_eq!(
            names(locked.choose(&all, now)),
            [(Some(mid), Why::Unpinned), (Some(new), Why::Unpinned)]
        );

        let gone = &all[0];
        assert!(gone.entry().starts_with("debs-v1/sha256/"));
        cache.remove_download(gone).unwrap();
        assert!(!dir.path().join(gone.entry()).exists());
        assert!(!cache.stamp_path(Bucket::Debs, &old).exists());
        assert_eq!(cache.downloads().unwrap().len(), 2);
    }
}
