//! What each bucket holds: its entries (every file under its directory, at any depth, a
//! symlink counted as itself) and their bytes (apparent sizes), for `gpuimg cache verify` and
//! `gpuimg cache prune`. Reads directory listings and metadata only: never opens an entry,
//! so counting moves no access time and no stamp.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use super::{Bucket, Cache};

/// The entries of a bucket and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub entries: usize,
    pub bytes: u64,
}

impl Usage {
    /// `self` less `gone` (never below zero).
    pub fn less(self, gone: Usage) -> Usage {
        Usage {
            entries: self.entries.saturating_sub(gone.entries),
            bytes: self.bytes.saturating_sub(gone.bytes),
        }
    }

    /// `self` and one more entry of `bytes`.
    pub fn add(&mut self, bytes: u64) {
        self.entries += 1;
        self.bytes += bytes;
    }
}

impl Cache {
    /// Every bucket's usage, in [`Bucket::ALL`]'s order (a bucket not made yet holds nothing).
    /// The stamps are counted under `trust-v2`, not under the bucket they vouch for.
    pub fn usage(&self) -> io::Result<BTreeMap<Bucket, Usage>> {
        let mut out = BTreeMap::new();
        for b in Bucket::ALL {
            let mut u = Usage::default();
            tally(&self.dir(b), &mut u)?;
            out.insert(b, u);
        }
        Ok(out)
    }
}

/// Add every non-directory under `dir` to `u` (not following symlinks); a missing directory
/// adds nothing.
fn tally(dir: &Path, u: &mut Usage) -> io::Result<()> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("Failed to list `{}`: {e}", dir.display()),
            ))
        }
    };
    for e in rd {
        let e = e?;
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue; // removed meanwhile
        };
        if meta.is_dir() {
            tally(&e.path(), u)?;
        } else {
            u.add(meta.len());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_files_at_any_depth_per_bucket() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let (_, p) = cache.put_test(Bucket::Debs, b"package");
        assert!(p.is_file());
        fs_err::create_dir_all(dir.path().join("roots-v1/device-code-v1/ab")).unwrap();
        std::fs::write(dir.path().join("roots-v1/device-code-v1/ab/k"), b"12345").unwrap();
        std::fs::write(dir.path().join("roots-v1/r"), b"123").unwrap();
        let u = cache.usage().unwrap();
        assert_eq!(
            u[&Bucket::Debs],
            Usage {
                entries: 1,
                bytes: 7
            }
        );
        assert_eq!(
            u[&Bucket::Roots],
            Usage {
                entries: 2,
                bytes: 8
            }
        );
        assert_eq!(u[&Bucket::Trust].entries, 1, "the deb's stamp");
        assert_eq!(u[&Bucket::Wheels], Usage::default());
        assert_eq!(u.len(), Bucket::ALL.len());
    }
}
