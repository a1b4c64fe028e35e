//! The strip rules that come from data rather than from a class's general rule: per package,
//! the paths a class removes besides its rule and the paths it never removes, the licence
//! terms of each file, and the `.pyc` tag the profile compiles for. Built by the plan from
//! the catalog's strip table; the strip stage only reads them.

use super::pattern::PathPattern;
use crate::profile::StripClass;

/// What strip knows beyond the classes' general rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// (class, path): the class removes the path too.
    pub remove: Vec<(StripClass, PathPattern)>,
    /// (class, path): the class never removes the path.
    pub keep: Vec<(StripClass, PathPattern)>,
    /// Licence terms by path, the first match winning (bundled files before their package).
    pub terms: Vec<Terms>,
    /// With `python.compile`, the tag of the `.pyc` gpuimg compiles (`cpython-311`):
    /// `python-caches` keeps `__pycache__/*.<tag>.pyc`.
    pub compiled_tag: Option<String>,
    /// The wheels' shared libraries the image's ELF closure does not reach (the plan's
    /// `plan::unused`): what `unused-libraries` removes.
    pub unused: std::collections::BTreeSet<String>,
}

/// The licence terms of the files a pattern matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms {
    pub path: PathPattern,
    /// The package the table lists the files under.
    pub package: String,
    pub licence: String,
    /// Whether a tool may change the files' bytes.
    pub modify: bool,
    /// Whether the whole file may be left out of an image.
    pub remove: bool,
}

impl Rules {
    /// The terms of the file at `path`, when the table names them.
    pub fn terms_of(&self, path: &str) -> Option<&Terms> {
        self.terms.iter().find(|t| t.path.matches(path))
    }

    /// Whether a tool may change the bytes of the file at `path`: only where its licence
    /// terms are known and allow it.
    pub fn may_modify(&self, path: &str) -> bool {
        self.terms_of(path).is_some_and(|t| t.modify)
    }

    /// Whether the file at `path` may be left out of the image (unless its terms say
    /// otherwise, every file may).
    pub fn may_remove(&self, path: &str) -> bool {
        self.terms_of(path).is_none_or(|t| t.remove)
    }

    pub(super) fn removes(&self, class: StripClass, path: &str) -> bool {
        self.remove
            .iter()
            .any(|(c, p)| *c == class && p.matches(path))
    }

    pub(super) fn keeps(&self, class: StripClass, path: &str) -> bool {
        self.keep
            .iter()
            .any(|(c, p)| *c == class && p.matches(path))
    }
}
