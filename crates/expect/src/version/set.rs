//! `VersionSet`: a sorted union of disjoint version intervals.
//!
//! Host ranges (driver, kernel) are sets, not single versions: the resolver intersects the
//! profile's pins with what the stack needs, and forward compatibility adds a second interval.
//! Treats versions as dense (there is always a version between two others). No I/O.

use std::fmt;
use std::ops::Bound;

use super::{Constraint, Version};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Interval {
    lo: Bound<Version>,
    hi: Bound<Version>,
}

/// A union of disjoint intervals, sorted by lower bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSet {
    intervals: Vec<Interval>,
}

/// Lower bounds: Unbounded < Included(v) < Excluded(v).
fn cmp_lo(a: &Bound<Version>, b: &Bound<Version>) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Equal,
        (Bound::Unbounded, _) => Less,
        (_, Bound::Unbounded) => Greater,
        (Bound::Included(x), Bound::Included(y)) | (Bound::Excluded(x), Bound::Excluded(y)) => {
            x.cmp(y)
        }
        (Bound::Included(x), Bound::Excluded(y)) => x.cmp(y).then(Less),
        (Bound::Excluded(x), Bound::Included(y)) => x.cmp(y).then(Greater),
    }
}

/// Upper bounds: Excluded(v) < Included(v) < Unbounded.
fn cmp_hi(a: &Bound<Version>, b: &Bound<Version>) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Equal,
        (Bound::Unbounded, _) => Greater,
        (_, Bound::Unbounded) => Less,
        (Bound::Included(x), Bound::Included(y)) | (Bound::Excluded(x), Bound::Excluded(y)) => {
            x.cmp(y)
        }
        (Bound::Included(x), Bound::Excluded(y)) => x.cmp(y).then(Greater),
        (Bound::Excluded(x), Bound::Included(y)) => x.cmp(y).then(Less),
    }
}

impl Interval {
    fn is_empty(&self) -> bool {
        match (&self.lo, &self.hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b))
            | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
            _ => false,
        }
    }

    fn contains(&self, v: &Version) -> bool {
        let above = match &self.lo {
            Bound::Unbounded => true,
            Bound::Included(a) => v >= a,
            Bound::Excluded(a) => v > a,
        };
        let below = match &self.hi {
            Bound::Unbounded => true,
            Bound::Included(b) => v <= b,
            Bound::Excluded(b) => v < b,
        };
        above && below
    }

    /// True when `self` ends at or after `next` starts, or touches it, so the two merge.
    fn meets(&self, next: &Interval) -> bool {
        match (&self.hi, &next.lo) {
            (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
            (Bound::Excluded(a), Bound::Excluded(b)) => a > b,
            (Bound::Included(a), Bound::Included(b))
            | (Bound::Included(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        }
    }
}

impl VersionSet {
    pub fn all() -> VersionSet {
        VersionSet {
            intervals: vec![Interval {
                lo: Bound::Unbounded,
                hi: Bound::Unbounded,
            }],
        }
    }

    pub fn empty() -> VersionSet {
        VersionSet { intervals: vec![] }
    }

    /// `[lo, hi]` with `(version, inclusive)` bounds; `None` is unbounded.
    pub fn range(lo: Option<(Version, bool)>, hi: Option<(Version, bool)>) -> VersionSet {
        let b = |x: Option<(Version, bool)>| match x {
            None => Bound::Unbounded,
            Some((v, true)) => Bound::Included(v),
            Some((v, false)) => Bound::Excluded(v),
        };
        VersionSet::normalised(vec![Interval {
            lo: b(lo),
            hi: b(hi),
        }])
    }

    /// `>= v`.
    pub fn at_least(v: &Version) -> VersionSet {
        VersionSet::range(Some((v.clone(), true)), None)
    }

    /// `< v`.
    pub fn below(v: &Version) -> VersionSet {
        VersionSet::range(None, Some((v.clone(), false)))
    }

    fn normalised(mut intervals: Vec<Interval>) -> VersionSet {
        intervals.retain(|i| !i.is_empty());
        intervals.sort_by(|a, b| cmp_lo(&a.lo, &b.lo));
        let mut out: Vec<Interval> = Vec::with_capacity(intervals.len());
        for i in intervals {
            match out.last_mut() {
                Some(last) if last.meets(&i) => {
                    if cmp_hi(&i.hi, &last.hi).is_gt() {
                        last.hi = i.hi;
                    }
                }
                _ => out.push(i),
            }
        }
        VersionSet { intervals: out }
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    pub fn is_all(&self) -> bool {
        matches!(
            self.intervals.as_slice(),
            [Interval {
                lo: Bound::Unbounded,
                hi: Bound::Unbounded
            }]
        )
    }

    pub fn contains(&self, v: &Version) -> bool {
        self.intervals.iter().any(|i| i.contains(v))
    }

    pub fn intersect(&self, other: &VersionSet) -> VersionSet {
        let mut out = Vec::new();
        for a in &self.intervals {
            for b in &other.intervals {
                let lo = if cmp_lo(&a.lo, &b.lo).is_ge() {
                    &a.lo
                } else {
                    &b.lo
                };
                let hi = if cmp_hi(&a.hi, &b.hi).is_le() {
                    &a.hi
                } else {
                    &b.hi
                };
                out.push(Interval {
                    lo: lo.clone(),
                    hi: hi.clone(),
                });
            }
        }
        VersionSet::normalised(out)
    }

    pub fn union(&self, other: &VersionSet) -> VersionSet {
        VersionSet::normalised(
            self.intervals
                .iter()
                .chain(&other.intervals)
                .cloned()
                .collect(),
        )
    }

    /// True when the two sets share a version.
    pub fn overlaps(&self, other: &VersionSet) -> bool {
        !self.intersect(other).is_empty()
    }

    /// The lowest version in the set, when the set has an inclusive lower bound.
    pub fn min(&self) -> Option<&Version> {
        match self.intervals.first().map(|i| &i.lo) {
            Some(Bound::Included(v)) | Some(Bound::Excluded(v)) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for VersionSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.intervals.is_empty() {
            return f.write_str("<none>");
        }
        let parts: Vec<String> = self
            .intervals
            .iter()
            .map(|i| {
                let mut terms = Vec::new();
                match (&i.lo, &i.hi) {
                    (Bound::Included(a), Bound::Included(b)) if a == b => return format!("={a}"),
                    _ => {}
                }
                match &i.lo {
                    Bound::Included(v) => terms.push(format!(">={v}")),
                    Bound::Excluded(v) => terms.push(format!(">{v}")),
                    Bound::Unbounded => {}
                }
                match &i.hi {
                    Bound::Included(v) => terms.push(format!("<={v}")),
                    Bound::Excluded(v) => terms.push(format!("<{v}")),
                    Bound::Unbounded => {}
                }
                if terms.is_empty() {
                    "*".to_string()
                } else {
                    terms.join(",")
                }
            })
            .collect();
        f.write_str(&parts.join(" || "))
    }
}

impl std::str::FromStr for VersionSet {
    type Err = super::ConstraintError;
    /// Parses what `Display` writes: constraints joined by ` || `.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "<none>" {
            return Ok(VersionSet::empty());
        }
        s.split("||").try_fold(VersionSet::empty(), |acc, part| {
            Ok(acc.union(&part.parse::<Constraint>()?.to_set()))
        })
    }
}

impl serde::Serialize for VersionSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for VersionSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> VersionSet {
        s.parse().unwrap()
    }

    #[test]
    fn intersect_union_display_roundtrip() {
        let a = set(">=525.60.13");
        let b = set("<580");
        assert_eq!(a.intersect(&b).to_string(), ">=525.60.13,<580");
        assert!(set(">=590").intersect(&set("<590")).is_empty());
        let u = set(">=580").union(&set(">=535,<536"));
        assert_eq!(u.to_string(), ">=535,<536 || >=580");
        assert_eq!(set(&u.to_string()), u);
        assert!(set(">=550,<560").union(&set(">=560,<570")) == set(">=550,<570"));
        assert!(set("*").is_all());
    }
}
