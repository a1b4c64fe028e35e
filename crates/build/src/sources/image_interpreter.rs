//! The image's Python, read from the base's package set (Debian's `python3.X`,
//! `libpython3.X-stdlib` and `libc6` versions, and the image's architecture), never from the
//! build host: the interpreter, its version for markers and `.pyc`, its install scheme, and the
//! glibc that bounds `manylinux_2_N` wheels.
//!
//! Python packages need the full standard library (`importlib.metadata`, `ssl`, `json`):
//! `python3-minimal` alone is refused, naming `python3`. Pure: it reasons over (name, version)
//! pairs the caller read (the lock's .debs, or a rootfs's dpkg status).

use std::collections::BTreeMap;

use crate::sources::Architecture;

use gpuimg_pypi::ImagePython;

/// Why the base cannot host Python packages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BasePythonError {
    #[error("Python packages need an interpreter in the base, and the base installs none: add `python3` to the base's packages (`base.apt.packages`)")]
    NoPython,
    #[error("Python packages need the full standard library (`importlib.metadata`, `ssl`, `json`), and the base has only `{minimal}`: add `python3` (it brings `libpython{version}-stdlib`) to the base's packages (`base.apt.packages`)")]
    MinimalOnly { minimal: String, version: String },
    #[error("The base installs several Pythons ({found}) and no `python3` that says which one is the image's: add `python3`, or set `stack.python`")]
    Ambiguous { found: String },
    #[error("The base's `{package}` has version `{version}`, which does not start with a version gpuimg can read")]
    BadVersion { package: String, version: String },
    #[error("The base installs no `libc6`, so the image's glibc (which bounds the `manylinux` wheels it can run) is unknown")]
    NoGlibc,
}

/// A Python the base has, as its packages say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasePython {
    pub version: (u32, u32),
    /// `3.11.2`.
    pub full_version: String,
    /// The package that says so (`python3.11-minimal 3.11.2-6+deb12u6`), for messages.
    pub package: String,
    /// Whether its full standard library is installed.
    pub stdlib: bool,
}

/// The upstream part of a Debian version: `1:3.11.2-6+deb12u6` → `3.11.2`; `None` when it
/// does not start with `N.N`.
fn upstream(version: &str) -> Option<String> {
    let v = version.split_once(':').map_or(version, |(_, v)| v);
    let v = v.rsplit_once('-').map_or(v, |(u, _)| u);
    let clean: String = v
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let clean = clean.trim_end_matches('.').to_string();
    let mut parts = clean.split('.');
    let ok =
        parts.next().is_some_and(|p| !p.is_empty()) && parts.next().is_some_and(|p| !p.is_empty());
    ok.then_some(clean)
}

fn major_minor(v: &str) -> Option<(u32, u32)> {
    let mut it = v.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// `python3.11-minimal` → `(3, 11)` and `minimal`; `libpython3.11-stdlib` → `(3, 11)` and
/// `stdlib`; `python3.11` → `(3, 11)` and `` (the interpreter package).
fn python_package(name: &str) -> Option<((u32, u32), &str)> {
    let (rest, lib) = match name.strip_prefix("libpython") {
        Some(r) => (r, true),
        None => (name.strip_prefix("python")?, false),
    };
    let (ver, suffix) = rest.split_once('-').unwrap_or((rest, ""));
    let v = major_minor(ver).filter(|_| ver.matches('.').count() == 1)?;
    match (lib, suffix) {
        (false, "" | "minimal") | (true, "stdlib" | "minimal") => Some((v, suffix)),
        _ => None,
    }
}

/// Every Python the base's `packages` (name, Debian version) install, by version.
pub fn base_pythons(
    packages: &[(String, String)],
) -> Result<BTreeMap<(u32, u32), BasePython>, BasePythonError> {
    let mut out: BTreeMap<(u32, u32), BasePython> = BTreeMap::new();
    for (name, version) in packages {
        let Some((v, suffix)) = python_package(name) else {
            continue;
        };
        let full = upstream(version).ok_or_else(|| BasePythonError::BadVersion {
            package: name.clone(),
            version: version.clone(),
        })?;
        let e = out.entry(v).or_insert_with(|| BasePython {
            version: v,
            full_version: full.clone(),
            package: format!("{name} {version}"),
            stdlib: false,
        });
        if suffix == "stdlib" {
            e.stdlib = true;
        }
        // The interpreter's own package names the version best.
        if suffix == "minimal" && !name.starts_with("lib") {
            e.full_version = full;
            e.package = format!("{name} {version}");
        }
    }
    Ok(out)
}

/// The base's default Python: the one `python3` (or `python3-minimal`) is for, else the only
/// one; `None` when the base has none.
pub fn default_python(
    packages: &[(String, String)],
) -> Result<Option<BasePython>, BasePythonError> {
    let all = base_pythons(packages)?;
    let default = packages
        .iter()
        .filter(|(n, _)| n == "python3" || n == "python3-minimal")
        .find_map(|(_, v)| upstream(v).and_then(|u| major_minor(&u)));
    Ok(match default {
        Some(v) => all.get(&v).cloned(),
        None if all.len() == 1 => all.into_values().next(),
        None => None,
    })
}

/// The image's Python for installing packages: `want` (`stack.python`, major.minor) or the
/// base's default, with its full standard library; glibc from `libc6`; the machine from
/// `arch`.
pub fn image_python(
    packages: &[(String, String)],
    arch: &Architecture,
    want: Option<(u32, u32)>,
) -> Result<ImagePython, BasePythonError> {
    let all = base_pythons(packages)?;
    let chosen = match want {
        Some(v) => all.get(&v).cloned(),
        None => default_python(packages)?,
    };
    let py = match chosen {
        Some(p) => p,
        None if all.is_empty() => return Err(BasePythonError::NoPython),
        None => {
            return Err(BasePythonError::Ambiguous {
                found: all
                    .values()
                    .map(|p| format!("`{}`", p.package))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    };
    let (major, minor) = py.version;
    if !py.stdlib {
        let minimal = if packages.iter().any(|(n, _)| n == "python3-minimal") {
            "python3-minimal".to_string()
        } else {
            format!("python{major}.{minor}-minimal")
        };
        return Err(BasePythonError::MinimalOnly {
            minimal,
            version: format!("{major}.{minor}"),
        });
    }
    let glibc = packages
        .iter()
        .find(|(n, _)| n == "libc6")
        .and_then(|(_, v)| upstream(v).and_then(|u| major_minor(&u)))
        .ok_or(BasePythonError::NoGlibc)?;
    Ok(ImagePython {
        version: py.version,
        full_version: py.full_version,
        interpreter: format!("/usr/bin/python{major}.{minor}"),
        site_dir: format!("/usr/local/lib/python{major}.{minor}/dist-packages"),
        scripts_dir: "/usr/local/bin".into(),
        glibc,
        machine: arch.python_machine().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pk(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn amd64() -> Architecture {
        Architecture::new("amd64")
    }

    const BOOKWORM: &[(&str, &str)] = &[
        ("libc6", "2.36-9+deb12u10"),
        ("python3", "3.11.2-1+b1"),
        ("python3-minimal", "3.11.2-1+b1"),
        ("python3.11", "3.11.2-6+deb12u6"),
        ("python3.11-minimal", "3.11.2-6+deb12u6"),
        ("libpython3.11-minimal", "3.11.2-6+deb12u6"),
        ("libpython3.11-stdlib", "3.11.2-6+deb12u6"),
        ("libpython3-stdlib", "3.11.2-1+b1"),
        ("python3-pkg-resources", "66.1.1-1+deb12u1"),
    ];

    #[test]
    fn bookworms_python3_is_read_from_its_packages() {
        let p = image_python(&pk(BOOKWORM), &amd64(), None).unwrap();
        assert_eq!(p.version, (3, 11));
        assert_eq!(p.full_version, "3.11.2");
        assert_eq!(p.interpreter, "/usr/bin/python3.11");
        assert_eq!(p.site_dir, "/usr/local/lib/python3.11/dist-packages");
        assert_eq!(p.scripts_dir, "/usr/local/bin");
        assert_eq!(p.glibc, (2, 36));
        assert_eq!(p.machine, "x86_64");
        let arm = Architecture::new("arm64");
        assert_eq!(
            image_python(&pk(BOOKWORM), &arm, None).unwrap().machine,
            "aarch64"
        );
        assert_eq!(
            image_python(&pk(BOOKWORM), &amd64(), Some((3, 11)))
                .unwrap()
                .version,
            (3, 11)
        );
    }

    #[test]
    fn python3_minimal_alone_asks_for_python3() {
        let minimal: Vec<(&str, &str)> = BOOKWORM
            .iter()
            .copied()
            .filter(|(n, _)| !n.contains("stdlib") && *n != "python3" && *n != "python3.11")
            .collect();
        let e = image_python(&pk(&minimal), &amd64(), None).unwrap_err();
        assert_eq!(
            e,
            BasePythonError::MinimalOnly {
                minimal: "python3-minimal".into(),
                version: "3.11".into()
            }
        );
        let line = e.to_string();
        assert!(
            line.contains("add `python3`") && line.contains("libpython3.11-stdlib"),
            "{line}"
        );
        // The version is still known, for `stack.python`.
        let d = default_python(&pk(&minimal)).unwrap().unwrap();
        assert_eq!((d.version, d.full_version.as_str()), ((3, 11), "3.11.2"));
        assert!(d.package.starts_with("python3.11-minimal "));
    }

    #[test]
    fn no_python_no_glibc_and_several_pythons_are_explained() {
        assert_eq!(
            image_python(&pk(&[("libc6", "2.36-9")]), &amd64(), None),
            Err(BasePythonError::NoPython)
        );
        let no_libc: Vec<(&str, &str)> = BOOKWORM
            .iter()
            .copied()
            .filter(|(n, _)| *n != "libc6")
            .collect();
        assert_eq!(
            image_python(&pk(&no_libc), &amd64(), None),
            Err(BasePythonError::NoGlibc)
        );
        let two = pk(&[
            ("libc6", "2.39-0ubuntu8"),
            ("python3.12", "3.12.3-1"),
            ("libpython3.12-stdlib", "3.12.3-1"),
            ("python3.13", "3.13.1-1+deadsnakes"),
            ("libpython3.13-stdlib", "3.13.1-1"),
        ]);
        let e = image_python(&two, &amd64(), None).unwrap_err();
        assert!(matches!(e, BasePythonError::Ambiguous { .. }), "{e}");
        assert_eq!(
            image_python(&two, &amd64(), Some((3, 13)))
                .unwrap()
                .full_version,
            "3.13.1"
        );
    }

    #[test]
    fn package_names_and_versions_parse_narrowly() {
        assert_eq!(python_package("python3.11"), Some(((3, 11), "")));
        assert_eq!(
            python_package("libpython3.12-stdlib"),
            Some(((3, 12), "stdlib"))
        );
        assert_eq!(python_package("python3"), None);
        assert_eq!(python_package("python3-minimal"), None);
        assert_eq!(python_package("python3.11-dev"), None);
        assert_eq!(python_package("python3.11.2"), None);
        assert_eq!(upstream("1:3.11.2-6+deb12u6").as_deref(), Some("3.11.2"));
        assert_eq!(upstream("2.36-9+deb12u10").as_deref(), Some("2.36"));
        assert_eq!(upstream("3.12.3-1ubuntu0.1").as_deref(), Some("3.12.3"));
        assert_eq!(upstream("3~rc1-1"), None);
        assert!(matches!(
            base_pythons(&pk(&[("python3.11", "x-1")])),
            Err(BasePythonError::BadVersion { .. })
        ));
    }
}
