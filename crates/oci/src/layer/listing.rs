//! What a layer holds that is not a directory, kept beside its blob so that a later layer can
//! be checked against a base that came from the cache without its tree: `listings-v1/
//! <diff_id>.json`. Keyed by the uncompressed content, so gzip and zstd share it; a missing or
//! changed record is rebuilt by reading the blob's tar headers.

use std::io::{self, Read};

use gpuimg_assemble::shape::{self, NonDirs};
use gpuimg_assemble::Tree;
use gpuimg_store::cache::{Bucket, Cache};

use super::{Compression, LayerBlob};

const BUCKET: Bucket = Bucket::Listings;

/// Record the listing of `tree`, the content of `blob`.
pub fn save(cache: &Cache, blob: &LayerBlob, tree: &Tree) -> io::Result<()> {
    cache.put_record(BUCKET, &blob.diff_id, &shape::non_dirs(tree))
}

/// The listing of `blob`: recorded (and unchanged since, by the cache's trust rule), or read
/// from the blob itself (and recorded).
pub fn load(cache: &Cache, blob: &LayerBlob) -> io::Result<NonDirs> {
    if let Ok(Some(rec)) = cache.read_record(BUCKET, &blob.diff_id) {
        if rec.trusted {
            if let Ok(l) = serde_json::from_slice::<NonDirs>(&rec.bytes) {
                return Ok(l);
            }
        }
    }
    let path = cache.blob_path(&blob.digest);
    let file = io::BufReader::with_capacity(1 << 20, fs_err::File::open(&path)?);
    let reader: Box<dyn Read> = match blob.compression {
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(file)),
        Compression::Zstd => Box::new(zstd::Decoder::new(file)?),
    };
    let mut out = NonDirs::new();
    for entry in tar::Archive::new(reader).entries()? {
        let entry = entry?;
        let path = entry
            .path()?
            .to_string_lossy()
            .trim_end_matches('/')
            .to_string();
        let path = path.trim_start_matches("./").to_string();
        match entry.header().entry_type() {
            tar::EntryType::Directory => {}
            tar::EntryType::Symlink => {
                let t = entry
                    .link_name()?
                    .map(|t| t.to_string_lossy().into_owned())
                    .unwrap_or_default();
                out.insert(path, Some(t));
            }
            t if t.is_pax_local_extensions() || t.is_gnu_longname() || t.is_gnu_longlink() => {}
            _ => {
                out.insert(path, None);
            }
        }
    }
    cache.put_record(BUCKET, &blob.diff_id, &out)?;
    Ok(out)
}
