//! Bounds on what an index can make resolution cost, whatever it serves: how many wheels'
//! metadata one resolution reads ([`DEFAULT_METADATA_READS`]), how long it runs
//! ([`DEFAULT_RESOLVE_SECONDS`]), how much version-range work it does
//! ([`DEFAULT_RANGE_SEGMENTS`]: the segments of the ranges versions are chosen from, summed;
//! what pubgrub holds grows with it, quadratically in the versions of one package ruled out
//! one by one), and the largest wheel size a page may claim ([`DEFAULT_MAX_WHEEL_BYTES`]).
//! Each is raised (or lowered) by a variable the settings phase passes in ([`READS_VAR`],
//! [`SECONDS_VAR`], [`SEGMENTS_VAR`], [`MAX_WHEEL_VAR`]).
//! Must never cap the versions *tried* by count alone (that could turn a true answer into a
//! false "no"): a budget that runs out is an error naming it, never a conflict.

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::PypiError;

/// Metadata reads (index metadata files, range reads or the cache) of one resolution.
pub const DEFAULT_METADATA_READS: u64 = 10_000;
/// Wall time of one resolution, in seconds.
pub const DEFAULT_RESOLVE_SECONDS: u64 = 900;
/// Segments of the version ranges chosen from, summed over one resolution (~100 bytes each
/// of pubgrub's memory at most: some 2,000 versions of one package ruled out one by one).
pub const DEFAULT_RANGE_SEGMENTS: u64 = 2_000_000;
/// The largest wheel a page (or a lock) may claim: 8 GiB.
pub const DEFAULT_MAX_WHEEL_BYTES: u64 = 8 << 30;

pub const READS_VAR: &str = "GPUIMG_PYTHON_METADATA_READS";
pub const SECONDS_VAR: &str = "GPUIMG_PYTHON_RESOLVE_SECONDS";
pub const SEGMENTS_VAR: &str = "GPUIMG_PYTHON_RANGE_SEGMENTS";
pub const MAX_WHEEL_VAR: &str = "GPUIMG_PYTHON_MAX_WHEEL_SIZE";

/// The bounds of one resolution and its downloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Wheels whose metadata one resolution may read.
    pub metadata_reads: u64,
    /// How long one resolution may run.
    pub wall: Duration,
    /// Segments of the version ranges one resolution may choose from, summed.
    pub range_segments: u64,
    /// The largest wheel, in bytes, a page (or lock) may claim; a larger one is refused before
    /// any byte of it is fetched.
    pub max_wheel_bytes: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            metadata_reads: DEFAULT_METADATA_READS,
            wall: Duration::from_secs(DEFAULT_RESOLVE_SECONDS),
            range_segments: DEFAULT_RANGE_SEGMENTS,
            max_wheel_bytes: DEFAULT_MAX_WHEEL_BYTES,
        }
    }
}

impl Budget {
    /// The defaults, changed by the variables set (`(name, value)`, as the settings phase
    /// gathered them); a malformed value is bad input naming its variable.
    pub fn from_vars(vars: &[(String, String)]) -> Result<Budget, PypiError> {
        let mut b = Budget::default();
        for (name, value) in vars {
            let whole = || {
                value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| PypiError::bad(name, format!("`{value}` is not a whole number")))
            };
            match name.as_str() {
                READS_VAR => b.metadata_reads = whole()?,
                SECONDS_VAR => b.wall = Duration::from_secs(whole()?),
                SEGMENTS_VAR => b.range_segments = whole()?,
                MAX_WHEEL_VAR => {
                    b.max_wheel_bytes = bytes(value).ok_or_else(|| {
                        PypiError::bad(
                            name,
                            format!("`{value}` is not a size (bytes, or with KiB, MiB, GiB, TiB)"),
                        )
                    })?
                }
                _ => {}
            }
        }
        Ok(b)
    }

    /// `Err` when a wheel's claimed `size` is over the maximum.
    pub fn check_wheel_size(&self, filename: &str, size: u64) -> Result<(), PypiError> {
        if size > self.max_wheel_bytes {
            return Err(PypiError::WheelTooLarge {
                filename: filename.to_string(),
                size,
                max: self.max_wheel_bytes,
                setting: MAX_WHEEL_VAR,
            });
        }
        Ok(())
    }
}

/// A size as bytes, or with a binary unit (`8GiB`, `512 MiB`).
fn bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(scale)
}

/// What one resolution has spent of its [`Budget`].
#[derive(Debug)]
pub struct Meter {
    budget: Budget,
    start: Instant,
    reads: Cell<u64>,
    segments: Cell<u64>,
}

impl Meter {
    pub fn new(budget: Budget) -> Meter {
        Meter {
            budget,
            start: Instant::now(),
            reads: Cell::new(0),
            segments: Cell::new(0),
        }
    }

    /// `Err` once the resolution has run past its time.
    pub fn check_time(&self) -> Result<(), PypiError> {
        if self.start.elapsed() >= self.budget.wall {
            return Err(PypiError::Budget {
                what: format!(
                    "it ran for {} s (reading the metadata of {} wheels)",
                    self.budget.wall.as_secs(),
                    self.reads.get()
                ),
                setting: SECONDS_VAR,
            });
        }
        Ok(())
    }

    /// Count one metadata read: `Err` when the budget has no read left (or no time).
    pub fn spend_read(&self) -> Result<(), PypiError> {
        self.check_time()?;
        let n = self.reads.get();
        if n >= self.budget.metadata_reads {
            return Err(PypiError::Budget {
                what: format!("it read the metadata of {n} wheels"),
                setting: READS_VAR,
            });
        }
        self.reads.set(n + 1);
        Ok(())
    }

    /// Count a range of `segments` that a version of `package` is chosen from: `Err` when the
    /// ranges so far pass the budget.
    pub fn spend_range(&self, package: &str, segments: u64) -> Result<(), PypiError> {
        let total = self.segments.get().saturating_add(segments);
        self.segments.set(total);
        if total > self.budget.range_segments {
            return Err(PypiError::Budget {
                what: format!(
                    "the version ranges it chose from reached {} segments (the last, of {package}, had {segments})",
                    self.budget.range_segments
                ),
                setting: SEGMENTS_VAR,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn variables_change_the_defaults_and_bad_values_name_their_variable() {
        assert_eq!(Budget::from_vars(&[]).ok(), Some(Budget::default()));
        let b = Budget::from_vars(&vars(&[
            (READS_VAR, "12"),
            (SECONDS_VAR, " 30 "),
            (SEGMENTS_VAR, "7"),
            (MAX_WHEEL_VAR, "1GiB"),
        ]))
        .unwrap();
        assert_eq!(b.metadata_reads, 12);
        assert_eq!(b.wall, Duration::from_secs(30));
        assert_eq!(b.range_segments, 7);
        assert_eq!(b.max_wheel_bytes, 1 << 30);
        for (k, v) in [
            (READS_VAR, "many"),
            (SECONDS_VAR, "-1"),
            (MAX_WHEEL_VAR, "9 parsecs"),
        ] {
            let e = Budget::from_vars(&vars(&[(k, v)])).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let s = e.to_string();
            assert!(s.starts_with(k) && s.contains(v), "{s}");
        }
    }

    #[test]
    fn a_spent_budget_names_its_variable() {
        let m = Meter::new(Budget {
            metadata_reads: 2,
            ..Budget::default()
        });
        m.spend_read().unwrap();
        m.spend_read().unwrap();
        let e = m.spend_read().unwrap_err().to_string();
        assert!(e.contains(READS_VAR) && e.contains("2 wheels"), "{e}");
        let m = Meter::new(Budget {
            wall: Duration::ZERO,
            ..Budget::default()
        });
        let e = m.check_time().unwrap_err().to_string();
        assert!(e.contains(SECONDS_VAR), "{e}");
        let e = Budget::default()
            .check_wheel_size("big-1-py3-none-any.whl", 50 << 30)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("big-1-py3-none-any.whl") && e.contains(MAX_WHEEL_VAR),
            "{e}"
        );
    }
}
