//! `Observer`: how stages report progress without knowing about terminals. A leaf: it imports
//! nothing from the crate, and every stage may use it.

/// How stages report progress without knowing about terminals.
pub trait Observer {
    fn message(&mut self, text: &str);
    fn warn(&mut self, text: &str);
    fn task_start(&mut self, label: &str, total_bytes: Option<u64>);
    fn task_progress(&mut self, bytes: u64);
    fn task_done(&mut self, label: &str, bytes: u64, summary: &str);
    /// One item of the running task finished (a file downloaded: its name, the bytes it moved
    /// and how long it took). Default: nothing.
    fn item_done(&mut self, _item: &str, _bytes: u64, _secs: f64) {}
    /// An item of the running task moved bytes: `bytes` of `total` so far. Default: nothing.
    fn item_progress(&mut self, _item: &str, _bytes: u64, _total: u64) {}
}

/// An observer that drops everything (tests, library use).
pub struct Silent;

impl Observer for Silent {
    fn message(&mut self, _: &str) {}
    fn warn(&mut self, _: &str) {}
    fn task_start(&mut self, _: &str, _: Option<u64>) {}
    fn task_progress(&mut self, _: u64) {}
    fn task_done(&mut self, _: &str, _: u64, _: &str) {}
}
