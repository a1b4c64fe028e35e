//! `-o registry:HOST[:PORT]/REPO[:TAG]` (and `docker://…`) against a real registry (Debian's
//! docker-registry 2.8, tests/common/registry.rs), checked with skopeo: the pushed manifest is
//! the built one and copies back whole; a second push uploads no blob; TLS needs `--ca` and
//! the right password (a wrong one is exit 2 in one line, nothing pushed); Bearer tokens from
//! a token server; credentials from `$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers`,
//! `$DOCKER_CONFIG`, `~/.docker` and docker-credential helpers (`credHelpers`,
//! `credsStore`); the SBOM as an OCI 1.1 artifact whose `subject` is the image, found
//! through the referrers tag schema (`sha256-<hex>`); a push killed mid-blob leaves no tag and
//! a new push completes; blobs pushed to one repository are mounted into another, and become
//! uploads when the credentials may not read the source repository; `gpuimg push` of a
//! layout or an oci-archive keeps the digest; bad flags and references are refused up front;
//! `--verify` reads back what the registry claims to hold.
//!
//! Against hostile registries (tests/common/fake_registry.rs): credentials go to a token realm
//! only on the registry's host or where an auth file configures them (`--verbose` names the
//! hosts); a registry that never answers, drips, or is busy for ever stops the push at a
//! deadline the error names (limits shortened, as the fetch tests shorten theirs); a registry
//! that claims every blob fails `--verify` naming the blob, and its storage redirect is
//! followed.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;

/// A profile: busybox, an app file, one wheel from a loopback index (so the image has an
/// SBOM: the Python is the one the rootfs's dpkg database names) and, for `big`, a 40 MiB
/// incompressible file (its own large layer).
struct Setup {
    sb: Sandbox,
    profile: PathBuf,
    _index: Server,
}

const DPKG_STATUS: &str = "\
Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u10\n\n\
Package: python3\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-1+b1\n\n\
Package: python3.11\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n\n\
Package: python3.11-minimal\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n\n\
Package: libpython3.11-stdlib\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n";

/// `len` bytes from a seeded xorshift64*: the same every run, and gzip cannot shrink them.
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

impl Setup {
    fn new(big: bool) -> Setup {
        let sb = Sandbox::new();
        busybox_rootfs(sb.path());
        write(&sb.join("rootfs/var/lib/dpkg/status"), DPKG_STATUS);
        write(&sb.join("app/hello.sh"), "echo hello from the registry\n");
        let wheels = [WheelSpec::new("push-demo", "1.0").file("push_demo/__init__.py", "X = 1\n")];
        let index = serve(&wheel_index(sb.path(), &wheels));
        let mut files = String::from("  - {src: ./app, dst: /opt/app, mode: \"0755\"}\n");
        if big {
            std::fs::create_dir_all(sb.join("big")).unwrap();
            std::fs::write(
                sb.join("big/noise.bin"),
                noise(40 << 20, 0x9e37_79b9_7f4a_7c15),
            )
            .unwrap();
            files.push_str("  - {src: ./big, dst: /opt/big}\n");
        }
        let profile = sb.join("profile.yaml");
        write(
            &profile,
            &format!(
                "name: demo/push\nbase:\n  rootfs: ./rootfs\nselftest: {{enabled: false}}\nfiles:\n{files}config:\n  entrypoint: [\"/bin/sh\", \"/opt/app/hello.sh\"]\npython:\n  index: {}/simple/\n  packages: [push-demo]\n",
                index.url
            ),
        );
        Setup {
            sb,
            profile,
            _index: index,
        }
    }

    /// `gpuimg build --json PROFILE -o TARGET EXTRA…`, not yet run.
    fn push_cmd(&self, target: &str, extra: &[&str]) -> Command {
        let mut c = self.sb.gpuimg();
        c.args(["build", "--json"])
            .arg(&self.profile)
            .arg("-o")
            .arg(target)
            .args(extra);
        c
    }

    /// `push_cmd` run to its end with `env` set.
    fn push(&self, target: &str, extra: &[&str], env: &[(&str, &Path)]) -> Output {
        let mut c = self.push_cmd(target, extra);
        for (k, v) in env {
            c.env(k, v);
        }
        run(&mut c)
    }

    /// `push`, which must succeed; its `--json` summary.
    fn push_ok(&self, target: &str, extra: &[&str], env: &[(&str, &Path)]) -> serde_json::Value {
        let out = self.push(target, extra, env);
        assert!(out.status.success(), "{}", said(&out));
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("--json printed no JSON ({e}): {}", said(&out)))
    }
}

fn said(out: &Output) -> String {
    format!(
        "({})\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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

/// The image's blobs from `build --json`: config and layers.
fn image_blobs(v: &serde_json::Value) -> Vec<String> {
    let mut out = vec![v["config_digest"].as_str().unwrap().to_string()];
    for l in v["layers"].as_array().unwrap() {
        out.push(l["digest"].as_str().unwrap().to_string());
    }
    out
}

fn num(v: &serde_json::Value, key: &str) -> u64 {
    v["push"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no number `push.{key}` in {v}"))
}

/// The pushed manifest is the built one, by digest and by bytes read back.
fn assert_pushed(reg: &Registry, repo_tag: &str, v: &serde_json::Value) {
    let digest = v["manifest_digest"].as_str().unwrap();
    assert_eq!(v["push"]["digest"], digest, "{v}");
    assert_eq!(v["push"]["reference"], reg.reference(repo_tag).as_str());
    let raw = reg
        .inspect_raw(repo_tag)
        .unwrap_or_else(|e| panic!("{repo_tag} is not there: {e}"));
    assert_eq!(digest_of(&raw), digest);
}

/// Exit 2 with exactly one line on stderr, an `error:`.
fn assert_refused_in_one_line(out: &Output) {
    assert_eq!(out.status.code(), Some(2), "{}", said(out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{}", said(out));
    assert!(err.starts_with("error:"), "{}", said(out));
}

#[test]
fn push_to_a_plain_registry_round_trips_and_a_second_push_uploads_nothing() {
    let s = Setup::new(false);
    let reg = Registry::plain();
    let v = s.push_ok(
        &format!("registry:{}", reg.reference("demo/push:v1")),
        &[],
        &[],
    );
    assert_pushed(&reg, "demo/push:v1", &v);
    let digest = v["manifest_digest"].as_str().unwrap().to_string();
    let blobs = image_blobs(&v);
    assert_eq!(
        v["layers"].as_array().unwrap().last().unwrap()["component"],
        "sbom",
        "{v}"
    );
    // Every image blob went up (the SBOM artifact's two blobs may count too), none was there.
    let uploaded = num(&v, "blobs_uploaded");
    assert!(
        (blobs.len() as u64..=blobs.len() as u64 + 2).contains(&uploaded),
        "{v}"
    );
    assert_eq!(num(&v, "blobs_existing"), 0, "{v}");
    assert_eq!(num(&v, "blobs_mounted"), 0, "{v}");
    let layer_bytes: u64 = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["size"].as_u64().unwrap())
        .sum();
    assert!(num(&v, "bytes_uploaded") > layer_bytes, "{v}");
    for b in &blobs {
        assert!(
            reg.requests().iter().any(|r| r.method == "PUT"
                && r.status == 201
                && r.decoded_uri().starts_with("/v2/demo/push/blobs/uploads/")
                && r.decoded_uri().contains(&format!("digest={b}"))),
            "{b} was not uploaded:\n{}",
            reg.describe_log()
        );
    }
    assert_eq!(reg.count("PUT", "/v2/demo/push/manifests/v1"), 1);

    // skopeo copies it back whole: the same manifest.
    let back = s.sb.join("back");
    reg.skopeo_pull("demo/push:v1", &back, "v1");
    assert_eq!(layout_digest(&back), digest);

    // The same image again (written `docker://` this time): every blob is there, nothing is
    // uploaded; only the manifest may be put again.
    let mark = reg.mark();
    let again = s.push_ok(
        &format!("docker://{}", reg.reference("demo/push:v1")),
        &[],
        &[],
    );
    assert_pushed(&reg, "demo/push:v1", &again);
    assert_eq!(again["manifest_digest"], digest.as_str());
    assert_eq!(num(&again, "blobs_uploaded"), 0, "{again}");
    assert_eq!(num(&again, "bytes_uploaded"), 0, "{again}");
    assert_eq!(num(&again, "blobs_mounted"), 0, "{again}");
    assert!(
        num(&again, "blobs_existing") >= blobs.len() as u64,
        "{again}"
    );
    assert_eq!(
        reg.uploads_since(mark),
        Vec::new(),
        "{}",
        reg.describe_log()
    );

    // `--verify` reads back every blob the registry says it has: all of them check out.
    let mark = reg.mark();
    let checked = s.push_ok(
        &format!("registry:{}", reg.reference("demo/push:v1")),
        &["--verify"],
        &[],
    );
    assert_eq!(
        num(&checked, "blobs_verified"),
        num(&checked, "blobs_existing"),
        "{checked}"
    );
    let since = reg.requests_since(mark);
    for b in &blobs {
        assert!(
            since.iter().any(|r| r.method == "GET"
                && r.status == 200
                && r.decoded_uri() == format!("/v2/demo/push/blobs/{b}")),
            "{b} was not read back:\n{}",
            reg.describe_log()
        );
    }
}

#[test]
fn push_over_tls_needs_the_ca_and_the_right_password() {
    let s = Setup::new(false);
    let reg = Registry::tls_htpasswd();
    let target = format!("registry:{}", reg.reference("demo/push:v1"));
    let auth = reg.auth_json(&s.sb.join("auth.json"), USER, PASSWORD);
    let ca = reg.ca_pem_path();
    let ca = ca.to_str().unwrap();
    let env = [("REGISTRY_AUTH_FILE", auth.as_path())];

    // The system store does not know the fixture's CA: refused, nothing pushed.
    let out = s.push(&target, &[], &env);
    assert!(!out.status.success(), "{}", said(&out));
    assert_eq!(reg.count("PUT", "/manifests/"), 0);

    // With it, and the password from $REGISTRY_AUTH_FILE, the push works.
    let v = s.push_ok(&target, &["--ca", ca], &env);
    assert_pushed(&reg, "demo/push:v1", &v);
    let back = s.sb.join("back");
    reg.skopeo_pull("demo/push:v1", &back, "v1");
    assert_eq!(layout_digest(&back), v["manifest_digest"].as_str().unwrap());

    // A wrong password: exit 2, one line, nothing pushed.
    let bad = reg.auth_json(&s.sb.join("bad.json"), USER, "wrong");
    let mark = reg.mark();
    let out = s.push(
        &format!("registry:{}", reg.reference("demo/denied:v1")),
        &["--ca", ca, "-q"],
        &[("REGISTRY_AUTH_FILE", bad.as_path())],
    );
    assert_refused_in_one_line(&out);
    // (Checked before skopeo's own requests below join the log.)
    assert!(
        reg.requests_since(mark).iter().all(|r| r.status == 401),
        "{}",
        reg.describe_log()
    );
    assert!(reg.inspect_raw("demo/denied:v1").is_err());
}

#[test]
fn push_with_token_auth_gets_its_token_from_the_realm() {
    let s = Setup::new(false);
    let reg = Registry::token();
    let ca = reg.ca_pem_path();
    let ca = ca.to_str().unwrap();
    // Credentials where containers tools keep them at run time.
    let run_dir = s.sb.join("run");
    reg.auth_json(&run_dir.join("containers/auth.json"), USER, PASSWORD);
    let v = s.push_ok(
        &format!("registry:{}", reg.reference("demo/push:v1")),
        &["--ca", ca],
        &[("XDG_RUNTIME_DIR", run_dir.as_path())],
    );
    assert_pushed(&reg, "demo/push:v1", &v);

    // The registry challenged, the token server granted push on the repository to our user.
    assert!(reg.requests().iter().any(|r| r.status == 401));
    let served = reg.token_requests();
    let granted: Vec<&serde_json::Value> = served.iter().filter(|r| r["status"] == 200).collect();
    assert!(!granted.is_empty(), "{served:?}");
    assert!(
        granted
            .iter()
            .all(|r| r["user"] == USER && r["service"] == TOKEN_SERVICE),
        "{served:?}"
    );
    let scopes: Vec<&str> = granted
        .iter()
        .flat_map(|r| r["scopes"].as_array().unwrap())
        .flat_map(|s| s.as_str().unwrap().split(' '))
        .collect();
    assert!(
        scopes
            .iter()
            .any(|s| s.starts_with("repository:demo/push:") && s.contains("push")),
        "{served:?}"
    );

    // A wrong password gets no token: exit 2, one line, nothing pushed.
    let bad = reg.auth_json(&s.sb.join("bad.json"), USER, "wrong");
    let out = s.push(
        &format!("registry:{}", reg.reference("demo/denied:v1")),
        &["--ca", ca, "-q"],
        &[("REGISTRY_AUTH_FILE", bad.as_path())],
    );
    assert_refused_in_one_line(&out);
    assert!(reg.inspect_raw("demo/denied:v1").is_err());
    assert!(reg.token_requests().iter().any(|r| r["status"] == 401));
}

#[test]
fn the_sbom_is_a_referrer_of_the_image_through_the_tag_schema() {
    let s = Setup::new(false);
    let reg = Registry::plain();
    let v = s.push_ok(
        &format!("registry:{}", reg.reference("demo/sbom:v1")),
        &[],
        &[],
    );
    assert_pushed(&reg, "demo/sbom:v1", &v);
    let digest = v["manifest_digest"].as_str().unwrap();
    let image_raw = reg.inspect_raw("demo/sbom:v1").unwrap();
    let hex = digest.strip_prefix("sha256:").unwrap();

    // registry 2.8 has no referrers API: the fallback index is tagged `sha256-<hex>`.
    let index_raw = reg
        .inspect_raw(&format!("demo/sbom:sha256-{hex}"))
        .unwrap_or_else(|e| panic!("no referrers tag: {e}\n{}", reg.describe_log()));
    let index: serde_json::Value = serde_json::from_slice(&index_raw).unwrap();
    assert_eq!(index["schemaVersion"], 2, "{index}");
    assert_eq!(
        index["mediaType"], "application/vnd.oci.image.index.v1+json",
        "{index}"
    );
    let entry = &index["manifests"][0];
    assert_eq!(entry["artifactType"], "application/spdx+json", "{index}");
    assert_eq!(
        entry["mediaType"], "application/vnd.oci.image.manifest.v1+json",
        "{index}"
    );
    let sbom_digest = entry["digest"].as_str().unwrap();
    assert_eq!(v["push"]["sbom_digest"], sbom_digest, "{v}");

    // The artifact manifest names the image as its subject and carries the SPDX document.
    let art_raw = reg
        .inspect_raw(&format!("demo/sbom@{sbom_digest}"))
        .unwrap();
    assert_eq!(digest_of(&art_raw), sbom_digest);
    assert_eq!(entry["size"].as_u64(), Some(art_raw.len() as u64));
    let art: serde_json::Value = serde_json::from_slice(&art_raw).unwrap();
    assert_eq!(art["subject"]["digest"], digest, "{art}");
    assert_eq!(
        art["subject"]["size"].as_u64(),
        Some(image_raw.len() as u64)
    );
    assert_eq!(
        art["subject"]["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    let art_type = art["artifactType"]
        .as_str()
        .or(art["config"]["mediaType"].as_str());
    assert_eq!(art_type, Some("application/spdx+json"), "{art}");
    let layer = &art["layers"][0];
    assert_eq!(layer["mediaType"], "application/spdx+json", "{art}");
    let layer_digest = layer["digest"].as_str().unwrap();
    let (status, doc) = reg.http_get(
        &format!("/v2/demo/sbom/blobs/{layer_digest}"),
        "application/spdx+json",
    );
    assert_eq!(status, 200);
    assert_eq!(digest_of(&doc), layer_digest);
    let spdx: serde_json::Value = serde_json::from_slice(&doc).unwrap();
    assert_eq!(spdx["spdxVersion"], "SPDX-2.3");

    // It is the document inside the image (the last layer's).
    let sbom_layer = v["layers"].as_array().unwrap().last().unwrap();
    assert_eq!(sbom_layer["component"], "sbom", "{v}");
    let (status, gz) = reg.http_get(
        &format!(
            "/v2/demo/sbom/blobs/{}",
            sbom_layer["digest"].as_str().unwrap()
        ),
        "application/octet-stream",
    );
    assert_eq!(status, 200);
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(&gz[..]));
    let inside = tar
        .entries()
        .unwrap()
        .map(|e| e.unwrap())
        .find(|e| {
            e.path()
                .unwrap()
                .ends_with("usr/share/gpuimg/sbom.spdx.json")
        })
        .map(|mut e| {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut b).unwrap();
            b
        })
        .expect("the sbom layer holds /usr/share/gpuimg/sbom.spdx.json");
    assert_eq!(inside, doc);
}

#[test]
fn a_push_killed_mid_blob_leaves_no_tag_and_the_next_push_completes() {
    let s = Setup::new(true);
    let reg = Registry::plain();
    // The large layer is about 40 MiB; other blobs are about 1 MiB together: 20 MiB in, the
    // push is inside the large one.
    let limit = 20 << 20;
    let proxy = StallingProxy::start(&reg.host_port(), limit);
    let log = |n: &str| std::fs::File::create(s.sb.join(n)).unwrap();
    let mut cmd = s.push_cmd(&format!("registry:{}/demo/big:v1", proxy.host_port()), &[]);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(log("killed.out"))
        .stderr(log("killed.err"))
        .spawn()
        .unwrap_or_else(|e| panic!("failed to start `{}`: {e}", command_line(&cmd)));
    // The stall or the push's end, whichever comes first (300 s bound only a hang).
    match proxy.wait_stalled_or_exit(&child, Duration::from_secs(300)) {
        Some(true) => {}
        Some(false) => panic!(
            "gpuimg ended ({}) before the proxy stalled ({} bytes through):\n{}\n{}",
            child.wait().unwrap(),
            proxy.forwarded(),
            read(&s.sb.join("killed.out")),
            read(&s.sb.join("killed.err"))
        ),
        None => {
            let _ = child.kill();
            panic!("the push did not reach {limit} bytes in 300 s");
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(proxy.forwarded(), limit);
    drop(proxy);

    // A blob upload had begun; no manifest went up, so there is no tag.
    assert!(
        reg.count("POST", "/v2/demo/big/blobs/uploads/") >= 1,
        "{}",
        reg.describe_log()
    );
    assert_eq!(reg.count("PUT", "/manifests/"), 0, "{}", reg.describe_log());
    assert!(reg.inspect_raw("demo/big:v1").is_err());

    // Pushed again, directly: complete, and it copies back whole.
    let v = s.push_ok(
        &format!("registry:{}", reg.reference("demo/big:v1")),
        &[],
        &[],
    );
    assert_pushed(&reg, "demo/big:v1", &v);
    let back = s.sb.join("back");
    reg.skopeo_pull("demo/big:v1", &back, "v1");
    assert_eq!(layout_digest(&back), v["manifest_digest"].as_str().unwrap());
}

#[test]
fn blobs_pushed_to_one_repository_are_mounted_into_another() {
    let s = Setup::new(false);
    let reg = Registry::plain();
    let one = s.push_ok(&format!("registry:{}", reg.reference("a/one:v1")), &[], &[]);
    assert_pushed(&reg, "a/one:v1", &one);
    let mark = reg.mark();
    let two = s.push_ok(&format!("registry:{}", reg.reference("a/two:v1")), &[], &[]);
    assert_pushed(&reg, "a/two:v1", &two);
    let blobs = image_blobs(&two);
    assert!(num(&two, "blobs_mounted") >= blobs.len() as u64, "{two}");
    assert_eq!(num(&two, "blobs_uploaded"), 0, "{two}");
    assert_eq!(num(&two, "bytes_uploaded"), 0, "{two}");
    let since = reg.requests_since(mark);
    let mounted = |r: &Request, b: &str| {
        let uri = r.decoded_uri();
        r.method == "POST"
            && r.status == 201
            && uri.starts_with("/v2/a/two/blobs/uploads/?")
            && uri.contains(&format!("mount={b}"))
            && uri.contains("from=a/one")
    };
    for b in &blobs {
        assert!(
            since.iter().any(|r| mounted(r, b)),
            "{b} was not mounted:\n{}",
            reg.describe_log()
        );
    }
    // Nothing was uploaded into a/two: every upload request was a mount that succeeded.
    let others: Vec<&Request> = since
        .iter()
        .filter(|r| {
            r.is_upload() && !(r.method == "POST" && r.status == 201 && r.uri.contains("mount="))
        })
        .collect();
    assert!(others.is_empty(), "{others:#?}");
}

/// `docker-credential-fixture` in `dir`: logs `ACTION HOST` to `dir/helper.log` and answers
/// `get` with the fixture's credentials.
fn credential_helper(dir: &Path) -> PathBuf {
    let script = dir.join("docker-credential-fixture");
    write(
        &script,
        &format!(
            "#!/bin/sh\nread -r host\nprintf '%s %s\\n' \"$1\" \"$host\" >> '{log}'\n[ \"$1\" = get ] || exit 1\nprintf '{{\"ServerURL\":\"%s\",\"Username\":\"{USER}\",\"Secret\":\"{PASSWORD}\"}}\\n' \"$host\"\n",
            log = dir.join("helper.log").display()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir.join("helper.log")
}

#[test]
fn credentials_from_a_docker_credential_helper() {
    let s = Setup::new(false);
    let reg = Registry::tls_htpasswd();
    let ca = reg.ca_pem_path();
    let ca = ca.to_str().unwrap();
    let bin = s.sb.join("helper-bin");
    let helper_log = credential_helper(&bin);
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let path = PathBuf::from(path);

    // `credHelpers` in ~/.docker/config.json (the sandbox's home).
    write(
        &s.sb.join("home/.docker/config.json"),
        &serde_json::json!({"credHelpers": {reg.host_port(): "fixture"}}).to_string(),
    );
    let v = s.push_ok(
        &format!("registry:{}", reg.reference("demo/helper:v1")),
        &["--ca", ca],
        &[("PATH", path.as_path())],
    );
    assert_pushed(&reg, "demo/helper:v1", &v);
    let calls = read(&helper_log);
    assert!(
        calls
            .lines()
            .any(|l| l.starts_with("get ") && l.contains(&reg.host_port())),
        "{calls}"
    );

    // `credsStore` in $DOCKER_CONFIG/config.json.
    let docker_config = s.sb.join("docker-config");
    write(
        &docker_config.join("config.json"),
        &serde_json::json!({"credsStore": "fixture"}).to_string(),
    );
    std::fs::remove_file(&helper_log).unwrap();
    let v = s.push_ok(
        &format!("registry:{}", reg.reference("demo/store:v1")),
        &["--ca", ca],
        &[
            ("PATH", path.as_path()),
            ("DOCKER_CONFIG", docker_config.as_path()),
        ],
    );
    assert_pushed(&reg, "demo/store:v1", &v);
    assert!(
        read(&helper_log).starts_with("get "),
        "{}",
        read(&helper_log)
    );
}

#[test]
fn push_of_a_layout_or_an_archive_from_disk_keeps_the_digest() {
    let s = Setup::new(false);
    let reg = Registry::plain();
    let layout = s.sb.join("out");
    let sbom = s.sb.join("sbom.spdx.json");
    let out = run(s
        .sb
        .gpuimg()
        .args(["build", "--json"])
        .arg(&s.profile)
        .arg("-o")
        .arg(format!("oci:{}:v7", layout.display()))
        .arg("--sbom")
        .arg(&sbom));
    assert!(out.status.success(), "{}", said(&out));
    let built: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let digest = built["manifest_digest"].as_str().unwrap().to_string();

    // A layout: the tag defaults to the layout's (v7), the SBOM given is attached.
    let out = run(s
        .sb
        .gpuimg()
        .args(["push", "--json"])
        .arg(format!("oci:{}:v7", layout.display()))
        .arg(format!("registry:{}", reg.reference("disk/layout")))
        .arg("--sbom")
        .arg(&sbom));
    assert!(out.status.success(), "{}", said(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["push"]["digest"], digest.as_str(), "{v}");
    assert_eq!(
        v["push"]["reference"],
        reg.reference("disk/layout:v7").as_str()
    );
    let raw = reg.inspect_raw("disk/layout:v7").expect("the tag exists");
    assert_eq!(digest_of(&raw), digest);
    let sbom_digest = v["push"]["sbom_digest"].as_str().unwrap();
    let hex = digest.trim_start_matches("sha256:");
    let index = reg
        .inspect_raw(&format!("disk/layout:sha256-{hex}"))
        .expect("the referrers index exists");
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    assert_eq!(index["manifests"][0]["digest"], sbom_digest, "{index}");

    // An oci-archive, to another tag of the docker:// spelling; same bytes, same digest.
    let archive = s.sb.join("img.tar");
    let out = run(s
        .sb
        .gpuimg()
        .arg("build")
        .arg(&s.profile)
        .arg("-o")
        .arg(format!("oci-archive:{}:v7", archive.display())));
    assert!(out.status.success(), "{}", said(&out));
    let out = run(s
        .sb
        .gpuimg()
        .args(["push", "--json"])
        .arg(format!("oci-archive:{}", archive.display()))
        .arg(format!("docker://{}", reg.reference("disk/archive:a1"))));
    assert!(out.status.success(), "{}", said(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["push"]["digest"], digest.as_str(), "{v}");
    assert_eq!(
        digest_of(&reg.inspect_raw("disk/archive:a1").unwrap()),
        digest
    );
    let back = s.sb.join("back");
    reg.skopeo_pull("disk/archive:a1", &back, "a1");
    assert_eq!(layout_digest(&back), digest);
}

#[test]
fn registry_flags_and_references_are_checked_before_anything_runs() {
    let s = Setup::new(false);
    for (args, says) in [
        (
            vec!["-o", "oci:out", "--plain-http"],
            "`--plain-http` applies to a registry output",
        ),
        (
            vec!["-o", "oci:out", "--ca", "x.pem"],
            "`--ca` applies to a registry output",
        ),
        (
            vec!["-o", "oci:out", "--verify"],
            "`--verify` applies to a registry output",
        ),
        (
            vec!["-o", "registry:demo/push:v1"],
            "is not a registry host",
        ),
        (
            vec!["-o", "docker://127.0.0.1:5/demo/push@sha256:00"],
            "not a digest",
        ),
        (
            vec!["-o", "registry:127.0.0.1:5/demo/push:v1", "--tag", "v2"],
            "disagree",
        ),
        (
            vec![
                "-o",
                "registry:127.0.0.1:5/demo/push:v1",
                "--ca",
                "missing.pem",
            ],
            "is not a readable file",
        ),
    ] {
        let out = run(s.sb.gpuimg().arg("build").arg(&s.profile).args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", said(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert_error(&err, &[s.sb.path()]);
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{err}"
        );
    }
    assert!(!s.sb.join("out").exists());
}

#[test]
fn a_mount_the_credentials_may_not_read_becomes_an_upload() {
    let s = Setup::new(false);
    let reg = Registry::token();
    let ca = reg.ca_pem_path();
    let ca = ca.to_str().unwrap();
    let auth = reg.auth_json(&s.sb.join("auth.json"), USER, PASSWORD);
    let env = [("REGISTRY_AUTH_FILE", auth.as_path())];
    let one = s.push_ok(
        &format!("registry:{}", reg.reference("a/one:v1")),
        &["--ca", ca],
        &env,
    );
    assert_pushed(&reg, "a/one:v1", &one);
    // The token server stops granting pull on a/one: the mounts from it are refused.
    reg.deny_pull("a/one");
    let mark = reg.mark();
    let two = s.push_ok(
        &format!("registry:{}", reg.reference("a/two:v1")),
        &["--ca", ca],
        &env,
    );
    assert_pushed(&reg, "a/two:v1", &two);
    assert_eq!(num(&two, "blobs_mounted"), 0, "{two}");
    assert!(
        num(&two, "blobs_uploaded") >= image_blobs(&two).len() as u64,
        "{two}"
    );
    let since = reg.requests_since(mark);
    assert!(
        since
            .iter()
            .any(|r| r.method == "POST" && r.status == 401 && r.uri.contains("mount=")),
        "no mount was tried and refused:\n{}",
        reg.describe_log()
    );
    let back = s.sb.join("back");
    reg.skopeo_pull("a/two:v1", &back, "v1");
    assert_eq!(
        layout_digest(&back),
        two["manifest_digest"].as_str().unwrap()
    );
}

// Hostile registries (tests/common/fake_registry.rs, hostile_push.rs): where the credentials
// may go, the deadlines of every request and of the whole push, and `--verify`.

/// Limits that never fire in these tests unless a test shortens one of them.
fn roomy() -> gpuimg_oci::registry::PushLimits {
    gpuimg_oci::registry::PushLimits {
        response: Duration::from_secs(60),
        window: Duration::from_secs(60),
        min_rate: 1,
        slack: Duration::from_secs(120),
        attempts: 2,
        backoff: Duration::from_millis(10),
        clock: gpuimg_fetch::Clock::default(),
    }
}

/// `limits` on a manual clock of their own (debug builds): it moves only by the registry's
/// drip and the backoff asked for, and a stalled socket waits `socket` of real time before it
/// counts as its bound passing.
#[cfg(debug_assertions)]
fn on_manual_clock(
    limits: gpuimg_oci::registry::PushLimits,
    clock: &'static gpuimg_fetch::ManualClock,
) -> gpuimg_oci::registry::PushLimits {
    gpuimg_oci::registry::PushLimits {
        clock: gpuimg_fetch::Clock::manual(clock),
        ..limits
    }
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// A registry on 127.0.0.1 sending clients for tokens to `realm`'s `/token`.
fn sends_to(realm: &FakeRegistry) -> FakeRegistry {
    FakeRegistry::start(
        "127.0.0.1",
        claims_everything(Some(format!("{}/token", realm.url())), |_| {
            Answer::status(404)
        }),
    )
}

#[test]
fn registry_credentials_go_to_a_token_realm_only_on_its_host_its_domain_or_where_configured() {
    let sb = Sandbox::new();
    let creds = basic("pusher", "s3cret");
    // A realm on another host (127.0.0.2) that gives anyone a token: asked without them.
    let foreign = FakeRegistry::start("127.0.0.2", grants_tokens);
    let reg = sends_to(&foreign);
    let auth = auth_file(&sb.join("a.json"), &[&reg.host_port()], "pusher", "s3cret");
    let (r, told) = push_tiny(&reg.host_port(), &connection(roomy(), Some(&auth)));
    let pushed = r.unwrap_or_else(|e| panic!("{e}\n{}", reg.describe()));
    assert_eq!(pushed.blobs_existing, 2, "{pushed:?}");
    let asked = foreign.requests();
    assert!(!asked.is_empty(), "the realm was never asked");
    assert!(
        asked.iter().all(|r| r.header("authorization").is_none()),
        "the foreign realm received credentials: {asked:?}"
    );
    let note = format!(
        "the token realm `{}` got no credentials",
        foreign.host_port()
    );
    assert!(
        told.lines().iter().any(|l| l.contains(&note)),
        "{:?}",
        told.lines()
    );

    // `gpuimg push --verbose` says so too.
    let layout = tiny_layout(&sb.join("layout"));
    let out = run(sb
        .gpuimg()
        .args(["push", "--plain-http", "--verbose"])
        .arg(format!("oci:{}:v1", layout.display()))
        .arg(format!("registry:{}/demo/tiny:v1", reg.host_port()))
        .env("REGISTRY_AUTH_FILE", &auth));
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&note),
        "{}",
        said(&out)
    );

    // A foreign realm that gives no token without credentials: one line saying why.
    let strict = FakeRegistry::start("127.0.0.2", grants_tokens_to_credentials);
    let reg = sends_to(&strict);
    let auth = auth_file(&sb.join("b.json"), &[&reg.host_port()], "pusher", "s3cret");
    let e = push_tiny(&reg.host_port(), &connection(roomy(), Some(&auth)))
        .0
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("`{}`", strict.host_port())) && e.contains("they were not sent"),
        "{e}"
    );
    assert!(strict
        .requests()
        .iter()
        .all(|r| r.header("authorization").is_none()));
    assert!(
        reg.requests().iter().all(|r| r.method != "PUT"),
        "{}",
        reg.describe()
    );

    // The same credentials configured for the realm's host in the auth file: they go.
    let hosts = [reg.host_port(), strict.host_port()];
    let auth = auth_file(
        &sb.join("c.json"),
        &[&hosts[0], &hosts[1]],
        "pusher",
        "s3cret",
    );
    let (r, told) = push_tiny(&reg.host_port(), &connection(roomy(), Some(&auth)));
    r.unwrap_or_else(|e| panic!("{e}"));
    assert!(strict
        .requests()
        .iter()
        .any(|r| r.header("authorization") == Some(creds.as_str())));
    let note = format!(
        "sent to the token realm `{}` (configured for them in",
        strict.host_port()
    );
    assert!(
        told.lines().iter().any(|l| l.contains(&note)),
        "{:?}",
        told.lines()
    );

    // A realm on the registry's own host (another port): they go.
    let own = FakeRegistry::start("127.0.0.1", grants_tokens_to_credentials);
    let reg = sends_to(&own);
    let auth = auth_file(&sb.join("d.json"), &[&reg.host_port()], "pusher", "s3cret");
    let (r, told) = push_tiny(&reg.host_port(), &connection(roomy(), Some(&auth)));
    r.unwrap_or_else(|e| panic!("{e}"));
    assert!(own
        .requests()
        .iter()
        .all(|r| r.header("authorization") == Some(creds.as_str())));
    let note = format!(
        "sent to the token realm `{}` (the registry's own host)",
        own.host_port()
    );
    assert!(
        told.lines().iter().any(|l| l.contains(&note)),
        "{:?}",
        told.lines()
    );
}

#[test]
#[cfg(debug_assertions)]
fn a_registry_that_never_answers_or_drips_stops_the_push_at_a_deadline_it_names() {
    use gpuimg_fetch::ManualClock;
    use gpuimg_oci::registry::PushLimits;
    // Real time passes only where a socket stalls on purpose (the silent registry): 0.3 s.
    let stall = Duration::from_millis(300);
    let no_stall = Duration::from_secs(30);
    let fails = |reg: &FakeRegistry, limits: PushLimits| match push_tiny(
        &reg.host_port(),
        &connection(limits, None),
    )
    .0
    {
        Ok(p) => panic!("the push succeeded: {p:?}\n{}", reg.describe()),
        Err(e) => e.to_string(),
    };
    // Never answers: the response deadline, and the request is not sent again.
    let silent = FakeRegistry::start("127.0.0.1", |_| Answer::Silent);
    let e = fails(
        &silent,
        on_manual_clock(
            PushLimits {
                response: Duration::from_millis(300),
                window: Duration::from_millis(300),
                ..roomy()
            },
            ManualClock::leak(stall),
        ),
    );
    assert!(
        e.contains("did not answer GET /v2/ within the response deadline of 0.3 s"),
        "{e}"
    );
    assert_eq!(silent.requests().len(), 1, "{}", silent.describe());
    // Reached without `--plain-http` (HTTPS first, then HTTP as it is on loopback): the same.
    let mut conn = connection(
        on_manual_clock(
            PushLimits {
                response: Duration::from_millis(300),
                ..roomy()
            },
            ManualClock::leak(stall),
        ),
        None,
    );
    conn.plain_http = false;
    let e = push_tiny(&silent.host_port(), &conn)
        .0
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("did not answer GET /v2/ over HTTP within the response deadline of 0.3 s"),
        "{e}"
    );

    // Answers a byte every 20 ms (of the push's clock, in step with its reads): under the
    // minimum rate over a window.
    let dripping = |clock: &'static ManualClock| {
        FakeRegistry::start("127.0.0.1", move |_: &Req| Answer::Drip {
            status: 200,
            len: 1 << 20,
            every: Duration::from_millis(20),
            clock,
        })
    };
    let clock = ManualClock::leak(no_stall);
    let e = fails(
        &dripping(clock),
        on_manual_clock(
            PushLimits {
                window: Duration::from_millis(400),
                min_rate: 1000,
                ..roomy()
            },
            clock,
        ),
    );
    assert!(
        e.contains("GET /v2/ moved slower than the minimum rate of 1000 B/s over a window of 0.4 s (2 attempts"),
        "{e}"
    );

    // The same drip, with a rate it keeps up: the push's own deadline (its bytes at the
    // minimum rate, nothing at this rate, plus the slack) ends it.
    let fast_enough = PushLimits {
        min_rate: 1 << 30,
        slack: Duration::from_millis(500),
        ..roomy()
    };
    let clock = ManualClock::leak(no_stall);
    let e = fails(&dripping(clock), on_manual_clock(fast_enough, clock));
    assert!(e.contains("the push passed its deadline of 0.5 s"), "{e}");
    assert!(e.contains("plus 0.5 s) during GET /v2/"), "{e}");
    // Stopped at the deadline (26 bytes at 20 ms), not by the window's minute.
    assert!(
        clock.elapsed() < Duration::from_secs(1),
        "{:?}",
        clock.elapsed()
    );

    // Busy (503) for ever, with retries unbounded: the same deadline. The waits asked for
    // double from 5 ms; the next (320 ms) would end past the deadline, so it is not waited.
    let busy = FakeRegistry::start("127.0.0.1", |_| Answer::status(503));
    let clock = ManualClock::leak(no_stall);
    let e = fails(
        &busy,
        on_manual_clock(
            PushLimits {
                attempts: u32::MAX,
                backoff: Duration::from_millis(5),
                ..fast_enough
            },
            clock,
        ),
    );
    assert!(e.contains("the push passed its deadline of 0.5 s"), "{e}");
    let waits: Vec<Duration> = [5, 10, 20, 40, 80, 160]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    let asked: Vec<Duration> = clock.slept().into_iter().filter(|d| !d.is_zero()).collect();
    assert_eq!(asked, waits);
    assert_eq!(
        busy.requests().len(),
        waits.len() + 1,
        "{}",
        busy.describe()
    );
}

#[test]
#[cfg(debug_assertions)]
fn a_registry_that_stops_reading_an_upload_stops_it_at_the_minimum_rate() {
    use gpuimg_oci::registry::{Blob, BlobSource, PushLimits};
    let dir = tempfile::tempdir().unwrap();
    // More than the loopback socket buffers hold: the sender must wait for the registry.
    let data = noise(32 << 20, 7);
    let path = dir.path().join("big.bin");
    std::fs::write(&path, &data).unwrap();
    let mut image = tiny_image();
    image.blobs = vec![Blob {
        digest: gpuimg_store::digest::Digest::of(&data),
        size: data.len() as u64,
        source: BlobSource::File { path, offset: 0 },
    }];
    image.labels = vec!["big".into()];
    // No blob is there; an upload session opens; its PUT's body is never read.
    let reg = FakeRegistry::swallowing(
        "127.0.0.1",
        |r| match (r.method.as_str(), r.path()) {
            ("GET", "/v2/") => Answer::body(200, "{}"),
            ("POST", _) => Answer::status(202).header("Location", "/upload/1"),
            _ => Answer::status(404),
        },
        |r| r.method == "PUT",
    );
    // The registry never reads: the upload's socket stalls, for 0.5 s of real time, which
    // counts as the window passing on the push's clock.
    let limits = on_manual_clock(
        PushLimits {
            response: Duration::from_millis(500),
            window: Duration::from_millis(500),
            min_rate: 1 << 20,
            ..roomy()
        },
        gpuimg_fetch::ManualClock::leak(Duration::from_millis(500)),
    );
    let e = match push_image(&reg.host_port(), &connection(limits, None), &image).0 {
        Ok(p) => panic!("the push succeeded: {p:?}"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("PUT /upload/1 moved slower than the minimum rate of 1048576 B/s over a window of 0.5 s"),
        "{e}"
    );
    let puts = reg.requests().iter().filter(|r| r.method == "PUT").count();
    assert!(puts >= 1, "{}", reg.describe());
    assert!(reg
        .requests()
        .iter()
        .all(|r| !r.path().contains("/manifests/")));
}

#[test]
fn push_verify_reads_back_every_blob_a_registry_claims_to_hold() {
    let sb = Sandbox::new();
    let layout = tiny_layout(&sb.join("layout"));
    let layer = digest_of(LAYER);
    let config = digest_of(CONFIG);
    // HEAD 200 for every blob; the layer's GET gives other bytes of its length, the config's
    // a 404.
    let lie_about = layer.clone();
    let liar = FakeRegistry::start(
        "127.0.0.1",
        claims_everything(None, move |r| {
            if r.path().ends_with(&lie_about) {
                Answer::body(200, vec![b'x'; LAYER.len()])
            } else {
                Answer::status(404)
            }
        }),
    );
    let push = |reg: &FakeRegistry, extra: &[&str]| {
        run(sb
            .gpuimg()
            .args(["push", "--plain-http"])
            .args(extra)
            .arg(format!("oci:{}:v1", layout.display()))
            .arg(format!("registry:{}/demo/tiny:v1", reg.host_port())))
    };
    // Without `--verify`: "pushed", with nothing uploaded.
    let out = push(&liar, &["--json"]);
    assert!(out.status.success(), "{}", said(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(num(&v, "blobs_existing"), 2, "{v}");
    assert_eq!(num(&v, "blobs_uploaded"), 0, "{v}");
    assert_eq!(num(&v, "blobs_verified"), 0, "{v}");

    // With it: exit 2 in one line naming the blob; no manifest was put.
    let before = liar.requests().len();
    let out = push(&liar, &["--verify", "-q"]);
    assert_refused_in_one_line(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("claims to hold the blob"), "{err}");
    assert!(
        (err.contains(&layer) && err.contains("digest is"))
            || (err.contains(&config) && err.contains("HTTP 404")),
        "{err}"
    );
    let since = &liar.requests()[before..];
    assert!(
        since.iter().all(|r| r.method != "PUT"),
        "{}",
        liar.describe()
    );
    assert!(since
        .iter()
        .any(|r| r.method == "GET" && r.path().contains("/blobs/")));

    // A registry that sends each GET to its storage on another host, which has the bytes:
    // followed, checked, pushed.
    let storage = FakeRegistry::start("127.0.0.2", |r| {
        match [CONFIG, LAYER]
            .into_iter()
            .find(|b| r.path().ends_with(&digest_of(b)))
        {
            Some(b) => Answer::body(200, b.to_vec()),
            None => Answer::status(404),
        }
    });
    let store = storage.url();
    let honest = FakeRegistry::start(
        "127.0.0.1",
        claims_everything(None, move |r| {
            Answer::status(307).header("Location", format!("{store}/store{}", r.path()))
        }),
    );
    let out = push(&honest, &["--verify", "--json"]);
    assert!(out.status.success(), "{}", said(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(num(&v, "blobs_verified"), 2, "{v}");
    assert_eq!(storage.requests().len(), 2, "{}", storage.describe());
}
