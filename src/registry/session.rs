//! One push's HTTP conversation with a registry: the scheme (HTTPS, or plain HTTP on loopback
//! or when allowed), authentication (anonymous, Basic, or a Bearer token fetched from the
//! challenge's realm for the push's scopes), and retries with backoff for what a retry can
//! cure. Shared by the upload threads; every response body read is capped.

use std::io::Read;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use ureq::http::{HeaderMap, Method};

use super::challenge::{self, Challenge};
use super::credentials::{Credentials, Secret};
use super::RegistryError;

/// The most bytes of a response body read (errors, tokens, manifests and indexes are small).
const MAX_RESPONSE: u64 = 8 << 20;
/// Attempts of a request a retry may cure, and the first backoff (doubling each time).
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(300);

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

enum Auth {
    None,
    Basic(String),
    Bearer(String),
}

pub struct Session {
    agent: ureq::Agent,
    /// `https://HOST[:PORT]` or `http://…`.
    pub base: String,
    pub registry: String,
    credentials: Option<Credentials>,
    /// The scopes a token is asked for (`repository:REPO:pull,push`, …).
    scopes: Mutex<Vec<String>>,
    auth: Mutex<Auth>,
    /// `--plain-http`: a token realm may be plain HTTP too.
    plain_http: bool,
}

/// How a request failed at the transport.
pub enum SendFailure {
    Net(String),
    Registry(RegistryError),
}

impl Session {
    pub fn new(
        agent: ureq::Agent,
        base: String,
        registry: String,
        credentials: Option<Credentials>,
        scopes: Vec<String>,
        plain_http: bool,
    ) -> Session {
        Session {
            agent,
            base,
            registry,
            credentials,
            scopes: Mutex::new(scopes),
            auth: Mutex::new(Auth::None),
            plain_http,
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

    /// Send `req`, authenticating on a 401 challenge (once) and retrying what a retry can
    /// cure. Statuses other than 401 are returned for the caller to judge.
    pub fn send(&self, req: &Request<'_>) -> Result<Response, RegistryError> {
        let mut attempt = 0;
        let mut authenticated = false;
        loop {
            attempt += 1;
            let result = self.send_once(req);
            let retry_after = match result {
                Ok(resp) if resp.status == 401 && !authenticated => {
                    authenticated = true;
                    self.authenticate(&resp)?;
                    attempt -= 1;
                    continue;
                }
                Ok(resp) if resp.status == 401 => {
                    return Err(self.refused(&resp));
                }
                Ok(resp) if retryable(resp.status) && req.retry && attempt < ATTEMPTS => {
                    format!("HTTP {}", resp.status)
                }
                Ok(resp) => return Ok(resp),
                Err(SendFailure::Net(e)) if req.retry && attempt < ATTEMPTS => e,
                Err(SendFailure::Net(e)) => {
                    return Err(RegistryError::Network {
                        registry: self.registry.clone(),
                        what: format!("{} {}", req.method, path_of(&req.url)),
                        reason: e,
                    })
                }
                Err(SendFailure::Registry(e)) => return Err(e),
            };
            let _ = retry_after;
            std::thread::sleep(FIRST_BACKOFF * 2u32.pow(attempt - 1));
        }
    }

    fn send_once(&self, req: &Request<'_>) -> Result<Response, SendFailure> {
        let mut b = ureq::http::Request::builder()
            .method(req.method.clone())
            .uri(&req.url);
        for (k, v) in &req.headers {
            b = b.header(*k, v.as_str());
        }
        // Credentials only ever go to the registry itself: a Location elsewhere gets none.
        if let Some(a) = self
            .authorization()
            .filter(|_| same_origin(&self.base, &req.url))
        {
            b = b.header("Authorization", a);
        }
        let net = |e: ureq::Error| SendFailure::Net(e.to_string());
        let resp = match &req.body {
            Body::Empty => {
                let r = b
                    .header("Content-Length", "0")
                    .body(())
                    .map_err(|e| SendFailure::Net(e.to_string()))?;
                self.agent.run(r).map_err(net)?
            }
            Body::Bytes(bytes) => {
                let r = b
                    .header("Content-Length", bytes.len().to_string())
                    .body(*bytes)
                    .map_err(|e| SendFailure::Net(e.to_string()))?;
                self.agent.run(r).map_err(net)?
            }
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
                };
                let body = ureq::SendBody::from_reader(&mut reader);
                let r = b
                    .header("Content-Length", len.to_string())
                    .body(body)
                    .map_err(|e| SendFailure::Net(e.to_string()))?;
                let resp = self.agent.run(r).map_err(net)?;
                if reader.sent != *len {
                    return Err(SendFailure::Net(format!(
                        "the file gave {} of {len} bytes",
                        reader.sent
                    )));
                }
                resp
            }
        };
        read_response(resp).map_err(SendFailure::Net)
    }

    fn authorization(&self) -> Option<String> {
        match &*self.auth.lock().unwrap_or_else(|e| e.into_inner()) {
            Auth::None => None,
            Auth::Basic(h) => Some(h.clone()),
            Auth::Bearer(t) => Some(format!("Bearer {t}")),
        }
    }

    /// Answer a 401's challenge: Basic with the credentials, or a token from the realm.
    fn authenticate(&self, resp: &Response) -> Result<(), RegistryError> {
        let header = resp.header("www-authenticate").unwrap_or("");
        let Some(ch) = challenge::parse(header) else {
            return Err(RegistryError::Protocol {
                registry: self.registry.clone(),
                reason: format!(
                    "it answered 401 without a usable WWW-Authenticate challenge (`{}`)",
                    header.chars().take(120).collect::<String>()
                ),
            });
        };
        let new = match ch.scheme.as_str() {
            "basic" => {
                let c = self.needs_credentials()?;
                match c.basic_header() {
                    Some(h) => Auth::Basic(h),
                    None => {
                        return Err(RegistryError::Protocol {
                            registry: self.registry.clone(),
                            reason: format!(
                                "it asks for Basic auth, and {} holds an identity token",
                                c.source
                            ),
                        })
                    }
                }
            }
            "bearer" => {
                // The scopes the registry names (a mount's source, say) join the push's own.
                if let Some(scope) = ch.param("scope") {
                    for s in scope.split(' ').filter(|s| !s.is_empty()) {
                        self.add_scope(s.to_string());
                    }
                }
                Auth::Bearer(self.token(&ch)?)
            }
            other => {
                return Err(RegistryError::Protocol {
                    registry: self.registry.clone(),
                    reason: format!("it asks for the `{other}` auth scheme, which gpuimg does not speak (Basic and Bearer)"),
                })
            }
        };
        *self.auth.lock().unwrap_or_else(|e| e.into_inner()) = new;
        Ok(())
    }

    fn needs_credentials(&self) -> Result<&Credentials, RegistryError> {
        self.credentials
            .as_ref()
            .ok_or_else(|| RegistryError::NoCredentials {
                registry: self.registry.clone(),
            })
    }

    /// A bearer token for the push's scopes from the challenge's realm (RFC 6750 / the
    /// distribution token spec): GET with Basic credentials, or the OAuth2 POST for an
    /// identity token.
    fn token(&self, ch: &Challenge) -> Result<String, RegistryError> {
        let realm = ch.param("realm").ok_or_else(|| RegistryError::Protocol {
            registry: self.registry.clone(),
            reason: "its Bearer challenge names no realm".into(),
        })?;
        let mut url = url::Url::parse(realm).map_err(|e| RegistryError::Protocol {
            registry: self.registry.clone(),
            reason: format!("its token realm `{realm}` is not a URL: {e}"),
        })?;
        let plain_ok = self.plain_http || url.host_str().is_some_and(super::is_loopback);
        if url.scheme() != "https" && !(url.scheme() == "http" && plain_ok) {
            return Err(RegistryError::Protocol {
                registry: self.registry.clone(),
                reason: format!(
                    "its token realm `{realm}` is not HTTPS; credentials go over plain HTTP only to loopback or with `--plain-http`"
                ),
            });
        }
        let scopes = self
            .scopes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let service = ch.param("service").map(String::from);
        let resp = match self.credentials.as_ref().map(|c| &c.secret) {
            Some(Secret::IdentityToken(t)) => {
                let mut form = url::form_urlencoded::Serializer::new(String::new());
                form.append_pair("grant_type", "refresh_token")
                    .append_pair("refresh_token", t)
                    .append_pair("client_id", "gpuimg");
                if let Some(s) = &service {
                    form.append_pair("service", s);
                }
                form.append_pair("scope", &scopes.join(" "));
                let body = form.finish();
                let req = Request::new(Method::POST, url.to_string())
                    .header("Content-Type", "application/x-www-form-urlencoded")
                    .body(Body::Bytes(body.as_bytes()));
                self.send_plain(&req)?
            }
            other => {
                {
                    let mut q = url.query_pairs_mut();
                    if let Some(s) = &service {
                        q.append_pair("service", s);
                    }
                    for s in &scopes {
                        q.append_pair("scope", s);
                    }
                }
                let mut req = Request::new(Method::GET, url.to_string());
                if let (Some(Secret::Basic { .. }), Some(c)) = (other, &self.credentials) {
                    if let Some(h) = c.basic_header() {
                        req = req.header("Authorization", h);
                    }
                }
                self.send_plain(&req)?
            }
        };
        if resp.status == 401 || resp.status == 403 {
            return Err(self.refused(&resp));
        }
        if resp.status != 200 {
            return Err(RegistryError::Status {
                registry: self.registry.clone(),
                what: "token request".into(),
                status: resp.status,
                message: resp.error_text(),
            });
        }
        #[derive(serde::Deserialize)]
        struct Token {
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            access_token: Option<String>,
        }
        let t: Token = serde_json::from_slice(&resp.body).map_err(|e| RegistryError::Protocol {
            registry: self.registry.clone(),
            reason: format!("its token answer is not JSON: {e}"),
        })?;
        t.token
            .or(t.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| RegistryError::Protocol {
                registry: self.registry.clone(),
                reason: "its token answer holds no token".into(),
            })
    }

    /// Send without the session's own Authorization (the token endpoint), with retries.
    fn send_plain(&self, req: &Request<'_>) -> Result<Response, RegistryError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut b = ureq::http::Request::builder()
                .method(req.method.clone())
                .uri(&req.url);
            for (k, v) in &req.headers {
                b = b.header(*k, v.as_str());
            }
            let body: &[u8] = match &req.body {
                Body::Bytes(b) => b,
                _ => &[],
            };
            let r = b
                .header("Content-Length", body.len().to_string())
                .body(body)
                .map_err(|e| RegistryError::Protocol {
                    registry: self.registry.clone(),
                    reason: e.to_string(),
                })?;
            let out = self
                .agent
                .run(r)
                .map_err(|e| e.to_string())
                .and_then(read_response);
            match out {
                Ok(resp) if retryable(resp.status) && attempt < ATTEMPTS => {}
                Ok(resp) => return Ok(resp),
                Err(_) if attempt < ATTEMPTS => {}
                Err(e) => {
                    return Err(RegistryError::Network {
                        registry: self.registry.clone(),
                        what: format!("the token request to {}", path_of(&req.url)),
                        reason: e,
                    })
                }
            }
            std::thread::sleep(FIRST_BACKOFF * 2u32.pow(attempt - 1));
        }
    }

    fn refused(&self, resp: &Response) -> RegistryError {
        match &self.credentials {
            None => RegistryError::NoCredentials {
                registry: self.registry.clone(),
            },
            Some(c) => RegistryError::Refused {
                registry: self.registry.clone(),
                user: c.user().to_string(),
                source_name: c.source.clone(),
                status: resp.status,
            },
        }
    }
}

fn read_response(mut resp: ureq::http::Response<ureq::Body>) -> Result<Response, String> {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let mut body = Vec::new();
    resp.body_mut()
        .as_reader()
        .take(MAX_RESPONSE + 1)
        .read_to_end(&mut body)
        .map_err(|e| e.to_string())?;
    if body.len() as u64 > MAX_RESPONSE {
        return Err(format!("the response is larger than {MAX_RESPONSE} bytes"));
    }
    Ok(Response {
        status,
        headers,
        body,
    })
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

struct Counting<'a, R> {
    inner: R,
    sent: u64,
    progress: &'a (dyn Fn(u64) + Sync),
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
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
