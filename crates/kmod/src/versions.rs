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
