//! The layers gpuimg writes itself, one file each: the self-test binary, its expectation, the
//! SBOM. Reads nothing but the self-test binary's metadata (its bytes are read when the layer
//! is written).

use super::BuildError;
use gpuimg_assemble::{DataSource, Entry, EntryKind, Provenance, Tree};
use gpuimg_expect::BINARY_PATH;

/// A tree holding one root-owned file at `path` (and its parent directories).
pub(super) fn file_tree(origin: &str, path: &str, data: DataSource, size: u64, mode: u32) -> Tree {
    let mut t = Tree::new(origin);
    t.insert_with(
        Entry {
            path: path.trim_start_matches('/').to_string(),
            kind: EntryKind::File { size, data },
            mode,
            uid: 0,
            gid: 0,
        },
        Provenance::generated(origin),
    );
    t.add_missing_parents();
    t
}

/// The `gpuimg-selftest` binary at its fixed path.
pub(super) fn selftest_tree(binary: &std::path::Path) -> Result<Tree, BuildError> {
    let meta = std::fs::metadata(binary).map_err(|source| BuildError::SelftestRead {
        path: binary.display().to_string(),
        source,
    })?;
    Ok(file_tree(
        "selftest",
        BINARY_PATH,
        DataSource::file(binary.to_path_buf(), &meta),
        meta.len(),
        0o755,
    ))
}
