//! Bounds on one push ([`PushLimits`]): the response deadline of every request, the
//! minimum-progress rule of every body sent or read (the window and rate the apt and index
//! downloads use: `gpuimg_fetch`'s `WINDOW` and `MIN_RATE`), the retries, and the deadline of
//! the whole push: the bytes it may move at the minimum rate plus a fixed slack, all measured by
//! one `gpuimg_fetch::Clock`. The defaults are the constants below and the system clock; tests
//! shorten them and drive a manual clock. Must never let a bound depend on what the registry
//! says.

use std::time::{Duration, Instant};

use gpuimg_fetch::{Clock, FetchLimits, Meter, MIN_RATE, WINDOW};

/// The longest wait for a response's head once its request (and body) went out.
pub const RESPONSE: Duration = Duration::from_secs(60);
/// The fixed part of a push's deadline (connections, the token, manifests, retries).
pub const SLACK: Duration = Duration::from_secs(300);
/// Attempts of a request a retry may cure, and the first backoff (doubling each time).
pub const ATTEMPTS: u32 = 5;
pub const BACKOFF: Duration = Duration::from_millis(300);

/// How long and how slowly one push may run. The defaults are the constants of this module and
/// of `gpuimg_fetch`; tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushLimits {
    /// The longest wait for a response's head after its request was sent.
    pub response: Duration,
    /// The minimum-progress window: also the longest a connection, a read or a write may stall.
    pub window: Duration,
    /// Bytes per second a body (sent or read) must move over each window.
    pub min_rate: u64,
    /// Deadline of the whole push: `slack` + its bytes at `min_rate`.
    pub slack: Duration,
    /// Attempts of a request a retry may cure, at least 1.
    pub attempts: u32,
    /// The first wait between attempts, doubled each time.
    pub backoff: Duration,
    /// What the bounds are measured by.
    pub clock: Clock,
}

impl Default for PushLimits {
    fn default() -> Self {
        PushLimits {
            response: RESPONSE,
            window: WINDOW,
            min_rate: MIN_RATE,
            slack: SLACK,
            attempts: ATTEMPTS,
            backoff: BACKOFF,
            clock: Clock::default(),
        }
    }
}

impl PushLimits {
    /// The same bounds in the fetch module's terms, whose arithmetic (deadline at a rate,
    /// doubling backoff, the progress meter) the push shares rather than repeats.
    fn as_fetch(&self) -> FetchLimits {
        FetchLimits {
            window: self.window,
            min_rate: self.min_rate,
            deadline_base: self.slack,
            deadline_rate: self.min_rate,
            attempts: self.attempts,
            backoff: self.backoff,
            clock: self.clock,
        }
    }

    /// The deadline of a push that may move `bytes` bytes.
    pub fn deadline(&self, bytes: u64) -> Duration {
        self.as_fetch().deadline(bytes)
    }

    /// The wait before attempt `attempt` (1-based; the first waits nothing).
    pub fn backoff_before(&self, attempt: u32) -> Duration {
        self.as_fetch().backoff_before(attempt.saturating_sub(1))
    }

    /// The minimum-progress meter of one body, started now.
    pub fn meter(&self) -> Meter {
        Meter::new(self.clock.now(), &self.as_fetch())
    }
}

/// `now + d`, or far in the future when that overflows.
pub fn later(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(1 << 40))
}

/// Seconds for messages: `60`, `0.3`.
pub fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_the_bytes_at_the_minimum_rate_plus_slack() {
        let l = PushLimits::default();
        assert_eq!(l.deadline(0), SLACK);
        assert_eq!(l.deadline(MIN_RATE * 100), SLACK + Duration::from_secs(100));
        assert!(l.deadline(u64::MAX) > Duration::from_secs(1 << 40));
        assert_eq!(l.backoff_before(1), Duration::ZERO);
        assert_eq!(l.backoff_before(2), BACKOFF);
        assert_eq!(l.backoff_before(4), BACKOFF * 4);
        let now = Instant::now();
        assert!(later(now, Duration::MAX) > now);
        assert_eq!(secs(Duration::from_millis(300)), 0.3);
        assert_eq!(format!("{}", secs(RESPONSE)), "60");
    }
}
