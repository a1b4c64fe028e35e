//! HTTP downloads: retries with backoff, parallel jobs, verified writes into the [`Cache`].
//!
//! Must never leave a partial or unverified file where a blob belongs, and never download when
//! `offline` is set.

use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use crate::build::Observer;
use crate::digest::{Digest, HashingWriter};

use super::resolver::CachingResolver;
use super::{Cache, FetchError};

/// One file to fetch: where from, and what its bytes must hash to.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub url: String,
    pub sha256: Digest,
    pub size: Option<u64>,
}

pub struct Fetcher {
    cache: Cache,
    agent: ureq::Agent,
    offline: bool,
    jobs: usize,
    attempts: u32,
    backoff: Duration,
}

/// Why one attempt failed: worth retrying or not.
enum Attempt {
    Retry(String, u64),
    Fatal(FetchError),
}

impl Fetcher {
    /// A fetcher over the cache at `cache_root` (created if missing).
    pub fn new(cache_root: &Path, offline: bool, jobs: usize) -> Result<Self, FetchError> {
        let config = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_per_read(Some(Duration::from_secs(60)))
            .user_agent(concat!("gpuimg/", env!("CARGO_PKG_VERSION")))
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::new(),
            CachingResolver::default(),
        );
        Ok(Fetcher {
            cache: Cache::open(cache_root)?,
            agent,
            offline,
            jobs: jobs.max(1),
            attempts: 4,
            backoff: Duration::from_millis(250),
        })
    }

    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    pub fn offline(&self) -> bool {
        self.offline
    }

    /// Fetch one artifact (from the cache when intact), reporting bytes to `progress`.
    pub fn fetch(
        &self,
        a: &Artifact,
        progress: &dyn Fn(u64),
        corrupted: &dyn Fn(&str),
    ) -> Result<PathBuf, FetchError> {
        let (hit, was_corrupt) = self.cache.lookup(&a.sha256)?;
        if let Some(path) = hit {
            progress(a.size.unwrap_or(0));
            return Ok(path);
        }
        if was_corrupt {
            corrupted(&a.url);
        }
        if self.offline {
            return Err(FetchError::Offline {
                url: a.url.clone(),
                digest: a.sha256.to_string(),
            });
        }
        let mut tmp = self.cache.temp()?;
        let mut last = String::new();
        let mut got = 0;
        for attempt in 0..self.attempts {
            if attempt > 0 {
                std::thread::sleep(self.backoff * 2u32.pow(attempt - 1));
            }
            match self.attempt(a, tmp.as_file_mut(), progress) {
                Ok(()) => return self.cache.commit(tmp, &a.sha256),
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(msg, n)) => {
                    last = msg;
                    got = n;
                }
            }
        }
        match a.size {
            Some(expected) if got < expected => Err(FetchError::Truncated {
                url: a.url.clone(),
                expected,
                actual: got,
            }),
            _ => Err(FetchError::Http {
                url: a.url.clone(),
                attempts: self.attempts,
                message: last,
            }),
        }
    }

    fn attempt(
        &self,
        a: &Artifact,
        file: &mut std::fs::File,
        progress: &dyn Fn(u64),
    ) -> Result<(), Attempt> {
        let io_fatal = |e: io::Error| {
            Attempt::Fatal(FetchError::Io {
                path: PathBuf::from(&a.url),
                source: e,
            })
        };
        file.set_len(0).map_err(io_fatal)?;
        file.rewind().map_err(io_fatal)?;
        let mut resp = match self.agent.get(&a.url).call() {
            Ok(r) => r,
            Err(ureq::Error::StatusCode(404)) => {
                return Err(Attempt::Fatal(FetchError::NotFound { url: a.url.clone() }))
            }
            Err(ureq::Error::StatusCode(c)) if (400..500).contains(&c) => {
                return Err(Attempt::Fatal(FetchError::Http {
                    url: a.url.clone(),
                    attempts: 1,
                    message: format!("HTTP status {c}"),
                }))
            }
            Err(e) => return Err(Attempt::Retry(e.to_string(), 0)),
        };
        let mut reader = resp.body_mut().as_reader();
        let mut w = HashingWriter::new(&mut *file);
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Attempt::Retry(e.to_string(), w.count())),
            };
            w.write_all(&buf[..n]).map_err(io_fatal)?;
            progress(w.count());
            if a.size.is_some_and(|s| w.count() > s) {
                break;
            }
        }
        let (_, actual, count) = w.finish();
        if let Some(expected) = a.size {
            if count < expected {
                return Err(Attempt::Retry("connection closed early".into(), count));
            }
        }
        if actual != a.sha256 {
            return Err(Attempt::Fatal(FetchError::HashMismatch {
                url: a.url.clone(),
                expected: a.sha256,
                actual,
            }));
        }
        file.flush().map_err(io_fatal)?;
        Ok(())
    }

    /// Fetch many artifacts with up to `jobs` parallel downloads. Paths come back in input
    /// order; the first failure (in input order) is returned.
    pub fn fetch_all(
        &self,
        items: &[Artifact],
        label: &str,
        obs: &mut dyn Observer,
    ) -> Result<Vec<PathBuf>, FetchError> {
        let total: u64 = items.iter().filter_map(|a| a.size).sum();
        obs.task_start(label, Some(total));
        let next = AtomicUsize::new(0);
        let (tx, rx) = mpsc::channel::<Event>();
        let mut results: Vec<Option<Result<PathBuf, FetchError>>> =
            (0..items.len()).map(|_| None).collect();
        let mut done_bytes = 0u64;
        std::thread::scope(|s| {
            for _ in 0..self.jobs.min(items.len()) {
                let tx = tx.clone();
                let next = &next;
                s.spawn(move || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(a) = items.get(i) else { break };
                    let last = std::cell::Cell::new(0u64);
                    let progress = |n: u64| {
                        let d = n.saturating_sub(last.replace(n));
                        let _ = tx.send(Event::Bytes(d));
                    };
                    let corrupted = |url: &str| {
                        let _ = tx.send(Event::Corrupted(url.to_string()));
                    };
                    let r = self.fetch(a, &progress, &corrupted);
                    let _ = tx.send(Event::Done(i, r));
                });
            }
            drop(tx);
            for ev in rx {
                match ev {
                    Event::Bytes(d) => {
                        done_bytes += d;
                        obs.task_progress(done_bytes);
                    }
                    Event::Corrupted(url) => {
                        obs.warn(&format!(
                            "Cache entry for `{url}` was corrupted; fetching it again"
                        ));
                    }
                    Event::Done(i, r) => results[i] = Some(r),
                }
            }
        });
        obs.task_done(label, done_bytes, &format!("{} files", items.len()));
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

    /// Fetch an unpinned root (an `InRelease`): `Ok(None)` when the server has none. Online,
    /// the copy is kept for `--offline`; offline, the kept copy is returned. The caller must
    /// verify it (signature) every time.
    pub fn fetch_root(&self, url: &str) -> Result<Option<Vec<u8>>, FetchError> {
        if self.offline {
            return match self.cache.get_root(url)? {
                Some(b) => Ok(Some(b)),
                None => Err(FetchError::Offline {
                    url: url.to_string(),
                    digest: "unpinned".into(),
                }),
            };
        }
        let mut last = String::new();
        for attempt in 0..self.attempts {
            if attempt > 0 {
                std::thread::sleep(self.backoff * 2u32.pow(attempt - 1));
            }
            match self.agent.get(url).call() {
                Ok(mut resp) => {
                    let mut data = Vec::new();
                    match resp.body_mut().as_reader().read_to_end(&mut data) {
                        Ok(_) => {
                            self.cache.put_root(url, &data)?;
                            return Ok(Some(data));
                        }
                        Err(e) => last = e.to_string(),
                    }
                }
                Err(ureq::Error::StatusCode(404 | 403 | 410)) => return Ok(None),
                Err(ureq::Error::StatusCode(c)) if (400..500).contains(&c) => {
                    last = format!("HTTP status {c}");
                    break;
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(FetchError::Http {
            url: url.to_string(),
            attempts: self.attempts,
            message: last,
        })
    }
}

enum Event {
    Bytes(u64),
    Corrupted(String),
    Done(usize, Result<PathBuf, FetchError>),
}
