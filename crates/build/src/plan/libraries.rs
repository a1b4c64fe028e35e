//! One provider per shared library, and no driver library in an image: the rules of
//! `data/libraries.yaml` (driver libraries by file name, link-time stubs, the
//! forward-compatibility exception, copies private to their package) and the profile's
//! `libraries:` picks, applied to the libraries the image's packages and wheels provide.
//! Pure: the caller reads the libraries (wheels' from the wheel files, apt packages' from the
//! install) and hands them in. Must never decide anything but the verdict on those libraries.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use serde::Deserialize;

use super::components::glob_match;
use gpuimg_store::cache::Key;
use gpuimg_store::digest::Digest;

const TABLE_FILE: &str = "data/libraries.yaml";
const TABLE_TEXT: &str = include_str!("../../../../data/libraries.yaml");

/// What brought a file into the image.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Provider {
    /// A Debian package, by name.
    Deb(String),
    /// A wheel, by its normalised project name.
    Wheel(String),
}

impl Provider {
    pub fn name(&self) -> &str {
        match self {
            Provider::Deb(n) | Provider::Wheel(n) => n,
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Provider::Deb(n) => write!(f, "package `{n}`"),
            Provider::Wheel(n) => write!(f, "wheel `{n}`"),
        }
    }
}

/// One shared library in the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    /// The image path, without a leading `/`.
    pub path: String,
    /// `DT_SONAME`, else the file name.
    pub soname: String,
    pub provider: Provider,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LibraryError {
    #[error("`/{path}` from {provider} is the NVIDIA driver's own library: the container runtime mounts the host's, and a copy in the image fails at run time (CUDA error 803) when the two differ; remove what brings {provider}")]
    DriverLibrary { path: String, provider: Provider },
    #[error("the node's loader finds no `{soname}`: a node needs the driver's user space at the module's version, its libraries reached through the `nvidia` alternative")]
    NodeWithoutDriverLibrary { soname: String },
    #[error("`/{path}` from {provider} is NVIDIA's forward-compatibility libcuda, which an image may carry only with `compat: forward`")]
    CompatWithoutForward { path: String, provider: Provider },
    #[error("`{soname}` is provided twice: by {first} (`/{first_path}`) and by {second} (`/{second_path}`); keep one, or pick one with `libraries: {{{soname}: {}}}` in the profile", first.name())]
    TwoProviders {
        soname: Box<str>,
        first: Provider,
        first_path: Box<str>,
        second: Provider,
        second_path: Box<str>,
    },
    #[error("`libraries:` picks `{provider}` for `{soname}`, but {}", if found.is_empty() { "nothing in the image provides it".to_string() } else { format!("it comes from {}", found.join(" and ")) })]
    PickNotAProvider {
        soname: String,
        provider: String,
        found: Vec<String>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Table {
    driver: Vec<String>,
    stubs: Vec<String>,
    forward_compat: ForwardCompat,
    private: Vec<Private>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForwardCompat {
    providers: Vec<String>,
    paths: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Private {
    provider: String,
    paths: Vec<String>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| match serde_saphyr::from_str(TABLE_TEXT) {
        Ok(t) => t,
        // The table is compiled in and parsed by a unit test: a bad one never ships.
        Err(e) => panic!("{TABLE_FILE} does not parse: {e}"),
    })
}

/// The digest of the rules (table and picks), for the keys of layers whose contents they
/// decide (`metadata`'s `ld.so.cache`).
pub fn rules_digest(picks: &BTreeMap<String, String>, forward: bool) -> Digest {
    let mut k = Key::new("library-rules-v1");
    k.str(TABLE_TEXT).bool(forward).count(picks.len());
    for (s, p) in picks {
        k.str(s).str(p);
    }
    k.finish()
}

/// Whether the file at `path` is one of the driver's libraries (a stub excepted).
pub fn is_driver_library(path: &str) -> bool {
    let t = table();
    let name = path.rsplit('/').next().unwrap_or(path);
    t.driver.iter().any(|g| glob_match(g, name)) && !t.stubs.iter().any(|g| glob_match(g, path))
}

/// Whether `path` from `provider` is the forward-compatibility libcuda's place.
fn is_forward_compat(path: &str, provider: &Provider) -> bool {
    let f = &table().forward_compat;
    f.providers.iter().any(|g| glob_match(g, provider.name()))
        && f.paths.iter().any(|g| glob_match(g, path))
}

/// Whether the catalog says the copy at `path` belongs to `provider` alone.
pub fn is_private(path: &str, provider: &Provider) -> bool {
    table().private.iter().any(|p| {
        glob_match(&p.provider, provider.name()) && p.paths.iter().any(|g| glob_match(g, path))
    })
}

/// The driver's libraries a node's loader must find (by SONAME): what CUDA and NVML open.
pub const NODE_LIBRARIES: [&str; 3] = [
    "libcuda.so.1",
    "libnvidia-ml.so.1",
    "libnvidia-ptxjitcompiler.so.1",
];

/// A node's image (`kind: host`) must let the loader find the driver's libraries
/// (`libraries`: SONAME → path, as `ld.so.cache` holds them).
pub fn check_node_libraries(libraries: &[(String, String)]) -> Result<(), LibraryError> {
    for soname in NODE_LIBRARIES {
        if !libraries.iter().any(|(s, _)| s == soname) {
            return Err(LibraryError::NodeWithoutDriverLibrary {
                soname: soname.to_string(),
            });
        }
    }
    Ok(())
}

/// Refuse any file among `paths` (each with its provider) that is a driver library, unless it
/// is the forward-compatibility libcuda and `forward` (`compat: forward`) holds.
pub fn check_driver_files<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a Provider)>,
    forward: bool,
) -> Result<(), LibraryError> {
    for (path, provider) in files {
        if !is_driver_library(path) {
            continue;
        }
        if is_forward_compat(path, provider) {
            if forward {
                continue;
            }
            return Err(LibraryError::CompatWithoutForward {
                path: path.to_string(),
                provider: provider.clone(),
            });
        }
        return Err(LibraryError::DriverLibrary {
            path: path.to_string(),
            provider: provider.clone(),
        });
    }
    Ok(())
}

/// The libraries the loader may find (none private, none a profile pick passed over), after
/// checking that each SONAME has one provider: two different providers of one SONAME are an
/// error unless `picks` names one of them (the others' copies are then left out of the
/// result). A pick that names no provider of its SONAME is an error.
pub fn check_providers<'a>(
    libraries: &'a [Library],
    picks: &BTreeMap<String, String>,
) -> Result<Vec<&'a Library>, LibraryError> {
    let mut by_soname: BTreeMap<&str, Vec<&Library>> = BTreeMap::new();
    for l in libraries {
        if is_private(&l.path, &l.provider) || is_driver_library(&l.path) {
            continue;
        }
        by_soname.entry(&l.soname).or_default().push(l);
    }
    let mut kept: Vec<&Library> = Vec::new();
    for (soname, ls) in &by_soname {
        let pick = picks.get(*soname);
        if let Some(p) = pick {
            if !ls.iter().any(|l| l.provider.name() == p) {
                return Err(LibraryError::PickNotAProvider {
                    soname: soname.to_string(),
                    provider: p.clone(),
                    found: ls.iter().map(|l| l.provider.to_string()).collect(),
                });
            }
            kept.extend(ls.iter().filter(|l| l.provider.name() == p));
            continue;
        }
        if let Some(other) = ls.iter().find(|l| l.provider != ls[0].provider) {
            return Err(LibraryError::TwoProviders {
                soname: (*soname).into(),
                first: ls[0].provider.clone(),
                first_path: ls[0].path.as_str().into(),
                second: other.provider.clone(),
                second_path: other.path.as_str().into(),
            });
        }
        kept.extend(ls.iter());
    }
    for (soname, p) in picks {
        if !by_soname.contains_key(soname.as_str()) {
            return Err(LibraryError::PickNotAProvider {
                soname: soname.clone(),
                provider: p.clone(),
                found: Vec::new(),
            });
        }
    }
    kept.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(kept)
}

/// The directories of `libraries` for `/etc/ld.so.conf.d/`: each directory holding one of
/// them, unless it also holds a copy the loader must not find (private, passed over, or a
/// driver library), sorted.
pub fn loader_directories(libraries: &[Library], found: &[&Library]) -> Vec<String> {
    let dir = |p: &str| {
        p.rsplit_once('/')
            .map_or(String::new(), |(d, _)| d.to_string())
    };
    let mut dirs: BTreeMap<String, bool> = BTreeMap::new();
    for l in found {
        dirs.entry(dir(&l.path)).or_insert(true);
    }
    for l in libraries {
        if !found.iter().any(|f| f.path == l.path) {
            if let Some(ok) = dirs.get_mut(&dir(&l.path)) {
                *ok = false;
            }
        }
    }
    dirs.into_iter()
        .filter(|(d, ok)| *ok && !d.is_empty())
        .map(|(d, _)| d)
        .collect()
}

#[cfg(test)]
#[path = "libraries_tests.rs"]
mod tests;
