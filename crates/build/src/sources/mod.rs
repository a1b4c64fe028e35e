//! Stage `sources`: every kind of input a component layer is made from, behind one interface.
//!
//! A [`Source`] reads its input into a [`Tree`] whose entries carry their
//! [`Provenance`](gpuimg_assemble::Provenance): [`rootfs::Rootfs`] (a base tarball or
//! directory), [`files::Files`] (the profile's `files:`), [`apt_tree::InstalledRoot`] (the root
//! `gpuimg_apt::install` unpacked, each path stamped with the package that shipped it) and
//! [`wheel_tree::Wheels`] (one layer's fetched wheels, installed for the image's interpreter by
//! the crate `gpuimg-wheel`; `wheel_facts` keeps what the cache records of each wheel). The
//! crate `gpuimg-apt` speaks Debian/Ubuntu repositories natively; the crate `gpuimg-pypi`
//! resolves and fetches Python wheels from a package index for the image's interpreter
//! (`image_interpreter`, read from the base's packages) and holds what resolution hands the
//! installer (`PinnedWheel`).
//! The walking and indexing stay in `assemble`; sources decide what an input is and where
//! each entry came from.
//! Sources take plain specs (`gpuimg_apt::PackagesSpec`, `files::FileSpec`, `gpuimg_pypi::RequestSpec`,
//! [`Architecture`]), never the profile's types: the plan converts (`plan::source_specs`).
//! Must never run code from a package (no maintainer scripts, no chroot).

pub mod apt_tree;
mod architecture;
pub mod dkms_conf;
pub mod files;
pub mod image_interpreter;
pub mod rootfs;
pub mod wheel_facts;
pub mod wheel_tree;

use std::path::Path;

use gpuimg_assemble::Tree;
use gpuimg_fetch::observe::Observer;

pub use architecture::Architecture;

/// One input of a component layer.
pub trait Source {
    /// Why reading the input failed.
    type Error;

    /// Names the input in messages, e.g. "rootfs `base.tar.zst`".
    fn describe(&self) -> String;

    /// Read the input into a sorted, checked tree whose every entry carries its provenance.
    /// `scratch` holds what reading needs on disk (decompressed tarballs, installed wheels);
    /// progress goes to `obs`, warnings into the tree (`Tree::warnings`) or to `obs`.
    fn tree(&self, scratch: &Path, obs: &mut dyn Observer) -> Result<Tree, Self::Error>;
}
