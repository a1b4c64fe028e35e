//! The symbol CRCs a module was built against (`CONFIG_MODVERSIONS`): the `__versions`
//! section, an array of 64-bit `struct modversion_info { unsigned long crc; char name[56]; }`,
//! and the extended form of newer kernels (`CONFIG_EXTENDED_MODVERSIONS`): `__version_ext_crcs`,
//! 32-bit CRCs, beside `__version_ext_names`, as many NUL-terminated names in the same order.
//! Both forms may be present; their union is the module's table.
//!
//! Must never accept a table it cannot read whole: a size that is not a whole number of
//! entries, a name without its NUL, a CRC wider than 32 bits, one extended section without the
//! other or with a different count, or one symbol listed with two CRCs is `Malformed`.

use std::collections::BTreeMap;

use crate::module::Malformed;
use crate::object::{c_string, u32_in, u64_in, Object};

/// Bytes of one `struct modversion_info` on a 64-bit kernel.
const ENTRY: usize = 64;
/// Bytes of its name field (`MODULE_NAME_LEN`).
const NAME: usize = 56;

/// One symbol the module was built against, with the CRC of its declaration there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub symbol: String,
    pub crc: u32,
}

/// The module's version table, by symbol; `None` when it has neither form (built without
/// `CONFIG_MODVERSIONS`).
pub(crate) fn read(obj: &Object) -> Result<Option<BTreeMap<String, u32>>, Malformed> {
    let basic = obj.section("__versions")?;
    let crcs = obj.section("__version_ext_crcs")?;
    let names = obj.section("__version_ext_names")?;
    if basic.is_none() && crcs.is_none() && names.is_none() {
        return Ok(None);
    }
    let mut out = BTreeMap::new();
    let mut add = |symbol: &[u8], crc: u32| -> Result<(), Malformed> {
        let symbol = String::from_utf8_lossy(symbol).into_owned();
        match out.insert(symbol.clone(), crc) {
            Some(old) if old != crc => Err(Malformed::Versions(format!(
                "`{symbol}` is listed with CRCs 0x{old:08x} and 0x{crc:08x}"
            ))),
            _ => Ok(()),
        }
    };
    if let Some(b) = basic {
        if b.len() % ENTRY != 0 {
            return Err(Malformed::Versions(format!(
                "__versions holds {} bytes, not a whole number of {ENTRY}-byte entries",
                b.len()
            )));
        }
        for e in b.chunks_exact(ENTRY) {
            let crc = u64_in(e, 0).unwrap_or_default();
            let crc = u32::try_from(crc).map_err(|_| {
                Malformed::Versions(format!("a CRC wider than 32 bits (0x{crc:x})"))
            })?;
            let name = c_string(&e[8..8 + NAME], 0)
                .ok_or_else(|| Malformed::Versions("a name without its NUL".into()))?;
            if !name.is_empty() {
                add(name, crc)?;
            }
        }
    }
    match (crcs, names) {
        (None, None) => {}
        (Some(crcs), Some(names)) => {
            if crcs.len() % 4 != 0 {
                return Err(Malformed::Versions(
                    "__version_ext_crcs is not a whole number of 32-bit CRCs".into(),
                ));
            }
            let mut at = 0u64;
            for i in 0..crcs.len() / 4 {
                let name = c_string(names, at).ok_or_else(|| {
                    Malformed::Versions(format!(
                        "__version_ext_names holds fewer names than the {} CRCs",
                        crcs.len() / 4
                    ))
                })?;
                at += name.len() as u64 + 1;
                let crc = u32_in(crcs, 4 * i as u64).unwrap_or_default();
                add(name, crc)?;
            }
            if names
                .get(at as usize..)
                .is_some_and(|rest| rest.iter().any(|c| *c != 0))
            {
                return Err(Malformed::Versions(
                    "__version_ext_names holds more names than __version_ext_crcs CRCs".into(),
                ));
            }
        }
        _ => {
            return Err(Malformed::Versions(
                "only one of __version_ext_crcs and __version_ext_names".into(),
            ))
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_object::object;

    fn entry(crc: u64, name: &str) -> Vec<u8> {
        let mut e = crc.to_le_bytes().to_vec();
        let mut n = name.as_bytes().to_vec();
        n.resize(NAME, 0);
        e.extend(n);
        e
    }

    fn read_sections(
        sections: &[(&str, u32, Vec<u8>)],
    ) -> Result<Option<BTreeMap<String, u32>>, Malformed> {
        let b = object(sections);
        read(&Object::parse(&b).unwrap())
    }

    #[test]
    fn the_basic_and_extended_tables_are_one() {
        let mut basic = entry(0x1111, "printk");
        basic.extend(entry(0x2222, "kfree"));
        let crcs: Vec<u8> = [0x2222u32, 0x3333]
            .iter()
            .flat_map(|c| c.to_le_bytes())
            .collect();
        let names =
            b"kfree\0a_name_longer_than_fifty_six_bytes_which_only_the_extended_form_holds\0\0\0"
                .to_vec();
        let v = read_sections(&[
            ("__versions", 1, basic),
            ("__version_ext_crcs", 1, crcs),
            ("__version_ext_names", 1, names),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v["printk"], 0x1111);
        assert_eq!(v["kfree"], 0x2222);
        assert_eq!(
            v["a_name_longer_than_fifty_six_bytes_which_only_the_extended_form_holds"],
            0x3333
        );
        assert_eq!(read_sections(&[(".text", 1, vec![0; 4])]).unwrap(), None);
    }

    #[test]
    fn a_table_it_cannot_read_whole_is_malformed() {
        let two =
            |a: u32, b: u32| -> Vec<u8> { [a, b].iter().flat_map(|c| c.to_le_bytes()).collect() };
        let mut long_name = 1u64.to_le_bytes().to_vec();
        long_name.extend([b'x'; NAME]);
        for (sections, why) in [
            (vec![("__versions", 1, vec![0u8; 63])], "whole number"),
            (vec![("__versions", 1, long_name)], "NUL"),
            (vec![("__versions", 1, entry(1 << 32, "wide"))], "wider"),
            (vec![("__version_ext_crcs", 1, two(1, 2))], "only one"),
            (
                vec![
                    ("__version_ext_crcs", 1, two(1, 2)),
                    ("__version_ext_names", 1, b"a\0".to_vec()),
                ],
                "fewer names",
            ),
            (
                vec![
                    ("__version_ext_crcs", 1, two(1, 2)),
                    ("__version_ext_names", 1, b"a\0b\0c\0".to_vec()),
                ],
                "more names",
            ),
            (
                vec![
                    ("__version_ext_crcs", 1, two(1, 2)),
                    ("__version_ext_names", 1, b"a\0a\0".to_vec()),
                ],
                "listed with CRCs",
            ),
        ] {
            let e = read_sections(&sections).unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
    }
}
