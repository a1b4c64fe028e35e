//! The apt install's package components written while it unpacks: each package, once it lies
//! in the staging root, has its entries appended to its component's layer, so decoding the
//! next packages, writing tar, hashing and compressing overlap.
//!
//! The appending runs on a thread of its own, so the install's own thread only unpacks; it
//! reads what the install wrote, which a later package may replace meanwhile (never in place:
//! a replaced file is a new inode), and the check at the end covers that too.
//!
//! A package component's layer is always its tree in *package order*: entries ranked by the
//! package that owns them (in unpack order; entries no package owns, the merged-/usr links,
//! first), each directory at the rank of the first entry below it (or last, in path order,
//! when nothing but directories lies below it), path order within a rank. While unpacking,
//! each package's entries (and the directories above them not yet written) are appended as
//! they lie in the root then. At the end the layer is accepted only if what was appended is
//! exactly that order of the final, split and stripped tree, entry for entry (same attributes,
//! same file identity); otherwise — a later package or a metadata step changed something
//! already written — it is written again from the final tree. Either way the bytes are the
//! final tree's in package order. Must never write what it has not read from the root.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use super::BuildError;
use crate::plan::components::Assignment;
use crate::profile::StripClass;
use crate::strip::{self, Rules};
use gpuimg_apt::UnpackedPackage;
use gpuimg_assemble::{Entry, EntryKind, Tree, Xattrs};
use gpuimg_fetch::observe::Observer;
use gpuimg_oci::layer::{LayerBlob, LayerOptions, LayerStream};
use gpuimg_store::cache::Cache;

/// One component's layer being written.
struct Stream {
    writer: Option<LayerStream>,
    /// What was appended, in order.
    appended: Vec<(Entry, Xattrs)>,
    paths: HashSet<String>,
    /// Something could not be appended as it lies (or was written twice): the layer is
    /// written again from the final tree at the end.
    broken: bool,
}

/// The streamed components of one install. Packages are appended on a thread of their own,
/// while the install writes the next ones.
pub struct Streams<'a> {
    cache: &'a Cache,
    opts: LayerOptions,
    assignment: &'a Assignment,
    /// Packages on their way to the writer: (component, entries it created).
    queue: Option<mpsc::SyncSender<(String, Vec<String>)>>,
    running: Option<std::thread::JoinHandle<Writer>>,
    streams: Option<BTreeMap<String, Stream>>,
}

/// The appending side, on its own thread: what it needs, owned.
struct Writer {
    cache: Cache,
    root: PathBuf,
    opts: LayerOptions,
    strip: Vec<StripClass>,
    rules: Rules,
    /// Entries no package owns that a component's layer holds (the merged-/usr links, in the
    /// `os` component): written before its first package.
    front: BTreeMap<String, Vec<String>>,
    streams: BTreeMap<String, Stream>,
}

/// Where an entry goes in its layer: (rank, path order follows).
type Rank = u64;
/// Entries no package owns.
const FRONT: Rank = 0;
/// Directories with no other entry below them.
const TAIL: Rank = Rank::MAX;

/// Packages waiting for the writer at most (each is a list of paths).
const QUEUE: usize = 16;

impl<'a> Streams<'a> {
    /// Streams for `components` of an install into `root`; `front` names the entries no
    /// package owns that go first into a component's layer.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cache: &'a Cache,
        root: &Path,
        opts: LayerOptions,
        strip: &[StripClass],
        rules: &Rules,
        assignment: &'a Assignment,
        front: BTreeMap<String, Vec<String>>,
        components: &BTreeSet<String>,
    ) -> Self {
        let mut writer = Writer {
            cache: cache.clone(),
            root: root.to_path_buf(),
            opts,
            strip: strip.to_vec(),
            rules: rules.clone(),
            front,
            streams: components
                .iter()
                .map(|c| {
                    (
                        c.clone(),
                        Stream {
                            writer: None,
                            appended: Vec::new(),
                            paths: HashSet::new(),
                            broken: false,
                        },
                    )
                })
                .collect(),
        };
        let (queue, jobs) = mpsc::sync_channel::<(String, Vec<String>)>(QUEUE);
        let running = std::thread::spawn(move || {
            for (component, created) in jobs {
                writer.package(&component, &created);
            }
            writer
        });
        Streams {
            cache,
            opts,
            assignment,
            queue: Some(queue),
            running: Some(running),
            streams: None,
        }
    }

    /// Hand what package `p` put into the root to its component's layer.
    pub fn package(&mut self, p: &UnpackedPackage<'_>) -> Result<(), BuildError> {
        let Some(component) = self.assignment.component(p.name) else {
            return Ok(());
        };
        if let Some(q) = &self.queue {
            q.send((component.to_string(), p.created.to_vec()))
                .map_err(|_| BuildError::Internal("the layer writer stopped"))?;
        }
        Ok(())
    }

    /// Wait for the writer to append every package handed to it.
    fn join(&mut self) -> Result<&mut BTreeMap<String, Stream>, BuildError> {
        if self.streams.is_none() {
            drop(self.queue.take());
            let w = self
                .running
                .take()
                .ok_or(BuildError::Internal("the layer writer is gone"))?
                .join()
                .map_err(|_| BuildError::Internal("the layer writer panicked"))?;
            self.streams = Some(w.streams);
        }
        self.streams
            .as_mut()
            .ok_or(BuildError::Internal("the layer writer is gone"))
    }

    /// Finish `component`'s layer, whose final tree is `tree`; `rank` gives the unpack index
    /// of the package owning a path. The layer is `tree` in package order (see the module
    /// doc).
    pub fn finish(
        &mut self,
        component: &str,
        tree: &Tree,
        rank: &dyn Fn(&str) -> Option<usize>,
        obs: &mut dyn Observer,
    ) -> Result<LayerBlob, BuildError> {
        let order = package_order(tree, rank);
        let s = self
            .join()?
            .remove(component)
            .ok_or(BuildError::Internal("a component was not streamed"))?;
        let n = s.appended.len();
        let matches = !s.broken
            && n <= order.len()
            && order[n..].iter().all(|(r, _)| *r == TAIL)
            && s.appended.iter().zip(&order).all(|((e, x), (_, path))| {
                tree.get(path) == Some(e) && tree.xattrs(path) == x.as_slice()
            });
        let (writer, rest, again) = match s.writer {
            Some(w) if matches => (w, &order[n..], false),
            _ => (
                LayerStream::new(component, self.opts, self.cache)?,
                &order[..],
                true,
            ),
        };
        let mut writer = writer;
        let mut group = Tree::new("the apt packages");
        let mut at = None;
        for (r, path) in rest {
            if at != Some(*r) && !group.is_empty() {
                writer.append(&group)?;
                group = Tree::new("the apt packages");
            }
            at = Some(*r);
            if let Some(e) = tree.get(path) {
                group.insert(e.clone());
                let x = tree.xattrs(path);
                if !x.is_empty() {
                    group.set_xattrs(path, x.iter().cloned());
                }
            }
        }
        if !group.is_empty() {
            writer.append(&group)?;
        }
        let blob = writer.finish(self.cache, tree, None)?;
        obs.message(&format!(
            "{component:>12} {} → {} ({}, {})",
            &blob.digest.hex()[..12],
            gpuimg_store::byte_size::ByteSize(blob.size),
            gpuimg_store::byte_size::ByteSize(blob.uncompressed_size),
            if again {
                "written after the unpack"
            } else {
                "written while unpacking"
            }
        ));
        Ok(blob)
    }
}

impl Drop for Streams<'_> {
    /// A build that stops early still waits for its writer (whose unfinished layers leave
    /// nothing in the cache).
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(w) = self.running.take() {
            let _ = w.join();
        }
    }
}

impl Writer {
    /// Append what a package of `component` created (`created`, as it lies in the root) to
    /// that component's layer. Anything that fails here gives the stream up: the layer is
    /// written from the final tree at the end, where a real error shows again.
    fn package(&mut self, component: &str, created: &[String]) {
        let Some(s) = self.streams.get_mut(component) else {
            return;
        };
        if s.broken {
            return;
        }
        if s.writer.is_none() {
            let Ok(w) = LayerStream::new(component, self.opts, &self.cache) else {
                return s.give_up();
            };
            s.writer = Some(w);
            let front = self.front.get(component).cloned().unwrap_or_default();
            match gpuimg_assemble::dir::entries_at(
                &self.root,
                front.iter().map(String::as_str),
                "the apt packages",
            ) {
                Ok(mut t) => {
                    strip::strip(&mut t, &self.strip, &self.rules, &HashSet::new());
                    append(s, &t);
                }
                Err(_) => return s.give_up(),
            }
        }
        let created: HashSet<&str> = created.iter().map(String::as_str).collect();
        let mut wanted: BTreeSet<&str> = created.iter().copied().collect();
        for c in &created {
            wanted.extend(parents(c));
        }
        // What cannot be read here (an entry a later package already replaced, a link the
        // final tree's checks refuse) is left to the final tree.
        let Ok(mut chunk) = gpuimg_assemble::dir::entries_at(
            &self.root,
            wanted.iter().copied(),
            "the apt packages",
        ) else {
            return s.give_up();
        };
        strip::strip(&mut chunk, &self.strip, &self.rules, &HashSet::new());
        // A path this component's layer already holds, shipped again: the same.
        if chunk.iter().any(|e| {
            !matches!(e.kind, EntryKind::Dir)
                && created.contains(e.path.as_str())
                && s.paths.contains(&e.path)
        }) {
            return s.give_up();
        }
        let files: Vec<String> = chunk
            .iter()
            .filter(|e| !matches!(e.kind, EntryKind::Dir) && created.contains(e.path.as_str()))
            .map(|e| e.path.clone())
            .collect();
        let mut above: HashSet<&str> = HashSet::new();
        for f in &files {
            above.extend(parents(f));
        }
        let keep: HashSet<String> = files
            .iter()
            .cloned()
            .chain(
                above
                    .iter()
                    .filter(|d| !s.paths.contains(**d))
                    .map(|d| d.to_string()),
            )
            .collect();
        chunk.retain(|e| keep.contains(&e.path));
        append(s, &chunk);
    }
}

impl Stream {
    /// Stop appending: the layer is written from the final tree at the end.
    fn give_up(&mut self) {
        self.broken = true;
        self.writer = None;
    }
}

/// Append `t` to the stream and remember what was appended (a file that changed meanwhile,
/// or any other failure, gives the stream up).
fn append(s: &mut Stream, t: &Tree) {
    if t.is_empty() {
        return;
    }
    let Some(w) = s.writer.as_mut() else {
        return;
    };
    if w.append(t).is_err() {
        return s.give_up();
    }
    for e in t.iter() {
        s.paths.insert(e.path.clone());
        s.appended.push((e.clone(), t.xattrs(&e.path).to_vec()));
    }
}

/// The directories above `path` (`a/b/c` → `a/b`, `a`).
fn parents(path: &str) -> impl Iterator<Item = &str> {
    let mut p = path;
    std::iter::from_fn(move || {
        let i = p.rfind('/')?;
        p = &p[..i];
        Some(p)
    })
}

/// `tree`'s paths in package order, with their ranks.
fn package_order(tree: &Tree, rank: &dyn Fn(&str) -> Option<usize>) -> Vec<(Rank, String)> {
    let mut ranks: HashMap<&str, Rank> = HashMap::new();
    for e in tree.iter() {
        if matches!(e.kind, EntryKind::Dir) {
            continue;
        }
        let r = rank(&e.path).map_or(FRONT, |i| i as Rank + 1);
        ranks.insert(&e.path, r);
        for d in parents(&e.path) {
            let slot = ranks.entry(d).or_insert(TAIL);
            *slot = (*slot).min(r);
        }
    }
    let mut order: Vec<(Rank, String)> = tree
        .iter()
        .map(|e| {
            (
                ranks.get(e.path.as_str()).copied().unwrap_or(TAIL),
                e.path.clone(),
            )
        })
        .collect();
    order.sort();
    order
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use gpuimg_assemble::DataSource;

    fn entry(path: &str, dir: bool) -> Entry {
        Entry {
            path: path.into(),
            kind: if dir {
                EntryKind::Dir
            } else {
                EntryKind::File {
                    size: 1,
                    data: DataSource::Bytes(Arc::new(vec![b'x'])),
                }
            },
            mode: 0o755,
            uid: 0,
            gid: 0,
        }
    }

    #[test]
    fn package_order_ranks_directories_by_their_first_entry() {
        let mut t = Tree::new("t");
        for (p, dir) in [
            ("bin", false),
            ("usr", true),
            ("usr/bin", true),
            ("usr/bin/a", false),
            ("usr/bin/b", false),
            ("usr/share", true),
            ("usr/share/doc", true),
            ("usr/share/doc/b", true),
            ("usr/share/empty", true),
            ("usr/share/doc/b/x", false),
        ] {
            t.insert(entry(p, dir));
        }
        let owner = |p: &str| match p {
            "usr/bin/a" => Some(1),
            "usr/bin/b" | "usr/share/doc/b/x" => Some(0),
            _ => None,
        };
        let order: Vec<String> = package_order(&t, &owner)
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        assert_eq!(
            order,
            [
                "bin",
                "usr",
                "usr/bin",
                "usr/bin/b",
                "usr/share",
                "usr/share/doc",
                "usr/share/doc/b",
                "usr/share/doc/b/x",
                "usr/bin/a",
                "usr/share/empty",
            ]
        );
    }
}
