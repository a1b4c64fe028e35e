//! oci-archive: the OCI layout as a single deterministic tar file; a docker-archive holds the
//! same blobs with `manifest.json` and `repositories` in place of `index.json` and
//! `oci-layout` (with those, podman would load it as an oci-archive and take the tag for the
//! image's name).
//!
//! Streams into a staging file; `export` moves it into place. Entries are sorted, owned by
//! 0:0, dated 0, mode 0644 (files) and 0755 (directories).

use std::io::{BufWriter, Write};

use super::layout::{FILE_MODE, OCI_LAYOUT};
use super::{io_err, Contents, ExportError};
use crate::image::DockerJson;
use gpuimg_store::cache::Cache;
use gpuimg_store::staging::Staged;

/// Write the archive of `contents` into the (empty) staging file `stage`; with `docker`, its
/// two files in place of `index.json` and `oci-layout`.
pub(super) fn fill_archive(
    stage: &Staged,
    contents: &Contents<'_>,
    docker: Option<&DockerJson>,
    cache: &Cache,
) -> Result<(), ExportError> {
    let err = io_err(stage.path());
    let mut b = tar::Builder::new(BufWriter::with_capacity(1 << 20, stage.file_handle()));
    let dir = |b: &mut tar::Builder<_>, p: &str| -> std::io::Result<()> {
        let mut h = header(0);
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        b.append_data(&mut h, p, std::io::empty())
    };
    let mut blobs: Vec<(String, Opener, u64)> = Vec::new();
    for l in &contents.layers {
        let src = cache.blob_path(&l.blob.digest);
        if !src.exists() {
            return Err(ExportError::MissingBlob(l.blob.digest.to_string()));
        }
        blobs.push((
            l.blob.digest.hex(),
            Box::new(move || Ok(Box::new(fs_err::File::open(src)?) as Box<dyn std::io::Read>)),
            l.blob.size,
        ));
    }
    for (d, bytes) in &contents.json {
        let bytes = bytes.to_vec();
        let len = bytes.len() as u64;
        blobs.push((
            d.hex(),
            Box::new(move || Ok(Box::new(std::io::Cursor::new(bytes)) as Box<dyn std::io::Read>)),
            len,
        ));
    }
    blobs.sort_by(|a, b| a.0.cmp(&b.0));
    blobs.dedup_by(|a, b| a.0 == b.0);

    (|| -> std::io::Result<()> {
        dir(&mut b, "blobs/")?;
        dir(&mut b, "blobs/sha256/")?;
        for (hex, open, size) in blobs {
            let mut h = header(size);
            b.append_data(&mut h, format!("blobs/sha256/{hex}"), open()?)?;
        }
        let files: [(&str, &[u8]); 2] = match docker {
            Some(d) => [
                ("manifest.json", &d.manifest),
                ("repositories", &d.repositories),
            ],
            None => [("index.json", contents.index), ("oci-layout", OCI_LAYOUT)],
        };
        for (name, bytes) in files {
            let mut h = header(bytes.len() as u64);
            b.append_data(&mut h, name, bytes)?;
        }
        let mut w = b.into_inner()?;
        w.flush()?;
        Ok(())
    })()
    .map_err(err)
}

/// Opens one blob's bytes when its turn comes in the archive.
type Opener = Box<dyn FnOnce() -> std::io::Result<Box<dyn std::io::Read>>>;

fn header(size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(FILE_MODE);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(size);
    h
}
