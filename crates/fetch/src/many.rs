//! Many artifacts at once: up to the fetcher's `jobs` downloads in parallel (the biggest
//! first), progress told per file and in total. Paths come back in input order; the first
//! failure in input order is the error. Must never return before every download it started
//! has finished.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use super::http::{Artifact, Fetcher};
use super::FetchError;
use crate::observe::Observer;

impl Fetcher {
    /// Fetch many artifacts with up to `jobs` parallel downloads. Paths come back in input
    /// order; the first failure (in input order) is returned.
    pub fn fetch_all(
        &self,
        items: &[Artifact],
        label: &str,
        obs: &mut dyn Observer,
    ) -> Result<Vec<PathBuf>, FetchError> {
        self.fetch_all_named(items, label, None, obs)
    }

    /// [`Fetcher::fetch_all`], also reporting each file by its name in `names`: its bytes as
    /// they come (`Observer::item_progress`) and when it is done (`Observer::item_done`: bytes
    /// moved and time taken; 0 bytes when cached).
    pub fn fetch_all_named(
        &self,
        items: &[Artifact],
        label: &str,
        names: Option<&[String]>,
        obs: &mut dyn Observer,
    ) -> Result<Vec<PathBuf>, FetchError> {
        self.fetch_all_each(items, label, names, obs, &|_, _| {})
    }

    /// [`Fetcher::fetch_all_named`], also handing each item to `each` (its index and verified
    /// path) on the downloading thread the moment it is in the cache, while the others are
    /// still on their way: a caller starts reading what has come. The next download on that
    /// thread waits for `each`: it should only hand the item on (or list it, as a wheel's zip
    /// directory is listed), never do the reading itself.
    pub fn fetch_all_each(
        &self,
        items: &[Artifact],
        label: &str,
        names: Option<&[String]>,
        obs: &mut dyn Observer,
        each: &(dyn Fn(usize, &Path) + Sync),
    ) -> Result<Vec<PathBuf>, FetchError> {
        let total: u64 = items.iter().map(|a| a.size).sum();
        obs.task_start(label, Some(total));
        // The biggest first: the last to finish is then a small one, not a big one that
        // started late (and what reads each item as it comes gets the big ones early).
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(items[i].size));
        let next = AtomicUsize::new(0);
        let (tx, rx) = mpsc::channel::<Event>();
        let mut results: Vec<Option<Result<PathBuf, FetchError>>> =
            (0..items.len()).map(|_| None).collect();
        let mut done_bytes = 0u64;
        let mut item_bytes = vec![0u64; items.len()];
        // What was downloaded (a named item served from the cache moves nothing), for the
        // summary line; `done_bytes` drives the bar.
        let mut moved_bytes = 0u64;
        std::thread::scope(|s| {
            for _ in 0..self.jobs.min(items.len()) {
                let tx = tx.clone();
                let (next, order) = (&next, &order);
                s.spawn(move || {
                    while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let Some(a) = items.get(i) else { break };
                        let last = std::cell::Cell::new(0u64);
                        let started = Instant::now();
                        let progress = |n: u64| {
                            let d = n.saturating_sub(last.replace(n));
                            let _ = tx.send(Event::Bytes(i, d));
                        };
                        let corrupted = |url: &str| {
                            let _ = tx.send(Event::Corrupted(url.to_string()));
                        };
                        // Whether it was cached (a stamp read): what the cache serves moves
                        // nothing, so the summary line does not count it as downloaded.
                        let hit = self
                            .cache
                            .shared()
                            .store(a.bucket)
                            .trusted(&a.sha256)
                            .is_some();
                        let r = self.fetch(a, &progress, &corrupted);
                        if let Ok(path) = &r {
                            each(i, path);
                        }
                        let moved = if hit { 0 } else { last.get() };
                        let _ = tx.send(Event::Done(i, r, moved, started.elapsed().as_secs_f64()));
                    }
                });
            }
            drop(tx);
            for ev in rx {
                match ev {
                    Event::Bytes(i, d) => {
                        done_bytes += d;
                        obs.task_progress(done_bytes);
                        if let (Some(n), Some(a)) = (names.and_then(|n| n.get(i)), items.get(i)) {
                            item_bytes[i] += d;
                            obs.item_progress(n, item_bytes[i], a.size);
                        }
                    }
                    Event::Corrupted(url) => {
                        obs.warn(&format!(
                            "Cache entry for `{url}` was corrupted; fetching it again"
                        ));
                    }
                    Event::Done(i, r, moved, secs) => {
                        moved_bytes += moved;
                        if let (Some(n), true) = (names.and_then(|n| n.get(i)), r.is_ok()) {
                            obs.item_done(n, moved, secs);
                        }
                        results[i] = Some(r)
                    }
                }
            }
        });
        obs.task_done(label, moved_bytes, &format!("{} files", items.len()));
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    Err(FetchError::Io {
                        path: PathBuf::from(label),
                        source: io::Error::other("download worker stopped"),
                    })
                })
            })
            .collect()
    }
}

enum Event {
    /// The item and the bytes it moved since its last report.
    Bytes(usize, u64),
    Corrupted(String),
    /// The item, its result, the bytes it moved and the seconds it took.
    Done(usize, Result<PathBuf, FetchError>, u64, f64),
}
