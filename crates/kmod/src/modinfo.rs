//! A module's `.modinfo` section: NUL-separated `key=value` strings (`vermagic`, `name`,
//! `version`, `license`, `srcversion`, `depends`, `import_ns`, `alias`, `parm`…), kept in file
//! order, a key possibly repeated.
//!
//! Must never fail on what it does not know: a string without `=` or an empty one is skipped,
//! as the kernel's own lookup skips it; bytes that are not UTF-8 are kept lossily.

/// The `key=value` fields of `.modinfo`, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModInfo {
    pub fields: Vec<(String, String)>,
}

impl ModInfo {
    /// The fields of a `.modinfo` section's bytes.
    pub fn parse(section: &[u8]) -> ModInfo {
        let fields = section
            .split(|c| *c == 0)
            .filter_map(|s| {
                let s = String::from_utf8_lossy(s);
                let (k, v) = s.split_once('=')?;
                (!k.is_empty()).then(|| (k.to_string(), v.to_string()))
            })
            .collect();
        ModInfo { fields }
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `key`, in file order.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `depends=`: the names of the modules it needs loaded first (comma-separated, empty for
    /// none).
    pub fn depends(&self) -> Vec<String> {
        self.get("depends")
            .map(|d| {
                d.split(',')
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_in_order_repeats_kept_junk_skipped() {
        let m = ModInfo::parse(
            b"license=GPL\0alias=a\0\0\0noequals\0=x\0alias=b\0depends=x,y\0vermagic=6.1.0-1-cloud-amd64 SMP \0",
        );
        assert_eq!(m.get("license"), Some("GPL"));
        assert_eq!(m.all("alias").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(m.depends(), ["x", "y"]);
        assert_eq!(m.get("vermagic"), Some("6.1.0-1-cloud-amd64 SMP "));
        assert_eq!(m.fields.len(), 5);
        assert_eq!(
            ModInfo::parse(b"depends=\0").depends(),
            Vec::<String>::new()
        );
    }
}
