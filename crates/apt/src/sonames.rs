//! `data/soname-packages.yaml`: which Debian package ships a runtime library, by SONAME, for the
//! suites the table was generated for (`scripts/soname-packages.py` writes it from each suite's
//! `Contents-<arch>.gz`: a `Packages` index has no file lists). Used to say what to install
//! when a library an object needs is provided by nothing. Data only: must never decide what
//! is installed, nor fetch anything.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

/// The table's text, compiled in.
const TABLE_TEXT: &str = include_str!("../../../data/soname-packages.yaml");

/// Where the names come from, as the hint says it.
pub const TABLE_SOURCE: &str = "`data/soname-packages.yaml`, from the suites' Contents indexes";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    suites: Vec<String>,
    sonames: BTreeMap<String, Shipped>,
}

/// The same packages in every suite, or per suite where they differ.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Shipped {
    Everywhere(Vec<String>),
    PerSuite(BTreeMap<String, Vec<String>>),
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| match serde_saphyr::from_str(TABLE_TEXT) {
        Ok(t) => t,
        // Compiled in and parsed by a unit test: a bad table never ships.
        Err(e) => panic!("data/soname-packages.yaml does not parse: {e}"),
    })
}

/// The Debian packages that ship `soname`, grouped: each group's packages and the suites it
/// holds for, in the table's suite order. Empty when the table does not know the name.
pub fn soname_packages(soname: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let t = table();
    let Some(shipped) = t.sonames.get(soname) else {
        return Vec::new();
    };
    let mut groups: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for suite in &t.suites {
        let packages = match shipped {
            Shipped::Everywhere(p) => p.clone(),
            Shipped::PerSuite(m) => match m.get(suite) {
                Some(p) => p.clone(),
                None => continue,
            },
        };
        match groups.iter_mut().find(|(p, _)| *p == packages) {
            Some((_, suites)) => suites.push(suite.clone()),
            None => groups.push((packages, vec![suite.clone()])),
        }
    }
    groups
}

/// What to install for a missing `soname`: "`libstdc++6` (the Debian package that ships it in
/// bookworm and trixie, by `data/soname-packages.yaml`, ...)"; `None` when the table does not
/// know the name.
pub fn soname_hint(soname: &str) -> Option<String> {
    let groups = soname_packages(soname);
    let quoted = |p: &[String]| {
        p.iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let suites = |s: &[String]| s.join(" and ");
    match groups.as_slice() {
        [] => None,
        [(packages, in_suites)] => Some(format!(
            "{} (the Debian package that ships it in {}, by {TABLE_SOURCE})",
            quoted(packages),
            suites(in_suites)
        )),
        many => Some(format!(
            "{} (the Debian packages that ship it, by {TABLE_SOURCE})",
            many.iter()
                .map(|(p, s)| format!("{} in {}", quoted(p), suites(s)))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_names_its_suites() {
        assert!(!table().suites.is_empty());
        assert!(table().sonames.len() > 1000);
    }

    #[test]
    fn a_runtime_library_is_named_with_its_package() {
        assert_eq!(
            soname_hint("libstdc++.so.6").unwrap(),
            format!("`libstdc++6` (the Debian package that ships it in bookworm and trixie, by {TABLE_SOURCE})")
        );
        // Renamed in trixie (the 64-bit time_t transition): each suite's name.
        assert_eq!(
            soname_hint("libssl.so.3").unwrap(),
            format!("`libssl3` in bookworm, `libssl3t64` in trixie (the Debian packages that ship it, by {TABLE_SOURCE})")
        );
        assert_eq!(soname_hint("libnothing-such.so.9"), None);
    }
}
