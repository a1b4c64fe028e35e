//! How many layers are written at once: a counting gate each layer write takes a slot of for
//! as long as it writes. Knows nothing of layers; never decides how many slots there are
//! (`driver::WRITE_SLOTS`).

use std::sync::{Condvar, Mutex};

pub(super) struct WriteSlots {
    free: Mutex<usize>,
    freed: Condvar,
}

pub(super) struct Slot<'a>(&'a WriteSlots);

impl WriteSlots {
    pub fn new(slots: usize) -> Self {
        WriteSlots {
            free: Mutex::new(slots.max(1)),
            freed: Condvar::new(),
        }
    }

    /// Wait for a free slot (`None`: a writer panicked holding the count).
    pub fn take(&self) -> Option<Slot<'_>> {
        let mut free = self.free.lock().ok()?;
        while *free == 0 {
            free = self.freed.wait(free).ok()?;
        }
        *free -= 1;
        Some(Slot(self))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Ok(mut free) = self.0.free.lock() {
            *free += 1;
        }
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn no_more_than_the_slots_are_held_at_once_and_every_taker_gets_one() {
        let slots = WriteSlots::new(2);
        let (held, most, done) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    let _slot = slots.take().unwrap();
                    let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::yield_now();
                    held.fetch_sub(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        assert!(most.load(Ordering::SeqCst) <= 2);
        assert_eq!(done.load(Ordering::SeqCst), 6);
        // Every slot is free again: two can be taken at once.
        let (a, b) = (slots.take(), slots.take());
        assert!(a.is_some() && b.is_some());
    }
}
