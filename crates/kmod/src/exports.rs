//! The symbols a module exports, read from its symbol table as the module loader and `modpost`
//! lay them out: a `__ksymtab_<name>` symbol in a `__ksymtab*` section (`__ksymtab_gpl`:
//! `EXPORT_SYMBOL_GPL`), its namespace the string at `__kstrtabns_<name>` in
//! `__ksymtab_strings` (Debian's 6.1 and 6.12 modules; empty for none), its CRC the 32-bit word
//! at `__crc_<name>` in a `__kcrctab*` section (or the value of an absolute `__crc_<name>`, as
//! kernels before 5.19 wrote it). An object not linked by `modpost` yet (6.5 and newer) has
//! instead a `.export_symbol` section with one `__export_symbol_<name>` per export: its licence
//! string (`GPL` or empty), then its namespace.
//!
//! Must never invent what the file does not say: an export without a CRC has none (`None`); an
//! export without a name, or a namespace or CRC whose symbol points outside its section, is
//! `Malformed`.

use std::collections::BTreeMap;

use crate::module::Malformed;
use crate::object::{c_string, u32_in, Object, Symbol, SHN_ABS, SHN_UNDEF};

/// One symbol a module exports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    pub symbol: String,
    /// `EXPORT_SYMBOL_GPL`: only modules under a GPL-compatible licence may use it.
    pub gpl_only: bool,
    /// The namespace a user must import (`MODULE_IMPORT_NS`), if any.
    pub namespace: Option<String>,
    /// The CRC of its declaration, where the module was built with `CONFIG_MODVERSIONS`.
    pub crc: Option<u32>,
}

fn non_empty(s: &[u8]) -> Option<String> {
    (!s.is_empty()).then(|| String::from_utf8_lossy(s).into_owned())
}

/// The module's exports, sorted by symbol.
pub(crate) fn read(obj: &Object, symbols: &[Symbol]) -> Result<Vec<Export>, Malformed> {
    let defined = |s: &Symbol| s.section != SHN_UNDEF;
    let by_name: BTreeMap<&str, &Symbol> = symbols
        .iter()
        .filter(|s| defined(s))
        .map(|s| (s.name.as_str(), s))
        .collect();
    // The string or word a symbol points at inside its own section.
    let string_at = |s: &Symbol, what: &str| -> Result<Vec<u8>, Malformed> {
        let b = obj.section_at(s.section)?;
        c_string(b, s.value)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Malformed::Exports(format!("{what} `{}` outside its section", s.name)))
    };
    let mut out = BTreeMap::new();
    for s in symbols.iter().filter(|s| defined(s)) {
        let Some(name) = s.name.strip_prefix("__ksymtab_") else {
            continue;
        };
        let Some(section) = obj.section_name(s.section) else {
            continue;
        };
        if name.is_empty() && section.starts_with(b"__ksymtab") {
            return Err(Malformed::Exports("an export without a name".into()));
        }
        let gpl_only = match section {
            b"__ksymtab" => false,
            b"__ksymtab_gpl" => true,
            // Before modpost's link: `___ksymtab+name`, `___ksymtab_gpl+name`.
            s if s.starts_with(b"___ksymtab+") => false,
            s if s.starts_with(b"___ksymtab_gpl+") => true,
            _ => continue,
        };
        let namespace = match by_name.get(format!("__kstrtabns_{name}").as_str()) {
            Some(ns) => non_empty(&string_at(ns, "namespace")?),
            None => None,
        };
        let crc = match by_name.get(format!("__crc_{name}").as_str()) {
            Some(c) if c.section == SHN_ABS => u32::try_from(c.value).ok(),
            Some(c) => Some(u32_in(obj.section_at(c.section)?, c.value).ok_or_else(|| {
                Malformed::Exports(format!("CRC `{}` outside its section", c.name))
            })?),
            None => None,
        };
        out.insert(
            name.to_string(),
            Export {
                symbol: name.to_string(),
                gpl_only,
                namespace,
                crc,
            },
        );
    }
    for s in symbols.iter().filter(|s| defined(s)) {
        let Some(name) = s.name.strip_prefix("__export_symbol_") else {
            continue;
        };
        if obj.section_name(s.section) != Some(b".export_symbol") || out.contains_key(name) {
            continue;
        }
        if name.is_empty() {
            return Err(Malformed::Exports("an export without a name".into()));
        }
        let license = string_at(s, "export")?;
        let ns_at = s.value.saturating_add(license.len() as u64 + 1);
        let b = obj.section_at(s.section)?;
        let namespace = c_string(b, ns_at).ok_or_else(|| {
            Malformed::Exports(format!("export `{}` outside its section", s.name))
        })?;
        out.insert(
            name.to_string(),
            Export {
                symbol: name.to_string(),
                gpl_only: license == b"GPL",
                namespace: non_empty(namespace),
                crc: None,
            },
        );
    }
    Ok(out.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{STB_GLOBAL, STB_WEAK};
    use crate::test_object::{object, symbol};

    /// A string table of `names` and each name's offset.
    fn strtab(names: &[&str]) -> (Vec<u8>, Vec<u32>) {
        let mut b = vec![0u8];
        let mut at = Vec::new();
        for n in names {
            at.push(b.len() as u32);
            b.extend_from_slice(n.as_bytes());
            b.push(0);
        }
        (b, at)
    }

    #[test]
    fn the_linked_and_the_unlinked_layouts() {
        let (names, at) = strtab(&[
            "__ksymtab_baz",
            "__kstrtabns_baz",
            "__crc_baz",
            "__export_symbol_foo",
            "__export_symbol_bar",
            "printk",
            "__ksymtab_qux",
            "__kstrtabns_qux",
        ]);
        // Sections: 1 __ksymtab, 2 __ksymtab_strings, 3 .export_symbol, 4 __ksymtab_gpl,
        // 5 .strtab, 6 .symtab.
        let mut syms = symbol(0, 0, 0, 0);
        syms.extend(symbol(at[0], 0, 1, 0));
        syms.extend(symbol(at[1], 0, 2, 4));
        syms.extend(symbol(at[2], 0, SHN_ABS, 0xabcd));
        syms.extend(symbol(at[3], STB_GLOBAL, 3, 0));
        syms.extend(symbol(at[4], STB_GLOBAL, 3, 7));
        syms.extend(symbol(at[5], STB_WEAK, 0, 0));
        syms.extend(symbol(at[6], 0, 4, 0));
        syms.extend(symbol(at[7], 0, 2, 5));
        let b = object(&[
            ("__ksymtab", 1, vec![0; 12]),
            ("__ksymtab_strings", 1, b"baz\0\0DMA\0".to_vec()),
            (".export_symbol", 1, b"GPL\0NS\0\0\0".to_vec()),
            ("__ksymtab_gpl", 1, vec![0; 12]),
            (".strtab", 3, names),
            (".symtab", 2, syms),
        ]);
        let obj = Object::parse(&b).unwrap();
        let symbols = obj.symbols().unwrap();
        assert_eq!(symbols.len(), 9);
        let x = read(&obj, &symbols).unwrap();
        let export = |s: &str, gpl_only, ns: Option<&str>, crc| Export {
            symbol: s.into(),
            gpl_only,
            namespace: ns.map(Into::into),
            crc,
        };
        assert_eq!(
            x,
            [
                export("bar", false, None, None),
                export("baz", false, None, Some(0xabcd)),
                export("foo", true, Some("NS"), None),
                export("qux", true, Some("DMA"), None),
            ]
        );
    }

    #[test]
    fn a_namespace_outside_its_section_is_malformed() {
        let (names, at) = strtab(&["__ksymtab_baz", "__kstrtabns_baz"]);
        let mut syms = symbol(0, 0, 0, 0);
        syms.extend(symbol(at[0], 0, 1, 0));
        syms.extend(symbol(at[1], 0, 2, 99));
        let b = object(&[
            ("__ksymtab", 1, vec![0; 12]),
            ("__ksymtab_strings", 1, b"baz\0\0".to_vec()),
            (".strtab", 3, names),
            (".symtab", 2, syms),
        ]);
        let obj = Object::parse(&b).unwrap();
        let e = read(&obj, &obj.symbols().unwrap()).unwrap_err().to_string();
        assert!(e.contains("__kstrtabns_baz"), "{e}");
    }
}
