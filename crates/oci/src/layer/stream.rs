//! One layer written a piece at a time: trees appended one after another to one tar stream
//! (each in its own order), through the same hashing and compressing pipeline as
//! [`write_layer`](super::write_layer), so a producer can feed a layer while it is still
//! making the rest of it (the apt install writes each package's entries as it unpacks them).
//! Duplicate files are found across the pieces (one `Dedup` per stream), so the layer is the
//! one `write_layer` writes for the pieces' concatenation.
//!
//! Nothing reaches the cache's blobs until [`LayerStream::finish`]: a stream dropped before
//! then leaves only a staging file, which is removed. Must never hold a layer in memory.

use std::io;

use super::compression::Encoder;
use super::dedup::Dedup;
use super::{tar_writer, LayerBlob, LayerError, LayerOptions};
use gpuimg_assemble::Tree;
use gpuimg_store::cache::{BlobWriter, Cache};
use gpuimg_store::digest::{Digest, HashingWriter};

type Sink = tar::Builder<HashingWriter<Encoder<BlobWriter>>>;

/// A layer being written.
pub struct LayerStream {
    component: String,
    opts: LayerOptions,
    tar: Sink,
    /// File bytes appended so far.
    data: u64,
    /// The files written so far, to store a later identical one once.
    dedup: Dedup,
}

impl LayerStream {
    /// Start the layer `component` (named in errors) with `opts`, into a staging file of
    /// `cache`.
    pub fn new(component: &str, opts: LayerOptions, cache: &Cache) -> Result<Self, LayerError> {
        let wrap = |source| LayerError::Write {
            component: component.to_string(),
            source,
        };
        let blob = cache.blob_writer().map_err(wrap)?;
        let enc = Encoder::new(opts.compression, blob, cache, Default::default()).map_err(wrap)?;
        let mut tar = tar::Builder::new(HashingWriter::new(enc));
        tar.follow_symlinks(false);
        Ok(LayerStream {
            component: component.to_string(),
            opts,
            tar,
            data: 0,
            dedup: Dedup::default(),
        })
    }

    fn wrap(&self) -> impl Fn(io::Error) -> LayerError + '_ {
        |source| LayerError::Write {
            component: self.component.clone(),
            source,
        }
    }

    /// Append `tree`'s entries, in the tree's order.
    pub fn append(&mut self, tree: &Tree) -> Result<(), LayerError> {
        let mut data = self.data;
        let r = tar_writer::append(
            &mut self.tar,
            tree,
            self.opts.epoch,
            &mut data,
            &mut |_| {},
            &mut self.dedup,
        );
        self.data = data;
        r.map_err(self.wrap())
    }

    /// End the archive and commit the blob to the cache (stamped, with its listing made from
    /// `all`: every entry appended). Under `key`, when given, a record is kept too.
    pub fn finish(
        self,
        cache: &Cache,
        all: &Tree,
        key: Option<&Digest>,
    ) -> Result<LayerBlob, LayerError> {
        let wrap = |source| LayerError::Write {
            component: self.component.clone(),
            source,
        };
        let linked = self.dedup.linked();
        let hashed = self.tar.into_inner().map_err(wrap)?;
        super::commit(hashed, self.opts.compression, linked, cache, all, key)
            .map(|(rec, _)| rec)
            .map_err(wrap)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::layer::{write_layer, Compression};
    use gpuimg_assemble::{DataSource, Entry, EntryKind};
    use gpuimg_fetch::observe::Silent;

    fn file(path: &str, body: &str) -> Entry {
        Entry {
            path: path.into(),
            kind: EntryKind::File {
                size: body.len() as u64,
                data: DataSource::Bytes(Arc::new(body.as_bytes().to_vec())),
            },
            mode: 0o644,
            uid: 0,
            gid: 0,
        }
    }

    fn dir(path: &str) -> Entry {
        Entry {
            path: path.into(),
            kind: EntryKind::Dir,
            mode: 0o755,
            uid: 0,
            gid: 0,
        }
    }

    #[test]
    fn pieces_in_sequence_make_the_layer_of_their_concatenation() {
        let t = tempfile::tempdir().unwrap();
        let cache = Cache::open(t.path()).unwrap();
        for compression in [Compression::Gzip, Compression::Zstd] {
            let opts = LayerOptions {
                compression,
                epoch: 7,
            };
            // In path order the pieces are one tree; appended piece by piece they must give
            // exactly the bytes `write_layer` writes for it.
            let mut whole = Tree::new("whole");
            let mut first = Tree::new("first");
            let mut second = Tree::new("second");
            // A file of the second piece identical to one of the first is stored once.
            let big = "z".repeat(5000);
            for e in [dir("a"), file("a/big", &big), file("a/x", "one")] {
                whole.insert(e.clone());
                first.insert(e);
            }
            for e in [
                dir("b"),
                file("b/big", &big),
                file("b/y", "two"),
                file("c", "three"),
            ] {
                whole.insert(e.clone());
                second.insert(e);
            }
            let mut s = LayerStream::new("s", opts, &cache).unwrap();
            s.append(&first).unwrap();
            s.append(&second).unwrap();
            let streamed = s.finish(&cache, &whole, None).unwrap();
            let (written, _) = write_layer("w", &whole, opts, &cache, &mut Silent).unwrap();
            assert_eq!(streamed, written);
            assert_eq!(
                streamed.linked.into_iter().collect::<Vec<_>>(),
                [("b/big".to_string(), 5000)]
            );
        }
    }

    #[test]
    fn a_stream_dropped_unfinished_leaves_no_blob() {
        let t = tempfile::tempdir().unwrap();
        let cache = Cache::open(t.path()).unwrap();
        let opts = LayerOptions {
            compression: Compression::Gzip,
            epoch: 0,
        };
        let mut s = LayerStream::new("s", opts, &cache).unwrap();
        let mut tree = Tree::new("t");
        tree.insert(file("f", "data"));
        s.append(&tree).unwrap();
        drop(s);
        assert!(cache.blob_names().unwrap().is_empty());
        assert_eq!(std::fs::read_dir(cache.tmp_dir()).unwrap().count(), 0);
    }
}
