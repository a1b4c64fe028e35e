//! One push's HTTP conversation with a registry: the scheme (HTTPS, or plain HTTP on loopback
//! or when allowed), authentication (`auth.rs`), and retries with backoff for what a retry can
//! cure. Shared by the upload threads; every response body read is capped.
//!
//! Every request is bounded ([`PushLimits`]): its response head must come within the response
//! deadline, every body sent or read must move the minimum rate over each window (a read or a
//! write that stalls altogether is abandoned after the longer of the two), and nothing runs past
//! the push's own deadline. Must never wait on the registry without one of these bounds.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ureq::http::{HeaderMap, Method};
use ureq::RequestExt;

use super::credentials::{AuthFiles, Credentials};
use super::limits::{secs, PushLimits};
use super::realm::RealmTrust;
use super::RegistryError;
use gpuimg_fetch::Slow;
use gpuimg_store::digest::{Digest, HashingWriter};

/// The most bytes of a response body read (errors, tokens, manifests and indexes are small).
const MAX_RESPONSE: u64 = 8 << 20;

/// A request body that can be sent again (after a 401 or a retry).
pub enum Body<'a> {
    Empty,
    Bytes(&'a [u8]),
    /// `len` bytes of the file from `start`; `progress` is told the bytes sent so far.
    File {
        path: &'a Path,
        start: u64,
        len: u64,
        progress: &'a (dyn Fn(u64) + Sync),
    },
}

pub struct Request<'a> {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Body<'a>,
    /// Whether a failed attempt may be sent again as it is (false for upload data, whose
    /// session may have taken part of it: the caller restarts the blob instead).
    pub retry: bool,
}

impl<'a> Request<'a> {
    pub fn new(method: Method, url: String) -> Request<'a> {
        Request {
            method,
            url,
            headers: Vec::new(),
            body: Body::Empty,
            retry: true,
        }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn body(mut self, body: Body<'a>) -> Self {
        self.body = body;
        self
    }

    pub fn once(mut self) -> Self {
        self.retry = false;
        self
    }
}

/// A response: status, headers and the (capped) body.
pub struct Response {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The registry's error text: the first `errors[].message` (with its code), else the body.
    pub fn error_text(&self) -> String {
        #[derive(serde::Deserialize)]
        struct Errors {
            errors: Vec<ErrorEntry>,
        }
        #[derive(serde::Deserialize)]
        struct ErrorEntry {
            #[serde(default)]
            code: String,
            #[serde(default)]
            message: String,
        }
        if let Ok(e) = serde_json::from_slice::<Errors>(&self.body) {
            if let Some(first) = e.errors.first() {
                return format!("{}: {}", first.code, first.message);
            }
        }
        let text = String::from_utf8_lossy(&self.body);
        let line = text.lines().next().unwrap_or("").trim();
        line.chars().take(200).collect()
    }
}

pub(super) enum Auth {
    None,
    Basic(String),
    Bearer(String),
}

/// When the push must be over, and what that deadline was made of (for its error).
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub deadline: Instant,
    /// The bytes the push may move (blobs, manifests, the SBOM, what `--verify` reads back).
    pub bytes: u64,
}

pub struct Session {
    agent: ureq::Agent,
    /// `https://HOST[:PORT]` or `http://…`.
    pub base: String,
    pub registry: String,
    pub(super) repo: String,
    pub(super) credentials: Option<Credentials>,
    /// Where an auth file may configure the credentials for a token realm's host.
    pub(super) auth_files: AuthFiles,
    /// The scopes a token is asked for (`repository:REPO:pull,push`, …).
    pub(super) scopes: Mutex<Vec<String>>,
    pub(super) auth: Mutex<Auth>,
    /// `--plain-http`: a token realm may be plain HTTP too.
    pub(super) plain_http: bool,
    /// Each token realm's host (`HOST[:PORT]`) met, and whether it may have the credentials.
    pub(super) realms: Mutex<Vec<(String, RealmTrust)>>,
    /// Who received the credentials, for `--verbose`.
    pub(super) notes: Mutex<Vec<String>>,
    pub limits: PushLimits,
    pub budget: Budget,
}

/// How a request failed at the transport.
pub enum SendFailure {
    Net(String),
    /// No response head within the response deadline.
    NoAnswer,
    /// A body moved slower than the minimum rate (what was measured).
    Slow(String),
    /// The push's deadline passed.
    Deadline,
    Registry(RegistryError),
}

/// What [`Session::digest_of`] read: a 200's body hashed as it streamed past (its digest and
/// length), or another status with its (capped) body.
pub enum Streamed {
    Body(Digest, u64),
    Other(Response),
}

impl Session {
    /// A session pushing to `repo` (its token asks for `repository:REPO:pull,push`).
    pub fn new(
        agent: ureq::Agent,
        base: String,
        registry: String,
        repo: String,
        credentials: Option<Credentials>,
        conn: &super::Connection,
        budget: Budget,
    ) -> Session {
        let scopes = vec![format!("repository:{repo}:pull,push")];
        Session {
            agent,
            base,
            registry,
            repo,
            credentials,
            auth_files: conn.auth.clone(),
            scopes: Mutex::new(scopes),
            auth: Mutex::new(Auth::None),
            plain_http: conn.plain_http,
            realms: Mutex::new(Vec::new()),
            notes: Mutex::new(Vec::new()),
            limits: conn.limits,
            budget,
        }
    }

    /// Add a scope (e.g. pull on a mount's source repository); the next token asks for it.
    pub fn add_scope(&self, scope: String) {
        let mut s = self.scopes.lock().unwrap_or_else(|e| e.into_inner());
        if !s.contains(&scope) {
            s.push(scope);
            // A token for fewer scopes would be refused: fetch a new one on the next 401.
        }
    }

    /// An absolute URL for a path or a `Location` header (absolute or relative).
    pub fn url(&self, location: &str) -> String {
        if location.starts_with("http://") || location.starts_with("https://") {
            location.to_string()
        } else if location.starts_with('/') {
            format!("{}{location}", self.base)
        } else {
            format!("{}/{location}", self.base)
        }
    }

    /// What `--verbose` tells, taken (each line once).
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Note `line` for `--verbose`, unless it was noted already.
    pub(super) fn note(&self, line: String) {
        let mut n = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        if !n.contains(&line) {
            n.push(line);
        }
    }

    /// Send `req`, authenticating on a 401 challenge (once) and retrying what a retry can
    /// cure. Statuses other than 401 are returned for the caller to judge.
    pub fn send(&self, req: &Request<'_>) -> Result<Response, RegistryError> {
        self.exchange(req, true, |r| {
            self.send_once(r, true).map(|resp| (resp, ()))
        })
        .map(|(resp, ())| resp)
    }

    /// GET `url` and hash a 200's body as it streams past (at most `max` bytes are read: more
    /// gives a length over `max`); another status comes back with its capped body.
    pub fn digest_of(&self, url: String, max: u64) -> Result<Streamed, RegistryError> {
        let req = Request::new(Method::GET, url);
        let (resp, got) = self.exchange(&req, true, |r| {
            let resp = self.run(r, true)?;
            if resp.status().as_u16() != 200 {
                return self.read_capped(resp).map(|r| (r, None));
            }
            let head = Response {
                status: 200,
                headers: resp.headers().clone(),
                body: Vec::new(),
            };
            let got = self.stream(resp, max)?;
            Ok((head, Some(got)))
        })?;
        Ok(match got {
            Some((digest, len)) => Streamed::Body(digest, len),
            None => Streamed::Other(resp),
        })
    }

    /// Send without the session's own Authorization (the token endpoint), with retries; a
    /// 401 is the caller's to judge.
    pub(super) fn send_plain(&self, req: &Request<'_>) -> Result<Response, RegistryError> {
        self.exchange(req, false, |r| {
            self.send_once(r, false).map(|resp| (resp, ()))
        })
        .map(|(resp, ())| resp)
    }

    /// The retry loop: `once` is one attempt; a 401 is answered (when `challenges`) by
    /// authenticating once; statuses and failures a retry may cure are tried again after a
    /// backoff, within the attempts and the push's deadline.
    fn exchange<X>(
        &self,
        req: &Request<'_>,
        challenges: bool,
        once: impl Fn(&Request<'_>) -> Result<(Response, X), SendFailure>,
    ) -> Result<(Response, X), RegistryError> {
        let mut attempt = 0;
        let mut authenticated = false;
        let attempts = self.limits.attempts.max(1);
        loop {
            attempt += 1;
            let wait = self.limits.backoff_before(attempt);
            if self.limits.clock.now() + wait >= self.budget.deadline {
                return Err(self.failed(req, SendFailure::Deadline, attempt));
            }
            self.limits.clock.sleep(wait);
            let again = req.retry && attempt < attempts;
            match once(req) {
                Ok((resp, _)) if challenges && resp.status == 401 && !authenticated => {
                    authenticated = true;
                    self.authenticate(&resp)?;
                    attempt -= 1;
                }
                Ok((resp, _)) if challenges && resp.status == 401 => {
                    return Err(self.refused(&resp));
                }
                Ok((resp, _)) if retryable(resp.status) && again => {}
                Ok(answer) => return Ok(answer),
                Err(SendFailure::Net(_) | SendFailure::Slow(_)) if again => {}
                Err(f) => return Err(self.failed(req, f, attempt)),
            }
        }
    }

    /// The error for a request that failed for good.
    fn failed(&self, req: &Request<'_>, f: SendFailure, attempts: u32) -> RegistryError {
        let registry = self.registry.clone();
        let what = format!("{} {}", req.method, path_of(&req.url));
        match f {
            SendFailure::Net(reason) => RegistryError::Network {
                registry,
                what,
                reason,
            },
            SendFailure::NoAnswer => RegistryError::NoAnswer {
                registry,
                what,
                secs: secs(self.limits.response),
            },
            SendFailure::Slow(measured) => RegistryError::TooSlow {
                registry,
                what,
                measured,
                min_rate: self.limits.min_rate,
                window: secs(self.limits.window),
                attempts,
            },
            SendFailure::Deadline => RegistryError::Deadline {
                registry,
                what,
                secs: secs(self.limits.deadline(self.budget.bytes)),
                bytes: self.budget.bytes,
                min_rate: self.limits.min_rate,
                slack: secs(self.limits.slack),
            },
            SendFailure::Registry(e) => e,
        }
    }

    /// One attempt: send, then read the (capped) body.
    fn send_once(&self, req: &Request<'_>, session_auth: bool) -> Result<Response, SendFailure> {
        let resp = self.run(req, session_auth)?;
        self.read_capped(resp)
    }

    /// Send `req` (its body too) and wait for the response head, within the push's deadline.
    fn run(
        &self,
        req: &Request<'_>,
        session_auth: bool,
    ) -> Result<ureq::http::Response<ureq::Body>, SendFailure> {
        let left = self
            .budget
            .deadline
            .saturating_duration_since(self.limits.clock.now());
        if left.is_zero() {
            return Err(SendFailure::Deadline);
        }
        let mut b = ureq::http::Request::builder()
            .method(req.method.clone())
            .uri(&req.url);
        for (k, v) in &req.headers {
            b = b.header(*k, v.as_str());
        }
        // Credentials only ever go to the registry itself: a Location elsewhere gets none.
        if let Some(a) = self
            .authorization()
            .filter(|_| session_auth && same_origin(&self.base, &req.url))
        {
            b = b.header("Authorization", a);
        }
        let bad = |e: ureq::http::Error| SendFailure::Net(e.to_string());
        match &req.body {
            Body::Empty => self.go(b.header("Content-Length", "0").body(()).map_err(bad)?, left),
            Body::Bytes(bytes) => self.go(
                b.header("Content-Length", bytes.len().to_string())
                    .body(*bytes)
                    .map_err(bad)?,
                left,
            ),
            Body::File {
                path,
                start,
                len,
                progress,
            } => {
                use std::io::Seek;
                let io = |e: std::io::Error| {
                    SendFailure::Registry(RegistryError::Read {
                        path: path.display().to_string(),
                        source: e,
                    })
                };
                let mut f = std::fs::File::open(path).map_err(io)?;
                f.seek(std::io::SeekFrom::Start(*start)).map_err(io)?;
                let mut reader = Counting {
                    inner: f.take(*len),
                    sent: 0,
                    progress: *progress,
                    meter: self.limits.meter(),
                    clock: self.limits.clock,
                    slow: None,
                };
                let body = ureq::SendBody::from_reader(&mut reader);
                let r = b
                    .header("Content-Length", len.to_string())
                    .body(body)
                    .map_err(bad)?;
                let result = self.go(r, left);
                if let Some(s) = reader.slow {
                    return Err(SendFailure::Slow(format!("the upload moved {s}")));
                }
                let resp = result?;
                if reader.sent != *len {
                    return Err(SendFailure::Net(format!(
                        "the file gave {} of {len} bytes",
                        reader.sent
                    )));
                }
                Ok(resp)
            }
        }
    }

    /// Run one request, all of it within `left`.
    fn go<S: ureq::AsSendBody>(
        &self,
        r: ureq::http::Request<S>,
        left: std::time::Duration,
    ) -> Result<ureq::http::Response<ureq::Body>, SendFailure> {
        r.with_agent(&self.agent)
            .configure()
            .timeout_global(self.limits.clock.global(left))
            .run()
            .map_err(|e| self.transport(e, true))
    }

    /// What a transport error means: the push's deadline, no answer in time, a stall, or
    /// something a retry may cure. `head`: the request was sent or waited for its response
    /// head (a read that timed out there is no answer, whichever timer fired first).
    fn transport(&self, e: ureq::Error, head: bool) -> SendFailure {
        use ureq::Timeout;
        let clock = self.limits.clock;
        // The span of the push's own time a socket's timeout stood for (on a manual clock it
        // passes now; on the system clock it has passed).
        match e {
            ureq::Error::Timeout(Timeout::Connect) => clock.timed_out(self.limits.window),
            ureq::Error::Timeout(Timeout::RecvResponse) => clock.timed_out(self.limits.response),
            ureq::Error::Timeout(Timeout::Global) => {}
            ureq::Error::Timeout(_) => clock.timed_out(self.stall()),
            _ => {}
        }
        match e {
            ureq::Error::Timeout(Timeout::Global) => SendFailure::Deadline,
            _ if clock.now() >= self.budget.deadline => SendFailure::Deadline,
            ureq::Error::Timeout(Timeout::RecvResponse) => SendFailure::NoAnswer,
            ureq::Error::Timeout(Timeout::PerRead) if head => SendFailure::NoAnswer,
            ureq::Error::Timeout(Timeout::Connect) => SendFailure::Net(format!(
                "no connection within {} s",
                secs(self.limits.window)
            )),
            ureq::Error::Timeout(t) => {
                SendFailure::Slow(format!("nothing for {} s ({t})", secs(self.stall())))
            }
            e => SendFailure::Net(e.to_string()),
        }
    }

    /// How long one read or write may wait: the longer of the window and the response
    /// deadline (a response head is a read too).
    pub(super) fn stall(&self) -> std::time::Duration {
        self.limits.window.max(self.limits.response)
    }

    /// Read a response's body into memory: at most [`MAX_RESPONSE`] bytes, at the minimum rate.
    fn read_capped(
        &self,
        mut resp: ureq::http::Response<ureq::Body>,
    ) -> Result<Response, SendFailure> {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let mut body = Vec::new();
        self.pump(&mut resp, MAX_RESPONSE, &mut body)?;
        if body.len() as u64 > MAX_RESPONSE {
            return Err(SendFailure::Net(format!(
                "the response is larger than {MAX_RESPONSE} bytes"
            )));
        }
        Ok(Response {
            status,
            headers,
            body,
        })
    }

    /// Hash a body as it streams past: its digest and length (at most `max` + 1 bytes read).
    fn stream(
        &self,
        mut resp: ureq::http::Response<ureq::Body>,
        max: u64,
    ) -> Result<(Digest, u64), SendFailure> {
        let mut w = HashingWriter::new(std::io::sink());
        self.pump(&mut resp, max, &mut w)?;
        let (_, digest, len) = w.finish();
        Ok((digest, len))
    }

    /// Copy at most `max` + 1 bytes of the body into `out`, never slower than the minimum
    /// rate over a window.
    fn pump(
        &self,
        resp: &mut ureq::http::Response<ureq::Body>,
        max: u64,
        out: &mut dyn Write,
    ) -> Result<(), SendFailure> {
        let mut meter = self.limits.meter();
        let mut reader = resp.body_mut().as_reader();
        let mut buf = vec![0u8; 64 * 1024];
        let mut count = 0u64;
        loop {
            let room = max.saturating_add(1).saturating_sub(count);
            let room = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
            if room == 0 {
                return Ok(());
            }
            let n = match reader.read(&mut buf[..room]) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(match self.transport(ureq::Error::from(e), false) {
                        SendFailure::Net(m) => SendFailure::Net(format!("{m} after {count} bytes")),
                        SendFailure::Slow(_) => SendFailure::Slow(format!(
                            "the response moved {}",
                            meter.stalled(self.limits.clock.now(), count)
                        )),
                        f => f,
                    })
                }
            };
            count += n as u64;
            out.write_all(&buf[..n])
                .map_err(|e| SendFailure::Net(e.to_string()))?;
            let now = self.limits.clock.now();
            // The system clock's deadline is the request's own timer (`go`); a clock with none
            // is held to it here, between reads.
            if self.limits.clock.global(Duration::ZERO).is_none() && now >= self.budget.deadline {
                return Err(SendFailure::Deadline);
            }
            meter
                .check(now, count)
                .map_err(|s| SendFailure::Slow(format!("the response moved {s}")))?;
        }
    }

    pub(super) fn authorization(&self) -> Option<String> {
        match &*self.auth.lock().unwrap_or_else(|e| e.into_inner()) {
            Auth::None => None,
            Auth::Basic(h) => Some(h.clone()),
            Auth::Bearer(t) => Some(format!("Bearer {t}")),
        }
    }
}

/// Statuses a later attempt may not see: server errors, timeouts, rate limiting.
fn retryable(code: u16) -> bool {
    code >= 500 || code == 408 || code == 429
}

/// Whether `url` has the scheme, host and port of `base`.
fn same_origin(base: &str, url: &str) -> bool {
    match (url::Url::parse(base), url::Url::parse(url)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

/// A URL's path (for messages: never its query, which may hold upload state).
pub fn path_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => u.path().to_string(),
        Err(_) => url.split('?').next().unwrap_or(url).to_string(),
    }
}

/// An upload's body: counts what was taken, tells `progress`, and stops the request when the
/// registry takes it slower than the minimum rate (`slow` says what was measured).
struct Counting<'a, R> {
    inner: R,
    sent: u64,
    progress: &'a (dyn Fn(u64) + Sync),
    meter: gpuimg_fetch::Meter,
    clock: gpuimg_fetch::Clock,
    slow: Option<Slow>,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Err(s) = self.meter.check(self.clock.now(), self.sent) {
            self.slow = Some(s);
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the upload moved {s}"),
            ));
        }
        let n = self.inner.read(buf)?;
        self.sent += n as u64;
        (self.progress)(self.sent);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_stay_with_the_registry_origin() {
        assert!(same_origin(
            "https://r.example:5000",
            "https://r.example:5000/v2/x/blobs/uploads/1?_state=a"
        ));
        assert!(!same_origin(
            "https://r.example:5000",
            "https://other.example/upload"
        ));
        assert!(!same_origin(
            "https://r.example:5000",
            "http://r.example:5000/v2/"
        ));
        assert!(!same_origin(
            "https://r.example",
            "https://r.example:8443/v2/"
        ));
        assert!(same_origin(
            "https://r.example",
            "https://r.example:443/v2/"
        ));
    }
}
