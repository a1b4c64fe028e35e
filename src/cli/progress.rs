//! Progress reporting: indicatif bars on a terminal, plain lines otherwise; none with `--json`
//! (warnings still show) and nothing at all with `-q`.
//!
//! Stages report through the [`gpuimg_fetch::observe::Observer`] trait; only this file knows indicatif.
//! A warning prints once per run: the same text said again (by a later stage) is dropped; so
//! is the line of a task (or a named item) that moved nothing under a label (a name) that
//! already printed one.
//! A finished task prints one line: its size, time and rate, or `cached` when it moved nothing.
//! On a terminal a task's named items (downloads) each get a bar of their own while they move
//! bytes, under the task's total bar; elsewhere each prints one line when done.

use gpuimg_store::byte_size::ByteSize;
use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use gpuimg_fetch::observe::Observer;

pub struct Progress {
    mode: Mode,
    /// Print warnings (everything but `-q`).
    warnings: bool,
    bar: Option<ProgressBar>,
    /// The task's bars on a terminal: its total and one per item moving bytes.
    multi: Option<MultiProgress>,
    items: HashMap<String, ProgressBar>,
    started: Instant,
    /// The warnings printed so far: each prints once per run, however many stages say it.
    warned: HashSet<String>,
    /// The labels of the tasks, and the names of the items, whose line printed so far.
    finished: HashSet<String>,
    items_done: HashSet<String>,
}

/// Bars shown at once for items, at most (the rest just count in the total).
const MAX_ITEM_BARS: usize = 16;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Quiet,
    Plain,
    Bars,
}

impl Progress {
    /// `-q`: print nothing; `--json` (`no_progress`): print warnings only.
    pub fn new(quiet: bool, no_progress: bool) -> Self {
        let mode = if quiet || no_progress {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Bars
        } else {
            Mode::Plain
        };
        Progress {
            mode,
            warnings: !quiet,
            bar: None,
            multi: None,
            items: HashMap::new(),
            started: Instant::now(),
            warned: HashSet::new(),
            finished: HashSet::new(),
            items_done: HashSet::new(),
        }
    }

    /// Print `line` above the bars (or plainly, with none).
    fn above(&self, line: &str) {
        match (&self.multi, &self.bar) {
            (Some(m), _) => {
                if m.println(line).is_err() {
                    eprintln!("{line}");
                }
            }
            (None, Some(b)) => b.println(line),
            (None, None) => eprintln!("{line}"),
        }
    }
}

impl Observer for Progress {
    fn message(&mut self, text: &str) {
        match self.mode {
            Mode::Quiet => {}
            Mode::Plain => eprintln!("{text}"),
            Mode::Bars => self.above(text),
        }
    }

    fn warn(&mut self, text: &str) {
        if !self.warnings || !self.warned.insert(text.to_string()) {
            return;
        }
        // Bounded as errors are: quoted input capped, control characters escaped.
        self.above(&format!(
            "warning: {}",
            gpuimg_entry::error_line::bounded(text)
        ));
    }

    fn task_start(&mut self, label: &str, total_bytes: Option<u64>) {
        self.started = Instant::now();
        if self.mode != Mode::Bars {
            return;
        }
        let bar = match total_bytes {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new_spinner(),
        };
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let bar = multi.add(bar);
        let style = ProgressStyle::with_template(
            "{prefix:>12} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        self.bar = Some(bar);
        self.multi = Some(multi);
    }

    fn task_progress(&mut self, bytes: u64) {
        if let Some(b) = &self.bar {
            b.set_position(bytes);
        }
    }

    fn task_done(&mut self, label: &str, bytes: u64, summary: &str) {
        let secs = self.started.elapsed().as_secs_f64();
        self.task_finished(label, bytes, secs, summary);
    }

    fn task_finished(&mut self, label: &str, bytes: u64, secs: f64, summary: &str) {
        for (_, b) in self.items.drain() {
            b.finish_and_clear();
        }
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if let Some(m) = self.multi.take() {
            let _ = m.clear();
        }
        // A task that moved nothing under a label already reported (the packages a build
        // reads again from the cache for the install) adds no line.
        let again = !self.finished.insert(label.to_string());
        if self.mode == Mode::Quiet || (again && bytes == 0) {
            return;
        }
        eprintln!("{}", done_line(label, bytes, secs, summary));
    }

    fn item_done(&mut self, item: &str, bytes: u64, secs: f64) {
        let line = format!(
            "{:>12} {}",
            "",
            done_line(item, bytes, secs, "").trim_start()
        );
        if let Some(b) = self.items.remove(item) {
            b.finish_and_clear();
            if let Some(m) = &self.multi {
                m.remove(&b);
            }
        }
        // An item the cache serves again (a wheel read for its layer after its download)
        // adds no line.
        if !self.items_done.insert(item.to_string()) && bytes == 0 {
            return;
        }
        match self.mode {
            Mode::Quiet => {}
            Mode::Bars => self.above(&line),
            Mode::Plain => eprintln!("{line}"),
        }
    }

    fn item_progress(&mut self, item: &str, bytes: u64, total: u64) {
        let Some(m) = &self.multi else {
            return;
        };
        if let Some(b) = self.items.get(item) {
            b.set_position(bytes);
            return;
        }
        if self.items.len() >= MAX_ITEM_BARS {
            return;
        }
        let b = m.add(ProgressBar::new(total));
        b.set_style(
            ProgressStyle::with_template(
                "{prefix:>12} {msg:40!} [{bar:20}] {bytes}/{total_bytes} {binary_bytes_per_sec}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        b.set_message(item.to_string());
        b.set_position(bytes);
        self.items.insert(item.to_string(), b);
    }
}

/// The line a finished task prints. A task that moved no bytes was served from the cache (or
/// had nothing to do): it says `cached`, keeping a non-empty summary (`12 files`) but no
/// meaningless rate.
fn done_line(label: &str, bytes: u64, secs: f64, summary: &str) -> String {
    const RATED_BYTES: u64 = 1_000_000;
    if bytes == 0 {
        if summary.is_empty() || summary.starts_with("0 ") {
            return format!("{label:>12} cached");
        }
        return format!("{label:>12} cached ({summary})");
    }
    // A rate is shown only where it measures throughput: over a time worth the name and at
    // least a megabyte (a few bytes over a long wait measure the wait: "42 B in 47.91s,
    // 0 B/s"); sizes in the unit that keeps them readable (never "0.0 MB", "0 MB/s").
    if secs < 0.1 || bytes < RATED_BYTES {
        return format!("{label:>12} {summary} ({} in {secs:.2}s)", ByteSize(bytes));
    }
    format!(
        "{label:>12} {summary} ({} in {secs:.2}s, {}/s)",
        ByteSize(bytes),
        ByteSize((bytes as f64 / secs) as u64)
    )
}

#[cfg(test)]
mod tests {
    use super::done_line;

    #[test]
    fn the_item_bar_template_parses() {
        for t in [
            "{prefix:>12} {msg:40!} [{bar:20}] {bytes}/{total_bytes} {binary_bytes_per_sec}",
            "{prefix:>12} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}",
        ] {
            assert!(indicatif::ProgressStyle::with_template(t).is_ok(), "{t}");
        }
    }

    #[test]
    fn a_task_that_moved_nothing_says_cached() {
        assert_eq!(
            done_line("indexes", 0, 0.0, "0 files"),
            "     indexes cached"
        );
        assert_eq!(
            done_line("packages", 0, 0.01, "12 files"),
            "    packages cached (12 files)"
        );
        assert_eq!(done_line("unpack", 0, 0.0, ""), "      unpack cached");
    }

    #[test]
    fn a_task_that_moved_bytes_reports_size_time_and_rate() {
        assert_eq!(
            done_line("packages", 25_000_000, 2.0, "12 files"),
            "    packages 12 files (25.0 MB in 2.00s, 12.5 MB/s)"
        );
        // Issue 34, item 9: a task too fast to time prints no rate, small sizes their unit.
        assert_eq!(
            done_line("base", 1_234, 0.04, "d75b03454461 → 1 files"),
            "        base d75b03454461 → 1 files (1.2 kB in 0.04s)"
        );
        // Nor one that moved too little for a rate to mean throughput.
        assert_eq!(
            done_line("indexes", 512, 0.5, "1 files"),
            "     indexes 1 files (512 B in 0.50s)"
        );
        assert_eq!(
            done_line(
                "unpack wheels",
                42,
                47.91,
                "6 files, 70 left in their wheels"
            ),
            "unpack wheels 6 files, 70 left in their wheels (42 B in 47.91s)"
        );
    }
}
