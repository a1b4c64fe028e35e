//! Device code inside CUDA shared objects: the fatbin containers of an ELF's `.nv_fatbin` and
//! `__nv_relfatbin` sections, what each entry holds (a cubin or PTX, for which target), and pruning a file to
//! the entries given GPUs can select (`strip: [device-code]`, `gpuimg device-code`). Uses the
//! crate's ELF reading alone.
//!
//! Reads the ELF's section headers (through `elf::sections`, the one section-table reader)
//! and the containers' and entries' headers only; never
//! decompresses or interprets an entry's payload. Every offset is checked against the file.
//! Anything it does not fully understand (a container version or header size it has not
//! seen, an entry kind other than cubin or PTX, an unknown target variant, bytes between
//! containers other than zeros) makes the whole file "not understood" ([`NotUnderstood`]), and
//! such a file is never pruned. Pruning ([`Pruning::write`]) keeps the file size, every section
//! and every container's start: within a container, the kept entries move to its front byte
//! for byte, its size field shrinks to them, and the rest of it becomes zeros. Must never
//! decide whether a file may be modified (its licence): that is the caller's.

mod prune;
mod target;
mod walk;

#[cfg(test)]
mod tests;

pub use prune::{prune, Pruning};
pub use target::{Cc, Code, Target, Variant};
pub use walk::{read, Container, Entry, Listing, NotUnderstood};

/// The container magic (`0xBA55ED50`, little-endian in the file).
pub const CONTAINER_MAGIC: u32 = 0xBA55_ED50;
/// The ELF sections that hold fatbin containers: `.nv_fatbin` (device-linked code) and
/// `__nv_relfatbin` (relocatable code of separately compiled units, which the runtime also
/// registers: the wrappers in `.nvFatBinSegment` point into both).
pub const SECTIONS: &[&str] = &[".nv_fatbin", "__nv_relfatbin"];
