//! The OCI image layout directory: `oci-layout`, `index.json`, `blobs/sha256/<hex>`.
//!
//! Fills a staging directory; `export` moves it into place. Every file is mode 0644 and
//! every directory 0755 whatever the umask; layer blobs are hard links to the cache when the
//! cache's copy already has that mode, else copies.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::{io_err, Contents, ExportError};
use gpuimg_store::cache::Cache;

pub const OCI_LAYOUT: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;

/// The mode of every file in an output.
pub const FILE_MODE: u32 = 0o644;

/// Write the layout of `contents` into the (empty) directory `stage`.
pub(super) fn fill_layout(
    stage: &Path,
    contents: &Contents<'_>,
    cache: &Cache,
) -> Result<(), ExportError> {
    let blobs = stage.join("blobs");
    let sha = blobs.join("sha256");
    for d in [&blobs, &sha] {
        fs_err::create_dir(d).map_err(io_err(d))?;
        fs_err::set_permissions(d, std::fs::Permissions::from_mode(0o755)).map_err(io_err(d))?;
    }
    for l in &contents.layers {
        let src = cache.blob_path(&l.blob.digest);
        let Ok(meta) = std::fs::metadata(&src) else {
            return Err(ExportError::MissingBlob(l.blob.digest.to_string()));
        };
        let dst = sha.join(l.blob.digest.hex());
        if dst.exists() {
            continue;
        }
        let linked = meta.permissions().mode() & 0o7777 == FILE_MODE
            && std::fs::hard_link(&src, &dst).is_ok();
        if !linked {
            fs_err::copy(&src, &dst).map_err(io_err(&dst))?;
            fs_err::set_permissions(&dst, std::fs::Permissions::from_mode(FILE_MODE))
                .map_err(io_err(&dst))?;
        }
    }
    for (digest, bytes) in &contents.json {
        let dst = sha.join(digest.hex());
        if !dst.exists() {
            put(&dst, bytes)?;
        }
    }
    put(&stage.join("oci-layout"), OCI_LAYOUT)?;
    put(&stage.join("index.json"), contents.index)
}

/// Create `path` with `bytes`, mode 0644 whatever the umask.
fn put(path: &Path, bytes: &[u8]) -> Result<(), ExportError> {
    let err = io_err(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(&err)?;
    f.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
        .map_err(&err)?;
    f.write_all(bytes).map_err(&err)
}
