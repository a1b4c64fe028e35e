//! Debian package versions (`[epoch:]upstream[-revision]`) and their ordering (deb-version(7)).
//!
//! Owns comparison only; must never normalise or rewrite a version string (the lock keeps it
//! exactly as the repository wrote it).

use std::cmp::Ordering;
use std::fmt;

/// A parsed Debian version; `Ord` follows dpkg's rules.
#[derive(Clone)]
pub struct Version {
    text: String,
    epoch: u64,
    upstream: (usize, usize),
    revision: (usize, usize),
}

#[derive(Debug, thiserror::Error)]
#[error("Invalid Debian version `{0}`")]
pub struct VersionError(pub String);

impl Version {
    pub fn parse(s: &str) -> Result<Self, VersionError> {
        let bad = || VersionError(s.to_string());
        let t = s.trim();
        if t.is_empty() || t.contains(char::is_whitespace) {
            return Err(bad());
        }
        let (epoch, rest_at) = match t.find(':') {
            Some(i) => (t[..i].parse::<u64>().map_err(|_| bad())?, i + 1),
            None => (0, 0),
        };
        let rest = &t[rest_at..];
        let (up, rev) = match rest.rfind('-') {
            Some(i) => ((rest_at, rest_at + i), (rest_at + i + 1, t.len())),
            None => ((rest_at, t.len()), (t.len(), t.len())),
        };
        let upstream = &t[up.0..up.1];
        if !upstream.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(bad());
        }
        Ok(Version {
            text: t.to_string(),
            epoch,
            upstream: up,
            revision: rev,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn upstream(&self) -> &str {
        &self.text[self.upstream.0..self.upstream.1]
    }

    fn revision(&self) -> &str {
        &self.text[self.revision.0..self.revision.1]
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

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.epoch
            .cmp(&other.epoch)
            .then_with(|| compare_part(self.upstream(), other.upstream()))
            .then_with(|| compare_part(self.revision(), other.revision()))
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Sort weight of one non-digit character: `~` before end, end before letters, letters before
/// everything else.
fn weight(c: Option<u8>) -> i32 {
    match c {
        Some(b'~') => -1,
        None => 0,
        Some(c) if c.is_ascii_digit() => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(c) => i32::from(c) + 256,
    }
}

/// dpkg's `verrevcmp`: alternate non-digit runs (by weight) and digit runs (numerically).
fn compare_part(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        while (i < a.len() && !a[i].is_ascii_digit()) || (j < b.len() && !b[j].is_ascii_digit()) {
            let wa = weight(a.get(i).copied());
            let wb = weight(b.get(j).copied());
            if wa != wb {
                return wa.cmp(&wb);
            }
            i += 1;
            j += 1;
        }
        while i < a.len() && a[i] == b'0' {
            i += 1;
        }
        while j < b.len() && b[j] == b'0' {
            j += 1;
        }
        let si = i;
        let sj = j;
        while i < a.len() && a[i].is_ascii_digit() {
            i += 1;
        }
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let (da, db) = (&a[si..i], &b[sj..j]);
        let ord = da.len().cmp(&db.len()).then_with(|| da.cmp(db));
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(a: &str, b: &str) -> Ordering {
        Version::parse(a).unwrap().cmp(&Version::parse(b).unwrap())
    }

    #[test]
    fn dpkg_ordering() {
        assert_eq!(cmp("1.0", "1.0"), Ordering::Equal);
        assert_eq!(cmp("1.0~rc1", "1.0"), Ordering::Less);
        assert_eq!(cmp("1.0", "1.0+b1"), Ordering::Less);
        assert_eq!(cmp("1:0.1", "2.0"), Ordering::Greater);
        assert_eq!(cmp("2.36-9+deb12u10", "2.36-9+deb12u4"), Ordering::Greater);
        assert_eq!(cmp("1.10", "1.9"), Ordering::Greater);
        assert_eq!(cmp("1.0a", "1.0+"), Ordering::Less);
        assert_eq!(cmp("1.0-1", "1.0"), Ordering::Greater);
        assert_eq!(cmp("1.01", "1.1"), Ordering::Equal);
        assert_eq!(cmp("3.11.2-1+b1", "3.11.2-1"), Ordering::Greater);
        assert!(Version::parse("a1").is_err());
        assert!(Version::parse("x:1").is_err());
    }
}
