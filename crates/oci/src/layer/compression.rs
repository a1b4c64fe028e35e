//! Layer compression: the two OCI media types and pinned compressor settings.
//!
//! Settings are part of the reproducibility contract: changing a level changes every digest,
//! so they are constants here and part of the layer cache key.

use std::io::{self, Write};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::fragments::FragmentIndex;
pub use super::pgzip::{GzipOutcome, Streams};
use gpuimg_store::cache::Cache;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Gzip,
    Zstd,
}

/// gzip level of libdeflate (the version Cargo.lock pins, built from its bundled source),
/// written in parallel independent blocks of at most 1 MiB, cut also where a large file's data
/// begins and ends (`pgzip.rs`).
pub const GZIP_LEVEL: i32 = 5;
/// zstd level 3 (the library default), multithreaded: output is independent of thread count
/// as long as at least one worker is used.
pub const ZSTD_LEVEL: i32 = 3;

impl Compression {
    pub fn media_type(self) -> &'static str {
        match self {
            Compression::Gzip => "application/vnd.oci.image.layer.v1.tar+gzip",
            Compression::Zstd => "application/vnd.oci.image.layer.v1.tar+zstd",
        }
    }

    pub fn from_media_type(s: &str) -> Option<Self> {
        match s {
            "application/vnd.oci.image.layer.v1.tar+gzip"
            | "application/vnd.docker.image.rootfs.diff.tar.gzip" => Some(Compression::Gzip),
            "application/vnd.oci.image.layer.v1.tar+zstd" => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// A stable name for cache keys.
    pub fn settings_id(self) -> String {
        match self {
            // `files`: a large file's data starts blocks of its own (`fragments.rs`);
            // `streams`: a large file with a deflate stream of its bytes is that stream.
            Compression::Gzip => format!("gzip-libdeflate-{GZIP_LEVEL}-blocks1m-files-streams"),
            Compression::Zstd => format!("zstd-{ZSTD_LEVEL}-mt"),
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "gzip" => Ok(Compression::Gzip),
            "zstd" => Ok(Compression::Zstd),
            _ => Err(format!(
                "Unknown compression `{s}`: expected `gzip` or `zstd`"
            )),
        }
    }
}

fn workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(1)
}

/// A compressing writer over `W`.
pub enum Encoder<W: Write> {
    Gzip(Box<super::pgzip::ParGzEncoder<W>>),
    Zstd(zstd::stream::write::Encoder<'static, W>),
}

impl<W: Write> Encoder<W> {
    /// `cache`: where earlier gzip layers' blocks are found again (`fragments.rs`);
    /// `streams`: large files a gzip layer writes as their deflate streams (`pgzip.rs`).
    pub fn new(c: Compression, w: W, cache: &Cache, streams: Streams) -> io::Result<Self> {
        Ok(match c {
            Compression::Gzip => {
                let index = FragmentIndex::load(cache, GZIP_LEVEL, super::pgzip::BLOCK);
                Encoder::Gzip(Box::new(super::pgzip::ParGzEncoder::new(
                    w,
                    GZIP_LEVEL,
                    workers(),
                    Some(Arc::new(index)),
                    streams,
                )?))
            }
            Compression::Zstd => {
                let mut e = zstd::stream::write::Encoder::new(w, ZSTD_LEVEL)?;
                e.multithread(workers() as u32)?;
                e.include_checksum(false)?;
                Encoder::Zstd(e)
            }
        })
    }

    /// End the stream; with gzip, also what its large files' blocks were.
    pub fn finish(self) -> io::Result<(W, GzipOutcome)> {
        match self {
            Encoder::Gzip(e) => e.finish(),
            Encoder::Zstd(e) => Ok((e.finish()?, GzipOutcome::default())),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Gzip(e) => e.write(buf),
            Encoder::Zstd(e) => e.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.flush(),
            Encoder::Zstd(e) => e.flush(),
        }
    }
}
