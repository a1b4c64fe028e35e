//! The OCI image layout directory: `oci-layout`, `index.json`, `blobs/sha256/<hex>`.

use std::path::Path;

use super::{io_err, remove_stale, staging_path, ExportError};
use crate::cache::Cache;
use crate::digest::Digest;
use crate::image::{ImageJson, ImageLayer};

pub const OCI_LAYOUT: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;

pub fn write_layout(
    dir: &Path,
    image: &ImageJson,
    layers: &[ImageLayer],
    cache: &Cache,
) -> Result<(), ExportError> {
    if dir.exists() && !is_layout(dir) {
        return Err(ExportError::NotALayout(dir.display().to_string()));
    }
    let parent = super::parent_of(dir);
    fs_err::create_dir_all(&parent).map_err(io_err(&parent))?;
    remove_stale(dir);
    let stage = staging_path(dir);
    let _ = std::fs::remove_dir_all(&stage);
    let blobs = stage.join("blobs/sha256");
    fs_err::create_dir_all(&blobs).map_err(io_err(&blobs))?;

    for l in layers {
        let src = cache.blob_path(&l.blob.digest);
        if !src.exists() {
            return Err(ExportError::MissingBlob(l.blob.digest.to_string()));
        }
        let dst = blobs.join(l.blob.digest.hex());
        if dst.exists() {
            continue;
        }
        if std::fs::hard_link(&src, &dst).is_err() {
            fs_err::copy(&src, &dst).map_err(io_err(&dst))?;
        }
    }
    put(&blobs, &image.config.0, &image.config.1)?;
    put(&blobs, &image.manifest.0, &image.manifest.1)?;
    let p = stage.join("oci-layout");
    fs_err::write(&p, OCI_LAYOUT).map_err(io_err(&p))?;
    let p = stage.join("index.json");
    fs_err::write(&p, &image.index).map_err(io_err(&p))?;

    swap_into_place(&stage, dir)
}

fn put(blobs: &Path, d: &Digest, bytes: &[u8]) -> Result<(), ExportError> {
    let p = blobs.join(d.hex());
    fs_err::write(&p, bytes).map_err(io_err(&p))
}

/// A directory we may replace: an OCI layout, or an empty directory.
fn is_layout(dir: &Path) -> bool {
    dir.join("oci-layout").is_file()
        || std::fs::read_dir(dir)
            .map(|mut r| r.next().is_none())
            .unwrap_or(false)
}

/// Move `stage` to `dir` in one step; the old `dir`, if any, is removed afterwards.
fn swap_into_place(stage: &Path, dir: &Path) -> Result<(), ExportError> {
    if !dir.exists() {
        return fs_err::rename(stage, dir).map_err(io_err(dir));
    }
    match rustix::fs::renameat_with(
        rustix::fs::CWD,
        stage,
        rustix::fs::CWD,
        dir,
        rustix::fs::RenameFlags::EXCHANGE,
    ) {
        Ok(()) => {
            // `stage` now holds the previous layout.
            let _ = std::fs::remove_dir_all(stage);
            Ok(())
        }
        Err(_) => {
            // No RENAME_EXCHANGE on this file system: move the old one aside first.
            let old = stage.with_extension("old");
            fs_err::rename(dir, &old).map_err(io_err(dir))?;
            fs_err::rename(stage, dir).map_err(io_err(dir))?;
            let _ = std::fs::remove_dir_all(&old);
            Ok(())
        }
    }
}
