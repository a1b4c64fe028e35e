//! Decompressing `.deb` data tarballs ahead of the unpacker, on worker threads, while the
//! unpacker writes packages strictly in order (so overlapping files resolve the same way on
//! every run).
//!
//! Memory stays bounded: at most `window` packages are decoded ahead, packages larger than
//! [`IN_MEMORY_LIMIT`] are left for the unpacker to stream, and so are those whose data
//! decompresses past [`DECODED_LIMIT`]. Must never write to the image.

use std::io::Read;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};

use crate::deb::{read_control, read_deb, ControlFiles};
use crate::AptError;

/// Compressed size above which a package is streamed rather than decoded ahead.
pub const IN_MEMORY_LIMIT: u64 = 32 << 20;

/// Decompressed data size above which a package decoded ahead is dropped and left for the
/// unpacker to stream (a small archive can expand without bound: a zstd bomb).
pub const DECODED_LIMIT: u64 = 4 * IN_MEMORY_LIMIT;

/// One package, ready for the unpacker.
pub enum Decoded {
    /// Control members and the whole decompressed data tarball.
    Memory(ControlFiles, Vec<u8>),
    /// Too large to hold: the unpacker reads the file itself.
    Stream,
    /// Only the control members were asked for (the package is replayed from its sketch).
    Control(ControlFiles),
}

/// Decode `items` (name, path, compressed size) with `jobs` workers and hand each result to
/// `consume` in input order (with `jobs <= 1`, everything is streamed by the unpacker). Of an
/// item whose `control_only` entry is true only the control members are read. Stops at the
/// first error `consume` returns.
pub fn decode_in_order(
    items: &[(String, PathBuf, u64)],
    control_only: &[bool],
    jobs: usize,
    mut consume: impl FnMut(usize, Result<Decoded, AptError>) -> Result<(), AptError>,
) -> Result<(), AptError> {
    let n = items.len();
    let window = jobs.max(1) * 2;
    // (next index to take, number consumed, stop)
    let gate = (Mutex::new((0usize, 0usize, false)), Condvar::new());
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..n).map(|_| mpsc::channel()).unzip();
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1).min(n) {
            let (gate, senders) = (&gate, &senders);
            s.spawn(move || loop {
                let i = {
                    let Ok(mut g) = gate.0.lock() else { return };
                    while !g.2 && g.0 < n && g.0 >= g.1 + window {
                        g = match gate.1.wait(g) {
                            Ok(g) => g,
                            Err(_) => return,
                        };
                    }
                    if g.2 || g.0 >= n {
                        return;
                    }
                    g.0 += 1;
                    g.0 - 1
                };
                let control = control_only.get(i).copied().unwrap_or(false);
                let _ = senders[i].send(decode_one(&items[i], control, jobs > 1));
            });
        }
        let mut result = Ok(());
        for (i, rx) in receivers.iter().enumerate() {
            let r = rx.recv().unwrap_or_else(|_| {
                Err(AptError::InvalidDeb {
                    package: items[i].0.clone(),
                    message: "decoder stopped".into(),
                })
            });
            if let Ok(mut g) = gate.0.lock() {
                g.1 = i + 1;
            }
            gate.1.notify_all();
            if let Err(e) = consume(i, r) {
                result = Err(e);
                break;
            }
        }
        if let Ok(mut g) = gate.0.lock() {
            g.2 = true;
        }
        gate.1.notify_all();
        result
    })
}

/// Decode one item: its control members only, or those and its data in memory (`in_memory`,
/// and within the size limits), or nothing (left for the unpacker to stream).
fn decode_one(
    (name, path, size): &(String, PathBuf, u64),
    control_only: bool,
    in_memory: bool,
) -> Result<Decoded, AptError> {
    if control_only {
        return read_control(name, path).map(Decoded::Control);
    }
    if !in_memory || *size > IN_MEMORY_LIMIT {
        return Ok(Decoded::Stream);
    }
    read_deb(name, path, |_, data| {
        let mut buf = Vec::new();
        Read::take(data, DECODED_LIMIT + 1)
            .read_to_end(&mut buf)
            .map_err(|e| AptError::InvalidDeb {
                package: name.clone(),
                message: format!("bad data tarball: {e}"),
            })?;
        Ok((buf.len() as u64 <= DECODED_LIMIT).then_some(buf))
    })
    .map(|(c, d)| match d {
        Some(d) => Decoded::Memory(c, d),
        None => Decoded::Stream,
    })
}

/// Decode every item at once with `jobs` workers, all held until returned, in input order:
/// for a replay, which must see every package before writing the first. Items are decoded
/// in memory only while their compressed sizes add up to at most `memory` (in input order;
/// the rest are left to stream), so what is held stays bounded.
pub fn decode_all(
    items: &[(String, PathBuf, u64)],
    control_only: &[bool],
    jobs: usize,
    memory: u64,
) -> Vec<Result<Decoded, AptError>> {
    let mut budget = memory;
    let in_memory: Vec<bool> = items
        .iter()
        .zip(control_only)
        .map(|((_, _, size), &c)| {
            let fits = !c && *size <= budget;
            if fits {
                budget -= size;
            }
            fits
        })
        .collect();
    let indexed: Vec<usize> = (0..items.len()).collect();
    map_parallel(&indexed, jobs, |&i| {
        decode_one(&items[i], control_only[i], in_memory[i])
    })
    .into_iter()
    .zip(items)
    .map(|(r, (name, _, _))| {
        r.unwrap_or_else(|| {
            Err(AptError::InvalidDeb {
                package: name.clone(),
                message: "decoder stopped".into(),
            })
        })
    })
    .collect()
}

/// The CPUs this process may use (at least one).
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `f` of every item, on up to `workers` threads, in the items' order (`None` only where a
/// worker could not report: a panic in `f` propagates when the threads are joined).
pub fn map_parallel<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..workers.max(1).min(items.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(item) = items.get(i) else { return };
                let r = f(item);
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|s| s.into_inner().ok().flatten())
        .collect()
}
