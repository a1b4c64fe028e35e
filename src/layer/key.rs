//! The layer cache key: a digest over everything that decides a layer's bytes.
//!
//! Entries (path, type, mode, owners, link targets, sizes) plus each file's source identity
//! (dev, inode, size, mtime, ctime, like git's index), extended attributes, the epoch and
//! compressor settings.
//! Touching a source file changes the key (a miss, recomputed), never the layer digest.

use sha2::{Digest as _, Sha256};

use super::compression::Compression;
use crate::assemble::{DataSource, EntryKind, Tree};
use crate::digest::Digest;

const KEY_VERSION: &str = "gpuimg-layer-key-v1";

pub fn layer_key(tree: &Tree, compression: Compression, epoch: u64) -> Digest {
    let mut h = Sha256::new();
    let mut put = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    put(KEY_VERSION.as_bytes());
    put(compression.settings_id().as_bytes());
    put(&epoch.to_le_bytes());
    for e in tree.iter() {
        put(e.path.as_bytes());
        put(&[e.mode as u8, (e.mode >> 8) as u8]);
        put(&e.uid.to_le_bytes());
        put(&e.gid.to_le_bytes());
        match &e.kind {
            EntryKind::Dir => put(b"d"),
            EntryKind::File { size, data } => {
                put(b"f");
                put(&size.to_le_bytes());
                match data {
                    DataSource::Path { identity, .. } => {
                        for v in identity {
                            put(&v.to_le_bytes());
                        }
                    }
                    DataSource::TarSpan {
                        offset, identity, ..
                    } => {
                        put(&offset.to_le_bytes());
                        for v in identity {
                            put(&v.to_le_bytes());
                        }
                    }
                    DataSource::Bytes(b) => put(&Sha256::digest(b.as_slice())),
                }
            }
            EntryKind::Symlink { target } => {
                put(b"l");
                put(target.as_bytes());
            }
            EntryKind::Hardlink { target } => {
                put(b"h");
                put(target.as_bytes());
            }
            EntryKind::CharDevice { major, minor } | EntryKind::BlockDevice { major, minor } => {
                put(if matches!(e.kind, EntryKind::CharDevice { .. }) {
                    b"c"
                } else {
                    b"b"
                });
                put(&major.to_le_bytes());
                put(&minor.to_le_bytes());
            }
            EntryKind::Fifo => put(b"p"),
        }
        for (name, value) in tree.xattrs(&e.path) {
            put(b"x");
            put(name.as_bytes());
            put(value);
        }
    }
    Digest::from_bytes(h.finalize().into())
}
