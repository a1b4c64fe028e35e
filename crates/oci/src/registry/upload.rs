//! Blobs into the registry: HEAD first (a blob already there is never sent), then a
//! cross-repository mount when the blob was pushed to another repository of the same registry
//! before, else an upload session: one PUT for a blob up to a chunk, PATCH chunks and a
//! closing PUT for larger ones. A failed upload starts its blob again, a bounded number of
//! times; the registry drops abandoned sessions itself.
//!
//! A `HEAD` 200 or a mount's 201 only says the registry claims to hold the blob. With `verify`
//! (`--verify`) such a blob is read back (a GET, following redirects to the registry's storage,
//! which get no credentials), hashed as it streams past, never held whole, and must be exactly
//! the blob's size and digest.

use ureq::http::Method;

use super::known;
use super::session::{path_of, Body, Request, Session, Streamed};
use super::{Blob, BlobSource, RegistryError};
use gpuimg_store::cache::Cache;

/// How often one blob's upload is started over after a failure.
const BLOB_ATTEMPTS: u32 = 3;
/// Redirects a blob's GET may take (registries send it to their storage).
const MAX_REDIRECTS: usize = 5;

/// How a blob got there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Existing,
    Mounted,
    Uploaded,
}

pub struct Uploader<'a> {
    pub session: &'a Session,
    pub repo: &'a str,
    pub chunk: u64,
    /// Where the mount hints are kept.
    pub cache: &'a Cache,
    /// Read back every blob the registry claims to hold and check it (`--verify`).
    pub verify: bool,
}

impl Uploader<'_> {
    /// [`Uploader::push`] with the mount hint from the cache, and the hint recorded after.
    pub fn push_known(
        &self,
        blob: &Blob,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Outcome, RegistryError> {
        let registry = &self.session.registry;
        let from = known::lookup(self.cache, registry, &blob.digest);
        let o = self.push(blob, from.as_deref(), progress)?;
        known::record(self.cache, registry, &blob.digest, self.repo);
        Ok(o)
    }

    /// Whether the repository holds `blob` already.
    pub fn exists(&self, blob: &Blob) -> Result<bool, RegistryError> {
        let url = self
            .session
            .url(&format!("/v2/{}/blobs/{}", self.repo, blob.digest));
        let resp = self.session.send(&Request::new(Method::HEAD, url))?;
        match resp.status {
            200 => Ok(true),
            404 => Ok(false),
            s => Err(self.status("HEAD of a blob", s, &resp)),
        }
    }

    /// Put `blob` into the repository; `mount_from` is a repository of the same registry that
    /// held it when gpuimg last pushed there.
    pub fn push(
        &self,
        blob: &Blob,
        mount_from: Option<&str>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Outcome, RegistryError> {
        if self.exists(blob)? {
            self.check_claim(blob)?;
            progress(blob.size);
            return Ok(Outcome::Existing);
        }
        let mut mount = mount_from.filter(|from| *from != self.repo);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let started = match self.start(blob, mount) {
                // Credentials that may push here but not read the source repository: upload.
                Err(RegistryError::Refused { .. }) if mount.is_some() => self.start(blob, None)?,
                r => r?,
            };
            let location = match started {
                Start::Mounted => {
                    self.check_claim(blob)?;
                    progress(blob.size);
                    return Ok(Outcome::Mounted);
                }
                Start::Session(l) => l,
            };
            // A mount the registry declined is not asked again on a retry.
            mount = None;
            match self.send(blob, &location, progress) {
                Ok(()) => return Ok(Outcome::Uploaded),
                Err(e) if attempt < BLOB_ATTEMPTS && e.is_transient() => {
                    progress(0);
                    let wait = self.session.limits.backoff.saturating_mul(2 << attempt);
                    let clock = self.session.limits.clock;
                    if clock.now() + wait >= self.session.budget.deadline {
                        return Err(e);
                    }
                    clock.sleep(wait);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// POST an upload session (with `?mount=&from=` when asked).
    fn start(&self, blob: &Blob, mount: Option<&str>) -> Result<Start, RegistryError> {
        let mut path = format!("/v2/{}/blobs/uploads/", self.repo);
        if let Some(from) = mount {
            self.session.add_scope(format!("repository:{from}:pull"));
            path.push_str(&format!("?mount={}&from={from}", blob.digest));
        }
        let resp = self
            .session
            .send(&Request::new(Method::POST, self.session.url(&path)))?;
        match resp.status {
            201 if mount.is_some() => Ok(Start::Mounted),
            202 => match resp.header("location") {
                Some(l) => Ok(Start::Session(self.session.url(l))),
                None => Err(RegistryError::Protocol {
                    registry: self.session.registry.clone(),
                    reason: "it opened an upload session without a Location".into(),
                }),
            },
            s => Err(self.status("starting a blob upload", s, &resp)),
        }
    }

    /// Send the blob's bytes into the session at `location` and close it with its digest.
    fn send(
        &self,
        blob: &Blob,
        location: &str,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<(), RegistryError> {
        let octets = "application/octet-stream";
        let mut location = location.to_string();
        if blob.size > self.chunk {
            let BlobSource::File { path, offset } = &blob.source else {
                return Err(RegistryError::Protocol {
                    registry: self.session.registry.clone(),
                    reason: "an in-memory blob is larger than a chunk".into(),
                });
            };
            let mut start = 0u64;
            while start < blob.size {
                let len = self.chunk.min(blob.size - start);
                let base = start;
                let chunk_progress = move |n: u64| progress(base + n);
                let req = Request::new(Method::PATCH, location.clone())
                    .header("Content-Type", octets)
                    .header("Content-Range", format!("{start}-{}", start + len - 1))
                    .body(Body::File {
                        path,
                        start: offset + start,
                        len,
                        progress: &chunk_progress,
                    })
                    .once();
                let resp = self.session.send(&req)?;
                if resp.status != 202 {
                    return Err(self.status("a chunk upload", resp.status, &resp));
                }
                // The session must hold exactly the bytes sent so far (`Range: 0-<last>`).
                let want = start + len - 1;
                let range = resp.header("range").map(|r| r.trim_start_matches("bytes="));
                if let Some(r) = range {
                    let last = r.split_once('-').and_then(|(_, e)| e.parse::<u64>().ok());
                    if last != Some(want) {
                        return Err(RegistryError::ShortSession {
                            registry: self.session.registry.clone(),
                            repo: self.repo.to_string(),
                            held: r.to_string(),
                            want: format!("0-{want}"),
                        });
                    }
                }
                location = match resp.header("location") {
                    Some(l) => self.session.url(l),
                    None => location,
                };
                start += len;
            }
            let req = Request::new(Method::PUT, with_digest(&location, blob)?)
                .header("Content-Type", octets)
                .once();
            let resp = self.session.send(&req)?;
            return self.closed(blob, &resp);
        }
        let body = match &blob.source {
            BlobSource::Bytes(b) => Body::Bytes(b),
            BlobSource::File { path, offset } => Body::File {
                path,
                start: *offset,
                len: blob.size,
                progress,
            },
        };
        let req = Request::new(Method::PUT, with_digest(&location, blob)?)
            .header("Content-Type", octets)
            .body(body)
            .once();
        let resp = self.session.send(&req)?;
        self.closed(blob, &resp)?;
        progress(blob.size);
        Ok(())
    }

    fn closed(&self, blob: &Blob, resp: &super::session::Response) -> Result<(), RegistryError> {
        if resp.status != 201 {
            return Err(self.status("closing a blob upload", resp.status, resp));
        }
        if let Some(d) = resp.header("docker-content-digest") {
            if d != blob.digest.to_string() {
                return Err(RegistryError::Protocol {
                    registry: self.session.registry.clone(),
                    reason: format!("it stored blob {} as {d}", blob.digest),
                });
            }
        }
        Ok(())
    }

    /// With `verify`: read the blob the registry claims to hold back and check its size and
    /// digest as it streams past.
    fn check_claim(&self, blob: &Blob) -> Result<(), RegistryError> {
        if !self.verify {
            return Ok(());
        }
        let lie = |reason: String| RegistryError::Unverified {
            registry: self.session.registry.clone(),
            repo: self.repo.to_string(),
            digest: blob.digest.to_string(),
            reason,
        };
        let mut url = self
            .session
            .url(&format!("/v2/{}/blobs/{}", self.repo, blob.digest));
        for _ in 0..=MAX_REDIRECTS {
            let resp = match self.session.digest_of(url.clone(), blob.size)? {
                Streamed::Body(_, len) if len > blob.size => {
                    return Err(lie(format!(
                        "its GET served more than the blob's {} bytes",
                        blob.size
                    )))
                }
                Streamed::Body(_, len) if len < blob.size => {
                    return Err(lie(format!(
                        "its GET served {len} of the blob's {} bytes",
                        blob.size
                    )))
                }
                Streamed::Body(d, _) if d != blob.digest => {
                    return Err(lie(format!("its GET served bytes whose digest is `{d}`")))
                }
                Streamed::Body(..) => return Ok(()),
                Streamed::Other(resp) => resp,
            };
            let location = resp
                .header("location")
                .filter(|_| matches!(resp.status, 301 | 302 | 303 | 307 | 308));
            let Some(location) = location else {
                return Err(lie(format!(
                    "its GET answered HTTP {}: {}",
                    resp.status,
                    resp.error_text()
                )));
            };
            url = url::Url::parse(&url)
                .and_then(|u| u.join(location))
                .map(String::from)
                .map_err(|e| RegistryError::Protocol {
                    registry: self.session.registry.clone(),
                    reason: format!("the redirect of blob {} is not a URL: {e}", blob.digest),
                })?;
        }
        Err(lie(format!(
            "its GET took more than {MAX_REDIRECTS} redirects"
        )))
    }

    fn status(&self, what: &str, status: u16, resp: &super::session::Response) -> RegistryError {
        RegistryError::Status {
            registry: self.session.registry.clone(),
            what: format!("{what} in `{}`", self.repo),
            status,
            message: resp.error_text(),
        }
    }
}

enum Start {
    Mounted,
    Session(String),
}

/// The session URL with `digest=` added to whatever query it carries.
fn with_digest(location: &str, blob: &Blob) -> Result<String, RegistryError> {
    let mut url = url::Url::parse(location).map_err(|e| RegistryError::Protocol {
        registry: String::new(),
        reason: format!(
            "its upload Location `{}` is not a URL: {e}",
            path_of(location)
        ),
    })?;
    url.query_pairs_mut()
        .append_pair("digest", &blob.digest.to_string());
    Ok(url.to_string())
}
