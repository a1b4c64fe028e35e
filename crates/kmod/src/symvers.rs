//! A kernel's `Module.symvers` (in Debian's `linux-headers-<abi>`, written by `modpost`): one
//! line per exported symbol, tab-separated: the CRC (`0x%08x`), the symbol, the module that
//! exports it (`vmlinux`, or a module's path in the tree without `.ko`), the export type
//! (`EXPORT_SYMBOL`, `EXPORT_SYMBOL_GPL`) and the namespace (empty for none; kernels before 5.4
//! wrote four fields). A CRC of `0x00000000` is `modpost`'s "none" (a kernel without
//! `CONFIG_MODVERSIONS`).
//!
//! Must never guess at a line: a wrong field count, a CRC that is not hex, an unknown export type,
//! an empty symbol or module, or a symbol listed twice is an error naming the line.

use std::collections::BTreeMap;

/// One exported symbol of a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymversEntry {
    pub symbol: String,
    /// `None` for `0x00000000`: no CRC recorded.
    pub crc: Option<u32>,
    /// `vmlinux`, or the exporting module's path in the tree (`net/vmw_vsock/vsock`).
    pub module: String,
    pub gpl_only: bool,
    pub namespace: Option<String>,
}

impl SymversEntry {
    /// The name of the module that exports it (`vsock` for `net/vmw_vsock/vsock`, `-` read as
    /// `_`), or `None` for `vmlinux`.
    pub fn module_name(&self) -> Option<String> {
        (self.module != "vmlinux").then(|| {
            let base = self.module.rsplit('/').next().unwrap_or(&self.module);
            crate::module::module_name(base)
        })
    }
}

/// A kernel's exported symbols, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symvers {
    entries: BTreeMap<String, SymversEntry>,
}

/// Why a `Module.symvers` was not read.
#[derive(Debug, thiserror::Error)]
pub enum SymversError {
    #[error("Module.symvers is not UTF-8 text")]
    NotText,
    #[error("Module.symvers, line {line}: {why}: {text:?}")]
    Line {
        line: usize,
        why: &'static str,
        text: String,
    },
}

impl Symvers {
    /// Parses the bytes of a `Module.symvers` file.
    pub fn parse(bytes: &[u8]) -> Result<Symvers, SymversError> {
        let text = std::str::from_utf8(bytes).map_err(|_| SymversError::NotText)?;
        let mut entries = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.is_empty() {
                continue;
            }
            let bad = |why| SymversError::Line {
                line: i + 1,
                why,
                text: line.chars().take(200).collect(),
            };
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() != 4 && f.len() != 5 {
                return Err(bad("not 4 or 5 tab-separated fields"));
            }
            let crc = f[0]
                .strip_prefix("0x")
                .filter(|h| !h.is_empty() && h.len() <= 8)
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad("the CRC is not 0x and up to 8 hex digits"))?;
            let gpl_only = match f[3] {
                "EXPORT_SYMBOL" => false,
                "EXPORT_SYMBOL_GPL" => true,
                _ => return Err(bad("an export type other than EXPORT_SYMBOL(_GPL)")),
            };
            if f[1].is_empty() || f[2].is_empty() {
                return Err(bad("an empty symbol or module"));
            }
            let entry = SymversEntry {
                symbol: f[1].to_string(),
                crc: (crc != 0).then_some(crc),
                module: f[2].to_string(),
                gpl_only,
                namespace: f.get(4).filter(|n| !n.is_empty()).map(|n| n.to_string()),
            };
            if entries.insert(entry.symbol.clone(), entry).is_some() {
                return Err(bad("a symbol listed twice"));
            }
        }
        Ok(Symvers { entries })
    }

    /// The entry of `symbol`.
    pub fn get(&self, symbol: &str) -> Option<&SymversEntry> {
        self.entries.get(symbol)
    }

    /// Every entry, by symbol.
    pub fn entries(&self) -> impl Iterator<Item = &SymversEntry> {
        self.entries.values()
    }

    /// Keeps only the entries `keep` says yes to (the kernel without some of its modules).
    pub fn retain(&mut self, mut keep: impl FnMut(&SymversEntry) -> bool) {
        self.entries.retain(|_, e| keep(e));
    }

    /// How many symbols it lists.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it lists none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_five_and_four_field_forms() {
        let s = Symvers::parse(
            b"0x4c9d28b0\tphys_base\tvmlinux\tEXPORT_SYMBOL\t\n\
              0x84b45156\tinsert_resource_expand_to_fit\tvmlinux\tEXPORT_SYMBOL_GPL\tCXL\n\
              0x00000000\tvsock_bind_table\tnet/vmw_vsock/vsock\tEXPORT_SYMBOL_GPL\n\n",
        )
        .unwrap();
        assert_eq!(s.len(), 3);
        let p = s.get("phys_base").unwrap();
        assert_eq!(
            (p.crc, p.gpl_only, p.namespace.as_deref()),
            (Some(0x4c9d28b0), false, None)
        );
        assert_eq!(p.module_name(), None);
        let c = s.get("insert_resource_expand_to_fit").unwrap();
        assert_eq!((c.gpl_only, c.namespace.as_deref()), (true, Some("CXL")));
        let v = s.get("vsock_bind_table").unwrap();
        assert_eq!((v.crc, v.module_name().as_deref()), (None, Some("vsock")));
    }

    #[test]
    fn refuses_what_it_cannot_read_naming_the_line() {
        for (text, why) in [
            (&b"0x1\ta\tvmlinux\n"[..], "not 4 or 5"),
            (
                b"0x1\ta\tvmlinux\tEXPORT_SYMBOL\t\n1234\tb\tvmlinux\tEXPORT_SYMBOL\t",
                "CRC",
            ),
            (b"0x123456789\ta\tvmlinux\tEXPORT_SYMBOL\t", "CRC"),
            (
                b"0x1\ta\tvmlinux\tEXPORT_SYMBOL_GPL_FUTURE\t",
                "export type",
            ),
            (b"0x1\t\tvmlinux\tEXPORT_SYMBOL\t", "empty"),
            (
                b"0x1\ta\tvmlinux\tEXPORT_SYMBOL\t\n0x2\ta\tvmlinux\tEXPORT_SYMBOL\t",
                "twice",
            ),
        ] {
            let e = Symvers::parse(text).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
            assert!(e.contains("line "), "{e}");
        }
        assert!(matches!(
            Symvers::parse(b"\xff\t"),
            Err(SymversError::NotText)
        ));
    }
}
