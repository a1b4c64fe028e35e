//! Stage `layer`: write one `Tree` as a compressed, content-addressed layer blob.
//!
//! One pass: tar stream → sha256 (diff_id) → compressor → sha256 + size (digest) → the cache's
//! blob file. A layer whose key (see `key.rs`) is already in the cache is reused, without
//! compressing again, once the cache's trust rule passes (`record.rs`). A file identical to
//! one already written to the layer is written as a hard link to it (`dedup.rs`); what the
//! layer holds per owner, and what it stored once, is measured as it is written (`sizes.rs`).
//! Must never hold a layer in memory, and never know about manifests or output formats.

mod compression;
mod dedup;
pub(crate) mod fragments;
mod key;
pub mod listing;
mod pgzip;
mod record;
mod sizes;
mod stream;
mod tar_writer;

use gpuimg_store::byte_size::ByteSize;
use std::collections::BTreeMap;
use std::io;

use serde::{Deserialize, Serialize};

pub use compression::Compression;
use compression::{Encoder, GzipOutcome, Streams, GZIP_LEVEL};
pub use dedup::MIN_BYTES as DEDUP_MIN_BYTES;
pub use key::layer_key;
pub use record::{ensure_intact, lookup, remember, Records};
pub use sizes::{owner_name, Bytes, Counted, LayerSizes};
pub use stream::LayerStream;

use std::sync::Arc;

use gpuimg_assemble::{DataSource, EntryKind, Tree};
use gpuimg_fetch::observe::Observer;
use gpuimg_store::cache::{BlobWriter, Cache, LAYERS};
use gpuimg_store::digest::{Digest, HashingWriter};

/// A finished layer blob in the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerBlob {
    pub digest: Digest,
    pub size: u64,
    pub diff_id: Digest,
    pub uncompressed_size: u64,
    pub compression: Compression,
    /// Where the layer's file bytes went (per owner, stripped, stored once).
    #[serde(default)]
    pub sizes: LayerSizes,
    /// The paths written as hard links to an identical file, with their sizes: with the tree,
    /// they give `sizes` again (a tree-keyed record is shared by trees whose owners differ).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub linked: BTreeMap<String, u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("Failed to write layer `{component}`: {source}")]
    Write {
        component: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "Cache blob `{digest}` changed while this build ran ({reason}); it was not exported, \
         build again"
    )]
    Changed { digest: Digest, reason: String },
}

/// Settings that decide a layer's bytes.
#[derive(Debug, Clone, Copy)]
pub struct LayerOptions {
    pub compression: Compression,
    /// SOURCE_DATE_EPOCH: every entry's mtime.
    pub epoch: u64,
}

/// Write (or reuse) the layer for `tree`. `component` names it in messages.
pub fn write_layer(
    component: &str,
    tree: &Tree,
    opts: LayerOptions,
    cache: &Cache,
    obs: &mut dyn Observer,
) -> Result<(LayerBlob, bool), LayerError> {
    let key = layer_key(tree, opts.compression, opts.epoch);
    if let Some(mut rec) = lookup(cache, &key, obs) {
        // The key covers the entries, not their owners: measure this tree's.
        rec.sizes = LayerSizes::measure(tree, &rec.linked);
        return Ok((rec, true));
    }
    let wrap = |source| LayerError::Write {
        component: component.to_string(),
        source,
    };
    obs.task_start(component, Some(tree.data_bytes()));
    let blob = cache.blob_writer().map_err(wrap)?;
    let enc = Encoder::new(opts.compression, blob, cache, streams_of(tree)).map_err(wrap)?;
    let uncompressed = HashingWriter::new(enc);
    let mut last = 0u64;
    let mut tick = |n: u64| {
        if n - last >= 4 << 20 {
            last = n;
            obs.task_progress(n);
        }
    };
    let (uncompressed, dedup) =
        tar_writer::write_tar(tree, opts.epoch, uncompressed, &mut tick).map_err(wrap)?;
    let (rec, outcome) = commit(
        uncompressed,
        opts.compression,
        dedup.linked(),
        cache,
        tree,
        Some(&key),
    )
    .map_err(wrap)?;
    let LayerBlob {
        digest,
        size,
        uncompressed_size,
        ..
    } = rec.clone();
    let mut detail = format!("{} → {}", short(&digest), ByteSize(size));
    if outcome.reused_bytes > 0 {
        detail.push_str(&format!(
            ", {} of compressed blocks reused",
            ByteSize(outcome.reused_bytes)
        ));
    }
    if outcome.streamed_bytes > 0 {
        detail.push_str(&format!(
            ", {} copied as the wheels' deflate streams",
            ByteSize(outcome.streamed_bytes)
        ));
    }
    obs.task_done(component, uncompressed_size, &detail);
    Ok((rec, false))
}

/// Finish a layer's compressed stream and commit its blob to `cache`: stamped, with its
/// listing made from `all` (every entry written), its large files' blocks recorded
/// (`fragments.rs`) and, under `key` when given, a record. Also returns what the compressor
/// did besides compressing (blocks reused, streams copied).
fn commit(
    hashed: HashingWriter<Encoder<BlobWriter>>,
    compression: Compression,
    linked: BTreeMap<String, u64>,
    cache: &Cache,
    all: &Tree,
    key: Option<&Digest>,
) -> io::Result<(LayerBlob, GzipOutcome)> {
    let (enc, diff_id, uncompressed_size) = hashed.finish();
    let (blob, outcome) = enc.finish()?;
    let (digest, size, _) = blob.commit()?;
    let rec = LayerBlob {
        digest,
        size,
        diff_id,
        uncompressed_size,
        compression,
        sizes: LayerSizes::measure(all, &linked),
        linked,
    };
    cache.stamp_new_blob(&digest, &record::facts_of(&rec))?;
    if let Some(k) = key {
        cache.put_record(LAYERS, k, &rec)?;
    }
    listing::save(cache, &rec, all)?;
    // Hints only (checked at each use): a build that cannot record them still succeeds.
    let _ = fragments::remember(cache, &digest, GZIP_LEVEL, &outcome.fragments);
    Ok((rec, outcome))
}

/// The tree's large files that hold what a deflate stream inflates to, by path: a gzip layer
/// copies those streams instead of compressing the files (`pgzip.rs`).
fn streams_of(tree: &Tree) -> Streams {
    tree.iter()
        .filter_map(|e| match &e.kind {
            EntryKind::File { size, data } if *size >= fragments::MIN_FILE => match data {
                DataSource::Path {
                    deflated: Some(d), ..
                } => Some((e.path.clone(), Arc::clone(d))),
                DataSource::Archived(a) => a.deflated().map(|d| (e.path.clone(), Arc::new(d))),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn short(d: &Digest) -> String {
    d.hex()[..12].to_string()
}
