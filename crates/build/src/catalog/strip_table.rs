//! What `strip` needs to know per package: the embedded table `catalog/strip.yaml` (licence
//! terms by file path, the paths a strip class removes beyond its general rule, the paths a
//! class never removes). Data only: strip classes stay names here (the profile owns their
//! type) and nothing here reads an image.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

const TABLE_FILE: &str = "catalog/strip.yaml";
const TABLE_TEXT: &str = include_str!("../../../../catalog/strip.yaml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    #[allow(dead_code)]
    source: Vec<String>,
    packages: Vec<PackageStrip>,
}

/// Where a package's paths are relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PackageKind {
    /// Paths relative to the Python site directory.
    Wheel,
    /// Paths relative to the image root, with a leading `/`.
    Deb,
}

/// One package's record.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageStrip {
    /// The wheel's normalised name or the Debian package's name.
    pub package: String,
    pub kind: PackageKind,
    /// The package's own files (path patterns), under `licence`.
    pub paths: Vec<String>,
    pub licence: String,
    /// Whether the package's own files may be modified.
    pub modify: bool,
    /// Files under other terms than the package's (bundled from elsewhere), first match wins.
    #[serde(default)]
    pub files: Vec<FileTerms>,
    /// Strip class name → paths the class removes beyond its general rule.
    #[serde(default)]
    pub remove: BTreeMap<String, Vec<String>>,
    /// Strip class name → paths the class never removes.
    #[serde(default)]
    pub keep: BTreeMap<String, Vec<String>>,
    /// Files that serve only GPUs of some compute capabilities: `device-code` leaves one out
    /// of an image none of whose GPUs it serves.
    #[serde(default, rename = "gpu-files")]
    pub gpu_files: Vec<GpuFile>,
}

/// A file (or directory) that serves only the GPUs whose compute capability is at least
/// `from` and below `below` (either bound may be absent), as `"9.0"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuFile {
    pub path: String,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub below: Option<String>,
}

/// The terms one group of files is under.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileTerms {
    pub path: String,
    pub licence: String,
    pub modify: bool,
    /// Whether the whole file may be left out of an image (every licence so far allows it).
    #[serde(default = "yes")]
    pub remove: bool,
}

fn yes() -> bool {
    true
}

/// Why the embedded table could not be read (a build defect: the table is compiled in).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{TABLE_FILE}: {0}")]
pub struct StripTableError(String);

impl StripTableError {
    /// A defect the table's reader found (a class name the profile does not know).
    pub fn new(why: String) -> Self {
        StripTableError(why)
    }
}

/// Every package the table knows, in table order.
pub fn strip_table() -> Result<&'static [PackageStrip], StripTableError> {
    static TABLE: OnceLock<Result<Table, String>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let t: Table = serde_saphyr::from_str(TABLE_TEXT).map_err(|e| e.to_string())?;
            check(&t)?;
            Ok(t)
        })
        .as_ref()
        .map(|t| t.packages.as_slice())
        .map_err(|e| StripTableError(e.clone()))
}

/// The table's text, for the cache keys of the layers strip shapes.
pub fn strip_table_text() -> &'static str {
    TABLE_TEXT
}

/// Every path of the right shape for its package's kind; each package once.
fn check(t: &Table) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for p in &t.packages {
        if !seen.insert(&p.package) {
            return Err(format!("package `{}` is listed twice", p.package));
        }
        let paths = p
            .paths
            .iter()
            .chain(p.files.iter().map(|f| &f.path))
            .chain(p.remove.values().flatten())
            .chain(p.keep.values().flatten());
        for path in paths {
            let absolute = path.starts_with('/');
            let ok = match p.kind {
                PackageKind::Wheel => !absolute,
                PackageKind::Deb => absolute,
            } && !path.trim_start_matches('/').is_empty()
                && !path
                    .split('/')
                    .skip(usize::from(absolute))
                    .any(|c| c.is_empty() || c == "." || c == "..");
            if !ok {
                return Err(format!(
                    "package `{}`: path `{path}` is not a {} path",
                    p.package,
                    match p.kind {
                        PackageKind::Wheel => "site-relative",
                        PackageKind::Deb => "`/`-rooted image",
                    }
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_reads_and_records_tritons_bundled_nvidia_tools() {
        let t = strip_table().unwrap();
        let triton = t.iter().find(|p| p.package == "triton").unwrap();
        assert_eq!(triton.licence, "MIT");
        assert!(triton.modify);
        let bin = triton
            .files
            .iter()
            .find(|f| f.path == "triton/backends/nvidia/bin")
            .unwrap();
        assert!(!bin.modify && bin.remove, "{bin:?}");
        assert_eq!(
            triton.remove["other-gpu-backends"],
            ["triton/backends/amd/lib", "triton/backends/amd/include"]
        );
        assert!(!strip_table_text().is_empty());
    }

    #[test]
    fn paths_of_the_wrong_shape_are_refused() {
        for (kind, path) in [
            ("wheel", "/usr/lib/x"),
            ("deb", "usr/lib/x"),
            ("wheel", "a/../b"),
            ("wheel", "a//b"),
        ] {
            let text = format!(
                "source: []\npackages:\n- {{package: p, kind: {kind}, paths: ['{path}'], licence: MIT, modify: true}}\n"
            );
            let t: Table = serde_saphyr::from_str(&text).unwrap();
            assert!(check(&t).is_err(), "{kind} {path}");
        }
    }
}
