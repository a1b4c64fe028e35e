//! Version ranges in the profile's constraint syntax (`>=550,<560`, a bare prefix, `*`), and
//! unions of them joined by `||` (as the resolver's `VersionSet` prints them).
//!
//! The comparison itself is the shared `version` module's (the resolver's); this file adds the
//! `||` unions and reading a host's version strings by their leading dotted digits
//! (`6.8.0-49-generic` is 6.8.0). Never panics on input.

use std::cmp::Ordering;
use std::fmt;

use crate::version::{Constraint, Version};

/// Why a range string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("Empty version range")]
    Empty,
    #[error("{message}")]
    Bad { range: String, message: String },
}

/// A parsed range: any `||` alternative, each a [`Constraint`] of the shared `version` module.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionRange {
    text: String,
    alternatives: Vec<Constraint>,
}

impl VersionRange {
    pub fn parse(text: &str) -> Result<Self, RangeError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(RangeError::Empty);
        }
        let alternatives = trimmed
            .split("||")
            .map(|alt| {
                let alt = alt.trim();
                if alt.is_empty() {
                    return Err(RangeError::Empty);
                }
                alt.parse::<Constraint>().map_err(|e| RangeError::Bad {
                    range: trimmed.to_string(),
                    message: e.to_string(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(VersionRange {
            text: trimmed.to_string(),
            alternatives,
        })
    }

    /// Whether `version` satisfies one alternative, compared over its leading dotted digits
    /// (`6.8.0-49-generic` is 6.8.0); a version without leading digits only satisfies `*`.
    pub fn matches(&self, version: &str) -> bool {
        match leading_version(version) {
            Some(v) => self.alternatives.iter().any(|c| c.matches(&v)),
            None => self.alternatives.iter().any(Constraint::is_any),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The leading dotted digits of a version as a `Version` (`6.8.0-49-generic` → 6.8.0).
fn leading_version(s: &str) -> Option<Version> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    s[..end].trim_end_matches('.').parse().ok()
}

/// The leading dotted digits of a version (`6.8.0-49-generic` → [6, 8, 0]).
pub fn leading_fields(s: &str) -> Option<Vec<u64>> {
    leading_version(s).map(|v| v.fields().to_vec())
}

/// Field-by-field numeric order, missing fields read as 0 (`13` == `13.0`).
pub fn compare_fields(a: &[u64], b: &[u64]) -> Ordering {
    Version::from_fields(a).cmp(&Version::from_fields(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(range: &str, v: &str) -> bool {
        VersionRange::parse(range).unwrap().matches(v)
    }

    #[test]
    fn operators_and_prefixes() {
        assert!(m(">=550,<560", "550.54.15"));
        assert!(!m(">=550,<560", "560.28.03"));
        assert!(!m(">=550,<560", "535.288.01"));
        assert!(m("12.4", "12.4.1"));
        assert!(!m("12.4", "12.40"));
        assert!(m("9", "9.1.0"));
        assert!(m("*", "anything"));
        assert!(m(">=5.15", "6.18.0-1-amd64"));
        assert!(!m(">=6.19", "6.18.0-1-amd64"));
        assert!(m("570.26,<570.124.06", "570.26"));
        assert!(m("<570.124.06", "570.26"));
        assert!(m("=13", "13.0"));
        assert!(m("!=580.159.04", "580.159.05"));
        // Unions, as the resolver prints driver sets with forward-compatible branches.
        let forward = ">=580 || >=535,<536 || >=575,<576";
        assert!(m(forward, "580.159.04"));
        assert!(m(forward, "535.288.01"));
        assert!(!m(forward, "550.54.15"));
    }

    #[test]
    fn bad_ranges_are_refused() {
        assert_eq!(VersionRange::parse(" "), Err(RangeError::Empty));
        let e = VersionRange::parse(">=abc").unwrap_err();
        assert!(e.to_string().contains("`>=abc`"), "{e}");
        assert!(VersionRange::parse(">=").is_err());
        assert_eq!(VersionRange::parse(">=550 ||"), Err(RangeError::Empty));
    }
}
