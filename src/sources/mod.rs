//! Stage `sources`: every kind of input a component layer is made from, behind one interface.
//!
//! A [`Source`] reads its input into a [`Tree`] whose entries carry their
//! [`Provenance`](crate::assemble::Provenance): [`rootfs::Rootfs`] (a base tarball or
//! directory), [`files::Files`] (the profile's `files:`) and [`apt::InstalledRoot`] (the root
//! [`apt::install`] unpacked, each path stamped with the package that shipped it). `apt` itself
//! speaks Debian/Ubuntu repositories natively; `pypi` resolves and fetches Python wheels from a
//! package index for the image's interpreter (`image_interpreter`, read from the base's
//! packages); `pinned_wheels` holds what resolution hands the installer.
//! The walking and indexing stay in `assemble`; sources decide what an input is and where
//! each entry came from.
//! Sources take plain specs (`apt::PackagesSpec`, `files::FileSpec`, `pypi::RequestSpec`,
//! [`Architecture`]), never the profile's types: the plan converts (`plan::source_specs`).
//! Must never run code from a package (no maintainer scripts, no chroot).

pub mod apt;
mod architecture;
pub mod files;
pub mod image_interpreter;
pub mod pinned_wheels;
pub mod pypi;
pub mod rootfs;
pub mod wheel;

use std::path::Path;

use crate::assemble::{AssembleError, Tree};

pub use architecture::Architecture;

/// One input of a component layer.
pub trait Source {
    /// Names the input in messages, e.g. "rootfs `base.tar.zst`".
    fn describe(&self) -> String;

    /// Read the input into a sorted, checked tree whose every entry carries its provenance.
    /// `scratch` holds what reading needs on disk (decompressed tarballs).
    fn tree(&self, scratch: &Path) -> Result<Tree, AssembleError>;
}
