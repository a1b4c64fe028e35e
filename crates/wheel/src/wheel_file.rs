//! The `.dist-info/WHEEL` file: `Wheel-Version` (major 1 is what this installer knows) and
//! `Root-Is-Purelib`, which says whether the archive's root goes to purelib or platlib.
//! Other keys (`Generator`, `Tag`, `Build`) are not needed to install.

/// What the installer reads from `WHEEL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelFile {
    /// `1.0`, as written.
    pub version: String,
    pub root_is_purelib: bool,
}

/// Why a `WHEEL` file was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WheelFileError {
    /// Malformed: the reason.
    Invalid(String),
    /// A `Wheel-Version` whose major is not 1.
    Version(String),
}

/// Parse a `WHEEL` file (email-header style `Key: value` lines).
pub fn parse(text: &str) -> Result<WheelFile, WheelFileError> {
    let mut version = None;
    let mut purelib = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            return Err(WheelFileError::Invalid(format!(
                "line `{line}` is not `Key: value`"
            )));
        };
        match k.trim().to_ascii_lowercase().as_str() {
            "wheel-version" => version = Some(v.trim().to_string()),
            "root-is-purelib" => {
                purelib = Some(match v.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(WheelFileError::Invalid(format!(
                            "`Root-Is-Purelib: {other}` is neither `true` nor `false`"
                        )))
                    }
                })
            }
            _ => {}
        }
    }
    let version =
        version.ok_or_else(|| WheelFileError::Invalid("it has no `Wheel-Version`".into()))?;
    let major = version.split('.').next().unwrap_or_default();
    match major.parse::<u32>() {
        Ok(1) => {}
        Ok(_) => return Err(WheelFileError::Version(version)),
        Err(_) => {
            return Err(WheelFileError::Invalid(format!(
                "`Wheel-Version: {version}` is not a version"
            )))
        }
    }
    Ok(WheelFile {
        version,
        root_is_purelib: purelib
            .ok_or_else(|| WheelFileError::Invalid("it has no `Root-Is-Purelib`".into()))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_keys_are_read() {
        let w = parse("Wheel-Version: 1.0\nGenerator: bdist_wheel (0.43.0)\nRoot-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_17_x86_64\n").unwrap();
        assert_eq!(w.version, "1.0");
        assert!(!w.root_is_purelib);
        assert!(
            parse("wheel-version: 1.9\nroot-is-purelib: True\n")
                .unwrap()
                .root_is_purelib
        );
    }

    #[test]
    fn other_majors_and_missing_keys_are_refused() {
        assert_eq!(
            parse("Wheel-Version: 2.0\nRoot-Is-Purelib: true\n"),
            Err(WheelFileError::Version("2.0".into()))
        );
        for text in [
            "Root-Is-Purelib: true\n",
            "Wheel-Version: 1.0\n",
            "Wheel-Version: x\nRoot-Is-Purelib: true\n",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: yes\n",
            "Wheel-Version 1.0\n",
        ] {
            assert!(
                matches!(parse(text), Err(WheelFileError::Invalid(_))),
                "{text}"
            );
        }
    }
}
