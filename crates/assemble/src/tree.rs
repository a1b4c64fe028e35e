//! `Tree`: the sorted list of entries one layer will hold, where each file's bytes live, and
//! where each entry came from ([`Provenance`]).
//!
//! Invariants every mutation keeps: paths are unique and sorted; every entry has a provenance;
//! extended attributes exist only for entries in the tree; removing a hard-link group's data
//! carrier (`remove`, `retain`) moves the data, attributes and provenance to the first
//! surviving link, so no hard link is left pointing at a removed entry.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use super::{AssembleError, Provenance};

/// Where a regular file's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataSource {
    /// A file on disk; `identity` is (dev, ino, size, mtime ns, ctime ns) for the layer cache
    /// key. `deflated`: where the same bytes are also one raw deflate stream.
    Path {
        path: PathBuf,
        identity: [u64; 5],
        deflated: Option<Arc<Deflated>>,
    },
    /// A span inside an uncompressed tarball on disk.
    TarSpan {
        tarball: Arc<PathBuf>,
        offset: u64,
        /// Identity of the original (possibly compressed) tarball, for the cache key.
        identity: [u64; 5],
    },
    /// Bytes held in memory (small generated files).
    Bytes(Arc<Vec<u8>>),
    /// A file left in its archive, inflated as it is read (`archived.rs`).
    Archived(Arc<super::ArchivedFile>),
}

impl DataSource {
    /// A file on disk, identified for the layer cache by its lstat data (like git's index).
    pub fn file(path: PathBuf, meta: &std::fs::Metadata) -> Self {
        DataSource::Path {
            path,
            identity: identity(meta),
            deflated: None,
        }
    }
}

/// A file's bytes as they also sit in another file, compressed: one raw deflate stream (a
/// wheel's deflated member, from which the file was written). A gzip layer copies the stream
/// instead of compressing the bytes again (`layer::pgzip`). Whoever attaches it vouches that
/// the file holds exactly what the stream inflates to; a stage that changes a file's bytes
/// gives it a new source, which has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deflated {
    /// The file holding the stream, with its identity when the stream was walked: a file
    /// with another identity is not read.
    pub archive: Arc<PathBuf>,
    pub identity: [u64; 5],
    /// The stream's first byte in `archive`.
    pub offset: u64,
    /// Where its final block starts and where it ends, counted from `offset`.
    pub ends: gpuimg_deflate::Ends,
    /// How many bytes it inflates to, and their CRC-32.
    pub size: u64,
    pub crc32: u32,
}

pub use gpuimg_store::file_identity::identity;

#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Names the tree's input in messages.
    pub origin: String,
    entries: BTreeMap<String, Slot>,
    /// The provenance [`Tree::insert`] gives new entries.
    default_provenance: Provenance,
    /// Extended attributes carried into the layer, by entry path.
    xattrs: BTreeMap<String, Xattrs>,
    /// Extended attributes seen but not carried: name → (count, first entry).
    dropped_xattrs: BTreeMap<String, (usize, String)>,
}

/// One entry and where it came from.
#[derive(Debug, Clone)]
struct Slot {
    entry: Entry,
    provenance: Provenance,
}

/// A removed data carrier, kept until its surviving links are repaired.
struct Carrier {
    slot: Slot,
    xattrs: Option<Xattrs>,
}

impl Tree {
    /// An empty tree named `origin`; its entries are `Generated { by: origin }` until stamped
    /// otherwise.
    pub fn new(origin: impl Into<String>) -> Self {
        let origin = origin.into();
        Tree {
            default_provenance: Provenance::generated(origin.as_str()),
            origin,
            ..Tree::default()
        }
    }

    /// Insert or replace an entry (a later entry with the same path wins, as in tar), with the
    /// tree's default provenance. Links to a replaced path refer to the new entry
    /// ([`Tree::check_links`] refuses them when it is not a regular file).
    pub fn insert(&mut self, e: Entry) {
        let p = self.default_provenance.clone();
        self.insert_with(e, p);
    }

    /// [`Tree::insert`] with an explicit provenance.
    pub fn insert_with(&mut self, e: Entry, provenance: Provenance) {
        self.xattrs.remove(&e.path);
        self.entries.insert(
            e.path.clone(),
            Slot {
                entry: e,
                provenance,
            },
        );
    }

    /// Remove one entry. When it carries a hard-link group's data, the first surviving link
    /// becomes the carrier (see [`Tree::retain`]); removing a regular file scans the tree for
    /// its links, so remove many entries with one `retain`.
    pub fn remove(&mut self, path: &str) -> Option<Entry> {
        let mut gone = BTreeMap::new();
        let entry = self.take(path, &mut gone)?;
        self.relink(gone);
        Some(entry)
    }

    /// Keep only entries for which `keep` returns true. A hard link that survives its removed
    /// data carrier is not left dangling: the first surviving link of the group (in layer
    /// order) takes the carrier's data, mode, owners, attributes and provenance, and the other
    /// survivors link to it.
    pub fn retain(&mut self, mut keep: impl FnMut(&Entry) -> bool) {
        let drop: Vec<String> = self
            .entries
            .values()
            .filter(|s| !keep(&s.entry))
            .map(|s| s.entry.path.clone())
            .collect();
        let mut gone = BTreeMap::new();
        for p in &drop {
            self.take(p, &mut gone);
        }
        self.relink(gone);
    }

    /// Remove `path`, keeping it in `gone` when it is a regular file (a possible carrier).
    fn take(&mut self, path: &str, gone: &mut BTreeMap<String, Carrier>) -> Option<Entry> {
        let slot = self.entries.remove(path)?;
        let xattrs = self.xattrs.remove(path);
        let entry = slot.entry.clone();
        if matches!(slot.entry.kind, EntryKind::File { .. }) {
            gone.insert(path.to_string(), Carrier { slot, xattrs });
        }
        Some(entry)
    }

    /// Give each removed carrier's data to the first surviving link of its group.
    fn relink(&mut self, mut gone: BTreeMap<String, Carrier>) {
        if gone.is_empty() {
            return;
        }
        // Surviving links by removed target, in layer order.
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for s in self.entries.values() {
            if let EntryKind::Hardlink { target } = &s.entry.kind {
                if gone.contains_key(target) {
                    groups
                        .entry(target.clone())
                        .or_default()
                        .push(s.entry.path.clone());
                }
            }
        }
        for (target, links) in groups {
            let (Some(first), Some(carrier)) = (links.first(), gone.remove(&target)) else {
                continue;
            };
            let Carrier { slot, xattrs } = carrier;
            if let Some(s) = self.entries.get_mut(first) {
                s.entry.kind = slot.entry.kind;
                s.entry.mode = slot.entry.mode;
                s.entry.uid = slot.entry.uid;
                s.entry.gid = slot.entry.gid;
                s.provenance = slot.provenance;
            }
            match xattrs {
                Some(x) => self.xattrs.insert(first.clone(), x),
                None => self.xattrs.remove(first),
            };
            for p in &links[1..] {
                if let Some(s) = self.entries.get_mut(p) {
                    s.entry.kind = EntryKind::Hardlink {
                        target: first.clone(),
                    };
                }
            }
        }
    }

    /// Where the entry at `path` came from.
    pub fn provenance_of(&self, path: &str) -> Option<&Provenance> {
        self.entries.get(path).map(|s| &s.provenance)
    }

    /// Set where the entry at `path` came from; false when the tree has no such entry.
    pub fn set_provenance(&mut self, path: &str, provenance: Provenance) -> bool {
        match self.entries.get_mut(path) {
            Some(s) => {
                s.provenance = provenance;
                true
            }
            None => false,
        }
    }

    /// The provenance [`Tree::insert`] gives new entries.
    pub fn default_provenance(&self) -> &Provenance {
        &self.default_provenance
    }

    /// Set the provenance [`Tree::insert`] gives new entries (existing ones keep theirs).
    pub fn set_default_provenance(&mut self, provenance: Provenance) {
        self.default_provenance = provenance;
    }

    /// Give every entry, and every entry inserted later, `provenance`.
    pub fn stamp_all(&mut self, provenance: Provenance) {
        for s in self.entries.values_mut() {
            s.provenance = provenance.clone();
        }
        self.default_provenance = provenance;
    }

    /// Re-stamp entries: each entry for which `f` returns a provenance takes it.
    pub fn stamp(&mut self, mut f: impl FnMut(&Entry) -> Option<Provenance>) {
        for s in self.entries.values_mut() {
            if let Some(p) = f(&s.entry) {
                s.provenance = p;
            }
        }
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
        if kept.is_empty() || !self.entries.contains_key(path) {
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
        self.entries.get(path).map(|s| &s.entry)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in layer order. BTreeMap order is byte order, so a parent `a` precedes `a/b`.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values().map(|s| &s.entry)
    }

    /// Entries in layer order, each with where it came from.
    pub fn iter_with_provenance(&self) -> impl Iterator<Item = (&Entry, &Provenance)> {
        self.entries.values().map(|s| (&s.entry, &s.provenance))
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

    /// Add root-owned 0755 directories for any missing parent of any entry, with the tree's
    /// default provenance.
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
            let provenance = self.default_provenance.clone();
            self.entries.entry(path.clone()).or_insert(Slot {
                entry: Entry {
                    path,
                    kind: EntryKind::Dir,
                    mode: 0o755,
                    uid: 0,
                    gid: 0,
                },
                provenance,
            });
        }
    }

    /// Every hard link must point at a regular file in this tree, and the file must come first
    /// in layer order (a tar reader links to what it has already seen). Groups are rewritten so
    /// the first path in order carries the data.
    pub fn check_links(&self) -> Result<(), AssembleError> {
        for e in self.iter() {
            if let EntryKind::Hardlink { target } = &e.kind {
                let why = match self.get(target).map(|t| &t.kind) {
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

    /// Rewrite hard-link groups so that the member first in layer order holds the data. The
    /// data's mode, owners, attributes and provenance (the inode's) travel with it; the other
    /// members keep their own provenance.
    pub fn order_hardlinks(&mut self) {
        let mut groups: HashMap<String, Vec<String>> = HashMap::new();
        for e in self.iter() {
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
            if let Some(s) = self.entries.get_mut(&first) {
                s.entry.kind = file.entry.kind.clone();
                s.entry.mode = file.entry.mode;
                s.entry.uid = file.entry.uid;
                s.entry.gid = file.entry.gid;
                s.provenance = file.provenance.clone();
            }
            for p in links.iter().skip(1).chain(std::iter::once(&target)) {
                if let Some(s) = self.entries.get_mut(p) {
                    s.entry.kind = EntryKind::Hardlink {
                        target: first.clone(),
                    };
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
