//! Stage `strip`: drop whole files an image does not need at run time, by path class.
//!
//! Removes entries only; never rewrites a file's bytes (NVIDIA's EULA forbids modifying its
//! libraries, see gpu-facts.md). Licence and copyright files are always kept, even when docs
//! are stripped.

use crate::assemble::Tree;
use crate::profile::StripClass;

/// Remove entries matching any class; returns how many were removed.
pub fn strip(tree: &mut Tree, classes: &[StripClass]) -> usize {
    if classes.is_empty() {
        return 0;
    }
    let before = tree.len();
    tree.retain(|e| !classes.iter().any(|c| matches(*c, &e.path)));
    before - tree.len()
}

fn is_licence(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    file == "copyright"
        || file.starts_with("license")
        || file.starts_with("licence")
        || file.starts_with("copying")
        || file.starts_with("notice")
}

fn under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn matches(class: StripClass, path: &str) -> bool {
    match class {
        StripClass::Docs => {
            (under(path, "usr/share/doc") || under(path, "usr/share/info"))
                && !is_licence(path)
                && path != "usr/share/doc"
                && !is_doc_package_dir(path)
        }
        StripClass::Man => under(path, "usr/share/man"),
        StripClass::Locales => {
            under(path, "usr/share/locale") && path != "usr/share/locale/locale.alias"
                || under(path, "usr/share/i18n/locales")
        }
        StripClass::StaticLibs => {
            path.ends_with(".a")
                && (path.starts_with("usr/lib")
                    || path.starts_with("usr/local/lib")
                    || path.contains("/lib/"))
        }
        StripClass::Headers => under(path, "usr/include") || under(path, "usr/local/include"),
        StripClass::DebugSymbols => under(path, "usr/lib/debug"),
    }
}

/// `usr/share/doc/<pkg>` directories stay so that kept copyright files have a parent.
fn is_doc_package_dir(path: &str) -> bool {
    path.strip_prefix("usr/share/doc/")
        .is_some_and(|rest| !rest.contains('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert!(matches(
            StripClass::Docs,
            "usr/share/doc/libc6/changelog.gz"
        ));
        assert!(!matches(StripClass::Docs, "usr/share/doc/libc6/copyright"));
        assert!(!matches(StripClass::Docs, "usr/share/doc/libc6"));
        assert!(matches(StripClass::Man, "usr/share/man/man1/ls.1.gz"));
        assert!(!matches(StripClass::Man, "usr/share/manual"));
        assert!(matches(
            StripClass::StaticLibs,
            "usr/lib/x86_64-linux-gnu/libc.a"
        ));
        assert!(matches(StripClass::Headers, "usr/include/stdio.h"));
        assert!(!matches(
            StripClass::Locales,
            "usr/share/locale/locale.alias"
        ));
    }
}
