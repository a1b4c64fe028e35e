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
    /// The global and weak symbols it leaves undefined, each once, in symbol-table order: the
    /// order the loader resolves them in, which its licence rule depends on (`check`).
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
        let mut seen = std::collections::BTreeSet::new();
        let undefined: Vec<Undefined> = symbols
            .iter()
            .filter(|s| s.section == SHN_UNDEF && !s.name.is_empty())
            .filter(|s| s.bind == STB_GLOBAL || s.bind == STB_WEAK)
            .filter(|s| seen.insert(s.name.as_str()))
            .map(|s| Undefined {
                symbol: s.name.clone(),
                weak: s.bind == STB_WEAK,
            })
            .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_object::{object, symbol};

    #[test]
    fn a_module_without_a_name_is_named_by_its_file() {
        let mut syms = symbol(0, 0, 0, 0);
        syms.extend(symbol(1, STB_GLOBAL, SHN_UNDEF, 0));
        syms.extend(symbol(1, STB_GLOBAL, SHN_UNDEF, 0));
        syms.extend(symbol(8, STB_WEAK, SHN_UNDEF, 0));
        syms.extend(symbol(0, STB_GLOBAL, SHN_UNDEF, 0));
        let b = object(&[
            (
                ".modinfo",
                1,
                b"vermagic=6.1.0-1-cloud-amd64 SMP \0".to_vec(),
            ),
            (".strtab", 3, b"\0printk\0maybe\0".to_vec()),
            (".symtab", 2, syms),
        ]);
        let m = Module::read("kernel/drivers/my-driver.ko.xz", &b).unwrap();
        assert_eq!(m.name, "my_driver");
        assert_eq!(m.versions, None);
        assert_eq!(
            m.undefined,
            [
                Undefined {
                    symbol: "printk".into(),
                    weak: false
                },
                Undefined {
                    symbol: "maybe".into(),
                    weak: true
                }
            ]
        );
    }

    #[test]
    fn what_is_not_a_module_is_refused_naming_the_file() {
        let no_modinfo = object(&[(".text", 1, vec![0xc3])]);
        let mut executable = object(&[(".modinfo", 1, b"name=x\0".to_vec())]);
        executable[16] = 2;
        let two_tables = object(&[
            (".modinfo", 1, b"name=x\0".to_vec()),
            (".symtab", 2, vec![0; 24]),
            (".symtab", 2, vec![0; 24]),
        ]);
        let mut outside = object(&[(".modinfo", 1, b"name=x\0".to_vec())]);
        let shoff = u64::from_le_bytes(outside[40..48].try_into().unwrap()) as usize;
        // The .modinfo header's size: past the end of the file.
        outside[shoff + 64 + 32..shoff + 64 + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        for (b, why) in [
            (no_modinfo, "no .modinfo"),
            (executable, "not a relocatable"),
            (two_tables, "more than one symbol table"),
            (outside, "`.modinfo` lies outside"),
            (b"\x7fELF".to_vec(), "not a 64-bit"),
        ] {
            let e = Module::read("m.ko", &b).unwrap_err().to_string();
            assert!(
                e.starts_with("kernel module m.ko: ") && e.contains(why),
                "{why}: {e}"
            );
        }
    }
}
