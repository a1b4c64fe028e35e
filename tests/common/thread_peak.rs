//! A test binary's heap, counted per thread: a test that runs the code under test on its own
//! thread (the wheel installer opens and checks each wheel on the calling thread) sees the most
//! that code held at once, whatever other tests do meanwhile. Include it with `#[path]` in one
//! test file; it sets that binary's global allocator.

/// The global allocator of the test binary that includes this file: the system's, counting
/// the heap each thread holds and the most it held since [`reset`].
pub struct ThreadPeak;

thread_local! {
    static HELD: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
    static PEAK: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

fn note(delta: i64) {
    let _ = HELD.try_with(|h| {
        let v = h.get() + delta;
        h.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

unsafe impl std::alloc::GlobalAlloc for ThreadPeak {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        note(l.size() as i64);
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        note(l.size() as i64);
        unsafe { std::alloc::System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        note(-(l.size() as i64));
        unsafe { std::alloc::System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, new: usize) -> *mut u8 {
        note(new as i64 - l.size() as i64);
        unsafe { std::alloc::System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: ThreadPeak = ThreadPeak;

/// Start measuring: what this thread holds now is the base, returned.
pub fn reset() -> i64 {
    let now = HELD.with(|h| h.get());
    PEAK.with(|p| p.set(now));
    now
}

/// The most this thread held since [`reset`] returned `base`, over `base`.
pub fn since(base: i64) -> i64 {
    PEAK.with(|p| p.get()) - base
}
