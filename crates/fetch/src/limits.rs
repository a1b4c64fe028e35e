//! Bounds on one download: the size caps, the overall deadline, the minimum-progress rule and
//! the retry budget ([`FetchLimits`]), and the meter that enforces the progress rule.
//!
//! Defaults (see the constants): an `InRelease`/`Release`/`Release.gpg` may be at most
//! [`MAX_ROOT_BYTES`]; an index or package exactly its signed size. An attempt is aborted when
//! fewer than [`MIN_RATE`] × [`WINDOW`] bytes arrived in the last [`WINDOW`] (a stall, or a
//! server dripping a byte at a time), and a response's headers must come within one window. All
//! attempts of one download together must end within [`DEADLINE_BASE`] + expected size at
//! [`DEADLINE_RATE`]. [`ATTEMPTS`] attempts at most, waiting [`BACKOFF`], doubling, between
//! them. All of it is measured by the limits' [`Clock`] (the system's, but in a test).
//! Must never let a window's check depend on how the server chunks its writes.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::Clock;

/// The cap on an unpinned root (`InRelease`, `Release`, `Release.gpg`): real ones are a few
/// hundred KiB.
pub const MAX_ROOT_BYTES: u64 = 4 << 20;
/// The sliding window of the minimum-progress rule; also the longest wait for response headers.
pub const WINDOW: Duration = Duration::from_secs(30);
/// The slowest transfer accepted over any [`WINDOW`], in bytes per second.
pub const MIN_RATE: u64 = 4 << 10;
/// The fixed part of a download's overall deadline (connection, headers, retries).
pub const DEADLINE_BASE: Duration = Duration::from_secs(120);
/// The average rate, in bytes per second, the overall deadline allows for the expected size.
pub const DEADLINE_RATE: u64 = 16 << 10;
/// Attempts per download (the first try included).
pub const ATTEMPTS: u32 = 4;
/// The wait before the second attempt; doubled before each later one.
pub const BACKOFF: Duration = Duration::from_millis(250);

/// How long and how slowly one download may run, and how often it is retried, by which clock.
/// The defaults are the constants of this module and the system clock; tests shorten them and
/// drive a manual clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// The minimum-progress window.
    pub window: Duration,
    /// Bytes per second that must arrive over each window.
    pub min_rate: u64,
    /// Deadline of a whole download: `deadline_base` + expected size / `deadline_rate`.
    pub deadline_base: Duration,
    pub deadline_rate: u64,
    /// Attempts per download, at least 1.
    pub attempts: u32,
    /// The first wait between attempts, doubled each time.
    pub backoff: Duration,
    /// What the bounds are measured by.
    pub clock: Clock,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            window: WINDOW,
            min_rate: MIN_RATE,
            deadline_base: DEADLINE_BASE,
            deadline_rate: DEADLINE_RATE,
            attempts: ATTEMPTS,
            backoff: BACKOFF,
            clock: Clock::default(),
        }
    }
}

impl FetchLimits {
    /// The deadline for all attempts of a download expected to be `size` bytes.
    pub fn deadline(&self, size: u64) -> Duration {
        let rate = self.deadline_rate.max(1);
        let secs = Duration::from_secs(size / rate)
            .saturating_add(Duration::from_secs_f64((size % rate) as f64 / rate as f64));
        self.deadline_base.saturating_add(secs)
    }

    /// The wait before attempt `attempt` (0-based; 0 waits nothing).
    pub fn backoff_before(&self, attempt: u32) -> Duration {
        match attempt {
            0 => Duration::ZERO,
            n => self.backoff.saturating_mul(1 << (n - 1).min(16)),
        }
    }
}

/// Too little arrived over the last window: what was measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slow {
    pub bytes: u64,
    pub over: Duration,
}

impl Slow {
    /// Bytes per second measured.
    pub fn rate(&self) -> u64 {
        let secs = self.over.as_secs_f64();
        if secs > 0.0 {
            (self.bytes as f64 / secs) as u64
        } else {
            self.bytes
        }
    }
}

impl std::fmt::Display for Slow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bytes in the last {:.1} s ({} B/s)",
            self.bytes,
            self.over.as_secs_f64(),
            self.rate()
        )
    }
}

/// The minimum-progress rule for one attempt: at most ~16 samples a window, whatever the read
/// sizes.
#[derive(Debug)]
pub struct Meter {
    start: Instant,
    window: Duration,
    min_bytes: u64,
    samples: VecDeque<(Instant, u64)>,
}

impl Meter {
    pub fn new(now: Instant, limits: &FetchLimits) -> Self {
        let min_bytes = (limits.min_rate as f64 * limits.window.as_secs_f64()).ceil() as u64;
        Meter {
            start: now,
            window: limits.window,
            min_bytes,
            samples: VecDeque::from([(now, 0)]),
        }
    }

    /// Record that `total` bytes have arrived by `now`; `Err` when, a full window into the
    /// transfer, fewer than the minimum arrived over the last window.
    pub fn check(&mut self, now: Instant, total: u64) -> Result<(), Slow> {
        let last = self.samples.back().map_or(self.start, |s| s.0);
        if now.duration_since(last) >= self.window / 16 {
            self.samples.push_back((now, total));
        } else if let Some(s) = self.samples.back_mut() {
            s.1 = total;
        }
        if now.duration_since(self.start) < self.window {
            return Ok(());
        }
        let edge = now.checked_sub(self.window).unwrap_or(self.start);
        while self.samples.len() > 1 && self.samples[1].0 <= edge {
            self.samples.pop_front();
        }
        let (t, base) = self.samples.front().copied().unwrap_or((self.start, 0));
        let got = total.saturating_sub(base);
        if got < self.min_bytes {
            return Err(Slow {
                bytes: got,
                over: now.duration_since(t),
            });
        }
        Ok(())
    }

    /// What the last window measured, for a read that timed out with nothing new.
    pub fn stalled(&mut self, now: Instant, total: u64) -> Slow {
        match self.check(now, total) {
            Err(s) => s,
            Ok(()) => Slow {
                bytes: 0,
                over: self.window,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(window_ms: u64, rate: u64) -> FetchLimits {
        FetchLimits {
            window: Duration::from_millis(window_ms),
            min_rate: rate,
            ..FetchLimits::default()
        }
    }

    #[test]
    fn a_fast_transfer_passes_whatever_its_chunking() {
        let t0 = Instant::now();
        let mut m = Meter::new(t0, &limits(1000, 100));
        // 1 byte every ms = 1000 B/s over any window, many reads.
        for i in 1..5000u64 {
            m.check(t0 + Duration::from_millis(i), i).unwrap();
        }
        assert!(m.samples.len() <= 18, "{}", m.samples.len());
    }

    #[test]
    fn a_drip_fails_once_a_window_has_passed() {
        let t0 = Instant::now();
        let mut m = Meter::new(t0, &limits(1000, 100));
        // 1 byte every 200 ms = 5 B/s.
        let mut failed = None;
        for i in 1..20u64 {
            if let Err(s) = m.check(t0 + Duration::from_millis(200 * i), i) {
                failed = Some((i, s));
                break;
            }
        }
        let (i, s) = failed.unwrap();
        assert_eq!(i, 5, "{s}");
        assert!(s.bytes <= 5 && s.rate() < 100, "{s}");
    }

    #[test]
    fn a_late_stall_fails_and_early_slowness_is_forgiven() {
        let t0 = Instant::now();
        let mut m = Meter::new(t0, &limits(1000, 100));
        // Nothing for 900 ms, then a burst: fine (under a window since the start).
        m.check(t0 + Duration::from_millis(900), 500).unwrap();
        m.check(t0 + Duration::from_millis(1500), 600).unwrap();
        // Then a stall: by 2.5 s nothing arrived for a second.
        let s = m.stalled(t0 + Duration::from_millis(2600), 600);
        assert_eq!(s.bytes, 0, "{s}");
    }

    #[test]
    fn deadline_grows_with_size_and_backoff_doubles() {
        let l = FetchLimits::default();
        assert_eq!(l.deadline(0), DEADLINE_BASE);
        assert_eq!(
            l.deadline(DEADLINE_RATE * 10),
            DEADLINE_BASE + Duration::from_secs(10)
        );
        assert!(l.deadline(u64::MAX) > Duration::from_secs(1 << 40));
        assert_eq!(l.backoff_before(0), Duration::ZERO);
        assert_eq!(l.backoff_before(1), BACKOFF);
        assert_eq!(l.backoff_before(3), BACKOFF * 4);
    }
}
