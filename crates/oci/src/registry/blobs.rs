//! A push's blobs into the registry several at once (`JOBS` threads, each blob through
//! `Uploader::push_known`), with per-blob progress for the observer. The caller hands each
//! blob once; the first error stops new blobs from starting and is returned. Must never put a
//! manifest: the caller does, once every blob is in.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::upload::{Outcome, Uploader};
use super::{Blob, RegistryError};
use gpuimg_fetch::observe::Observer;

/// Blobs uploaded at once.
const JOBS: usize = 3;

enum Event {
    Progress(usize, u64),
    Done(usize, Result<Outcome, RegistryError>, f64),
}

/// Push every blob, `JOBS` at a time, reporting per-blob progress under its label; the first
/// error stops the others from starting new blobs and is returned.
pub fn push_all(
    up: &Uploader<'_>,
    blobs: &[Blob],
    labels: &[String],
    obs: &mut dyn Observer,
) -> Result<Vec<Outcome>, RegistryError> {
    let n = blobs.len();
    let next = AtomicU64::new(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<Event>();
    let mut outcomes: Vec<Option<Outcome>> = vec![None; n];
    let mut first_err: Option<RegistryError> = None;
    let label = |i: usize| {
        labels
            .get(i)
            .cloned()
            .unwrap_or_else(|| blobs[i].digest.to_string())
    };
    std::thread::scope(|scope| {
        for _ in 0..JOBS.min(n.max(1)) {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= n {
                    break;
                }
                let blob = &blobs[i];
                let t = Instant::now();
                let last = std::sync::Mutex::new(Instant::now() - Duration::from_secs(1));
                let progress = |bytes: u64| {
                    let mut l = last.lock().unwrap_or_else(|e| e.into_inner());
                    if l.elapsed() >= Duration::from_millis(100) || bytes == blob.size {
                        *l = Instant::now();
                        let _ = tx.send(Event::Progress(i, bytes));
                    }
                };
                let r = up.push_known(blob, &progress);
                if r.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                let _ = tx.send(Event::Done(i, r, t.elapsed().as_secs_f64()));
            });
        }
        drop(tx);
        let mut moved = vec![0u64; n];
        for ev in rx {
            match ev {
                Event::Progress(i, b) => {
                    moved[i] = b;
                    obs.item_progress(&label(i), b, blobs[i].size);
                    obs.task_progress(moved.iter().sum());
                }
                Event::Done(i, r, secs) => match r {
                    Ok(o) => {
                        moved[i] = blobs[i].size;
                        obs.task_progress(moved.iter().sum());
                        let bytes = if o == Outcome::Uploaded {
                            blobs[i].size
                        } else {
                            0
                        };
                        obs.item_done(&label(i), bytes, secs);
                        outcomes[i] = Some(o);
                    }
                    Err(e) => {
                        if first_err.is_none() {
                            first_err = Some(e);
                        }
                    }
                },
            }
        }
    });
    if let Some(e) = first_err {
        return Err(e);
    }
    outcomes
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            o.ok_or_else(|| RegistryError::Protocol {
                registry: up.session.registry.clone(),
                reason: format!("blob {} was never pushed", blobs[i].digest),
            })
        })
        .collect()
}
