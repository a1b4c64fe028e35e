//! A real OCI registry for push tests: Debian's `docker-registry` (distribution 2.8) on a
//! loopback port it picks itself and names in its `listening on` line (the fixture's readiness
//! signal; the token server likewise prints its port), with its configuration, storage and logs in a temporary directory, killed
//! when dropped. Three modes: plain HTTP without auth; TLS (a CA and a server certificate for
//! 127.0.0.1/localhost made with the `openssl` CLI) with htpasswd (bcrypt) auth; TLS with
//! token auth against tests/fixtures/registry_token_server.py (RS256 JWTs carrying the
//! signing certificate as `x5c`, trusted through `rootcertbundle`), itself served over TLS
//! with the same CA.
//!
//! The registry's access log (its stdout: `HOST - - [TIME] "METHOD URI HTTP/1.1" STATUS SIZE
//! "REFERER" "AGENT"`, one line per request, written before the answer is finished) is what
//! `requests`, `count` and `uploads_since` read; the token server logs one JSON line per
//! request (`token_requests`). `skopeo*` helpers talk to the registry with the right TLS
//! flags, an empty auth file of their own (the host's never leaks in) and, where the mode
//! needs them, the fixture's credentials ([`USER`], [`PASSWORD`]).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::cmd::{exits_within, first_line, require, run, run_ok};
use super::fs::write;

/// The user the authenticated modes accept.
pub const USER: &str = "pusher";
/// [`USER`]'s password.
pub const PASSWORD: &str = "s3cret-pass";
/// The token mode's `service` (the JWT's audience).
pub const TOKEN_SERVICE: &str = "gpuimg-test-registry";
/// The token mode's issuer.
pub const TOKEN_ISSUER: &str = "gpuimg-test-token-issuer";

/// How the registry is reached and who it lets in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistryMode {
    /// Plain HTTP, no auth.
    Plain,
    /// HTTPS with the fixture's CA, Basic auth from an htpasswd file.
    TlsHtpasswd,
    /// HTTPS with the fixture's CA, Bearer tokens from the fixture token server (HTTPS too).
    Token,
}

/// One request of the registry's access log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// Path and query, as the client sent them.
    pub uri: String,
    pub status: u16,
}

impl Request {
    /// The URI with its percent-escapes decoded (`mount=sha256%3A…` → `mount=sha256:…`).
    pub fn decoded_uri(&self) -> String {
        let b = self.uri.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
            match (b[i], hex) {
                (b'%', Some(h)) => {
                    out.push(h);
                    i += 3;
                }
                (c, _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// A blob upload request: POST, PATCH or PUT under `/blobs/uploads/`.
    pub fn is_upload(&self) -> bool {
        ["POST", "PATCH", "PUT"].contains(&self.method.as_str())
            && self.uri.contains("/blobs/uploads/")
    }
}

/// A running registry; killed (with its token server) when dropped.
pub struct Registry {
    mode: RegistryMode,
    dir: tempfile::TempDir,
    port: u16,
    registry: Child,
    token_server: Option<Child>,
}

impl Registry {
    /// Plain HTTP, no auth.
    pub fn plain() -> Registry {
        Registry::start(RegistryMode::Plain)
    }

    /// HTTPS (the fixture's CA) with htpasswd auth for [`USER`]/[`PASSWORD`].
    pub fn tls_htpasswd() -> Registry {
        Registry::start(RegistryMode::TlsHtpasswd)
    }

    /// HTTPS (the fixture's CA) with token auth; the token server grants [`USER`] (with
    /// [`PASSWORD`]) every scope it asks for.
    pub fn token() -> Registry {
        Registry::start(RegistryMode::Token)
    }

    pub fn start(mode: RegistryMode) -> Registry {
        require("docker-registry");
        let dir = tempfile::Builder::new()
            .prefix("gpuimg-registry-")
            .tempdir()
            .unwrap_or_else(|e| panic!("failed to create the registry's directory: {e}"));
        let d = dir.path();
        write(&d.join("no-auth.json"), "{\"auths\":{}}\n");
        if mode != RegistryMode::Plain {
            make_tls(d);
        }
        let mut token_server = None;
        let auth = match mode {
            RegistryMode::Plain => String::new(),
            RegistryMode::TlsHtpasswd => {
                require("htpasswd");
                // Cost 4, the least bcrypt allows: the registry checks it on every request.
                let line = run_ok(
                    Command::new("htpasswd").args(["-n", "-b", "-B", "-C", "4", USER, PASSWORD]),
                );
                write(&d.join("htpasswd"), line.trim());
                format!(
                    "auth:\n  htpasswd:\n    realm: gpuimg-test\n    path: {}\n",
                    d.join("htpasswd").display()
                )
            }
            RegistryMode::Token => {
                let (child, port) = start_token_server(d);
                token_server = Some(child);
                format!(
                    "auth:\n  token:\n    realm: https://127.0.0.1:{port}/token\n    service: {TOKEN_SERVICE}\n    issuer: {TOKEN_ISSUER}\n    rootcertbundle: {}\n",
                    d.join("token.crt").display()
                )
            }
        };
        let tls = if mode == RegistryMode::Plain {
            String::new()
        } else {
            format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                d.join("server.crt").display(),
                d.join("server.key").display()
            )
        };
        // Port 0: the registry binds a free port itself, then names it (`listening on
        // 127.0.0.1:PORT`, `, tls` after it in the TLS modes): no port to race for, and the
        // line, printed once the socket listens, is the readiness signal.
        let config = format!(
            "version: 0.1\nlog:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: false\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n  maintenance:\n    uploadpurging:\n      enabled: false\n\
             http:\n  addr: 127.0.0.1:0\n  secret: gpuimg-test-secret\n{tls}{auth}",
            d.join("data").display()
        );
        write(&d.join("config.yml"), &config);
        let file = |n: &str| std::fs::File::create(d.join(n)).unwrap();
        let mut child = tied(
            Command::new("docker-registry")
                .arg("serve")
                .arg(d.join("config.yml")),
        )
        .stdin(Stdio::piped())
        .stdout(file("access.log"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("failed to start docker-registry: {e}"));
        let stderr = child.stderr.take().expect("piped stderr");
        const LISTENING: &str = "msg=\"listening on 127.0.0.1:";
        let line = first_line(
            stderr,
            file("registry.log"),
            |l| l.contains(LISTENING),
            Duration::from_secs(60),
        );
        let port = line.as_deref().and_then(|l| {
            let rest = &l[l.find(LISTENING)? + LISTENING.len()..];
            rest[..rest.find(|c: char| !c.is_ascii_digit())?]
                .parse()
                .ok()
        });
        let Some(port) = port else {
            end(&mut child);
            let log = std::fs::read_to_string(d.join("registry.log")).unwrap_or_default();
            panic!("docker-registry did not say where it listens ({line:?}):\n{log}");
        };
        Registry {
            mode,
            dir,
            port,
            registry: child,
            token_server,
        }
    }

    pub fn mode(&self) -> RegistryMode {
        self.mode
    }

    /// The registry's directory (configuration, certificates, storage, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `127.0.0.1:PORT`: the registry part of a reference.
    pub fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        let scheme = if self.mode == RegistryMode::Plain {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}", self.host_port())
    }

    /// `127.0.0.1:PORT/REPO_TAG` (`repo_tag`: `a/b:tag` or `a/b@sha256:…`).
    pub fn reference(&self, repo_tag: &str) -> String {
        format!("{}/{repo_tag}", self.host_port())
    }

    /// The CA (PEM) that signed the registry's and the token server's certificates.
    pub fn ca_pem_path(&self) -> PathBuf {
        assert!(
            self.mode != RegistryMode::Plain,
            "a plain HTTP registry has no CA"
        );
        self.dir().join("certs/ca.crt")
    }

    /// A directory holding only the CA as `ca.crt` (skopeo's `--cert-dir`).
    pub fn cert_dir(&self) -> PathBuf {
        self.ca_pem_path().parent().unwrap().to_path_buf()
    }

    /// The credentials the mode needs: `Some((USER, PASSWORD))` unless plain.
    pub fn creds(&self) -> Option<(&'static str, &'static str)> {
        (self.mode != RegistryMode::Plain).then_some((USER, PASSWORD))
    }

    /// Write a containers `auth.json` (`{"auths": {"127.0.0.1:PORT": {"auth": base64}}}`)
    /// with `user`/`password` for this registry to `path`; returns `path`.
    pub fn auth_json(&self, path: &Path, user: &str, password: &str) -> PathBuf {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let doc = serde_json::json!({"auths": {self.host_port(): {"auth": auth}}});
        write(path, &format!("{doc}\n"));
        path.to_path_buf()
    }

    /// The access log's lines, one per request so far (a line still being written is left
    /// out).
    pub fn log_lines(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir().join("access.log")).unwrap_or_default();
        let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        complete.lines().map(str::to_string).collect()
    }

    /// The registry's own log (stderr: start-up, errors, one `response completed` per request),
    /// for failure messages.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir().join("registry.log")).unwrap_or_default()
    }

    /// Every request so far, in the order they finished.
    pub fn requests(&self) -> Vec<Request> {
        self.log_lines()
            .iter()
            .map(|l| {
                parse_access_line(l).unwrap_or_else(|| panic!("unexpected access log line: {l}"))
            })
            .collect()
    }

    /// How many requests so far: pass it to `*_since` to look only at later ones.
    pub fn mark(&self) -> usize {
        self.requests().len()
    }

    /// The requests after `mark`.
    pub fn requests_since(&self, mark: usize) -> Vec<Request> {
        self.requests().into_iter().skip(mark).collect()
    }

    /// Requests with `method` (`*`: any) whose URI contains `contains`.
    pub fn count(&self, method: &str, contains: &str) -> usize {
        self.count_since(0, method, contains)
    }

    /// [`Registry::count`] over the requests after `mark`.
    pub fn count_since(&self, mark: usize, method: &str, contains: &str) -> usize {
        self.requests_since(mark)
            .iter()
            .filter(|r| (method == "*" || r.method == method) && r.uri.contains(contains))
            .count()
    }

    /// Blob upload requests (POST, PATCH, PUT under `/blobs/uploads/`) after `mark`.
    pub fn uploads_since(&self, mark: usize) -> Vec<Request> {
        self.requests_since(mark)
            .into_iter()
            .filter(Request::is_upload)
            .collect()
    }

    /// The access log as one text, for failure messages.
    pub fn describe_log(&self) -> String {
        self.log_lines().join("\n")
    }

    /// From now on the token server never grants `pull` on `repo` (token mode only).
    pub fn deny_pull(&self, repo: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir().join("deny-pull"))
            .unwrap();
        writeln!(f, "{repo}").unwrap();
    }

    /// The token server's log: one JSON object per request (`method`, `path`, `user`,
    /// `service`, `scopes` as sent, `grant_type` for POST, `status`). Empty unless token mode.
    pub fn token_requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir().join("token-requests.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// `skopeo --insecure-policy` reading only an empty auth file of the registry's.
    pub fn skopeo(&self) -> Command {
        require("skopeo");
        let mut c = Command::new("skopeo");
        c.env("REGISTRY_AUTH_FILE", self.dir().join("no-auth.json"))
            .env_remove("DOCKER_CONFIG")
            .arg("--insecure-policy");
        c
    }

    /// skopeo's TLS flags for this registry, with `prefix` (`""`, `"src-"`, `"dest-"`):
    /// `--tls-verify=false` for plain HTTP, `--cert-dir` with the CA for TLS.
    pub fn skopeo_tls(&self, prefix: &str) -> Vec<String> {
        match self.mode {
            RegistryMode::Plain => vec![format!("--{prefix}tls-verify=false")],
            _ => vec![
                format!("--{prefix}cert-dir"),
                self.cert_dir().display().to_string(),
            ],
        }
    }

    /// skopeo's credential flag with `prefix`, for `creds` (none for `None`).
    pub fn skopeo_creds(prefix: &str, creds: Option<(&str, &str)>) -> Vec<String> {
        match creds {
            Some((u, p)) => vec![format!("--{prefix}creds"), format!("{u}:{p}")],
            None => Vec::new(),
        }
    }

    /// `skopeo copy oci:LAYOUT:TAG docker://HOST:PORT/REPO_TAG` with `creds`.
    pub fn skopeo_push(
        &self,
        layout: &Path,
        tag: &str,
        repo_tag: &str,
        creds: Option<(&str, &str)>,
    ) -> Output {
        let mut c = self.skopeo();
        c.arg("copy")
            .args(self.skopeo_tls("dest-"))
            .args(Self::skopeo_creds("dest-", creds))
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}", self.reference(repo_tag)));
        run(&mut c)
    }

    /// `skopeo copy docker://HOST:PORT/REPO_TAG oci:LAYOUT:TAG` with the mode's credentials;
    /// must succeed.
    pub fn skopeo_pull(&self, repo_tag: &str, layout: &Path, tag: &str) {
        let mut c = self.skopeo();
        c.arg("copy")
            .args(self.skopeo_tls("src-"))
            .args(Self::skopeo_creds("src-", self.creds()))
            .arg(format!("docker://{}", self.reference(repo_tag)))
            .arg(format!("oci:{}:{tag}", layout.display()));
        run_ok(&mut c);
    }

    /// `skopeo inspect --raw docker://HOST:PORT/REPO_TAG` with the mode's credentials: the
    /// manifest's bytes as stored, or skopeo's stderr when it fails.
    pub fn inspect_raw(&self, repo_tag: &str) -> Result<Vec<u8>, String> {
        let mut c = self.skopeo();
        c.args(["inspect", "--raw"])
            .args(self.skopeo_tls(""))
            .args(Self::skopeo_creds("", self.creds()))
            .arg(format!("docker://{}", self.reference(repo_tag)));
        let out = run(&mut c);
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// GET `path` (e.g. `/v2/REPO/blobs/sha256:…`) from a plain HTTP registry with `accept`;
    /// returns the status and the body.
    pub fn http_get(&self, path: &str, accept: &str) -> (u16, Vec<u8>) {
        assert_eq!(
            self.mode,
            RegistryMode::Plain,
            "http_get speaks plain HTTP only"
        );
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n",
            self.host_port()
        )
        .unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP answer head");
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let body = raw[split + 4..].to_vec();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line: {head}"));
        let chunked = head.lines().any(|l| {
            let l = l.to_ascii_lowercase();
            l.starts_with("transfer-encoding:") && l.contains("chunked")
        });
        (status, if chunked { dechunk(&body) } else { body })
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        for c in std::iter::once(&mut self.registry).chain(self.token_server.as_mut()) {
            end(c);
        }
    }
}

/// `cmd` (whose stdin must be piped) run so that it ends when its stdin closes: when the
/// fixture is dropped, and also when the test process dies without dropping it (killed, or
/// a test binary's timeout), so that no registry outlives its test. A shell starts it in the
/// background, waits for it (so the shell's exit status is the server's), and kills it once
/// a reader of the shell's stdin sees end of file.
fn tied(cmd: &Command) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("exec 3<&0; \"$@\" </dev/null & c=$!; (read -r _ <&3; kill $c 2>/dev/null) & wait $c")
        .arg("sh")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    c
}

/// End a child started with a piped stdin that it watches: close the stdin, give it 5 s to
/// go (waiting for its exit, not polling), then kill it.
fn end(c: &mut Child) {
    drop(c.stdin.take());
    if !exits_within(c, Duration::from_secs(5)) {
        let _ = c.kill();
    }
    let _ = c.wait();
}

/// `HOST - - [TIME] "METHOD URI PROTO" STATUS SIZE "REFERER" "AGENT"` → the request.
pub fn parse_access_line(line: &str) -> Option<Request> {
    let (_, rest) = line.split_once('"')?;
    let (request, rest) = rest.split_once('"')?;
    let mut words = request.split(' ');
    let method = words.next()?.to_string();
    let uri = words.next()?.to_string();
    let status = rest.split_whitespace().next()?.parse().ok()?;
    Some(Request {
        method,
        uri,
        status,
    })
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size_text = String::from_utf8_lossy(&body[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        body = &body[eol + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

/// A port nobody listens on now (the registry binds it right after).
fn openssl(dir: &Path, args: &[&str]) {
    run_ok(Command::new("openssl").current_dir(dir).args(args));
}

/// In `dir`: `certs/ca.crt` (a CA, P-256), `server.crt`/`server.key` (for IP 127.0.0.1 and
/// localhost, signed by the CA), and the token signer `token.crt`/`token.key` (RSA 2048,
/// self-signed: RS256 needs RSA).
fn make_tls(dir: &Path) {
    require("openssl");
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec!["req", "-x509", "-new", "-nodes"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "certs/ca.crt",
        "-days",
        "3",
        "-subj",
        "/CN=gpuimg test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &ca);
    let mut csr = vec!["req", "-new", "-nodes"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(dir, &csr);
    write(
        &dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n\
         subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n",
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "certs/ca.crt",
            "-CAkey",
            "ca.key",
            "-set_serial",
            "2",
            "-days",
            "3",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-nodes",
            "-newkey",
            "rsa:2048",
            "-keyout",
            "token.key",
            "-out",
            "token.crt",
            "-days",
            "3",
            "-subj",
            "/CN=gpuimg test token signer",
        ],
    );
}

/// A Python 3 that imports `cryptography` (Debian's python3-cryptography lives in
/// /usr/bin/python3's path, which another `python3` first on PATH may not see).
pub fn python_with_cryptography() -> &'static str {
    static FOUND: OnceLock<&'static str> = OnceLock::new();
    FOUND.get_or_init(|| {
        for p in ["/usr/bin/python3", "python3"] {
            let ok = Command::new(p)
                .args(["-c", "import cryptography"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return p;
            }
        }
        panic!(
            "no python3 imports `cryptography` (the registry token server needs it): run `bash scripts/install-deps.sh` (tests never skip)"
        )
    })
}

/// Start the token server (HTTPS with the fixture's server certificate) in `dir`; returns it
/// and its port.
fn start_token_server(dir: &Path) -> (Child, u16) {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/registry_token_server.py");
    let out = std::fs::File::create(dir.join("token-server.out")).unwrap();
    let mut child = Command::new(python_with_cryptography())
        .arg(&script)
        .arg("--signing-key")
        .arg(dir.join("token.key"))
        .arg("--signing-cert")
        .arg(dir.join("token.crt"))
        .arg("--tls-cert")
        .arg(dir.join("server.crt"))
        .arg("--tls-key")
        .arg(dir.join("server.key"))
        .args(["--issuer", TOKEN_ISSUER, "--service", TOKEN_SERVICE])
        .args(["--user", USER, "--password", PASSWORD])
        .arg("--log")
        .arg(dir.join("token-requests.log"))
        .arg("--deny-pull-file")
        .arg(dir.join("deny-pull"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(out.try_clone().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("failed to start the token server: {e}"));
    // Its first line on stdout, printed once it listens, is its port.
    let stdout = child.stdout.take().expect("piped stdout");
    let line = first_line(stdout, out, |_| true, Duration::from_secs(60));
    match line.as_deref().map(|l| l.trim().parse()) {
        Some(Ok(port)) => (child, port),
        _ => {
            end(&mut child);
            panic!(
                "the token server did not give its port ({line:?}):\n{}",
                std::fs::read_to_string(dir.join("token-server.out")).unwrap_or_default()
            );
        }
    }
}
