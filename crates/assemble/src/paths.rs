//! Lexical path rules: normalising entry names and checking where link targets lead.

use std::path::{Component, Path};

/// Why a path is not acceptable inside an image.
pub enum PathProblem {
    Absolute,
    DotDot,
    NotUtf8,
}

/// Normalise an archive entry name: strip `./`, trailing `/`; refuse absolute paths and `..`.
/// The root itself normalises to the empty string.
pub fn normalise_entry(p: &Path) -> Result<String, PathProblem> {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::Normal(s) => parts.push(s.to_str().ok_or(PathProblem::NotUtf8)?),
            Component::ParentDir => return Err(PathProblem::DotDot),
            Component::RootDir | Component::Prefix(_) => return Err(PathProblem::Absolute),
        }
    }
    Ok(parts.join("/"))
}

/// Does a symlink at `link` (a normalised entry path) with `target` stay inside the root when
/// resolved lexically? Absolute targets resolve from the image root; climbing above the root
/// at any step counts as leaving it.
pub fn symlink_stays_inside(link: &str, target: &str) -> bool {
    let mut depth: i64 = if target.starts_with('/') {
        0
    } else {
        // The link's directory depth.
        link.split('/').count() as i64 - 1
    };
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks() {
        assert!(symlink_stays_inside("usr/bin/python3", "python3.11"));
        assert!(symlink_stays_inside("bin", "usr/bin"));
        assert!(symlink_stays_inside("etc/alt/x", "/usr/bin/x"));
        assert!(symlink_stays_inside("a/b/c", "../../d"));
        assert!(!symlink_stays_inside("a/b/c", "../../../d"));
        assert!(!symlink_stays_inside("evil", "/../../etc/shadow"));
        assert!(!symlink_stays_inside("x", "../etc/passwd"));
    }

    #[test]
    fn entries() {
        assert_eq!(
            normalise_entry(Path::new("./usr/bin/")).ok(),
            Some("usr/bin".into())
        );
        assert!(matches!(
            normalise_entry(Path::new("../x")),
            Err(PathProblem::DotDot)
        ));
        assert!(matches!(
            normalise_entry(Path::new("a/../../x")),
            Err(PathProblem::DotDot)
        ));
        assert!(matches!(
            normalise_entry(Path::new("/etc/x")),
            Err(PathProblem::Absolute)
        ));
    }
}
