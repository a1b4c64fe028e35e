//! One kernel module read whole from its bytes ([`Module::read`]): the appended signature cut
//! off first (`signature`), then the ELF object (`object`), its `.modinfo` (`modinfo`), its
//! version table (`versions`), the symbols it leaves undefined and those it exports
//! (`exports`). The one home of [`ReadError`] and of the module's name rule.
//!
//! Must never return a module it could not read whole: whatever is out of bounds, cut short or
//! inconsistent is a [`Malformed`] naming the part, never a partial answer or a panic.

use std::collections::BTreeMap;

use crate::exports::{self, Export};
use crate::modinfo::ModInfo;
use crate::object::{Object, SHN_UNDEF, STB_GLOBAL, STB_WEAK};
use crate::signature::{self, Signature};
use crate::versions::{self, Version};

/// Bytes of a module read at most (the largest NVIDIA modules are tens of MB).
pub const MAX_MODULE_BYTES: usize = 1 << 30;

/// A symbol the module needs from the kernel or another module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undefined {
    pub symbol: String,
    /// A weak reference: the module loads without it (the address reads as zero).
    pub weak: bool,
}

/// What was wrong with a module's bytes.
#[derive(Debug, thiserror::Error)]
pub enum Malformed {
    #[error("larger than {MAX_MODULE_BYTES} bytes")]
    TooLarge,
    #[error("not a 64-bit little-endian ELF file")]
    NotElf,
    #[error("not a relocatable ELF object (a kernel module is one)")]
    NotRelocatable,
    #[error("its section headers lie outside the file or are inconsistent")]
    SectionTable,
    #[error("section `{0}` lies outside the file")]
    Outside(String),
    #[error("no .modinfo section")]
    NoModinfo,
    #[error("its symbol table: {0}")]
    Symbols(&'static str),
    #[error("its symbol versions: {0}")]
    Versions(String),
    #[error("its exports: {0}")]
    Exports(String),
    #[error("its appended signature: {0}")]
    Signature(String),
}

/// A module that could not be read, and why.
#[derive(Debug, thiserror::Error)]
#[error("kernel module {file}: {what}")]
pub struct ReadError {
    /// The caller's name for the file (its path in the build's output).
    pub file: String,
    pub what: Malformed,
}

/// Everything the check reads from one `.ko` file.
#[derive(Debug, Clone)]
pub struct Module {
    /// The caller's name for the file.
    pub file: String,
    /// `.modinfo`'s `name=`, else the file's stem; `-` read as `_`, as the kernel does.
    pub name: String,
    /// `e_machine`.
    pub machine: u16,
    pub modinfo: ModInfo,
    /// The CRCs it was built against, by symbol; `None` when built without
    /// `CONFIG_MODVERSIONS`.
    pub versions: Option<BTreeMap<String, u32>>,
    /// The global and weak symbols it leaves undefined, sorted.
    pub undefined: Vec<Undefined>,
    pub exports: Vec<Export>,
    pub signature: Option<Signature>,
}

/// A module's name as the kernel compares names: `-` is `_`.
pub(crate) fn module_name(name: &str) -> String {
    name.replace('-', "_")
}

impl Module {
    /// Reads the module `bytes`; `file` names it in errors and facts.
    pub fn read(file: &str, bytes: &[u8]) -> Result<Module, ReadError> {
        Self::read_inner(file, bytes).map_err(|what| ReadError {
            file: file.to_string(),
            what,
        })
    }

    fn read_inner(file: &str, bytes: &[u8]) -> Result<Module, Malformed> {
        if bytes.len() > MAX_MODULE_BYTES {
            return Err(Malformed::TooLarge);
        }
        let (elf, signature) = signature::split(bytes)?;
        let obj = Object::parse(elf)?;
        let modinfo = ModInfo::parse(obj.section(".modinfo")?.ok_or(Malformed::NoModinfo)?);
        let versions = versions::read(&obj)?;
        let symbols = obj.symbols()?;
        let mut undefined: Vec<Undefined> = symbols
            .iter()
            .filter(|s| s.section == SHN_UNDEF && !s.name.is_empty())
            .filter(|s| s.bind == STB_GLOBAL || s.bind == STB_WEAK)
            .map(|s| Undefined {
                symbol: s.name.clone(),
                weak: s.bind == STB_WEAK,
            })
            .collect();
        undefined.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        undefined.dedup_by(|a, b| a.symbol == b.symbol);
        let exports = exports::read(&obj, &symbols)?;
        let name = match modinfo.get("name") {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => {
                let base = file.rsplit('/').next().unwrap_or(file);
                base.split('.').next().unwrap_or(base).to_string()
            }
        };
        Ok(Module {
            file: file.to_string(),
            name: module_name(&name),
            machine: obj.machine,
            modinfo,
            versions,
            undefined,
            exports,
            signature,
        })
    }

    /// `.modinfo`'s `vermagic`.
    pub fn vermagic(&self) -> Option<&str> {
        self.modinfo.get("vermagic")
    }

    /// The module's version table as a list, sorted by symbol.
    pub fn version_list(&self) -> Vec<Version> {
        self.versions
            .iter()
            .flatten()
            .map(|(symbol, crc)| Version {
                symbol: symbol.clone(),
                crc: *crc,
            })
            .collect()
    }
}
