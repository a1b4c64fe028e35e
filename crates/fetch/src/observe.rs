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
    /// A task that ran elsewhere (another thread, recorded by [`Recorded`]) took `secs`.
    /// Default: as [`Observer::task_done`].
    fn task_finished(&mut self, label: &str, bytes: u64, secs: f64, summary: &str) {
        let _ = secs;
        self.task_done(label, bytes, summary);
    }
}

/// What a stage running on another thread reported, kept to be told later, in order, to the
/// observer of the thread that uses its result (progress is dropped; tasks keep their times).
#[derive(Debug, Default)]
pub struct Recorded {
    events: Vec<RecordedEvent>,
    started: Option<std::time::Instant>,
}

#[derive(Debug)]
enum RecordedEvent {
    Message(String),
    Warn(String),
    Task {
        label: String,
        bytes: u64,
        secs: f64,
        summary: String,
    },
    Item {
        item: String,
        bytes: u64,
        secs: f64,
    },
}

impl Recorded {
    /// Tell `obs` everything recorded, in order.
    pub fn replay(self, obs: &mut dyn Observer) {
        for e in self.events {
            match e {
                RecordedEvent::Message(m) => obs.message(&m),
                RecordedEvent::Warn(w) => obs.warn(&w),
                RecordedEvent::Task {
                    label,
                    bytes,
                    secs,
                    summary,
                } => obs.task_finished(&label, bytes, secs, &summary),
                RecordedEvent::Item { item, bytes, secs } => obs.item_done(&item, bytes, secs),
            }
        }
    }
}

impl Observer for Recorded {
    fn message(&mut self, text: &str) {
        self.events.push(RecordedEvent::Message(text.to_string()));
    }
    fn warn(&mut self, text: &str) {
        self.events.push(RecordedEvent::Warn(text.to_string()));
    }
    fn task_start(&mut self, _: &str, _: Option<u64>) {
        self.started = Some(std::time::Instant::now());
    }
    fn task_progress(&mut self, _: u64) {}
    fn task_done(&mut self, label: &str, bytes: u64, summary: &str) {
        let secs = self
            .started
            .take()
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        self.events.push(RecordedEvent::Task {
            label: label.to_string(),
            bytes,
            secs,
            summary: summary.to_string(),
        });
    }
    fn item_done(&mut self, item: &str, bytes: u64, secs: f64) {
        self.events.push(RecordedEvent::Item {
            item: item.to_string(),
            bytes,
            secs,
        });
    }
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
