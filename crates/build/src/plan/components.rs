//! Which component layer each apt package goes to: the fixed table in `data/components.yaml`,
//! the rules for packages it does not list, and the profile's `layers:` overrides.
//!
//! Rules, first that applies: the profile's `layers:`; an exact name in the table; a glob in the
//! table (first in component order); `Essential: yes` or `Priority: required` → `os`; Section
//! `python`/`interpreters` or a name `python3*`/`libpython3*` → `python`; else `packages`.
//! Architecture Invariant: a package's component depends only on its own name and control
//! fields (and the profile's explicit overrides), never on which other packages were pulled.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use serde::Deserialize;

/// The component every package the table and rules do not place goes to.
pub const PACKAGES: &str = "packages";
/// The component holding the essential set.
pub const OS: &str = "os";
/// The component holding the interpreter and its standard library.
pub const PYTHON: &str = "python";

const TABLE_FILE: &str = "data/components.yaml";
const TABLE_TEXT: &str = include_str!("../../../../data/components.yaml");

/// The control fields of one package that decide its component.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct PackageMeta {
    pub name: String,
    /// `Essential: yes`.
    pub essential: bool,
    /// `Priority:` as written (`required`, `important`, `optional`, …).
    pub priority: Option<String>,
    /// `Section:` as written, possibly with an area prefix (`universe/python`).
    pub section: Option<String>,
    /// `Maintainer:` as written (the SBOM's supplier; it decides no component).
    #[serde(default)]
    pub maintainer: Option<String>,
}

impl PackageMeta {
    /// A package known by name only (no control fields).
    pub fn named(name: impl Into<String>) -> Self {
        PackageMeta {
            name: name.into(),
            ..PackageMeta::default()
        }
    }
}

/// The profile's `layers:` in the order written: component name → packages it takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LayerOverrides {
    layers: Vec<(String, Vec<String>)>,
}

impl LayerOverrides {
    /// `layers` in profile order. A package named twice keeps its first component (the profile
    /// validator refuses that before it gets here).
    pub fn new(layers: Vec<(String, Vec<String>)>) -> Self {
        LayerOverrides { layers }
    }

    /// The overrides of a loaded profile.
    pub fn from_profile(layers: &[crate::profile::Layer]) -> Self {
        LayerOverrides::new(
            layers
                .iter()
                .filter(|l| !l.deb.is_empty())
                .map(|l| {
                    let debs = l.deb.iter().map(|d| d.value.clone()).collect();
                    (l.name.value.clone(), debs)
                })
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

/// Where each package goes and the order of the components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    order: Vec<String>,
    by_package: BTreeMap<String, String>,
    unused: Vec<String>,
}

impl Assignment {
    /// Every component in layer order: the table's, then the profile's new names in the order
    /// written. Includes components no package went to (`split` drops empty ones).
    pub fn order(&self) -> &[String] {
        &self.order
    }

    /// The component of `package`, if it was one of the packages assigned.
    pub fn component(&self, package: &str) -> Option<&str> {
        self.by_package.get(package).map(String::as_str)
    }

    /// Packages of `component`, sorted by name.
    pub fn packages(&self, component: &str) -> Vec<&str> {
        self.by_package
            .iter()
            .filter(|(_, c)| c.as_str() == component)
            .map(|(p, _)| p.as_str())
            .collect()
    }

    /// Package → component, sorted by package name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.by_package
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
    }

    /// Packages named in `layers:` that are not among the assigned packages (sorted), for a
    /// warning or an error at the caller.
    pub fn unused_overrides(&self) -> &[String] {
        &self.unused
    }
}

/// Assign every package to a component: overrides first, then the table, then the rules.
pub fn assign(pkgs: &[PackageMeta], overrides: &LayerOverrides) -> Assignment {
    let table = Table::embedded();
    let mut order: Vec<String> = table.order.clone();
    let mut forced: HashMap<&str, &str> = HashMap::new();
    for (component, debs) in &overrides.layers {
        if !order.contains(component) {
            order.push(component.clone());
        }
        for d in debs {
            forced.entry(d.as_str()).or_insert(component.as_str());
        }
    }
    let mut by_package = BTreeMap::new();
    for p in pkgs {
        let c = match forced.get(p.name.as_str()) {
            Some(c) => c.to_string(),
            None => table.component_of(p).to_string(),
        };
        by_package.insert(p.name.clone(), c);
    }
    let mut unused: Vec<String> = forced
        .keys()
        .filter(|n| !by_package.contains_key(**n))
        .map(|n| n.to_string())
        .collect();
    unused.sort();
    Assignment {
        order,
        by_package,
        unused,
    }
}

/// The component of one package by the table and the rules alone (no profile overrides).
pub fn component_of(pkg: &PackageMeta) -> &'static str {
    Table::embedded().component_of(pkg)
}

/// The table's components in layer order.
pub fn table_order() -> &'static [String] {
    &Table::embedded().order
}

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("Failed to parse `{file}`: {message}")]
    Parse { file: String, message: String },
    #[error("`{file}`: {message}")]
    Invalid { file: String, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    components: Vec<TableComponent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableComponent {
    name: String,
    #[serde(default)]
    packages: Vec<String>,
}

/// The parsed table: exact names, then globs in component order.
#[derive(Debug)]
pub(crate) struct Table {
    order: Vec<String>,
    /// Exact package name → index into `order`.
    exact: HashMap<String, usize>,
    /// Globs with the index of their component, in component order.
    globs: Vec<(String, usize)>,
}

impl Table {
    /// The embedded table (checked by this module's tests, so parsing it cannot fail in a
    /// released build).
    fn embedded() -> &'static Table {
        static TABLE: OnceLock<Table> = OnceLock::new();
        TABLE.get_or_init(|| match Table::parse(TABLE_FILE, TABLE_TEXT) {
            Ok(t) => t,
            Err(e) => panic!("the embedded component table is invalid: {e}"),
        })
    }

    /// Parse and check a table: names `[a-z0-9-]+` once each, `packages` last, each exact
    /// package name once, globs made of package-name characters and `*`/`?`.
    pub(crate) fn parse(file: &str, text: &str) -> Result<Table, TableError> {
        let raw: TableFile = serde_saphyr::from_str(text).map_err(|e| TableError::Parse {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        let invalid = |message: String| TableError::Invalid {
            file: file.to_string(),
            message,
        };
        let mut order = Vec::new();
        let mut exact = HashMap::new();
        let mut globs = Vec::new();
        for c in raw.components {
            if !is_component_name(&c.name) {
                return Err(invalid(format!(
                    "`{}` is not a component name (`[a-z0-9-]+`)",
                    c.name.escape_debug()
                )));
            }
            if order.contains(&c.name) {
                return Err(invalid(format!("component `{}` is listed twice", c.name)));
            }
            let (name, index) = (c.name.as_str(), order.len());
            for p in c.packages {
                let ok = !p.is_empty()
                    && p.chars().all(|ch| {
                        ch.is_ascii_lowercase()
                            || ch.is_ascii_digit()
                            || matches!(ch, '+' | '-' | '.' | '*' | '?')
                    });
                if !ok {
                    return Err(invalid(format!(
                        "component `{name}`: `{}` is not a package name or glob",
                        p.escape_debug()
                    )));
                }
                if p.contains(['*', '?']) {
                    globs.push((p, index));
                } else if let Some(first) = exact.insert(p.clone(), index) {
                    let first: &String = &order[first];
                    return Err(invalid(format!(
                        "package `{p}` is listed twice (in `{first}` and `{name}`)"
                    )));
                }
            }
            order.push(c.name);
        }
        for must in [OS, PYTHON] {
            if !order.iter().any(|c| c == must) {
                return Err(invalid(format!("component `{must}` is missing")));
            }
        }
        if order.last().map(String::as_str) != Some(PACKAGES) {
            return Err(invalid(format!("`{PACKAGES}` must be the last component")));
        }
        Ok(Table {
            order,
            exact,
            globs,
        })
    }

    fn component_of(&self, p: &PackageMeta) -> &str {
        if let Some(&i) = self.exact.get(&p.name) {
            return &self.order[i];
        }
        if let Some(&(_, i)) = self.globs.iter().find(|(g, _)| glob_match(g, &p.name)) {
            return &self.order[i];
        }
        let priority = p.priority.as_deref().map(str::trim);
        if p.essential || priority.is_some_and(|v| v.eq_ignore_ascii_case("required")) {
            return OS;
        }
        let section = p.section.as_deref().map(|s| {
            let s = s.trim();
            s.rsplit_once('/').map_or(s, |(_, tail)| tail)
        });
        if matches!(section, Some("python" | "interpreters"))
            || p.name.starts_with("python3")
            || p.name.starts_with("libpython3")
        {
            return PYTHON;
        }
        PACKAGES
    }
}

/// `[a-z0-9-]+`: the names components (and profile `layers:` keys) may have.
pub fn is_component_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

pub(crate) use crate::glob::glob_match;

#[cfg(test)]
#[path = "components_tests.rs"]
mod tests;
