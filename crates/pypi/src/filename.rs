//! Distribution file names: a wheel's name, version, build tag and (expanded) tag triples
//! (`numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl`), and which other
//! files are source distributions (never built, only named in errors).
//! Must never accept a wheel name that does not parse: such a file is skipped, not guessed at.

use std::str::FromStr;

use pep440_rs::Version;
use pep508_rs::PackageName;

/// A parsed wheel file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelName {
    pub name: PackageName,
    pub version: Version,
    /// The optional build tag: its number and the rest (`1` → (1, "")).
    pub build: Option<(u64, String)>,
    pub python: Vec<String>,
    pub abi: Vec<String>,
    pub platform: Vec<String>,
}

impl WheelName {
    pub fn parse(filename: &str) -> Option<WheelName> {
        let stem = filename.strip_suffix(".whl").filter(|s| s.is_ascii())?;
        let parts: Vec<&str> = stem.split('-').collect();
        let (name, version, build, py, abi, plat) = match parts.as_slice() {
            [n, v, p, a, pl] => (*n, *v, None, *p, *a, *pl),
            [n, v, b, p, a, pl] => (*n, *v, Some(*b), *p, *a, *pl),
            _ => return None,
        };
        let build = match build {
            None => None,
            Some(b) => {
                let digits: String = b.chars().take_while(char::is_ascii_digit).collect();
                Some((digits.parse().ok()?, b[digits.len()..].to_string()))
            }
        };
        let tags = |s: &str| -> Vec<String> { s.split('.').map(str::to_string).collect() };
        Some(WheelName {
            name: PackageName::from_str(name).ok()?,
            version: Version::from_str(version).ok()?,
            build,
            python: tags(py),
            abi: tags(abi),
            platform: tags(plat),
        })
    }

    /// Every `(python, abi, platform)` triple the compressed tag sets stand for.
    pub fn triples(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.python.iter().flat_map(move |p| {
            self.abi.iter().flat_map(move |a| {
                self.platform
                    .iter()
                    .map(move |pl| (p.as_str(), a.as_str(), pl.as_str()))
            })
        })
    }

    /// The tags as written in the file name (`cp311-cp311-manylinux_2_39_x86_64`).
    pub fn tag_text(&self) -> String {
        format!(
            "{}-{}-{}",
            self.python.join("."),
            self.abi.join("."),
            self.platform.join(".")
        )
    }
}

/// The version of a source distribution file (`pkg-1.0.tar.gz`), if `filename` is one of
/// `project`.
pub fn sdist_version(filename: &str, project: &PackageName) -> Option<Version> {
    let stem = [".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tgz", ".tar"]
        .iter()
        .find_map(|ext| filename.strip_suffix(ext))
        .filter(|s| s.is_ascii())?;
    // The name may itself hold `-`: try each split from the right.
    let mut at = stem.len();
    while let Some(i) = stem[..at].rfind('-') {
        if let (Ok(n), Ok(v)) = (
            PackageName::from_str(&stem[..i]),
            Version::from_str(&stem[i + 1..]),
        ) {
            if &n == project {
                return Some(v);
            }
        }
        at = i;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_tag_sets_expand() {
        let w = WheelName::parse(
            "numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        )
        .unwrap();
        assert_eq!(w.name.as_ref(), "numpy");
        assert_eq!(w.version.to_string(), "2.1.0");
        let t: Vec<_> = w.triples().collect();
        assert_eq!(
            t,
            [
                ("cp311", "cp311", "manylinux_2_17_x86_64"),
                ("cp311", "cp311", "manylinux2014_x86_64")
            ]
        );
        let b = WheelName::parse("Foo_Bar-1.0-2b-py2.py3-none-any.whl").unwrap();
        assert_eq!(b.name.as_ref(), "foo-bar");
        assert_eq!(b.build, Some((2, "b".into())));
        assert_eq!(b.triples().count(), 2);
        for bad in [
            "x-1.0-py3-none.whl",
            "x-notaversion-py3-none-any.whl",
            "x.tar.gz",
        ] {
            assert!(WheelName::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn sdists_by_name() {
        let p = PackageName::from_str("zope-interface").unwrap();
        assert_eq!(
            sdist_version("zope.interface-6.0.tar.gz", &p).map(|v| v.to_string()),
            Some("6.0".into())
        );
        assert_eq!(sdist_version("other-1.0.tar.gz", &p), None);
        assert_eq!(
            sdist_version("zope.interface-6.0-py3-none-any.whl", &p),
            None
        );
    }
}
