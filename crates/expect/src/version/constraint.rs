//! `Constraint`: what a profile, the catalog or a flag may write for a version.
//!
//! The syntax: a bare version is a prefix (`"12.4"` matches 12.4.0 and 12.4.1), operators
//! `= != < <= > >=` are joined by commas (`">=550,<560"`), `"*"` matches anything.
//! Must never guess: anything else is a `ConstraintError` naming the offending part.

use std::fmt;
use std::str::FromStr;

use super::{Version, VersionError, VersionSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    Any,
    Prefix(Version),
    Cmp(Op, Version),
}

/// A parsed version constraint; every term must hold.
#[derive(Clone, PartialEq, Eq)]
pub struct Constraint {
    terms: Vec<Term>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    #[error("Constraint is empty (write `*` for any version)")]
    Empty,
    #[error("`{text}` is not a version constraint: `{part}` has no version after `{op}`")]
    MissingVersion {
        text: String,
        part: String,
        op: String,
    },
    #[error("`{text}` is not a version constraint: `{part}`: {source}")]
    BadVersion {
        text: String,
        part: String,
        #[source]
        source: VersionError,
    },
}

impl Constraint {
    /// The constraint that matches everything.
    pub fn any() -> Constraint {
        Constraint {
            terms: vec![Term::Any],
            text: "*".into(),
        }
    }

    /// The constraint `=v`: exactly this version.
    pub fn exact(v: &Version) -> Constraint {
        Constraint {
            terms: vec![Term::Cmp(Op::Eq, v.clone())],
            text: format!("={v}"),
        }
    }

    /// The prefix constraint `v` (what a bare version means).
    pub fn from_prefix(v: &Version) -> Constraint {
        Constraint {
            terms: vec![Term::Prefix(v.clone())],
            text: v.to_string(),
        }
    }

    pub fn terms(&self) -> &[Term] {
        &self.terms
    }

    pub fn matches(&self, v: &Version) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Any => true,
            Term::Prefix(p) => v.starts_with(p),
            Term::Cmp(op, w) => match op {
                Op::Eq => v == w,
                Op::Ne => v != w,
                Op::Lt => v < w,
                Op::Le => v <= w,
                Op::Gt => v > w,
                Op::Ge => v >= w,
            },
        })
    }

    pub fn is_any(&self) -> bool {
        self.terms.iter().all(|t| matches!(t, Term::Any))
    }

    /// The versions this constraint admits, as intervals.
    pub fn to_set(&self) -> VersionSet {
        self.terms.iter().fold(VersionSet::all(), |acc, t| {
            let s = match t {
                Term::Any => VersionSet::all(),
                Term::Prefix(p) => {
                    VersionSet::range(Some((p.clone(), true)), Some((p.prefix_end(), false)))
                }
                Term::Cmp(Op::Eq, w) => {
                    VersionSet::range(Some((w.clone(), true)), Some((w.clone(), true)))
                }
                Term::Cmp(Op::Ne, w) => VersionSet::range(None, Some((w.clone(), false)))
                    .union(&VersionSet::range(Some((w.clone(), false)), None)),
                Term::Cmp(Op::Lt, w) => VersionSet::range(None, Some((w.clone(), false))),
                Term::Cmp(Op::Le, w) => VersionSet::range(None, Some((w.clone(), true))),
                Term::Cmp(Op::Gt, w) => VersionSet::range(Some((w.clone(), false)), None),
                Term::Cmp(Op::Ge, w) => VersionSet::range(Some((w.clone(), true)), None),
            };
            acc.intersect(&s)
        })
    }
}

impl FromStr for Constraint {
    type Err = ConstraintError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        if text.is_empty() {
            return Err(ConstraintError::Empty);
        }
        let mut terms = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            if part == "*" {
                terms.push(Term::Any);
                continue;
            }
            let (op, rest) = [
                (">=", Some(Op::Ge)),
                ("<=", Some(Op::Le)),
                ("!=", Some(Op::Ne)),
                ("==", Some(Op::Eq)),
                ("=", Some(Op::Eq)),
                (">", Some(Op::Gt)),
                ("<", Some(Op::Lt)),
            ]
            .iter()
            .find_map(|(p, op)| part.strip_prefix(p).map(|r| (*op, r)))
            .unwrap_or((None, part));
            let rest = rest.trim();
            if rest.is_empty() {
                return Err(ConstraintError::MissingVersion {
                    text: text.to_string(),
                    part: part.to_string(),
                    op: op.map_or("", Op::as_str).to_string(),
                });
            }
            let v: Version = rest.parse().map_err(|source| ConstraintError::BadVersion {
                text: text.to_string(),
                part: part.to_string(),
                source,
            })?;
            terms.push(match op {
                None => Term::Prefix(v),
                Some(op) => Term::Cmp(op, v),
            });
        }
        Ok(Constraint {
            terms,
            text: text.to_string(),
        })
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Constraint({})", self.text)
    }
}

impl serde::Serialize for Constraint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Constraint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Constraint {
        s.parse().unwrap()
    }
    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn documented_examples() {
        assert!(c("12.4").matches(&v("12.4.0")) && c("12.4").matches(&v("12.4.1")));
        assert!(!c("12.4").matches(&v("12.5.0")));
        assert!(c("9").matches(&v("9.10.2")) && !c("9").matches(&v("8.9.5")));
        assert!(
            c(">=550,<560").matches(&v("550.54.15")) && !c(">=550,<560").matches(&v("560.28.03"))
        );
        assert!(c("*").matches(&v("1")));
        assert!(c("!=12.4.0").matches(&v("12.4.1")) && !c("!=12.4.0").matches(&v("12.4")));
    }

    #[test]
    fn malformed_constraints_name_the_part() {
        let e = "abc".parse::<Constraint>().unwrap_err().to_string();
        assert!(e.contains("`abc`"), "{e}");
        let e = ">=550,<".parse::<Constraint>().unwrap_err().to_string();
        assert!(e.contains("`<`"), "{e}");
        assert!(matches!(
            "".parse::<Constraint>(),
            Err(ConstraintError::Empty)
        ));
        assert!("=>550".parse::<Constraint>().is_err());
    }

    #[test]
    fn set_agrees_with_matches() {
        for (cs, vs) in [
            ("12.4", ["12.3.9", "12.4", "12.4.1", "12.5"]),
            (">=550,<560", ["549", "550", "559.9", "560"]),
            ("!=9.1", ["9.0", "9.1", "9.1.0", "9.1.1"]),
            ("<=3.11", ["3.10", "3.11", "3.11.0", "3.12"]),
        ] {
            let cc = c(cs);
            let set = cc.to_set();
            for x in vs {
                assert_eq!(set.contains(&v(x)), cc.matches(&v(x)), "{cs} vs {x}");
            }
        }
    }
}
