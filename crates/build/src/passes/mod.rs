//! A layer's tree passes: what happens to a layer's tree between its sources and its writer,
//! in the order the plan lists them ([`TreePass`]): strip classes by path (protecting the
//! paths `ld.so.cache` indexes), device-code pruning of shared objects for given compute
//! capabilities, debug-section stripping inside shared objects, and after each, the rewrites
//! of the wheel `RECORD`s and dpkg file lists that keep the tree describing itself truly.
//! [`apply`] is the one entry; it returns what each pass removed ([`Applied`]), for the
//! layer's size record.
//!
//! Rewritten library copies (pruned, stripped) live in the cache (`cache::Cache::copy`): the
//! tree then points at the copy, so an original's bytes never reach a layer.
//! Must never open for writing a file whose licence terms forbid modification
//! (`strip::Rules::may_modify`), nor a file in the cache or a source in place; never read
//! the profile (the plan hands it the classes, GPUs and rules), never write a layer.

mod debug_sections;
mod device_code;
mod rewritable;
mod strip;

use std::collections::HashSet;

use crate::profile::StripClass;
use crate::strip::{Rules, Stripped};
use gpuimg_assemble::Tree;
use gpuimg_expect::version::Version;
use gpuimg_fetch::observe::Observer;
use gpuimg_oci::layer::{owner_name, LayerSizes};
use gpuimg_store::cache::{serde_name, Cache};

pub use debug_sections::StrippedFile;
pub use device_code::PrunedFile;

/// One pass over a layer's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreePass {
    /// Remove the entries of these classes by path (`strip`), then the removed paths from the
    /// tree's wheel `RECORD`s and dpkg file lists.
    Strip(Vec<StripClass>),
    /// Prune every modifiable shared object to the device code these compute capabilities
    /// can select (`strip: [device-code]`), then rehash the files' `RECORD` rows.
    DeviceCode(Vec<Version>),
    /// Strip the DWARF sections and full symbol table of every modifiable shared object
    /// (`strip: [debug-symbols]`, inside files), then rehash the files' `RECORD` rows.
    DebugSections,
}

impl TreePass {
    /// A wheel layer's passes for the profile's strip classes: strip by path, then
    /// device-code pruning for `gpus` when `device-code` is a class, then debug-section
    /// stripping when `debug-symbols` is (a pruned file is stripped from its pruned copy).
    /// Other layers strip by path alone (`TreePass::Strip`).
    pub fn for_wheels(classes: &[StripClass], gpus: &[Version]) -> Vec<TreePass> {
        let mut passes = vec![TreePass::Strip(classes.to_vec())];
        if classes.contains(&StripClass::DeviceCode) {
            passes.push(TreePass::DeviceCode(gpus.to_vec()));
        }
        if classes.contains(&StripClass::DebugSymbols) {
            passes.push(TreePass::DebugSections);
        }
        passes
    }
}

/// What the passes read beside the tree.
pub struct PassContext<'a> {
    /// The catalog's strip table (what each class removes, which files may be modified).
    pub rules: &'a Rules,
    /// Paths strip never removes (the libraries `ld.so.cache` indexes).
    pub protect: &'a HashSet<String>,
    /// Where rewritten library copies are kept.
    pub cache: &'a Cache,
    /// The tree's name in messages (`the base`, "the `torch` wheels").
    pub what: &'a str,
}

/// What the passes removed from one tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The entries strip removed.
    pub stripped: Stripped,
    /// The libraries `device-code` pruned.
    pub pruned: Vec<PrunedFile>,
    /// The libraries whose debug sections were cut.
    pub sections: Vec<StrippedFile>,
}

impl Applied {
    /// What strip alone removed (a share of an apt install's strip, split per layer).
    pub fn of_strip(stripped: Stripped) -> Applied {
        Applied {
            stripped,
            ..Applied::default()
        }
    }

    /// Count what was removed into a layer's sizes (the writer measured what it wrote).
    pub fn add_sizes(&self, sizes: &mut LayerSizes) {
        for ((class, owner), r) in &self.stripped.by_class {
            sizes.add_stripped(&serde_name(class), &owner_name(owner), r.entries, r.bytes);
        }
        for p in &self.pruned {
            sizes.add_device_code(
                &format!("/{}", p.path),
                (p.entries - p.kept) as u64,
                p.zeroed,
            );
        }
        for f in &self.sections {
            sizes.add_stripped("debug-symbols", &f.owner, f.sections as u64, f.removed);
        }
    }
}

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("Failed to prune the device code of `{path}`: {source}")]
    DeviceCode {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Failed to strip the debug sections of `{path}`: {source}")]
    DebugSections {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Wheel(#[from] gpuimg_wheel::WheelError),
    #[error(transparent)]
    Apt(#[from] gpuimg_apt::AptError),
}

impl PassError {
    /// The process exit code this error ends a run with.
    pub fn exit_code(&self) -> u8 {
        match self {
            PassError::Wheel(e) => e.exit_code(),
            _ => 2,
        }
    }
}

/// Apply `passes` to `tree` in order (see the module doc); returns what they removed.
pub fn apply(
    tree: &mut Tree,
    passes: &[TreePass],
    ctx: &PassContext,
    obs: &mut dyn Observer,
) -> Result<Applied, PassError> {
    let mut out = Applied::default();
    for pass in passes {
        match pass {
            TreePass::Strip(classes) => {
                let s = strip::strip_tree(tree, classes, ctx, obs)?;
                out.stripped.removed.extend(s.removed);
                out.stripped.by_class.extend(s.by_class);
            }
            TreePass::DeviceCode(gpus) => {
                out.pruned
                    .extend(device_code::prune_tree(tree, gpus, ctx, obs)?);
            }
            TreePass::DebugSections => {
                out.sections
                    .extend(debug_sections::strip_sections_tree(tree, ctx, obs)?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
