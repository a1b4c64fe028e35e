//! `Version`: dot-separated unsigned numbers compared field by field, missing fields as zero.
//!
//! Keeps the text as written (`570.124.06` prints as written) but compares numerically, so
//! `570.26 < 570.124.06` and `12.4 == 12.4.0`. Must never accept anything but digits and dots.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

/// A numeric version such as `12.4.1`, `570.124.06` or `3.11`.
#[derive(Clone)]
pub struct Version {
    fields: Vec<u64>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("Version is empty")]
    Empty,
    #[error("`{text}` is not a version: expected numbers separated by dots, like `12.4.1`")]
    Malformed { text: String },
}

impl Version {
    /// The numeric fields as written (`[570, 124, 6]`).
    pub fn fields(&self) -> &[u64] {
        &self.fields
    }

    /// Field `i`, zero when absent.
    pub fn field(&self, i: usize) -> u64 {
        self.fields.get(i).copied().unwrap_or(0)
    }

    pub fn major(&self) -> u64 {
        self.field(0)
    }

    /// The first `n` fields as a new version (`12.4.1` → `12.4` for n = 2).
    pub fn truncate(&self, n: usize) -> Version {
        let fields: Vec<u64> = (0..n.max(1)).map(|i| self.field(i)).collect();
        Version::from_fields(&fields)
    }

    pub fn from_fields(fields: &[u64]) -> Version {
        let text = fields
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join(".");
        Version {
            fields: fields.to_vec(),
            text,
        }
    }

    /// True when `self`'s first fields equal all of `prefix`'s (`12.4.1` starts with `12.4`).
    pub fn starts_with(&self, prefix: &Version) -> bool {
        (0..prefix.fields.len()).all(|i| self.field(i) == prefix.fields[i])
    }

    /// The smallest version above every version starting with `self` (`12.4` → `12.5`).
    pub fn prefix_end(&self) -> Version {
        let mut fields = self.fields.clone();
        if let Some(last) = fields.last_mut() {
            *last = last.saturating_add(1);
        }
        Version::from_fields(&fields)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn significant(&self) -> &[u64] {
        let n = self
            .fields
            .iter()
            .rposition(|f| *f != 0)
            .map_or(0, |i| i + 1);
        &self.fields[..n]
    }
}

impl FromStr for Version {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(VersionError::Empty);
        }
        let fields = s
            .split('.')
            .map(|f| {
                if f.is_empty() || f.len() > 18 || !f.bytes().all(|b| b.is_ascii_digit()) {
                    None
                } else {
                    f.parse::<u64>().ok()
                }
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| VersionError::Malformed {
                text: s.to_string(),
            })?;
        Ok(Version {
            fields,
            text: s.to_string(),
        })
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let n = self.fields.len().max(other.fields.len());
        (0..n)
            .map(|i| self.field(i).cmp(&other.field(i)))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl Hash for Version {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.significant().hash(state);
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Version({})", self.text)
    }
}

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn driver_order_is_numeric_field_by_field() {
        assert!(v("570.26") < v("570.124.06"));
        assert!(v("580.65.06") < v("580.82.07"));
        assert!(v("9.10.2") > v("9.5.1"));
        assert_eq!(v("12.4"), v("12.4.0"));
        assert_eq!(v("570.124.06").to_string(), "570.124.06");
    }

    #[test]
    fn malformed_versions_are_refused() {
        for bad in ["", "12.", ".4", "12..4", "12.4a", "v12", "1 2", "-1"] {
            assert!(bad.parse::<Version>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn prefixes() {
        assert!(v("12.4.1").starts_with(&v("12.4")));
        assert!(!v("12.40").starts_with(&v("12.4")));
        assert_eq!(v("12.4").prefix_end(), v("12.5"));
    }
}
