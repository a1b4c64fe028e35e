//! `gpuimg-assemble`: turn each component's input into a sorted, validated [`Tree`] whose
//! entries carry their [`Provenance`].
//!
//! Inputs are a root filesystem tarball (indexed in place, never extracted), a directory
//! (walked with lstat, symlinks never followed) or the profile's `files`. The one public entry
//! is [`assemble`]; the root package's `sources` wraps each input as a `Source`, which builds
//! use. Besides it: the [`Tree`] type the later stages pass on, the shape rules across layers
//! ([`shape`]), the entries at given paths of a directory ([`dir::entries_at`]) and a wheel's
//! files left in it ([`ArchivedFile`]). Owns the rules that keep an image inside its root: no
//! `..`, no absolute entry paths, no symlink or hard link that leaves the root, special files
//! only when allowed.
//! Depends on `gpuimg-deflate` and `gpuimg-store` alone. Must never write layer bytes (that is
//! the root package's `layer`), fetch, or read a profile.

mod archived;
pub mod dir;
mod error;
mod files;
mod paths;
mod provenance;
mod rewrite;
mod same_file;
pub mod shape;
mod tarball;
mod tree;
pub mod xattr;

pub use archived::{ArchivedFile, ArchivedReader, Tap, TapRef};
pub use error::AssembleError;
pub use files::FileSpec;
pub use provenance::{PackageKind, Provenance};
pub use same_file::open_same_file;
pub use tarball::read_member as read_tarball_member;
pub use tree::{identity, DataSource, Deflated, Entry, EntryKind, Tree, Xattrs};

use std::path::Path;

/// What one component layer is made from.
#[derive(Debug, Clone)]
pub enum Input<'a> {
    /// A tarball (plain, gzip, zstd or xz) or a directory holding a root filesystem.
    Rootfs { path: &'a Path, allow_special: bool },
    /// A directory tree produced by an earlier stage (e.g. unpacked packages); `origin` names
    /// it in messages (its path is a scratch directory the user never saw).
    Dir {
        path: &'a Path,
        origin: &'a str,
        allow_special: bool,
    },
    /// The profile's `files:` entries, owned by root.
    Files(&'a [FileSpec]),
}

/// Build the sorted tree for one input. `scratch` holds decompressed tarballs. Entries are
/// stamped [`Provenance::Rootfs`] (rootfs), [`Provenance::File`] (`files:`, their parent
/// directories `Generated { by: "files" }`) or `Generated { by: origin }` (a directory, for
/// its producer to re-stamp).
pub fn assemble(input: &Input<'_>, scratch: &Path) -> Result<Tree, AssembleError> {
    let tree = match input {
        Input::Rootfs {
            path,
            allow_special,
        } => {
            let meta = fs_err::metadata(path).map_err(AssembleError::Io)?;
            let mut t = if meta.is_dir() {
                dir::walk(path, "", *allow_special, None)?
            } else {
                tarball::index(path, *allow_special, scratch)?
            };
            t.stamp_all(Provenance::Rootfs);
            t
        }
        Input::Dir {
            path,
            origin,
            allow_special,
        } => {
            let mut t =
                dir::walk(path, "", *allow_special, None).map_err(|e| e.with_origin(origin))?;
            t.origin = origin.to_string();
            t.stamp_all(Provenance::generated(*origin));
            t
        }
        Input::Files(entries) => files::collect(entries)?,
    };
    tree.check_links()?;
    shape::check(&tree)?;
    Ok(tree)
}
