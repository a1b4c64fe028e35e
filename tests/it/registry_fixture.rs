//! The registry and proxy fixtures (tests/common/registry.rs, tests/common/proxy.rs) behave as
//! the push tests rely on, checked with skopeo, a client that already speaks the distribution
//! API: a plain registry takes a push, serves it back and logs every request (a second push
//! uploads nothing); the TLS registry refuses an unknown CA and a wrong password and accepts
//! the right ones (from the fixture's auth.json too); the token registry sends clients to the
//! token server, which issues tokens to the right user only and logs each request; the proxy
//! is transparent below its limit and, past it, stalls a push mid-blob so that killing the
//! client leaves no tag.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::*;

/// A busybox image in an OCI layout (tag `v1`) built by gpuimg; its manifest digest.
fn tiny_layout(sb: &Sandbox) -> (PathBuf, String) {
    busybox_rootfs(sb.path());
    write(&sb.join("app/hello.sh"), "echo hello from the registry\n");
    let p = sb.join("profile.yaml");
    write(
        &p,
        "name: fixture/tiny\nbase:\n  rootfs: ./rootfs\nfiles:\n  - {src: ./app, dst: /opt/app, mode: \"0755\"}\nconfig:\n  entrypoint: [\"/bin/sh\", \"/opt/app/hello.sh\"]\n",
    );
    let layout = sb.join("layout");
    let json = run_ok(
        sb.gpuimg()
            .args(["build", "--json", "-o"])
            .arg(format!("oci:{}:v1", layout.display()))
            .arg(&p),
    );
    (layout, manifest_digest(&json))
}

fn digest_of(bytes: &[u8]) -> String {
    gpuimg_store::digest::Digest::of(bytes).to_string()
}

/// The digest of the one manifest in the OCI layout at `dir`.
fn layout_digest(dir: &Path) -> String {
    let index: serde_json::Value = serde_json::from_str(&read(&dir.join("index.json"))).unwrap();
    assert_eq!(index["manifests"].as_array().unwrap().len(), 1, "{index}");
    index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn plain_registry_takes_a_push_serves_it_back_and_logs_every_request() {
    let sb = Sandbox::new();
    let (layout, digest) = tiny_layout(&sb);
    let reg = Registry::plain();
    assert_eq!(reg.http_get("/v2/", "application/json").0, 200);

    let out = reg.skopeo_push(&layout, "v1", "fixture/plain:v1", None);
    assert!(out.status.success(), "{}", said(&out));
    let raw = reg.inspect_raw("fixture/plain:v1").unwrap();
    assert_eq!(digest_of(&raw), digest);
    let manifest: serde_json::Value = serde_json::from_slice(&raw).unwrap();

    // The log names every request: skopeo asked whether each blob exists, uploaded each, and
    // put the manifest by tag.
    let reqs = reg.requests();
    assert!(reqs.iter().any(|r| r.method == "GET" && r.uri == "/v2/"));
    let blobs = manifest["layers"].as_array().unwrap().len() + 1;
    assert!(
        reg.count("HEAD", "/v2/fixture/plain/blobs/sha256:") >= blobs,
        "{}",
        reg.describe_log()
    );
    let finished = reg
        .uploads_since(0)
        .into_iter()
        .filter(|r| r.method == "PUT" && r.uri.contains("digest="))
        .count();
    assert_eq!(finished, blobs, "{}", reg.describe_log());
    assert_eq!(reg.count("POST", "/v2/fixture/plain/blobs/uploads/"), blobs);
    let put: Vec<Request> = reqs
        .iter()
        .filter(|r| r.method == "PUT" && r.uri.contains("/manifests/"))
        .cloned()
        .collect();
    assert_eq!(
        put,
        vec![Request {
            method: "PUT".into(),
            uri: "/v2/fixture/plain/manifests/v1".into(),
            status: 201
        }]
    );

    // The blobs are served as stored.
    let config = manifest["config"]["digest"].as_str().unwrap();
    let (status, body) = reg.http_get(
        &format!("/v2/fixture/plain/blobs/{config}"),
        "application/octet-stream",
    );
    assert_eq!(status, 200);
    assert_eq!(digest_of(&body), config);

    // A second push of the same image uploads nothing: every blob is there.
    let mark = reg.mark();
    let out = reg.skopeo_push(&layout, "v1", "fixture/plain:v1", None);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(reg.uploads_since(mark), Vec::new());
    assert!(reg.count_since(mark, "HEAD", "/blobs/sha256:") >= blobs);

    // What comes back is the same image.
    let back = sb.join("back");
    reg.skopeo_pull("fixture/plain:v1", &back, "v1");
    assert_eq!(layout_digest(&back), digest);
    assert!(reg.inspect_raw("fixture/plain:nope").is_err());
}

#[test]
fn tls_registry_wants_its_ca_and_the_right_password() {
    let sb = Sandbox::new();
    let (layout, digest) = tiny_layout(&sb);
    let reg = Registry::tls_htpasswd();
    assert!(reg.url().starts_with("https://127.0.0.1:"));
    let pem = read(&reg.ca_pem_path());
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");

    // The system store does not know the fixture's CA.
    let mut c = reg.skopeo();
    c.args(["copy", "--dest-creds"])
        .arg(format!("{USER}:{PASSWORD}"))
        .arg(format!("oci:{}:v1", layout.display()))
        .arg(format!("docker://{}", reg.reference("fixture/tls:v1")));
    let out = run(&mut c);
    assert!(!out.status.success());
    assert!(
        said(&out).contains("certificate signed by unknown authority"),
        "{}",
        said(&out)
    );

    // A wrong password is refused, no credentials too.
    for creds in [Some((USER, "wrong")), None] {
        let out = reg.skopeo_push(&layout, "v1", "fixture/tls:v1", creds);
        assert!(!out.status.success(), "{creds:?}");
        assert!(
            said(&out).to_lowercase().contains("unauthorized"),
            "{}",
            said(&out)
        );
    }
    assert!(reg.count("*", "/v2/") > 0);
    assert!(reg.requests().iter().all(|r| r.status == 401));
    assert!(reg.inspect_raw("fixture/tls:v1").is_err());

    // The right one, from the auth.json the fixture writes, is accepted.
    let auth = reg.auth_json(&sb.join("auth.json"), USER, PASSWORD);
    let mut c = reg.skopeo();
    c.arg("copy")
        .args(reg.skopeo_tls("dest-"))
        .arg("--dest-authfile")
        .arg(&auth)
        .arg(format!("oci:{}:v1", layout.display()))
        .arg(format!("docker://{}", reg.reference("fixture/tls:v1")));
    run_ok(&mut c);
    assert_eq!(
        digest_of(&reg.inspect_raw("fixture/tls:v1").unwrap()),
        digest
    );
    assert_eq!(reg.count("PUT", "/v2/fixture/tls/manifests/v1"), 1);
    let back = sb.join("back");
    reg.skopeo_pull("fixture/tls:v1", &back, "v1");
    assert_eq!(layout_digest(&back), digest);
}

#[test]
fn token_registry_sends_clients_to_the_token_server() {
    let sb = Sandbox::new();
    let (layout, digest) = tiny_layout(&sb);
    let reg = Registry::token();

    // A wrong password gets no token, so no push.
    let out = reg.skopeo_push(&layout, "v1", "fixture/token:v1", Some((USER, "wrong")));
    assert!(!out.status.success());
    let denied = reg.token_requests();
    assert!(!denied.is_empty(), "{}", reg.describe_log());
    assert!(denied.iter().all(|r| r["status"] == 401), "{denied:?}");
    assert!(reg.inspect_raw("fixture/token:v1").is_err());

    // The right one does, scoped to the repository, and the registry takes the push.
    let out = reg.skopeo_push(&layout, "v1", "fixture/token:v1", reg.creds());
    assert!(out.status.success(), "{}", said(&out));
    let served = reg.token_requests();
    let granted: Vec<&serde_json::Value> = served.iter().filter(|r| r["status"] == 200).collect();
    assert!(!granted.is_empty(), "{served:?}");
    assert!(granted
        .iter()
        .all(|r| r["user"] == USER && r["service"] == TOKEN_SERVICE));
    assert!(
        granted
            .iter()
            .any(|r| r["scopes"].as_array().unwrap().iter().any(|s| s
                .as_str()
                .unwrap()
                .starts_with("repository:fixture/token:")
                && s.as_str().unwrap().contains("push"))),
        "{served:?}"
    );
    // The registry challenged first (401) and accepted the bearer token after.
    assert!(reg.requests().iter().any(|r| r.status == 401));
    assert_eq!(reg.count("PUT", "/v2/fixture/token/manifests/v1"), 1);
    assert_eq!(
        digest_of(&reg.inspect_raw("fixture/token:v1").unwrap()),
        digest
    );
}

/// `skopeo copy` of the layout to `docker://HOST_PORT/REPO_TAG` over plain HTTP.
fn skopeo_push_via(
    reg: &Registry,
    layout: &Path,
    host_port: &str,
    repo_tag: &str,
) -> std::process::Command {
    let mut c = reg.skopeo();
    c.args(["copy", "--dest-tls-verify=false"])
        .arg(format!("oci:{}:v1", layout.display()))
        .arg(format!("docker://{host_port}/{repo_tag}"));
    c
}

#[test]
fn proxy_below_its_limit_is_transparent() {
    let sb = Sandbox::new();
    let (layout, digest) = tiny_layout(&sb);
    let reg = Registry::plain();
    let proxy = StallingProxy::start(&reg.host_port(), 1 << 40);
    run_ok(&mut skopeo_push_via(
        &reg,
        &layout,
        &proxy.host_port(),
        "fixture/proxied:v1",
    ));
    assert!(!proxy.is_stalled());
    assert!(proxy.forwarded() > 1_000_000, "{}", proxy.forwarded());
    assert_eq!(
        digest_of(&reg.inspect_raw("fixture/proxied:v1").unwrap()),
        digest
    );
}

#[test]
fn proxy_past_its_limit_stalls_a_push_mid_blob() {
    let sb = Sandbox::new();
    let (layout, _) = tiny_layout(&sb);
    let reg = Registry::plain();
    // The busybox layer is about 1 MB: 256 KiB in, the push is inside it.
    let limit = 256 << 10;
    let proxy = StallingProxy::start(&reg.host_port(), limit);
    let mut child = skopeo_push_via(&reg, &layout, &proxy.host_port(), "fixture/stalled:v1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The stall or skopeo's end, whichever comes first (60 s bound only a hang).
    let stalled = proxy.wait_stalled_or_exit(&child, Duration::from_secs(60));
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert_eq!(
        stalled,
        Some(true),
        "skopeo ended ({status}) or hung before the stall"
    );
    assert_eq!(proxy.forwarded(), limit);
    // The upload began and never finished; no manifest, no tag.
    assert!(reg.count("POST", "/v2/fixture/stalled/blobs/uploads/") >= 1);
    assert_eq!(reg.count("PUT", "/manifests/"), 0, "{}", reg.describe_log());
    assert!(reg.inspect_raw("fixture/stalled:v1").is_err());
    drop(proxy);
}
