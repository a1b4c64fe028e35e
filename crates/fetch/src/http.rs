//! HTTP downloads: retries with backoff, bounded size and time, verified writes
//! into the [`Cache`].
//!
//! Every download is bounded by [`FetchLimits`] (defaults and rules in `limits.rs`): an artifact
//! must be exactly its signed size (more is refused at once, less is retried, then reported as
//! truncated), a root at most [`MAX_ROOT_BYTES`] (held in memory, never more than that); an
//! attempt that falls under the minimum rate over a window is aborted, and all attempts of one
//! download share one deadline. Only failures a retry can cure are retried (network errors,
//! short bodies, slowness, HTTP 5xx, 408 and 429). Must never leave a partial or unverified file
//! where a blob belongs, and never download when `offline` is set.

use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpuimg_store::digest::{Digest, HashingWriter};

use super::dns::DnsCache;
use super::limits::{FetchLimits, Meter, Slow, MAX_ROOT_BYTES};
use super::tls::Trust;
use super::{Cache, FetchError};
use gpuimg_store::cache::Bucket;

/// One file to fetch: where from, what its bytes must hash to and how many there must be.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub url: String,
    pub sha256: Digest,
    /// The size the signed chain gives; the download must be exactly this long.
    pub size: u64,
    /// The cache bucket it is kept in (`Debs` or `Indexes`).
    pub bucket: Bucket,
}

pub struct Fetcher {
    pub(super) cache: Cache,
    agent: ureq::Agent,
    offline: bool,
    pub(super) jobs: usize,
    limits: FetchLimits,
    credentials: Vec<Credential>,
}

/// Basic credentials sent to one host (`host` or `host:port`, as in a URL's authority without
/// its user part). Never printed: `Debug` hides the header.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub authority: String,
    /// The `Authorization` header's value (`Basic <base64>`).
    pub header: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({}, <hidden>)", self.authority)
    }
}

/// One GET of a small document held in memory (an index page, a range of a file).
#[derive(Debug, Clone)]
pub struct Get<'a> {
    pub url: &'a str,
    /// The `Accept` header, if any.
    pub accept: Option<&'a str>,
    /// A byte range; a server that answers with the whole file instead gives
    /// [`Fetched::RangeIgnored`].
    pub range: Option<ByteRange>,
    /// The most bytes the body may have.
    pub cap: u64,
}

/// A range of a file (`Range: bytes=...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// The last `n` bytes.
    Suffix(u64),
    /// Bytes `start..start + len`.
    Span { start: u64, len: u64 },
}

/// A document fetched by [`Fetcher::get`].
#[derive(Debug, Clone)]
pub struct Page {
    pub body: Vec<u8>,
    /// The `Content-Type` header's media type, lower case, without parameters.
    pub content_type: Option<String>,
    /// The URL after redirects (relative links resolve against it).
    pub url: String,
    /// For a range: the whole file's size, from `Content-Range`.
    pub total: Option<u64>,
}

/// What [`Fetcher::get`] gave.
#[derive(Debug, Clone)]
pub enum Fetched {
    Page(Page),
    /// 404, 403 or 410.
    Missing(u16),
    /// A range was asked for and the server sent the whole file (or refused the range).
    RangeIgnored,
}

/// How long a download may be.
#[derive(Debug, Clone, Copy)]
enum Size {
    /// Exactly this many bytes, as the signed chain says.
    Signed(u64),
    /// At most this many bytes (an unpinned root).
    Cap(u64),
}

impl Size {
    fn max(self) -> u64 {
        match self {
            Size::Signed(n) | Size::Cap(n) => n,
        }
    }

    fn exceeded(self, url: &str, seen: String) -> FetchError {
        let url = url.to_string();
        match self {
            Size::Signed(size) => FetchError::ExceedsSigned { url, size, seen },
            Size::Cap(cap) => FetchError::ExceedsCap { url, cap, seen },
        }
    }
}

/// What one request asks for, besides the body's bound.
#[derive(Clone, Copy)]
struct Ask<'a> {
    url: &'a str,
    accept: Option<&'a str>,
    range: Option<ByteRange>,
}

impl<'a> Ask<'a> {
    fn plain(url: &'a str) -> Self {
        Ask {
            url,
            accept: None,
            range: None,
        }
    }
}

impl ByteRange {
    fn header(self) -> String {
        match self {
            ByteRange::Suffix(n) => format!("bytes=-{n}"),
            ByteRange::Span { start, len } => {
                format!("bytes={start}-{}", start + len.max(1) - 1)
            }
        }
    }
}

/// What a response said about itself.
#[derive(Default)]
struct Meta {
    content_type: Option<String>,
    url: String,
    total: Option<u64>,
}

/// Why one attempt failed.
enum Attempt {
    /// A range was asked for and the server answered with something else.
    RangeIgnored,
    /// Worth another attempt.
    Retry(Failure),
    /// An HTTP status a retry will not change (404, 403, …).
    Refused(u16),
    /// The download's deadline passed, with this many bytes in the attempt.
    Deadline(u64),
    Fatal(FetchError),
}

/// A failure a retry may cure.
enum Failure {
    Status(u16),
    Net(String),
    /// The body ended after this many bytes, before its signed size.
    Short(u64),
    Slow(Slow),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Status(c) => f.write_str(&status_text(*c)),
            Failure::Net(m) => f.write_str(m),
            Failure::Short(n) => write!(f, "the body ended after {n} bytes"),
            Failure::Slow(s) => write!(f, "too slow: {s}"),
        }
    }
}

/// What a finished download gave.
enum Got<W> {
    Body(W, Meta),
    RangeIgnored,
    Refused { status: u16, attempts: u32 },
}

fn status_text(code: u16) -> String {
    match ureq::http::StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
    {
        Some(reason) => format!("HTTP status {code} ({reason})"),
        None => format!("HTTP status {code}"),
    }
}

/// Statuses a later attempt may not see: server errors, timeouts, rate limiting.
fn retryable(code: u16) -> bool {
    code >= 500 || code == 408 || code == 429
}

impl Fetcher {
    /// A fetcher over the gpuimg cache at `cache_root` (created if missing; its download
    /// buckets, see `gpuimg_store::cache`), bounded by `limits`.
    pub fn new(
        cache_root: &Path,
        offline: bool,
        jobs: usize,
        limits: FetchLimits,
        trust: &Trust,
    ) -> Result<Self, FetchError> {
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(trust.root_certs()?)
            .build();
        let config = ureq::Agent::config_builder()
            .tls_config(tls)
            .timeout_connect(Some(limits.clock.socket(limits.window)))
            .timeout_recv_response(Some(limits.clock.socket(limits.window)))
            .timeout_per_read(Some(limits.clock.socket(limits.window)))
            .user_agent(concat!("gpuimg/", env!("CARGO_PKG_VERSION")))
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::new(),
            DnsCache::default(),
        );
        Ok(Fetcher {
            cache: Cache::open(cache_root)?,
            agent,
            offline,
            jobs: jobs.max(1),
            limits,
            credentials: Vec::new(),
        })
    }

    /// Send these credentials to their hosts (replacing any set before).
    pub fn set_credentials(&mut self, credentials: Vec<Credential>) {
        self.credentials = credentials;
    }

    /// The `Authorization` header for `url`'s host, if credentials were set for it.
    fn authorization(&self, url: &str) -> Option<&str> {
        let uri: ureq::http::Uri = url.parse().ok()?;
        let host = uri.host()?;
        let authority = match uri.port_u16() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        self.credentials
            .iter()
            .find(|c| c.authority.eq_ignore_ascii_case(&authority))
            .map(|c| c.header.as_str())
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
        let (hit, was_corrupt) = self.cache.lookup(a.bucket, &a.sha256)?;
        if let Some(path) = hit {
            progress(a.size);
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
        let tmp = self.cache.temp()?;
        let io_err = |source| FetchError::Io {
            path: tmp.path().to_path_buf(),
            source,
        };
        let fresh = || -> Result<HashingWriter<std::fs::File>, FetchError> {
            let mut f = tmp.file_handle().try_clone().map_err(io_err)?;
            f.set_len(0).map_err(io_err)?;
            f.rewind().map_err(io_err)?;
            Ok(HashingWriter::new(f))
        };
        let w = match self.download(
            Ask::plain(&a.url),
            Size::Signed(a.size),
            tmp.path(),
            fresh,
            progress,
        )? {
            Got::Body(w, _) => w,
            Got::RangeIgnored => return Err(odd_range(&a.url)),
            Got::Refused { status: 404, .. } => {
                return Err(FetchError::NotFound { url: a.url.clone() })
            }
            Got::Refused { status, attempts } => {
                return Err(FetchError::Http {
                    url: a.url.clone(),
                    attempts,
                    message: status_text(status),
                })
            }
        };
        let (_, actual, _) = w.finish();
        if actual != a.sha256 {
            return Err(FetchError::HashMismatch {
                url: a.url.clone(),
                expected: a.sha256,
                actual,
            });
        }
        self.cache.commit(tmp, a.bucket, &a.sha256)
    }

    /// Download `url` with retries under one deadline; `fresh` gives an empty sink for each
    /// attempt (`sink` names it in errors).
    fn download<W: Write>(
        &self,
        ask: Ask<'_>,
        size: Size,
        sink: &Path,
        mut fresh: impl FnMut() -> Result<W, FetchError>,
        progress: &dyn Fn(u64),
    ) -> Result<Got<W>, FetchError> {
        let url = ask.url;
        let clock = self.limits.clock;
        let budget = self.limits.deadline(size.max());
        let deadline = later(clock.now(), budget);
        let attempts = self.limits.attempts.max(1);
        let mut last: Option<Failure> = None;
        let mut tried = 0;
        let mut got = 0;
        let mut timed_out = false;
        for attempt in 0..attempts {
            let wait = self.limits.backoff_before(attempt);
            if later(clock.now(), wait) >= deadline {
                timed_out = true;
                break;
            }
            clock.sleep(wait);
            tried += 1;
            let mut w = fresh()?;
            match self.attempt(ask, size, deadline, sink, &mut w, progress) {
                Ok(meta) => return Ok(Got::Body(w, meta)),
                Err(Attempt::RangeIgnored) => return Ok(Got::RangeIgnored),
                Err(Attempt::Retry(f)) => {
                    if let Failure::Short(n) = f {
                        got = n;
                    }
                    last = Some(f);
                }
                Err(Attempt::Refused(status)) => {
                    return Ok(Got::Refused {
                        status,
                        attempts: tried,
                    })
                }
                Err(Attempt::Deadline(n)) => {
                    got = n;
                    timed_out = true;
                    break;
                }
                Err(Attempt::Fatal(e)) => return Err(e),
            }
        }
        let url = url.to_string();
        if timed_out {
            return Err(FetchError::Deadline {
                url,
                secs: budget.as_secs_f64(),
                attempts: tried,
                got,
                last: last.map_or_else(|| "still downloading".into(), |f| f.to_string()),
            });
        }
        Err(match (last, size) {
            (Some(Failure::Short(actual)), Size::Signed(expected)) => FetchError::Truncated {
                url,
                expected,
                actual,
                attempts: tried,
            },
            (Some(Failure::Slow(s)), _) => FetchError::TooSlow {
                url,
                attempts: tried,
                measured: s.to_string(),
                min_rate: self.limits.min_rate,
            },
            (last, _) => FetchError::Http {
                url,
                attempts: tried,
                message: last.map_or_else(String::new, |f| f.to_string()),
            },
        })
    }

    /// One attempt at `url` into `out`: at most `size.max()` bytes, before `deadline`, never
    /// slower than the minimum rate over a window.
    fn attempt(
        &self,
        ask: Ask<'_>,
        size: Size,
        deadline: Instant,
        sink: &Path,
        out: &mut dyn Write,
        progress: &dyn Fn(u64),
    ) -> Result<Meta, Attempt> {
        let url = ask.url;
        let window = self.limits.window;
        let clock = self.limits.clock;
        let left = deadline.saturating_duration_since(clock.now());
        if left.is_zero() {
            return Err(Attempt::Deadline(0));
        }
        let mut req = self.agent.get(url);
        if let Some(a) = self.authorization(url) {
            req = req.header("Authorization", a);
        }
        if let Some(a) = ask.accept {
            req = req.header("Accept", a);
        }
        if let Some(r) = ask.range {
            req = req.header("Range", r.header());
        }
        let call = req
            .config()
            .timeout_global(clock.global(left))
            .build()
            .call();
        let mut resp = match call {
            Ok(r) if ask.range.is_some() && r.status().as_u16() != 206 => {
                return Err(Attempt::RangeIgnored)
            }
            Err(ureq::Error::StatusCode(416)) if ask.range.is_some() => {
                return Err(Attempt::RangeIgnored)
            }
            Ok(r) => r,
            Err(ureq::Error::StatusCode(c)) if retryable(c) => {
                return Err(Attempt::Retry(Failure::Status(c)))
            }
            Err(ureq::Error::StatusCode(c)) => return Err(Attempt::Refused(c)),
            Err(ureq::Error::Timeout(_)) => {
                clock.timed_out(window);
                if clock.now() >= deadline {
                    return Err(Attempt::Deadline(0));
                }
                return Err(Attempt::Retry(Failure::Slow(Slow {
                    bytes: 0,
                    over: window,
                })));
            }
            Err(e) => return Err(Attempt::Retry(Failure::Net(e.to_string()))),
        };
        let meta = meta_of(&resp);
        let limit = size.max();
        if let Some(len) = resp.body().content_length().filter(|&n| n > limit) {
            return Err(Attempt::Fatal(
                size.exceeded(url, format!("the server announces {len} bytes")),
            ));
        }
        let mut meter = Meter::new(clock.now(), &self.limits);
        let mut reader = resp.body_mut().as_reader();
        let mut buf = vec![0u8; 256 * 1024];
        let mut count = 0u64;
        loop {
            // One byte more than allowed tells an oversized body from an exact one.
            let room = limit.saturating_add(1).saturating_sub(count);
            let room = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
            let n = match reader.read(&mut buf[..room]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(read_failed(
                        e,
                        size,
                        count,
                        deadline,
                        &mut meter,
                        &self.limits,
                    ))
                }
            };
            count += n as u64;
            if count > limit {
                return Err(Attempt::Fatal(
                    size.exceeded(url, format!("the server sent more than {limit} bytes")),
                ));
            }
            out.write_all(&buf[..n]).map_err(|source| {
                Attempt::Fatal(FetchError::Io {
                    path: sink.to_path_buf(),
                    source,
                })
            })?;
            progress(count);
            let now = clock.now();
            if now >= deadline {
                return Err(Attempt::Deadline(count));
            }
            meter
                .check(now, count)
                .map_err(|s| Attempt::Retry(Failure::Slow(s)))?;
        }
        match size {
            Size::Signed(s) if count < s => Err(Attempt::Retry(Failure::Short(count))),
            _ => Ok(meta),
        }
    }

    /// GET a small document into memory: at most `g.cap` bytes, with the same retries, rate
    /// and deadline as every download. Never when offline (the caller keeps its own copies).
    pub fn get(&self, g: &Get<'_>) -> Result<Fetched, FetchError> {
        if self.offline {
            return Err(FetchError::Offline {
                url: g.url.to_string(),
                digest: "unpinned".into(),
            });
        }
        let ask = Ask {
            url: g.url,
            accept: g.accept,
            range: g.range,
        };
        let sink = PathBuf::from(g.url);
        match self.download(ask, Size::Cap(g.cap), &sink, || Ok(Vec::new()), &|_| {})? {
            Got::Body(body, meta) => Ok(Fetched::Page(Page {
                body,
                content_type: meta.content_type,
                url: if meta.url.is_empty() {
                    g.url.to_string()
                } else {
                    meta.url
                },
                total: meta.total,
            })),
            Got::RangeIgnored => Ok(Fetched::RangeIgnored),
            Got::Refused {
                status: status @ (404 | 403 | 410),
                ..
            } => Ok(Fetched::Missing(status)),
            Got::Refused { status, attempts } => Err(FetchError::Http {
                url: g.url.to_string(),
                attempts,
                message: status_text(status),
            }),
        }
    }

    /// Fetch an unpinned root (an `InRelease`, at most [`MAX_ROOT_BYTES`]): `Ok(None)` when
    /// the server has none. Online, the copy is kept for `--offline`; offline, the kept copy is
    /// returned. The caller must verify it (signature) every time.
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
        let sink = PathBuf::from(url);
        match self.download(
            Ask::plain(url),
            Size::Cap(MAX_ROOT_BYTES),
            &sink,
            || Ok(Vec::new()),
            &|_| {},
        )? {
            Got::RangeIgnored => Err(odd_range(url)),
            Got::Body(data, _) => {
                self.cache.put_root(url, &data)?;
                Ok(Some(data))
            }
            Got::Refused {
                status: 404 | 403 | 410,
                ..
            } => Ok(None),
            Got::Refused { status, attempts } => Err(FetchError::Http {
                url: url.to_string(),
                attempts,
                message: status_text(status),
            }),
        }
    }
}

/// A plain request answered as if it asked for a range (a 416 or 206 it cannot have earned).
fn odd_range(url: &str) -> FetchError {
    FetchError::Http {
        url: url.to_string(),
        attempts: 1,
        message: "the server answered with a range that was not asked for".into(),
    }
}

/// The content type, final URL and range total of a response.
fn meta_of(resp: &ureq::http::Response<ureq::Body>) -> Meta {
    use ureq::ResponseExt;
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    Meta {
        content_type: header("content-type").map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        }),
        url: resp.get_uri().to_string(),
        // `bytes 100-199/1234`
        total: header("content-range")
            .and_then(|v| v.rsplit_once('/').and_then(|(_, t)| t.trim().parse().ok())),
    }
}

/// `now + d`, or a century from now where that overflows (a signed size can be absurd).
fn later(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86400)))
        .unwrap_or(now)
}

/// Classify a failed body read after `count` bytes.
fn read_failed(
    e: io::Error,
    size: Size,
    count: u64,
    deadline: Instant,
    meter: &mut Meter,
    limits: &FetchLimits,
) -> Attempt {
    let e = ureq::Error::from(e);
    if let ureq::Error::Timeout(_) = e {
        limits.clock.timed_out(limits.window);
    }
    let now = limits.clock.now();
    match e {
        ureq::Error::Timeout(_) if now >= deadline => Attempt::Deadline(count),
        ureq::Error::Timeout(_) => Attempt::Retry(Failure::Slow(meter.stalled(now, count))),
        _ if matches!(size, Size::Signed(s) if count < s) => Attempt::Retry(Failure::Short(count)),
        e => Attempt::Retry(Failure::Net(format!("{e} after {count} bytes"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absurd_signed_size_gives_a_far_deadline_not_a_panic() {
        let now = Instant::now();
        let far = later(now, FetchLimits::default().deadline(u64::MAX));
        assert!(far > later(now, Duration::from_secs(1 << 30)));
        assert_eq!(
            later(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
    }
}
