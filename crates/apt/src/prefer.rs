//! Which of one package's versions a build prefers, as an apt pin would: the caller decides
//! the test (the stack wants its packages built for the image's CUDA line and of the pinned
//! release, which only it knows how to read from a version); the solver orders candidates by
//! it. Owns nothing but that test and the text that names it.
//!
//! A preference must never remove a candidate: when no version fits, the solver takes what it
//! would have taken without one, and the caller's own check names the mismatch.

use std::fmt;
use std::sync::Arc;

/// Versions of `package` that fit come before those that do not, newest first within each.
#[derive(Clone)]
pub struct Preference {
    pub package: String,
    /// What the test asks (`cuda12 release 2.21`), part of a resolution's cache key: two
    /// preferences with the same package and text must test the same.
    pub describe: String,
    fits: Arc<dyn Fn(&str) -> bool + Send + Sync>,
}

impl Preference {
    pub fn new(
        package: impl Into<String>,
        describe: impl Into<String>,
        fits: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Self {
        Preference {
            package: package.into(),
            describe: describe.into(),
            fits: Arc::new(fits),
        }
    }

    /// Whether the Debian version text `version` fits.
    pub fn fits(&self, version: &str) -> bool {
        (self.fits)(version)
    }
}

/// The text a resolution's key records.
impl fmt::Display for Preference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.package, self.describe)
    }
}

impl fmt::Debug for Preference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Preference({self})")
    }
}
