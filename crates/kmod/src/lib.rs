//! `gpuimg-kmod`: the truth check of built kernel modules. It reads a `.ko` file
//! ([`Module::read`]: `.modinfo`, the symbol CRCs it was built against, its undefined and
//! exported symbols, its appended signature) and a kernel's `Module.symvers` ([`Symvers::parse`])
//! as data, and its one public entry, [`check`], holds a set of built modules to one kernel:
//! every symbol a module needs is exported by that kernel or by another module of the set, with
//! the CRC the module recorded, under the licence and namespace rules the kernel's loader applies,
//! and every module's `vermagic` names that kernel. It answers the facts a caller labels an image
//! with ([`Facts`]: name, version, vermagic, depends, signer), or a refusal naming the module, the
//! symbol and both sides ([`CheckError`]).
//!
//! Pure data: bytes in, facts or errors out. Must never open a file, start a program, read the
//! environment or the clock, load a module, or panic on what a module or `Module.symvers` holds;
//! every offset a file gives is bounds-checked (section headers through `gpuimg_elf::sections`).

mod certificate;
mod check;
mod exports;
mod modinfo;
mod module;
mod object;
mod signature;
mod symvers;
#[cfg(test)]
mod test_object;
mod versions;

pub use certificate::{Certificate, CertificateError};
pub use check::{check, CheckError, Facts, Kernel, Refusal};
pub use exports::Export;
pub use modinfo::ModInfo;
pub use module::{Malformed, Module, ReadError, Undefined, MAX_MODULE_BYTES};
pub use signature::{Signature, SignatureId};
pub use symvers::{Symvers, SymversEntry, SymversError};
pub use versions::Version;
