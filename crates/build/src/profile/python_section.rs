//! `python:` checks: every requirement string is PEP 508 (`gpuimg_pypi::requirement`, here only
//! to point at a bad one; `gpuimg-pypi` parses them again for resolution), URLs are http(s) or file URLs, and
//! the requirements file and find-links directories lie in the build context.
//! Must never resolve or fetch anything: the values stay as written, with their positions.

use std::path::{Path, PathBuf};

use gpuimg_pypi::requirement;

use super::schema::PythonSpec;
use super::sources::{build_context, join, source_for};
use super::{Located, ProfileError};

/// The validated `python:` section.
#[derive(Debug, Clone)]
pub struct Python {
    /// PEP 508 requirement strings, as written (syntax checked).
    pub packages: Vec<Located<String>>,
    /// The requirements file (canonical, inside `context`), with where the profile names it.
    pub requirements: Option<(Located<String>, PathBuf)>,
    /// The build context: `-r`/`-c` includes of the requirements file must stay inside it.
    pub context: PathBuf,
    /// `python.index`: a URL.
    pub index: Option<Located<String>>,
    /// `python.extra-indexes`: (name, URL); the name is the one written before `=`, else
    /// `extra-N` (1-based).
    pub extra_indexes: Vec<(String, Located<String>)>,
    /// `python.find-links`: URLs and directories.
    pub find_links: Vec<FindLink>,
    /// `python.compile`.
    pub compile: bool,
}

/// One `python.find-links` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FindLink {
    /// A page listing wheels.
    Url(Located<String>),
    /// A local directory of wheels (canonical, inside the context).
    Dir(PathBuf),
}

/// Names the lock uses for indexes the profile does not name itself.
pub const RESERVED_INDEX_NAMES: &[&str] = &["host", "index", "find-links"];

pub(super) fn validate(
    spec: &Located<PythonSpec>,
    context: Option<&Located<String>>,
    file: &str,
    dir: &Path,
) -> Result<Python, ProfileError> {
    let py = &spec.value;
    let err = |at: &Located<String>, key: &str, m: String| ProfileError::invalid(file, at, key, m);
    for p in &py.packages {
        requirement::check(&p.value).map_err(|m| err(p, "python.packages", m.to_string()))?;
    }
    let context = build_context(context, dir, file)?;
    let requirements = match &py.requirements {
        None => None,
        Some(r) => {
            let path = source_for("python.requirements", r, dir, &context, file)?;
            if !path.is_file() {
                return Err(err(
                    r,
                    "python.requirements",
                    format!("`{}` is not a file", path.display()),
                ));
            }
            Some((r.clone(), path))
        }
    };
    if let Some(i) = &py.index {
        requirement::index_url(&i.value).map_err(|m| err(i, "python.index", m.to_string()))?;
    }
    let mut extra_indexes: Vec<(String, Located<String>)> = Vec::new();
    for (n, e) in py.extra_indexes.iter().enumerate() {
        let (name, url) = split_named(&e.value).map_err(|m| err(e, "python.extra-indexes", m))?;
        let name = name.map_or_else(|| format!("extra-{}", n + 1), str::to_string);
        if extra_indexes.iter().any(|(o, _)| *o == name) {
            return Err(err(
                e,
                "python.extra-indexes",
                format!("the name `{name}` is used twice"),
            ));
        }
        let url = Located {
            value: url.to_string(),
            line: e.line,
            column: e.column,
        };
        requirement::index_url(&url.value)
            .map_err(|m| err(e, "python.extra-indexes", m.to_string()))?;
        extra_indexes.push((name, url));
    }
    let mut find_links = Vec::new();
    for f in &py.find_links {
        if f.value.contains("://") {
            requirement::index_url(&f.value)
                .map_err(|m| err(f, "python.find-links", m.to_string()))?;
            find_links.push(FindLink::Url(f.clone()));
        } else {
            let path = source_for("python.find-links", f, dir, &context, file)?;
            if !path.is_dir() {
                return Err(err(
                    f,
                    "python.find-links",
                    format!("`{}` is not a directory", join(dir, &f.value).display()),
                ));
            }
            find_links.push(FindLink::Dir(path));
        }
    }
    Ok(Python {
        packages: py.packages.clone(),
        requirements,
        context,
        index: py.index.clone(),
        extra_indexes,
        find_links,
        compile: py.compile,
    })
}

/// `NAME=URL` or `URL`: the name (lowercase letters, digits, `-`; not a reserved one).
fn split_named(text: &str) -> Result<(Option<&str>, &str), String> {
    let Some((name, url)) = text.split_once('=').filter(|(n, _)| !n.contains('/')) else {
        return Ok((None, text));
    };
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok {
        return Err(format!(
            "`{}` is not an index name: use lowercase letters, digits and `-`",
            name.escape_debug()
        ));
    }
    if RESERVED_INDEX_NAMES.contains(&name) {
        return Err(format!("`{name}` is reserved; name the index otherwise"));
    }
    Ok((Some(name), url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_names() {
        assert_eq!(
            split_named("https://x/simple"),
            Ok((None, "https://x/simple"))
        );
        assert_eq!(
            split_named("cu121=https://x/whl/cu121"),
            Ok((Some("cu121"), "https://x/whl/cu121"))
        );
        assert!(split_named("Bad Name=https://x").is_err());
        assert!(split_named("host=https://x").is_err());
    }
}
