//! [`ByteSize`]: a number of bytes as a user writes it (`500MB`, `2GiB`, `1.5 GB`, `123`) and
//! as gpuimg shows it (`612.3 MB`).
//!
//! Decimal units (`kB`, `MB`, `GB`, `TB`: powers of 1000) and binary ones (`KiB`, `MiB`,
//! `GiB`, `TiB`: powers of 1024), case-insensitive; a bare number is bytes. Parsed at the edge
//! (`gpuimg build --max-size`, `gpuimg cache prune --max-size`); imports nothing.

use std::fmt;
use std::str::FromStr;

/// A number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "Invalid size `{0}`: expected a number with an optional unit (B, kB, MB, GB, TB, KiB, MiB, \
     GiB, TiB), e.g. `500MB` or `2GiB`"
)]
pub struct ByteSizeError(pub String);

const UNITS: [(&str, u64); 10] = [
    ("b", 1),
    ("kb", 1000),
    ("mb", 1000 * 1000),
    ("gb", 1000 * 1000 * 1000),
    ("tb", 1000 * 1000 * 1000 * 1000),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("k", 1000),
];

impl FromStr for ByteSize {
    type Err = ByteSizeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ByteSizeError(s.to_string());
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let unit = unit.trim().to_ascii_lowercase();
        let scale = if unit.is_empty() {
            1
        } else {
            UNITS
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|(_, n)| *n)
                .ok_or_else(bad)?
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && frac.is_empty() || frac.contains('.') {
            return Err(bad());
        }
        let whole: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad())?
        };
        let bytes = whole.checked_mul(scale).ok_or_else(bad)?;
        // The fraction exactly, rounded down (no float): 1.5GB is 1500000000, 0.5KiB 512.
        if frac.len() > 18 {
            return Err(bad());
        }
        let num: u128 = if frac.is_empty() {
            0
        } else {
            frac.parse().map_err(|_| bad())?
        };
        let part = u128::from(scale) * num / 10u128.pow(frac.len() as u32);
        let bytes = u64::try_from(part)
            .ok()
            .and_then(|p| bytes.checked_add(p))
            .ok_or_else(bad)?;
        Ok(ByteSize(bytes))
    }
}

impl fmt::Display for ByteSize {
    /// Decimal units with one decimal (`612.3 MB`); below 1000 bytes, the bytes (`512 B`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        match self.0 {
            n if n < 1000 => write!(f, "{n} B"),
            n if n < 1000 * 1000 => write!(f, "{:.1} kB", b / 1e3),
            n if n < 1000 * 1000 * 1000 => write!(f, "{:.1} MB", b / 1e6),
            _ => write!(f, "{:.2} GB", b / 1e9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_exactly() {
        for (text, want) in [
            ("123", 123),
            ("500MB", 500_000_000),
            ("500 mb", 500_000_000),
            ("2GiB", 2 << 30),
            ("1.5GB", 1_500_000_000),
            ("0.5KiB", 512),
            ("10k", 10_000),
            ("7B", 7),
            (".5MB", 500_000),
        ] {
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(want)), "{text}");
        }
        for bad in [
            "",
            "MB",
            "5XB",
            "1.2.3GB",
            "-5MB",
            "99999999999999999999",
            "20000000TB",
            "1e9",
        ] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad}");
        }
    }

    #[test]
    fn shows_decimal_units() {
        assert_eq!(ByteSize(512).to_string(), "512 B");
        assert_eq!(ByteSize(1_500).to_string(), "1.5 kB");
        assert_eq!(ByteSize(612_345_678).to_string(), "612.3 MB");
        assert_eq!(ByteSize(2_500_000_000).to_string(), "2.50 GB");
    }
}
