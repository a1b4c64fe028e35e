//! Version ranges in DESIGN.md's constraint syntax (`>=550,<560`, a bare prefix, `*`), and
//! unions of them joined by `||` (as the resolver's `VersionSet` prints them).
//!
//! A small, self-contained comparator for the self-test: versions compare numerically field by
//! field over their leading dotted digits (`6.8.0-49-generic` is 6.8.0). Never panics on input.

use std::cmp::Ordering;
use std::fmt;

/// Why a range string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("Empty version range")]
    Empty,
    #[error("Invalid version `{version}` in range `{range}`")]
    BadVersion { range: String, version: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Clause {
    Any,
    Prefix(Vec<u64>),
    Cmp(Op, Vec<u64>),
}

/// A parsed constraint: any `||` alternative whose comma-separated clauses all hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRange {
    text: String,
    alternatives: Vec<Vec<Clause>>,
}

impl VersionRange {
    pub fn parse(text: &str) -> Result<Self, RangeError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(RangeError::Empty);
        }
        let mut alternatives = Vec::new();
        for alt in trimmed.split("||") {
            let mut clauses = Vec::new();
            for part in alt.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                clauses.push(parse_clause(trimmed, part)?);
            }
            if clauses.is_empty() {
                return Err(RangeError::Empty);
            }
            alternatives.push(clauses);
        }
        Ok(VersionRange {
            text: trimmed.to_string(),
            alternatives,
        })
    }

    /// Whether `version` satisfies one alternative; a version without leading digits only
    /// satisfies `*`.
    pub fn matches(&self, version: &str) -> bool {
        self.alternatives
            .iter()
            .any(|clauses| all_hold(clauses, version))
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn all_hold(clauses: &[Clause], version: &str) -> bool {
    let Some(v) = leading_fields(version) else {
        return clauses.iter().all(|c| matches!(c, Clause::Any));
    };
    clauses.iter().all(|c| match c {
        Clause::Any => true,
        Clause::Prefix(p) => v.len() >= p.len() && v[..p.len()] == p[..],
        Clause::Cmp(op, r) => {
            let o = compare_fields(&v, r);
            match op {
                Op::Eq => o == Ordering::Equal,
                Op::Ne => o != Ordering::Equal,
                Op::Lt => o == Ordering::Less,
                Op::Le => o != Ordering::Greater,
                Op::Gt => o == Ordering::Greater,
                Op::Ge => o != Ordering::Less,
            }
        }
    })
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn parse_clause(range: &str, part: &str) -> Result<Clause, RangeError> {
    if part == "*" {
        return Ok(Clause::Any);
    }
    let (op, rest) = [
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("!=", Op::Ne),
        ("==", Op::Eq),
        (">", Op::Gt),
        ("<", Op::Lt),
        ("=", Op::Eq),
    ]
    .iter()
    .find_map(|(s, op)| part.strip_prefix(s).map(|r| (Some(*op), r.trim())))
    .unwrap_or((None, part));
    let bad = || RangeError::BadVersion {
        range: range.to_string(),
        version: rest.to_string(),
    };
    let fields = exact_fields(rest).ok_or_else(bad)?;
    Ok(match op {
        Some(op) => Clause::Cmp(op, fields),
        None => Clause::Prefix(fields),
    })
}

/// `580.159.04` → [580, 159, 4]; anything but digits and dots is refused.
fn exact_fields(s: &str) -> Option<Vec<u64>> {
    if s.is_empty() {
        return None;
    }
    s.split('.').map(|f| f.parse::<u64>().ok()).collect()
}

/// The leading dotted digits of a version (`6.8.0-49-generic` → [6, 8, 0]).
pub fn leading_fields(s: &str) -> Option<Vec<u64>> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let head = s[..end].trim_end_matches('.');
    exact_fields(head)
}

/// Field-by-field numeric order, missing fields read as 0 (`13` == `13.0`).
pub fn compare_fields(a: &[u64], b: &[u64]) -> Ordering {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            a.get(i)
                .copied()
                .unwrap_or(0)
                .cmp(&b.get(i).copied().unwrap_or(0))
        })
        .find(|o| *o != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
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
        assert_eq!(e.to_string(), "Invalid version `abc` in range `>=abc`");
        assert!(VersionRange::parse(">=").is_err());
        assert_eq!(VersionRange::parse(">=550 ||"), Err(RangeError::Empty));
    }
}
