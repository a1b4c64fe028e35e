//! One file beside the output (`--sbom FILE`): checked before the build, written through a
//! locked staging sibling and renamed into place, so a reader never sees half of it.
//! Replaces only a regular file (never a directory, symbolic link, device, FIFO or socket).

use std::io::Write;
use std::path::Path;

use super::{io_err, parent_of, stem_of, ExportError};
use gpuimg_store::staging::{self, Staged};

/// Check that `path` may be written: nothing there, or a regular file.
pub fn check_file_target(path: &Path) -> Result<(), ExportError> {
    stem_of(path)?;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(path)(e)),
    };
    let t = meta.file_type();
    if t.is_file() {
        return Ok(());
    }
    let kind = if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    };
    Err(ExportError::Special {
        path: path.display().to_string(),
        kind,
    })
}

/// Write `bytes` to `path` (mode 0644), replacing a regular file there in one rename.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ExportError> {
    check_file_target(path)?;
    let stem = stem_of(path)?;
    let parent = parent_of(path);
    fs_err::create_dir_all(&parent).map_err(io_err(&parent))?;
    staging::reclaim(&parent, Some(&stem));
    let stage =
        Staged::file(&parent, &stem, super::layout::FILE_MODE).map_err(ExportError::Stage)?;
    let err = io_err(path);
    let mut f = stage.file_handle();
    f.write_all(bytes).map_err(&err)?;
    f.flush().map_err(&err)?;
    stage.persist(path).map_err(err)
}
