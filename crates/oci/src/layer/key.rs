//! The layer cache key: a digest (built with `cache::Key`) over everything that decides a
//! layer's bytes.
//!
//! Entries (path, type, mode, owners, link targets, sizes) plus each file's source identity
//! (dev, inode, size, mtime, ctime, like git's index), extended attributes, the epoch,
//! compressor settings and this gpuimg's version (which decides the tar writer's output).
//! Touching a source file changes the key (a miss, recomputed), never the layer digest.
//! The purpose's version moves with what the writer does to a tree (`layer-v3`: identical
//! files stored once as hard links, and records carrying the layer's sizes); the plan's
//! up-front keys (`plan::keys`) move with it.

use sha2::{Digest as _, Sha256};

use super::compression::Compression;
use gpuimg_assemble::{DataSource, EntryKind, Tree};
use gpuimg_store::cache::Key;
use gpuimg_store::digest::Digest;

pub fn layer_key(tree: &Tree, compression: Compression, epoch: u64) -> Digest {
    let mut k = Key::new("layer-v3").tool_version();
    k.str(&compression.settings_id()).u64(epoch);
    k.count(tree.len());
    for e in tree.iter() {
        k.str(&e.path).u32(e.mode).u32(e.uid).u32(e.gid);
        match &e.kind {
            EntryKind::Dir => k.str("d"),
            EntryKind::File { size, data } => {
                k.str("f").u64(*size);
                match data {
                    DataSource::Path {
                        identity, deflated, ..
                    } => {
                        k.str("path").bytes(&ids(identity));
                        deflated_key(&mut k, deflated.as_deref())
                    }
                    DataSource::Archived(a) => {
                        k.str("archived")
                            .bytes(&ids(&a.identity))
                            .u64(a.offset)
                            .u64(a.compressed)
                            .u32(a.crc32)
                            .digest(&a.sha256);
                        deflated_key(&mut k, a.deflated().as_ref())
                    }
                    DataSource::TarSpan {
                        offset, identity, ..
                    } => k.str("span").u64(*offset).bytes(&ids(identity)),
                    DataSource::Bytes(b) => k.str("bytes").bytes(&Sha256::digest(b.as_slice())),
                }
            }
            EntryKind::Symlink { target } => k.str("l").str(target),
            EntryKind::Hardlink { target } => k.str("h").str(target),
            EntryKind::CharDevice { major, minor } => k.str("c").u32(*major).u32(*minor),
            EntryKind::BlockDevice { major, minor } => k.str("b").u32(*major).u32(*minor),
            EntryKind::Fifo => k.str("p"),
        };
        let xattrs = tree.xattrs(&e.path);
        k.count(xattrs.len());
        for (name, value) in xattrs {
            k.str(name).bytes(value);
        }
    }
    k.finish()
}

/// The copied stream is the layer's bytes for a file that has one.
fn deflated_key<'k>(k: &'k mut Key, deflated: Option<&gpuimg_assemble::Deflated>) -> &'k mut Key {
    match deflated {
        Some(d) => k
            .str("deflated")
            .bytes(&ids(&d.identity))
            .u64(d.offset)
            .u64(d.ends.final_block)
            .u64(d.ends.end)
            .u64(d.size)
            .u32(d.crc32),
        None => k.str("plain"),
    }
}

/// A source identity as one field.
fn ids(identity: &[u64; 5]) -> [u8; 40] {
    let mut out = [0u8; 40];
    for (chunk, v) in out.chunks_exact_mut(8).zip(identity) {
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    out
}
