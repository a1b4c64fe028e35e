//! What the push tests against a [`FakeRegistry`] share: a tiny image (a config and one layer,
//! in memory for the library's `registry::push`, or written as an OCI layout for `gpuimg
//! push`), a library push with chosen `PushLimits` that records what it told its observer, an
//! auth file, and the handler of a registry that answers only what a push needs (a Bearer
//! challenge naming a realm, `HEAD` 200 for every blob, 201 for the manifest).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gpuimg_oci::registry::{self, Blob, BlobSource, Connection, PushLimits, Pushed, RegistryError};
use gpuimg_store::digest::Digest;

use super::fake_registry::{Answer, Req};
use super::fs::write;

/// The blobs of the tiny image: its config and its one layer.
pub const CONFIG: &[u8] = b"{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";
pub const LAYER: &[u8] = b"not really a layer, but the registry never looks";

/// The tiny image's manifest.
pub fn tiny_manifest() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": Digest::of(CONFIG).to_string(),
            "size": CONFIG.len(),
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": Digest::of(LAYER).to_string(),
            "size": LAYER.len(),
        }],
    }))
    .unwrap()
}

/// The tiny image, in memory.
pub fn tiny_image() -> registry::Image {
    let blob = |b: &[u8]| Blob {
        digest: Digest::of(b),
        size: b.len() as u64,
        source: BlobSource::Bytes(b.to_vec()),
    };
    registry::Image {
        manifest: tiny_manifest(),
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
        blobs: vec![blob(CONFIG), blob(LAYER)],
        labels: vec!["config".into(), "layer".into()],
    }
}

/// The tiny image as an OCI layout at `dir`, tagged `v1`; returns `dir`.
pub fn tiny_layout(dir: &Path) -> PathBuf {
    let manifest = tiny_manifest();
    for b in [CONFIG, LAYER, &manifest[..]] {
        let p = dir.join("blobs/sha256").join(Digest::of(b).hex());
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b).unwrap();
    }
    write(
        &dir.join("oci-layout"),
        "{\"imageLayoutVersion\":\"1.0.0\"}",
    );
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": Digest::of(&manifest).to_string(),
            "size": manifest.len(),
            "annotations": {"org.opencontainers.image.ref.name": "v1"},
        }],
    });
    write(&dir.join("index.json"), &index.to_string());
    dir.to_path_buf()
}

/// An auth file at `path` holding `user:password` for each of `hosts`; returns `path`.
pub fn auth_file(path: &Path, hosts: &[&str], user: &str, password: &str) -> PathBuf {
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let auths: serde_json::Map<String, serde_json::Value> = hosts
        .iter()
        .map(|h| (h.to_string(), serde_json::json!({ "auth": auth })))
        .collect();
    write(path, &serde_json::json!({ "auths": auths }).to_string());
    path.to_path_buf()
}

/// What a push told its observer (messages and warnings).
#[derive(Default, Clone)]
pub struct Told(pub Arc<Mutex<Vec<String>>>);

impl Told {
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl gpuimg_fetch::observe::Observer for Told {
    fn message(&mut self, text: &str) {
        self.0.lock().unwrap().push(text.to_string());
    }
    fn warn(&mut self, text: &str) {
        self.0.lock().unwrap().push(format!("warning: {text}"));
    }
    fn task_start(&mut self, _: &str, _: Option<u64>) {}
    fn task_progress(&mut self, _: u64) {}
    fn task_done(&mut self, _: &str, _: u64, _: &str) {}
}

/// A plain-HTTP connection with `limits`, the auth file `auth` (if any), `--verbose`.
pub fn connection(limits: PushLimits, auth: Option<&Path>) -> Connection {
    Connection {
        plain_http: true,
        auth: registry::AuthFiles {
            files: auth
                .map(|p| (p.to_path_buf(), "REGISTRY_AUTH_FILE".to_string()))
                .into_iter()
                .collect(),
            helper_dirs: Vec::new(),
        },
        limits,
        verbose: true,
        ..Connection::default()
    }
}

/// `registry::push` of the tiny image to `HOST_PORT/demo/tiny:v1` over `conn`; what it told.
pub fn push_tiny(host_port: &str, conn: &Connection) -> (Result<Pushed, RegistryError>, Told) {
    push_image(host_port, conn, &tiny_image())
}

/// `registry::push` of `image` to `HOST_PORT/demo/tiny:v1` over `conn`; what it told.
pub fn push_image(
    host_port: &str,
    conn: &Connection,
    image: &registry::Image,
) -> (Result<Pushed, RegistryError>, Told) {
    let dest =
        gpuimg_oci::reference::RegistryRef::parse(&format!("registry:{host_port}/demo/tiny:v1"))
            .unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = gpuimg_store::cache::Cache::open(cache_dir.path()).unwrap();
    let mut told = Told::default();
    let r = registry::push(&dest, "v1", image, None, conn, &cache, &mut told);
    (r, told)
}

/// A registry that wants a Bearer token from `realm` (any token will do), says every blob is
/// there already (`HEAD` 200), takes the manifest, and answers a blob's GET with `get`.
pub fn claims_everything(
    realm: Option<String>,
    get: impl Fn(&Req) -> Answer + Send + Sync + 'static,
) -> impl Fn(&Req) -> Answer + Send + Sync + 'static {
    move |r: &Req| {
        let bearer = r
            .header("authorization")
            .is_some_and(|a| a.starts_with("Bearer "));
        if let (Some(realm), false) = (&realm, bearer) {
            return Answer::status(401).header(
                "WWW-Authenticate",
                format!("Bearer realm=\"{realm}\",service=\"fake\""),
            );
        }
        match (r.method.as_str(), r.path()) {
            ("GET", "/v2/") => Answer::body(200, "{}"),
            ("HEAD", p) if p.contains("/blobs/") => Answer::status(200),
            ("GET", p) if p.contains("/blobs/") => get(r),
            ("PUT", p) if p.contains("/manifests/") => Answer::status(201),
            _ => Answer::status(404),
        }
    }
}

/// A token server: every request gets a token (with credentials or without).
pub fn grants_tokens(_: &Req) -> Answer {
    Answer::body(200, "{\"token\":\"fake-token\"}")
}

/// A token server that refuses anyone without credentials.
pub fn grants_tokens_to_credentials(r: &Req) -> Answer {
    match r.header("authorization") {
        Some(_) => grants_tokens(r),
        None => Answer::status(401),
    }
}
