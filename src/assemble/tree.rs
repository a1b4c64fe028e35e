//! `Tree`: the sorted list of entries one layer will hold, and where each file's bytes live.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use super::AssembleError;

/// Where a regular file's bytes come from.
#[derive(Debug, Clone)]
pub enum DataSource {
    /// A file on disk; `identity` is (dev, ino, size, mtime ns, ctime ns) for the layer cache key.
    Path { path: PathBuf, identity: [u64; 5] },
    /// A span inside an uncompressed tarball on disk.
    TarSpan {
        tarball: Arc<PathBuf>,
        offset: u64,
        /// Identity of the original (possibly compressed) tarball, for the cache key.
        identity: [u64; 5],
    },
    /// Bytes held in memory (small generated files).
    Bytes(Arc<Vec<u8>>),
}

impl DataSource {
    /// A file on disk, identified for the layer cache by its lstat data (like git's index).
    pub fn file(path: PathBuf, meta: &std::fs::Metadata) -> Self {
        DataSource::Path {
            path,
            identity: identity(meta),
        }
    }
}

/// (dev, ino, size, mtime ns, ctime ns): changes whenever a file's content may have changed.
pub fn identity(meta: &std::fs::Metadata) -> [u64; 5] {
    use std::os::unix::fs::MetadataExt;
    let ns = |s: i64, n: i64| {
        (s as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(n as u64)
    };
    [
        meta.dev(),
        meta.ino(),
        meta.len(),
        ns(meta.mtime(), meta.mtime_nsec()),
        ns(meta.ctime(), meta.ctime_nsec()),
    ]
}

#[derive(Debug, Clone)]
pub enum EntryKind {
    Dir,
    File {
        size: u64,
        data: DataSource,
    },
    Symlink {
        target: String,
    },
    /// A hard link to another entry's normalised path.
    Hardlink {
        target: String,
    },
    CharDevice {
        major: u32,
        minor: u32,
    },
    BlockDevice {
        major: u32,
        minor: u32,
    },
    Fifo,
}

/// One entry: a normalised path (no leading `/`, never empty), kind, permission bits, owners.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: String,
    pub kind: EntryKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Extended attributes of one entry: (name, value), sorted by name.
pub type Xattrs = Vec<(String, Vec<u8>)>;

/// The entries of one layer, sorted by path bytes, each path once, parents before children.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub origin: String,
    entries: BTreeMap<String, Entry>,
    /// Extended attributes carried into the layer, by entry path.
    xattrs: BTreeMap<String, Xattrs>,
    /// Extended attributes seen but not carried: name → (count, first entry).
    dropped_xattrs: BTreeMap<String, (usize, String)>,
}

impl Tree {
    pub fn new(origin: impl Into<String>) -> Self {
        Tree {
            origin: origin.into(),
            ..Tree::default()
        }
    }

    /// Insert or replace an entry (a later entry with the same path wins, as in tar).
    pub fn insert(&mut self, e: Entry) {
        self.xattrs.remove(&e.path);
        self.entries.insert(e.path.clone(), e);
    }

    pub fn remove(&mut self, path: &str) -> Option<Entry> {
        self.xattrs.remove(path);
        self.entries.remove(path)
    }

    /// Record the extended attributes of the entry at `path`: those gpuimg carries are kept
    /// (sorted), the others are counted for [`Tree::warnings`].
    pub fn set_xattrs(&mut self, path: &str, attrs: impl IntoIterator<Item = (String, Vec<u8>)>) {
        let mut kept: Xattrs = Vec::new();
        for (name, value) in attrs {
            if super::xattr::carried(&name) {
                kept.push((name, value));
            } else {
                let d = self
                    .dropped_xattrs
                    .entry(name)
                    .or_insert((0, path.to_string()));
                d.0 += 1;
            }
        }
        kept.sort();
        kept.dedup_by(|a, b| a.0 == b.0);
        if kept.is_empty() {
            self.xattrs.remove(path);
        } else {
            self.xattrs.insert(path.to_string(), kept);
        }
    }

    /// The carried extended attributes of the entry at `path`.
    pub fn xattrs(&self, path: &str) -> &[(String, Vec<u8>)] {
        self.xattrs.get(path).map_or(&[], Vec::as_slice)
    }

    /// One line per extended attribute that was seen but not carried.
    pub fn warnings(&self) -> Vec<String> {
        self.dropped_xattrs
            .iter()
            .map(|(name, (n, first))| {
                format!(
                    "`{}`: extended attribute `{name}` is not carried into the image ({n} {}, first `{first}`): {}",
                    self.origin,
                    if *n == 1 { "entry" } else { "entries" },
                    super::xattr::why_not(name)
                )
            })
            .collect()
    }

    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries.get(path)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in layer order. BTreeMap order is byte order, so a parent `a` precedes `a/b`.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    /// Keep only entries for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&Entry) -> bool) {
        self.entries.retain(|_, e| keep(e));
        let entries = &self.entries;
        self.xattrs.retain(|p, _| entries.contains_key(p));
    }

    /// Sum of regular file sizes.
    pub fn data_bytes(&self) -> u64 {
        self.iter()
            .map(|e| match &e.kind {
                EntryKind::File { size, .. } => *size,
                _ => 0,
            })
            .sum()
    }

    /// Add root-owned 0755 directories for any missing parent of any entry.
    pub fn add_missing_parents(&mut self) {
        let mut missing = Vec::new();
        for path in self.entries.keys() {
            let mut p = path.as_str();
            while let Some(idx) = p.rfind('/') {
                p = &p[..idx];
                if !self.entries.contains_key(p) {
                    missing.push(p.to_string());
                }
            }
        }
        for path in missing {
            self.entries.entry(path.clone()).or_insert(Entry {
                path,
                kind: EntryKind::Dir,
                mode: 0o755,
                uid: 0,
                gid: 0,
            });
        }
    }

    /// Every hard link must point at a regular file in this tree, and the file must come first
    /// in layer order (a tar reader links to what it has already seen). Groups are rewritten so
    /// the first path in order carries the data.
    pub fn check_links(&self) -> Result<(), AssembleError> {
        for e in self.iter() {
            if let EntryKind::Hardlink { target } = &e.kind {
                let why = match self.entries.get(target).map(|t| &t.kind) {
                    Some(EntryKind::File { .. }) => continue,
                    None => "is not in the tree".to_string(),
                    Some(k) => format!(
                        "is a {}; a hard link must point at a regular file",
                        super::shape::kind_name(k)
                    ),
                };
                return Err(AssembleError::DanglingHardlink {
                    origin: self.origin.clone(),
                    entry: e.path.clone(),
                    target: target.clone(),
                    why,
                });
            }
        }
        Ok(())
    }

    /// Rewrite hard-link groups so that the member first in layer order holds the data.
    pub fn order_hardlinks(&mut self) {
        let mut groups: HashMap<String, Vec<String>> = HashMap::new();
        for e in self.entries.values() {
            if let EntryKind::Hardlink { target } = &e.kind {
                groups
                    .entry(target.clone())
                    .or_default()
                    .push(e.path.clone());
            }
        }
        for (target, mut links) in groups {
            links.sort();
            let first = &links[0];
            if first.as_str() >= target.as_str() {
                continue;
            }
            // `first` sorts before the file: move the data to `first`, link the rest to it.
            let Some(file) = self.entries.get(&target).cloned() else {
                continue;
            };
            let first = first.clone();
            // Attributes belong to the inode: they travel with the data.
            if let Some(x) = self.xattrs.remove(&target) {
                self.xattrs.insert(first.clone(), x);
            }
            if let Some(e) = self.entries.get_mut(&first) {
                e.kind = file.kind.clone();
                e.mode = file.mode;
                e.uid = file.uid;
                e.gid = file.gid;
            }
            for p in links.iter().skip(1).chain(std::iter::once(&target)) {
                if let Some(e) = self.entries.get_mut(p) {
                    e.kind = EntryKind::Hardlink {
                        target: first.clone(),
                    };
                }
            }
        }
    }
}
