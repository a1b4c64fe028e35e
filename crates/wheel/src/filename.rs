//! Wheel file names (`{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`) and PEP 503
//! project-name normalisation, as far as the installer needs them: which project a wheel is,
//! and which `.dist-info` directory inside it belongs to that project.
//! Never decides whether a wheel fits the image: tag selection is resolution's.

/// The parts of a wheel's file name the installer checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelName {
    /// The project name as written in the file name (`PyYAML`, `typing_extensions`).
    pub name: String,
    pub version: String,
}

impl WheelName {
    /// Parse `file` (a bare file name); `Err` says why it is not a wheel's name.
    pub fn parse(file: &str) -> Result<WheelName, String> {
        let stem = file
            .strip_suffix(".whl")
            .ok_or_else(|| "it does not end in `.whl`".to_string())?;
        let parts: Vec<&str> = stem.split('-').collect();
        if !(parts.len() == 5 || parts.len() == 6) {
            return Err(format!(
                "it has {} `-`-separated parts; a wheel's name has 5 or 6",
                parts.len()
            ));
        }
        if parts.iter().any(|p| p.is_empty()) {
            return Err("it has an empty part".into());
        }
        if parts.len() == 6 && !parts[2].starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!(
                "its build tag `{}` does not start with a digit",
                parts[2]
            ));
        }
        Ok(WheelName {
            name: parts[0].to_string(),
            version: parts[1].to_string(),
        })
    }
}

/// PEP 503 normalisation: lower case, every run of `-`, `_` and `.` one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
            continue;
        }
        if sep && !out.is_empty() {
            out.push('-');
        }
        sep = false;
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The project a `.dist-info` (or `.data`) directory name belongs to:
/// `typing_extensions-4.12.2.dist-info` → `typing-extensions`; `None` for another suffix.
pub fn project_of(dir: &str, suffix: &str) -> Option<String> {
    let stem = dir.strip_suffix(suffix)?;
    let (name, version) = stem.split_once('-')?;
    (!name.is_empty() && !version.is_empty()).then(|| normalize(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_with_and_without_a_build_tag() {
        let w = WheelName::parse(
            "numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        )
        .unwrap();
        assert_eq!((w.name.as_str(), w.version.as_str()), ("numpy", "2.1.0"));
        let w = WheelName::parse("pkg-1.0-1build-py3-none-any.whl").unwrap();
        assert_eq!(w.version, "1.0");
        for bad in [
            "pkg-1.0-py3-none-any.zip",
            "pkg-1.0-py3-any.whl",
            "pkg-1.0-x-py3-none-any.whl",
            "pkg--py3-none-any.whl",
            "a-b-c-d-e-f-g.whl",
        ] {
            assert!(WheelName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn normalisation_follows_pep_503() {
        assert_eq!(normalize("Typing_Extensions"), "typing-extensions");
        assert_eq!(normalize("zope.interface"), "zope-interface");
        assert_eq!(normalize("a-_.b"), "a-b");
        assert_eq!(normalize("PyYAML"), "pyyaml");
    }

    #[test]
    fn dist_info_names_give_their_project() {
        assert_eq!(
            project_of("typing_extensions-4.12.2.dist-info", ".dist-info").as_deref(),
            Some("typing-extensions")
        );
        assert_eq!(project_of("pkg-1.0.data", ".data").as_deref(), Some("pkg"));
        assert_eq!(project_of("pkg.dist-info", ".dist-info"), None);
        assert_eq!(project_of("pkg-1.0.dist-info", ".data"), None);
    }
}
