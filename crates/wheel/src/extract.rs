//! Writing the prepared wheels' files into the staging root, on several threads, each file
//! hashed as it is written and checked against its `RECORD` row (a mismatch refuses the wheel,
//! naming the path); a script whose first line is `#!python` gets the image's interpreter,
//! as pip does. A large deflated file that nothing reads from the staging root is left in its
//! wheel instead (`gpuimg_assemble::ArchivedFile`, checked against the same row when it is read).
//!
//! Writes go through `confined::Root` only, to paths the installer computed (never a name
//! from the archive unchecked). The files' modes on disk do not matter: the tree carries them.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use crate::archive::{Archive, Member, MAX_METADATA_BYTES};
use crate::prepare::{Content, Item, Prepared};
use crate::record::{FileHash, HashAlgo, Hasher};
use crate::scheme::Role;
use crate::WheelError;
use gpuimg_assemble::{ArchivedFile, Deflated};
use gpuimg_fetch::observe::Observer;
use gpuimg_store::confined::Root;

/// One file to write: (wheel, item) indexes into the prepared wheels.
pub type Job = (usize, usize);

/// What was written: the file's final hash and size (a rewritten `#!python` script differs
/// from its archive entry), and for a large file, where that entry's deflate stream lies:
/// walked (`deflated`) when it was written as it inflated, or the file left in the wheel
/// (`archived`, nothing written).
#[derive(Debug, Clone)]
pub struct Written {
    pub hash: FileHash,
    pub size: u64,
    pub deflated: Option<Arc<Deflated>>,
    pub archived: Option<Arc<ArchivedFile>>,
}

/// Files at least this large have their entry's deflate stream walked for a gzip layer to
/// copy it (smaller ones are cut into no block of their own: `layer::fragments`).
const STREAM_MIN_BYTES: u64 = 1 << 20;

/// Whether `item` (entry `m`) is left in its wheel instead of being written: a deflated,
/// non-empty entry that nothing reads from the staging root (not a script, whose first line
/// may be rewritten; not a `.py` source, which `.pyc` compilation reads), whose `RECORD` row
/// gives its size and a sha256 for the layer writer to check it against as it inflates.
/// Small files too: writing a framework's ten thousand headers only to read them back once
/// and unlink them cost seconds.
fn leave_in_archive(item: &Item, m: &Member) -> bool {
    m.deflated.is_some()
        && m.size > 0
        && m.size == item.size
        && item.role != Role::Script
        && !item.dest.ends_with(".py")
        && item.hash.algo == HashAlgo::Sha256
        && item.hash.value.len() == 32
}

/// Write every job's file under `root` (whose directories exist), in parallel; the result is
/// in job order. `walk_streams`: walk the deflate streams of large files (`Written::deflated`).
pub fn extract(
    wheels: &[Prepared],
    jobs: &[Job],
    root: &Path,
    interpreter: &str,
    walk_streams: bool,
    obs: &mut dyn Observer,
) -> Result<Vec<Written>, WheelError> {
    // What is written (the files left in their wheels are read as their layer is written).
    let left = |&(w, i): &Job| {
        let item = &wheels[w].items[i];
        matches!(&item.content, Content::Member(m) if leave_in_archive(item, m))
    };
    let total: u64 = jobs
        .iter()
        .filter(|j| !left(j))
        .map(|&(w, i)| wheels[w].items[i].size)
        .sum();
    let n_left = jobs.iter().filter(|j| left(j)).count();
    // Largest first, so one big library does not finish alone at the end.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&j| {
        let (w, i) = jobs[j];
        (std::cmp::Reverse(wheels[w].items[i].size), j)
    });
    let next = AtomicUsize::new(0);
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Written>>> = Mutex::new(vec![None; jobs.len()]);
    let errors: Mutex<Vec<(usize, WheelError)>> = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8)
        .min(jobs.len().max(1));
    obs.task_start("unpack wheels", Some(total));
    let running = AtomicUsize::new(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let worker = Worker::new(root, wheels, walk_streams);
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= order.len() || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let j = order[k];
                    let r = worker.and_then_write(jobs[j], interpreter, &done);
                    match r {
                        Ok(w) => lock(&results)[j] = Some(w),
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            lock(&errors).push((j, e));
                        }
                    }
                }
                running.fetch_sub(1, Ordering::Release);
            });
        }
        let mut reported = 0;
        while running.load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_millis(50));
            let now = done.load(Ordering::Relaxed);
            if now > reported {
                obs.task_progress(now);
                reported = now;
            }
        }
    });
    let mut errors = errors.into_inner().unwrap_or_else(|e| e.into_inner());
    errors.sort_by_key(|(j, _)| *j);
    if let Some((_, e)) = errors.into_iter().next() {
        return Err(e);
    }
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let detail = match n_left {
        0 => format!("{} files", jobs.len()),
        n => format!("{} files, {n} left in their wheels", jobs.len() - n),
    };
    obs.task_done("unpack wheels", total, &detail);
    results
        .into_iter()
        .map(|r| r.ok_or(WheelError::Internal("a planned file was not written")))
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One thread's root handle and archive clones.
struct Worker<'a> {
    root: Result<Root, std::io::Error>,
    root_path: &'a Path,
    wheels: &'a [Prepared],
    archives: std::cell::RefCell<std::collections::HashMap<usize, Archive>>,
    /// The copy buffer, allocated once per thread.
    buf: std::cell::RefCell<Vec<u8>>,
    walk_streams: bool,
}

impl<'a> Worker<'a> {
    fn new(root_path: &'a Path, wheels: &'a [Prepared], walk_streams: bool) -> Self {
        Worker {
            root: Root::open(root_path),
            root_path,
            wheels,
            archives: Default::default(),
            buf: std::cell::RefCell::new(vec![0u8; 256 << 10]),
            walk_streams,
        }
    }

    fn and_then_write(
        &self,
        (w, i): Job,
        interpreter: &str,
        done: &AtomicU64,
    ) -> Result<Written, WheelError> {
        let root = self.root.as_ref().map_err(|e| WheelError::Write {
            path: self.root_path.to_path_buf(),
            source: std::io::Error::new(e.kind(), e.to_string()),
        })?;
        let wheel = &self.wheels[w];
        let item = &wheel.items[i];
        let dest = Path::new(&item.dest);
        let write_err = |source| WheelError::Write {
            path: self.root_path.join(dest),
            source,
        };
        let written = match &item.content {
            Content::Bytes(b) => {
                root.write(dest, b, 0o644).map_err(write_err)?;
                Written {
                    hash: item.hash.clone(),
                    size: item.size,
                    deflated: None,
                    archived: None,
                }
            }
            Content::Member(m) if leave_in_archive(item, m) => {
                let mut archives = self.archives.borrow_mut();
                let archive = archives.entry(w).or_insert_with(|| wheel.archive.clone());
                let ends = if self.walk_streams && m.size >= STREAM_MIN_BYTES {
                    archive.deflated(m)?.map(|d| d.ends)
                } else {
                    None
                };
                let sha256 = <[u8; 32]>::try_from(item.hash.value.as_slice())
                    .map(gpuimg_store::digest::Digest::from_bytes)
                    .map_err(|_| WheelError::Internal("a sha256 of other than 32 bytes"))?;
                Written {
                    hash: item.hash.clone(),
                    size: item.size,
                    deflated: None,
                    archived: archive.archived(m, sha256, ends).map(Arc::new),
                }
            }
            Content::Member(m) => {
                let mut archives = self.archives.borrow_mut();
                let archive = archives.entry(w).or_insert_with(|| wheel.archive.clone());
                let mut out = root.create_new(dest, 0o644).map_err(write_err)?;
                let mut hasher = Hasher::new(item.hash.algo);
                let mut buf = self.buf.borrow_mut();
                archive.copy(
                    m,
                    &mut out,
                    &mut hasher,
                    &self.root_path.join(dest),
                    &mut buf,
                )?;
                let got = hasher.finish();
                if got != item.hash {
                    return Err(WheelError::RecordHash {
                        wheel: wheel.label.clone(),
                        path: m.name.clone(),
                        expected: item.hash.to_string(),
                        actual: got.to_string(),
                    });
                }
                let mut written = Written {
                    hash: got,
                    size: item.size,
                    deflated: None,
                    archived: None,
                };
                if item.role == Role::Script {
                    if let Some(w) = fix_script(root, dest, interpreter).map_err(write_err)? {
                        written = w;
                    }
                } else if self.walk_streams && m.size >= STREAM_MIN_BYTES {
                    // Written as the entry inflates (the zip's CRC-32 checked on the way).
                    written.deflated = archive.deflated(m)?.map(Arc::new);
                }
                written
            }
        };
        if written.archived.is_none() {
            done.fetch_add(item.size, Ordering::Relaxed);
        }
        Ok(written)
    }
}

/// pip's rule: a script whose first line starts with `#!python` gets `#!<interpreter>` as its
/// first line instead. Returns the new hash and size when it rewrote the file.
fn fix_script(root: &Root, dest: &Path, interpreter: &str) -> std::io::Result<Option<Written>> {
    let mut head = [0u8; 8];
    let n = {
        use std::io::Read;
        let mut f = root.open_file(dest)?;
        let mut n = 0;
        while n < head.len() {
            match f.read(&mut head[n..])? {
                0 => break,
                k => n += k,
            }
        }
        n
    };
    if &head[..n] != b"#!python" {
        return Ok(None);
    }
    let old = root.read(dest, MAX_METADATA_BYTES)?;
    let rest = match old.iter().position(|b| *b == b'\n') {
        Some(p) => &old[p + 1..],
        None => &[][..],
    };
    let mut new = format!("#!{interpreter}\n").into_bytes();
    new.extend_from_slice(rest);
    root.write(dest, &new, 0o755)?;
    Ok(Some(Written {
        hash: FileHash::sha256_of(&new),
        size: new.len() as u64,
        deflated: None,
        archived: None,
    }))
}
