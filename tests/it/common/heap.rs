//! The integration-test binary's global allocator (a binary has one, so it has one home; the
//! wheel installer's tests, `crates/wheel/tests/it`, take this file by path for theirs): the
//! system's, counting the heap each thread holds and the most it held since [`reset`], and the
//! live heap of the whole process, which [`set_cap`] may bound.
//!
//! A test that runs the code under test on its own thread (the wheel installer opens and checks
//! each wheel on the calling thread) sees with [`reset`]/[`since`] the most that code held at
//! once, whatever other tests do meanwhile. The cap is for the fuzz harness only, which sets it
//! in a child process of its own (`fuzz::harness`), never in the process that runs the other
//! tests: past it an allocation fails, which aborts that process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The allocator `main.rs` installs.
pub struct Heap;

thread_local! {
    static HELD: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

/// The live heap of the process, in bytes.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The cap on [`LIVE`]; 0 is none (reading it from the environment allocates, so it is set from
/// outside `alloc`, by [`set_cap`]).
static CAP: AtomicUsize = AtomicUsize::new(0);

/// Start measuring this thread: what it holds now is the base, returned.
pub fn reset() -> i64 {
    let now = HELD.with(|h| h.get());
    PEAK.with(|p| p.set(now));
    now
}

/// The most this thread held since [`reset`] returned `base`, over `base`.
pub fn since(base: i64) -> i64 {
    PEAK.with(|p| p.get()) - base
}

/// Refuse allocations that would take the process's live heap past `bytes` (fuzz child only).
pub fn set_cap(bytes: usize) {
    CAP.store(bytes, Ordering::Relaxed);
}

fn note(delta: i64) {
    let _ = HELD.try_with(|h| {
        let v = h.get() + delta;
        h.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

fn reserve(size: usize) -> bool {
    let cap = match CAP.load(Ordering::Relaxed) {
        0 => usize::MAX,
        c => c,
    };
    let before = LIVE.fetch_add(size, Ordering::Relaxed);
    if before.saturating_add(size) > cap {
        LIVE.fetch_sub(size, Ordering::Relaxed);
        let _ = std::io::stderr().write_all(
            b"fuzz: an input exceeded the memory cap (GPUIMG_FUZZ_MEMORY_MB); it is in the \
              running target's `.current` file\n",
        );
        return false;
    }
    true
}

unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        } else {
            note(layout.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !reserve(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        } else {
            note(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        note(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !reserve(new_size - old) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > old {
                LIVE.fetch_sub(new_size - old, Ordering::Relaxed);
            }
        } else {
            if new_size < old {
                LIVE.fetch_sub(old - new_size, Ordering::Relaxed);
            }
            note(new_size as i64 - old as i64);
        }
        p
    }
}
