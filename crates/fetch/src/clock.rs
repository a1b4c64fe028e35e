//! The time every bound of a download (and of a push, which shares the arithmetic) is measured
//! in: [`Clock`], the one place the deadline, the minimum-progress window and the backoff read
//! the time and wait.
//!
//! A release build has only the system clock (`Instant::now`, `thread::sleep`, the socket
//! timeouts as given): `Clock` is then empty and reads nothing else. A debug build can also
//! carry a [`ManualClock`] that a test drives: its time moves only when the test advances it or
//! the code under test asks to wait (a backoff), so a test asserts the decision (which bound,
//! the rate measured, the attempts, the waits requested) without waiting and without reading
//! the wall clock. Must never be given a manual clock by anything but a test (in a release
//! build it cannot be).

use std::time::{Duration, Instant};

/// The clock a download's bounds are measured by; `Clock::default()` is the system's.
#[derive(Clone, Copy, Default)]
pub struct Clock {
    #[cfg(debug_assertions)]
    manual: Option<&'static ManualClock>,
}

impl Clock {
    /// The time now.
    pub fn now(&self) -> Instant {
        #[cfg(debug_assertions)]
        if let Some(m) = self.manual {
            return m.now();
        }
        Instant::now()
    }

    /// Wait `d` (a backoff between attempts).
    pub fn sleep(&self, d: Duration) {
        #[cfg(debug_assertions)]
        if let Some(m) = self.manual {
            return m.sleep(d);
        }
        std::thread::sleep(d);
    }

    /// The real time a socket may block for a span `d` of this clock's time (a connection, a
    /// response head, a read or a write that stalls): `d` itself, or a manual clock's
    /// [`ManualClock::socket`].
    pub fn socket(&self, d: Duration) -> Duration {
        #[cfg(debug_assertions)]
        if let Some(m) = self.manual {
            return m.socket;
        }
        d
    }

    /// The real-time limit on a whole request with `left` of this clock's time to go: `left`,
    /// or none on a manual clock (whose deadline is checked between reads, in its own time).
    pub fn global(&self, left: Duration) -> Option<Duration> {
        #[cfg(debug_assertions)]
        if self.manual.is_some() {
            return None;
        }
        Some(left)
    }

    /// A socket timed out after [`Clock::socket`]`(d)`: on a manual clock, `d` passes.
    pub fn timed_out(&self, d: Duration) {
        #[cfg(debug_assertions)]
        if let Some(m) = self.manual {
            m.advance(d);
        }
        let _ = d;
    }
}

#[cfg(debug_assertions)]
impl Clock {
    /// A clock a test drives (debug builds only).
    pub fn manual(m: &'static ManualClock) -> Self {
        Clock { manual: Some(m) }
    }
}

impl PartialEq for Clock {
    fn eq(&self, _other: &Self) -> bool {
        #[cfg(debug_assertions)]
        return match (self.manual, _other.manual) {
            (None, None) => true,
            (Some(a), Some(b)) => std::ptr::eq(a, b),
            _ => false,
        };
        #[cfg(not(debug_assertions))]
        true
    }
}

impl Eq for Clock {}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[cfg(debug_assertions)]
        if self.manual.is_some() {
            return f.write_str("Clock(manual)");
        }
        f.write_str("Clock(system)")
    }
}

pub use manual::ManualClock;

/// The manual clock itself is built in every profile (a test server paces itself by it), but
/// only a debug build's [`Clock`] can hold one.
mod manual {
    use std::sync::{Condvar, Mutex, MutexGuard};
    use std::time::{Duration, Instant};

    /// A clock whose time moves only when told: by [`ManualClock::advance`] (a test's server
    /// pacing its bytes), by a wait the code asks for ([`ManualClock::sleep`], recorded), and by
    /// a socket timeout (one span of the bound that timed out). Reads are counted, so that a
    /// server can move in step with the reader ([`ManualClock::advance_in_step`]).
    #[derive(Debug)]
    pub struct ManualClock {
        origin: Instant,
        /// The real time a stalled socket waits for before it counts as one span passing.
        pub socket: Duration,
        state: Mutex<State>,
        changed: Condvar,
    }

    #[derive(Debug, Default)]
    struct State {
        elapsed: Duration,
        reads: u64,
        slept: Vec<Duration>,
    }

    impl ManualClock {
        /// A clock at its origin whose stalled sockets wait `socket` of real time; leaked, as
        /// a [`super::Clock`] holds it for the rest of the process.
        pub fn leak(socket: Duration) -> &'static ManualClock {
            Box::leak(Box::new(ManualClock {
                origin: Instant::now(),
                socket,
                state: Mutex::default(),
                changed: Condvar::new(),
            }))
        }

        fn state(&self) -> MutexGuard<'_, State> {
            self.state.lock().unwrap_or_else(|p| p.into_inner())
        }

        /// The time now (counted as a read).
        pub fn now(&self) -> Instant {
            let mut s = self.state();
            s.reads += 1;
            self.changed.notify_all();
            self.origin + s.elapsed
        }

        /// A wait the code under test asked for: recorded, and the time moves by it at once.
        pub fn sleep(&self, d: Duration) {
            let mut s = self.state();
            s.slept.push(d);
            s.elapsed = s.elapsed.saturating_add(d);
            self.changed.notify_all();
        }

        /// Move the time on by `d`.
        pub fn advance(&self, d: Duration) {
            let mut s = self.state();
            s.elapsed = s.elapsed.saturating_add(d);
            self.changed.notify_all();
        }

        /// Move the time on by `d`, run `then` (a server sends a byte), and return once the
        /// code under test has read the clock after it, or `limit` of real time passed (a
        /// reader that went away; the limit only ends the wait, it decides nothing).
        pub fn advance_in_step<T>(
            &self,
            d: Duration,
            limit: Duration,
            then: impl FnOnce() -> T,
        ) -> T {
            let before = {
                let mut s = self.state();
                s.elapsed = s.elapsed.saturating_add(d);
                s.reads
            };
            let out = then();
            let s = self.state();
            let _ = self
                .changed
                .wait_timeout_while(s, limit, |s| s.reads == before)
                .unwrap_or_else(|p| p.into_inner());
            out
        }

        /// How much time has passed since the origin.
        pub fn elapsed(&self) -> Duration {
            self.state().elapsed
        }

        /// The waits asked for, in order.
        pub fn slept(&self) -> Vec<Duration> {
            self.state().slept.clone()
        }
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_records_waits() {
        let m = ManualClock::leak(Duration::from_secs(1));
        let c = Clock::manual(m);
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        c.sleep(Duration::from_millis(250));
        c.timed_out(Duration::from_secs(30));
        m.advance(Duration::from_millis(5));
        assert_eq!(c.now() - t0, Duration::from_millis(30_255));
        assert_eq!(m.slept(), [Duration::from_millis(250)]);
        assert_eq!(c.socket(Duration::from_secs(30)), Duration::from_secs(1));
        assert_eq!(c.global(Duration::from_secs(5)), None);
        assert_ne!(c, Clock::default());
        assert_eq!(c, Clock::manual(m));
    }

    #[test]
    fn the_system_clock_passes_its_bounds_through() {
        let c = Clock::default();
        assert_eq!(c.socket(Duration::from_secs(3)), Duration::from_secs(3));
        assert_eq!(
            c.global(Duration::from_secs(5)),
            Some(Duration::from_secs(5))
        );
        assert_eq!(c, Clock::default());
    }
}
