//! Stage `push`: put a built image into a registry over the OCI distribution API, and its SBOM
//! beside it as a referrer; or an image index ([`push_index`]): every platform's manifest, the
//! index above them, and each manifest's SBOM as that manifest's referrer.
//!
//! Order makes an interrupted push harmless: every blob first (HEAD, then mount or upload,
//! several at once; a blob several manifests of an index share goes once), then the image
//! manifest by tag only when all are there (for an index: each manifest by its digest, then
//! the index by tag), the SBOM artifacts last. A push killed at any point leaves at most
//! unreferenced blobs, manifests and upload sessions, never a tag; the next push skips the
//! blobs that made it. Owns the protocol, credentials and
//! the mount hints (`known`); must never build image JSON (it sends what `image` made, byte for
//! byte), never send credentials over plain HTTP to anything but loopback or a registry the
//! user allowed with `--plain-http`, nor to a token realm `realm.rs` does not trust, and never
//! wait on the registry without a bound (`limits.rs`: each request's response deadline and
//! minimum rate, the whole push's deadline). A `HEAD` 200 only says the registry claims to hold
//! a blob; with `--verify` each blob it claims (a `HEAD` 200, a mount) is read back and its
//! digest checked before the tag.

mod auth;
mod blobs;
mod challenge;
mod credentials;
mod known;
mod limits;
mod realm;
mod referrers;
mod session;
mod upload;

use std::path::PathBuf;
use std::time::Instant;

use ureq::http::Method;

pub use credentials::AuthFiles;
pub use limits::PushLimits;

use crate::reference::RegistryRef;
use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::{FetchError, Trust};
use gpuimg_store::cache::Cache;
use gpuimg_store::digest::Digest;
use session::{Body, Budget, Request, Session};
use upload::{Outcome, Uploader};

/// Blobs larger than this go up in PATCH chunks of this size; smaller ones in one PUT.
pub const CHUNK: u64 = 64 << 20;

/// One blob of the image and where its bytes are.
#[derive(Debug, Clone)]
pub struct Blob {
    pub digest: Digest,
    pub size: u64,
    pub source: BlobSource,
}

#[derive(Debug, Clone)]
pub enum BlobSource {
    /// `size` bytes of the file from `offset` (a layout's blob, or an archive's entry).
    File {
        path: PathBuf,
        offset: u64,
    },
    Bytes(Vec<u8>),
}

/// What is pushed: the manifest's bytes (sent as they are) and every blob it references.
#[derive(Debug, Clone)]
pub struct Image {
    pub manifest: Vec<u8>,
    pub media_type: String,
    pub blobs: Vec<Blob>,
    /// Labels for progress (a component name per blob, same order).
    pub labels: Vec<String>,
}

/// One platform's image of an index, with the SBOM to attach to its manifest.
#[derive(Debug, Clone)]
pub struct IndexEntry {
    pub image: Image,
    pub sbom: Option<Vec<u8>>,
    /// `os/arch[/variant]` as the index's descriptor states it (`unknown` without one): a
    /// label for the summary, never sent.
    pub platform: String,
}

/// What is pushed for a multi-platform image: the image index's bytes (sent as they are, by
/// tag) and every manifest it lists.
#[derive(Debug, Clone)]
pub struct IndexImage {
    pub index: Vec<u8>,
    /// The index's media type (`image::INDEX_MEDIA_TYPE` for an OCI image index).
    pub media_type: String,
    pub manifests: Vec<IndexEntry>,
}

/// How to reach and authenticate to the registry.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// The CAs to trust (the system store, `SSL_CERT_FILE`/`SSL_CERT_DIR`, `--ca`).
    pub trust: Trust,
    /// Plain HTTP to a registry that is not on loopback (`--plain-http`).
    pub plain_http: bool,
    pub auth: AuthFiles,
    /// Bounds on every request and on the whole push (tests shorten them).
    pub limits: PushLimits,
    /// `--verify`: read back every blob the registry claims to hold and check its digest.
    pub verify: bool,
    /// `--verbose`: tell which hosts received the credentials.
    pub verbose: bool,
}

/// What a push did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Pushed {
    /// `HOST[:PORT]/REPO:TAG`.
    pub reference: String,
    pub digest: Digest,
    pub blobs_uploaded: usize,
    pub blobs_existing: usize,
    pub blobs_mounted: usize,
    /// Blobs the registry claimed (already there, mounted) read back and checked (`--verify`).
    pub blobs_verified: usize,
    pub bytes_uploaded: u64,
    pub sbom_digest: Option<Digest>,
    /// `referrers-api` or `tag-schema`.
    pub referrers: Option<&'static str>,
    pub seconds: f64,
    /// For an index (`digest` is the index's): each platform's manifest, in the index's order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<PushedManifest>,
}

/// One manifest of a pushed index.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PushedManifest {
    pub platform: String,
    pub digest: Digest,
    pub sbom_digest: Option<Digest>,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("Failed to read the auth file `{path}` ({setting}): {reason}")]
    AuthFile {
        path: String,
        setting: String,
        reason: String,
    },
    #[error("The credential helper `{program}` (named in `{file}`) failed: {reason}")]
    Helper {
        program: String,
        file: String,
        reason: String,
    },
    #[error("Registry `{registry}` asks for credentials and none are configured for it (log in with `podman login`, `docker login` or `skopeo login`, or point REGISTRY_AUTH_FILE at an auth file)")]
    NoCredentials { registry: String },
    #[error("Registry `{registry}` refused the credentials of `{user}` from {source_name} (HTTP {status})")]
    Refused {
        registry: String,
        user: String,
        source_name: String,
        status: u16,
    },
    #[error("Registry `{registry}`: {what} failed: {reason}")]
    Network {
        registry: String,
        what: String,
        reason: String,
    },
    #[error("Registry `{registry}` answered {what} with HTTP {status}: {message}")]
    Status {
        registry: String,
        what: String,
        status: u16,
        message: String,
    },
    #[error("Registry `{registry}`: an upload session of `{repo}` holds `{held}` after a chunk, not `{want}`")]
    ShortSession {
        registry: String,
        repo: String,
        held: String,
        want: String,
    },
    #[error(
        "Registry `{registry}` did not answer {what} within the response deadline of {secs} s"
    )]
    NoAnswer {
        registry: String,
        what: String,
        secs: f64,
    },
    #[error("Registry `{registry}`: {what} moved slower than the minimum rate of {min_rate} B/s over a window of {window} s ({attempts} attempts; last: {measured})")]
    TooSlow {
        registry: String,
        what: String,
        measured: String,
        min_rate: u64,
        window: f64,
        attempts: u32,
    },
    #[error("Registry `{registry}`: the push passed its deadline of {secs} s ({bytes} bytes at the minimum rate of {min_rate} B/s, plus {slack} s) during {what}")]
    Deadline {
        registry: String,
        what: String,
        secs: f64,
        bytes: u64,
        min_rate: u64,
        slack: f64,
    },
    #[error("Registry `{registry}` sends for its token to `{realm}`, which is neither its host nor of its registrable domain, and no auth file holds the credentials of `{user}` from {source_name} for it: they were not sent, and it refused a token without them (HTTP {status})")]
    UntrustedRealm {
        registry: String,
        realm: String,
        user: String,
        source_name: String,
        status: u16,
    },
    #[error("Registry `{registry}` claims to hold the blob `{digest}` in `{repo}`, but {reason} (`--verify`)")]
    Unverified {
        registry: String,
        repo: String,
        digest: String,
        reason: String,
    },
    #[error("Registry `{registry}` broke the protocol: {reason}")]
    Protocol { registry: String, reason: String },
    #[error("Failed to read `{path}` for the push: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Trust(#[from] FetchError),
    /// The SBOM's artifact JSON could not be written.
    #[error(transparent)]
    Artifact(#[from] crate::image::ImageError),
}

impl RegistryError {
    /// Whether starting the blob over may cure it.
    fn is_transient(&self) -> bool {
        match self {
            RegistryError::Network { .. }
            | RegistryError::ShortSession { .. }
            | RegistryError::TooSlow { .. } => true,
            RegistryError::Status { status, .. } => {
                *status >= 500
                    || *status == 408
                    || *status == 429
                    || *status == 404
                    || *status == 416
            }
            _ => false,
        }
    }
}

/// Push `image` to `dest` under `tag`, then `sbom` as its referrer.
pub fn push(
    dest: &RegistryRef,
    tag: &str,
    image: &Image,
    sbom: Option<&[u8]>,
    conn: &Connection,
    cache: &Cache,
    obs: &mut dyn Observer,
) -> Result<Pushed, RegistryError> {
    let parts = Parts {
        manifests: vec![Part {
            image,
            sbom,
            platform: None,
        }],
        index: None,
    };
    push_parts(dest, tag, &parts, conn, cache, obs)
}

/// Push `index` to `dest`: every blob of its manifests (each distinct blob once), each
/// manifest by its digest, the index under `tag`, then each manifest's SBOM as its referrer.
pub fn push_index(
    dest: &RegistryRef,
    tag: &str,
    index: &IndexImage,
    conn: &Connection,
    cache: &Cache,
    obs: &mut dyn Observer,
) -> Result<Pushed, RegistryError> {
    let parts = Parts {
        manifests: index
            .manifests
            .iter()
            .map(|m| Part {
                image: &m.image,
                sbom: m.sbom.as_deref(),
                platform: Some(&m.platform),
            })
            .collect(),
        index: Some((&index.index, &index.media_type)),
    };
    push_parts(dest, tag, &parts, conn, cache, obs)
}

/// What one push sends: the manifests, each with its SBOM, and for an index its bytes.
struct Parts<'a> {
    manifests: Vec<Part<'a>>,
    /// The image index (its bytes and media type) tagged above the manifests; `None`: the one
    /// manifest is tagged.
    index: Option<(&'a [u8], &'a str)>,
}

struct Part<'a> {
    image: &'a Image,
    sbom: Option<&'a [u8]>,
    platform: Option<&'a str>,
}

impl Parts<'_> {
    /// Every blob of every manifest once (the first manifest's label names it), in order.
    fn distinct_blobs(&self) -> (Vec<Blob>, Vec<String>) {
        let mut seen = std::collections::HashSet::new();
        let (mut blobs, mut labels) = (Vec::new(), Vec::new());
        for p in &self.manifests {
            for (i, b) in p.image.blobs.iter().enumerate() {
                if seen.insert(b.digest) {
                    blobs.push(b.clone());
                    labels.push(
                        p.image
                            .labels
                            .get(i)
                            .cloned()
                            .unwrap_or_else(|| b.digest.to_string()),
                    );
                }
            }
        }
        (blobs, labels)
    }
}

/// One session (one ping, one authentication) for everything `parts` sends.
fn push_parts(
    dest: &RegistryRef,
    tag: &str,
    parts: &Parts<'_>,
    conn: &Connection,
    cache: &Cache,
    obs: &mut dyn Observer,
) -> Result<Pushed, RegistryError> {
    let clock = conn.limits.clock;
    let started = clock.now();
    let registry = dest.registry.clone();
    let repo = dest.repo.to_string();
    let credentials = credentials::find(&conn.auth, &registry, &repo)?;
    let agent = agent(&conn.trust, &conn.limits)?;
    let (blobs, labels) = parts.distinct_blobs();
    let budget = budget(started, parts, &blobs, conn);
    let base = choose_base(&agent, dest, conn, &budget)?;
    let session = Session::new(
        agent,
        base,
        registry.clone(),
        repo.clone(),
        credentials,
        conn,
        budget,
    );
    let result = push_in(&session, tag, parts, (&blobs, &labels), conn, cache, obs);
    if conn.verbose {
        for n in session.take_notes() {
            obs.message(&n);
        }
    }
    let mut pushed = result?;
    pushed.seconds = clock.now().saturating_duration_since(started).as_secs_f64();
    Ok(pushed)
}

/// The push's deadline: every byte it may move (the distinct blobs, read back too with
/// `--verify`; the manifests and the index; each SBOM and its artifact) at the minimum rate,
/// plus the slack.
fn budget(started: Instant, parts: &Parts<'_>, blobs: &[Blob], conn: &Connection) -> Budget {
    let mut once: u64 = blobs.iter().map(|b| b.size).sum();
    for p in &parts.manifests {
        let sbom = p.sbom.map_or(0, |s| s.len() as u64 + 2 + 4096);
        once = once
            .saturating_add(sbom)
            .saturating_add(p.image.manifest.len() as u64);
    }
    once = once.saturating_add(parts.index.map_or(0, |(i, _)| i.len() as u64));
    let bytes = if conn.verify {
        once.saturating_mul(2)
    } else {
        once
    };
    Budget {
        deadline: limits::later(started, conn.limits.deadline(bytes)),
        bytes,
    }
}

/// The push over an open session.
fn push_in(
    session: &Session,
    tag: &str,
    parts: &Parts<'_>,
    (blobs, labels): (&[Blob], &[String]),
    conn: &Connection,
    cache: &Cache,
    obs: &mut dyn Observer,
) -> Result<Pushed, RegistryError> {
    let registry = session.registry.clone();
    let repo = session.repo.clone();
    // The ping authenticates before any bytes move: wrong credentials stop the push here.
    let ping = session.send(&Request::new(Method::GET, session.url("/v2/")))?;
    if ping.status != 200 {
        return Err(RegistryError::Status {
            registry,
            what: "GET /v2/".into(),
            status: ping.status,
            message: ping.error_text(),
        });
    }
    let up = Uploader {
        session,
        repo: &repo,
        chunk: CHUNK,
        cache,
        verify: conn.verify,
    };
    let total: u64 = blobs.iter().map(|b| b.size).sum();
    obs.task_start("push", Some(total));
    let outcomes = blobs::push_all(&up, blobs, labels, obs)?;
    let top = match (parts.index, parts.manifests.first()) {
        (Some((index, _)), _) => index,
        (None, Some(p)) => &p.image.manifest[..],
        (None, None) => &[],
    };
    let mut pushed = Pushed {
        reference: format!("{registry}/{repo}:{tag}"),
        digest: Digest::of(top),
        blobs_uploaded: 0,
        blobs_existing: 0,
        blobs_mounted: 0,
        blobs_verified: 0,
        bytes_uploaded: 0,
        sbom_digest: None,
        referrers: None,
        seconds: 0.0,
        manifests: Vec::new(),
    };
    for (blob, o) in blobs.iter().zip(&outcomes) {
        pushed.count(blob.size, *o);
    }
    match parts.index {
        None => {
            for p in &parts.manifests {
                put_manifest(session, tag, &p.image.media_type, &p.image.manifest)?;
            }
        }
        Some((index, media_type)) => {
            // The index's manifests by digest first: a registry refuses an index naming a
            // manifest it does not hold, and the tag moves only when all are there.
            for p in &parts.manifests {
                let digest = Digest::of(&p.image.manifest).to_string();
                put_manifest(session, &digest, &p.image.media_type, &p.image.manifest)?;
            }
            put_manifest(session, tag, media_type, index)?;
        }
    }
    for p in &parts.manifests {
        let digest = Digest::of(&p.image.manifest);
        let mut sbom_digest = None;
        if let Some(sbom) = p.sbom {
            let a = referrers::attach(&up, sbom, &digest, p.image.manifest.len() as u64)?;
            for (size, o) in a.blobs {
                pushed.count(size, o);
            }
            sbom_digest = Some(a.digest);
            pushed.referrers = Some(a.via.as_str());
        }
        match p.platform {
            Some(platform) => pushed.manifests.push(PushedManifest {
                platform: platform.to_string(),
                digest,
                sbom_digest,
            }),
            None => pushed.sbom_digest = sbom_digest,
        }
    }
    if conn.verify {
        pushed.blobs_verified = pushed.blobs_existing + pushed.blobs_mounted;
    }
    obs.task_done(
        "push",
        pushed.bytes_uploaded,
        &format!(
            "{} uploaded, {} already there, {} mounted",
            pushed.blobs_uploaded, pushed.blobs_existing, pushed.blobs_mounted
        ),
    );
    Ok(pushed)
}

/// PUT `bytes` as the manifest `reference` (a tag or a digest) of the session's repository;
/// the digest the registry says it stored must be theirs.
fn put_manifest(
    session: &Session,
    reference: &str,
    media_type: &str,
    bytes: &[u8],
) -> Result<(), RegistryError> {
    let repo = &session.repo;
    let url = session.url(&format!("/v2/{repo}/manifests/{reference}"));
    let resp = session.send(
        &Request::new(Method::PUT, url)
            .header("Content-Type", media_type.to_string())
            .body(Body::Bytes(bytes)),
    )?;
    let shown = if reference.contains(':') {
        format!("{repo}@{reference}")
    } else {
        format!("{repo}:{reference}")
    };
    if resp.status != 201 {
        return Err(RegistryError::Status {
            registry: session.registry.clone(),
            what: format!("the manifest PUT of `{shown}`"),
            status: resp.status,
            message: resp.error_text(),
        });
    }
    let digest = Digest::of(bytes);
    if let Some(d) = resp.header("docker-content-digest") {
        if d != digest.to_string() {
            return Err(RegistryError::Protocol {
                registry: session.registry.clone(),
                reason: format!("it stored the manifest {digest} as {d}"),
            });
        }
    }
    Ok(())
}

impl Pushed {
    fn count(&mut self, size: u64, o: Outcome) {
        match o {
            Outcome::Existing => self.blobs_existing += 1,
            Outcome::Mounted => self.blobs_mounted += 1,
            Outcome::Uploaded => {
                self.blobs_uploaded += 1;
                self.bytes_uploaded += size;
            }
        }
    }
}

/// The agent every request of a push goes through: a connection within a window, a response
/// head within the response deadline, no read or write stalled longer than the longer of the
/// two (the minimum rate over a window is the session's meter; the push's deadline is set per
/// request).
fn agent(trust: &Trust, limits: &PushLimits) -> Result<ureq::Agent, RegistryError> {
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(trust.root_certs()?)
        .build();
    let real = |d| Some(limits.clock.socket(d));
    let stall = limits.window.max(limits.response);
    let config = ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(real(limits.window))
        .timeout_send_request(real(stall))
        .timeout_recv_response(real(limits.response))
        .timeout_per_read(real(stall))
        .timeout_per_write(real(stall))
        .user_agent(concat!("gpuimg/", env!("CARGO_PKG_VERSION")))
        .build();
    Ok(config.into())
}

/// Whether `host` is this machine (`localhost`, 127.0.0.0/8, ::1).
pub(crate) fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `https://…` unless plain HTTP is allowed and the registry speaks it: with `--plain-http`
/// always HTTP; on loopback HTTP when HTTPS fails and `/v2/` answers over HTTP as a registry
/// does (200 or 401).
fn choose_base(
    agent: &ureq::Agent,
    dest: &RegistryRef,
    conn: &Connection,
    budget: &Budget,
) -> Result<String, RegistryError> {
    let https = format!("https://{}", dest.registry);
    let http = format!("http://{}", dest.registry);
    if conn.plain_http {
        return Ok(http);
    }
    let probe = |url: String| {
        let clock = conn.limits.clock;
        let left = budget.deadline.saturating_duration_since(clock.now());
        agent
            .get(url)
            .config()
            .timeout_global(clock.global(left))
            .build()
            .call()
    };
    // A probe that ran out of time says which bound it hit.
    let timed_out = |e: &ureq::Error, what: &str| {
        use ureq::Timeout::{Global, PerRead, RecvResponse};
        let registry = dest.registry.clone();
        let what = what.to_string();
        match e {
            ureq::Error::Timeout(Global) => Some(RegistryError::Deadline {
                registry,
                what,
                secs: limits::secs(conn.limits.deadline(budget.bytes)),
                bytes: budget.bytes,
                min_rate: conn.limits.min_rate,
                slack: limits::secs(conn.limits.slack),
            }),
            ureq::Error::Timeout(RecvResponse | PerRead) => Some(RegistryError::NoAnswer {
                registry,
                what,
                secs: limits::secs(conn.limits.response),
            }),
            _ => None,
        }
    };
    let tls_err = match probe(format!("{https}/v2/")) {
        Ok(_) => return Ok(https),
        Err(e) => e,
    };
    if is_loopback(dest.host()) {
        match probe(format!("{http}/v2/")) {
            Ok(resp) if matches!(resp.status().as_u16(), 200 | 401) => return Ok(http),
            Err(e) => {
                if let Some(err) = timed_out(&e, "GET /v2/ over HTTP") {
                    return Err(err);
                }
            }
            Ok(_) => {}
        }
    }
    if let Some(err) = timed_out(&tls_err, "GET /v2/ over HTTPS") {
        return Err(err);
    }
    Err(RegistryError::Network {
        registry: dest.registry.clone(),
        what: "GET /v2/ over HTTPS".into(),
        reason: tls_err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(bytes: &[u8]) -> Blob {
        Blob {
            digest: Digest::of(bytes),
            size: bytes.len() as u64,
            source: BlobSource::Bytes(bytes.to_vec()),
        }
    }

    fn image(manifest: &[u8], blobs: &[(&[u8], &str)]) -> Image {
        Image {
            manifest: manifest.to_vec(),
            media_type: crate::image::MANIFEST_MEDIA_TYPE.into(),
            blobs: blobs.iter().map(|(b, _)| blob(b)).collect(),
            labels: blobs.iter().map(|(_, l)| l.to_string()).collect(),
        }
    }

    #[test]
    fn an_index_sends_each_shared_blob_once_and_its_budget_counts_every_byte() {
        let amd64 = image(b"m1", &[(b"config-a", "config"), (b"shared", "files")]);
        let arm64 = image(b"m22", &[(b"config-bb", "config"), (b"shared", "app")]);
        let sbom: &[u8] = b"{\"spdxVersion\":\"SPDX-2.3\"}";
        let parts = Parts {
            manifests: vec![
                Part {
                    image: &amd64,
                    sbom: Some(sbom),
                    platform: Some("linux/amd64"),
                },
                Part {
                    image: &arm64,
                    sbom: None,
                    platform: Some("linux/arm64"),
                },
            ],
            index: Some((b"index!", crate::image::INDEX_MEDIA_TYPE)),
        };
        let (blobs, labels) = parts.distinct_blobs();
        let digests: Vec<Digest> = blobs.iter().map(|b| b.digest).collect();
        assert_eq!(
            digests,
            [b"config-a" as &[u8], b"shared", b"config-bb"].map(Digest::of)
        );
        // A shared blob keeps the label of the first manifest that holds it.
        assert_eq!(labels, ["config", "files", "config"]);

        let conn = Connection::default();
        let now = Instant::now();
        let b = budget(now, &parts, &blobs, &conn);
        // Distinct blobs (8 + 6 + 9), manifests (2 + 3), the index (6), the SBOM with its
        // artifact's allowance.
        assert_eq!(b.bytes, 23 + 5 + 6 + sbom.len() as u64 + 2 + 4096);
        let verify = Connection {
            verify: true,
            ..Connection::default()
        };
        assert_eq!(budget(now, &parts, &blobs, &verify).bytes, 2 * b.bytes);
    }

    #[test]
    fn loopback_hosts() {
        for h in ["localhost", "127.0.0.1", "127.3.2.1", "::1"] {
            assert!(is_loopback(h), "{h}");
        }
        for h in ["10.0.0.1", "registry.example", "localhost.example", "::2"] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
