//! `gpuimg push` of an image index (issue 37, item 5) against the real registry
//! (tests/common/registry.rs), checked with skopeo: the tag is the index, byte for byte; every
//! manifest is put by its digest; a blob the platforms share is uploaded once; each
//! `--sbom PLATFORM=FILE` is the referrer of its own platform's manifest; `skopeo copy
//! --override-arch` takes each platform back with its digest; a second push uploads nothing;
//! an oci-archive of the index pushes the same. An index gpuimg cannot push whole (an index
//! inside it, a missing blob) and an SBOM it cannot place are refused up front, in one line.
//!
//! The two-platform image is a fixture: two single-platform builds (`platform: linux/amd64`,
//! `platform: linux/arm64`, data files only, so nothing of the wrong machine) joined here into
//! one layout whose tag names an image index.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use serde_json::{json, Value};

const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// One platform's build: its layout (tagged `v1`), manifest digest and SBOM file.
struct Built {
    layout: PathBuf,
    digest: String,
    sbom: PathBuf,
    /// The config and layer digests.
    blobs: Vec<String>,
}

/// Two single-platform images and the index layout joining them.
struct Setup {
    sb: Sandbox,
    amd64: Built,
    arm64: Built,
    /// The layout whose tag `v1` names the index.
    layout: PathBuf,
    index: Vec<u8>,
}

impl Setup {
    fn new() -> Setup {
        let sb = Sandbox::new();
        // The same data files in both: a layer the platforms share byte for byte.
        write(&sb.join("app/data.txt"), "shared by every platform\n");
        write(&sb.join("app/more/table.csv"), "a,b\n1,2\n");
        let amd64 = build(&sb, "amd64");
        let arm64 = build(&sb, "arm64");
        let layout = sb.join("multi");
        let index = join_index(&[&amd64.layout, &arm64.layout], &layout, "v1");
        Setup {
            sb,
            amd64,
            arm64,
            layout,
            index,
        }
    }

    fn index_digest(&self) -> String {
        digest_of(&self.index)
    }

    /// `gpuimg push --json SOURCE registry:DEST EXTRA…`, run.
    fn push(&self, source: &str, dest: &str, extra: &[&str]) -> Output {
        run(self
            .sb
            .gpuimg()
            .args(["push", "--json", source])
            .arg(format!("registry:{dest}"))
            .args(extra))
    }

    /// [`Setup::push`], which must succeed; its `--json` summary.
    fn push_ok(&self, source: &str, dest: &str, extra: &[&str]) -> Value {
        let out = self.push(source, dest, extra);
        assert!(out.status.success(), "{}", said(&out));
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("--json printed no JSON ({e}): {}", said(&out)))
    }

    /// Both SBOMs, as `--sbom PLATFORM=FILE` arguments.
    fn sbom_args(&self) -> Vec<String> {
        vec![
            "--sbom".into(),
            format!("linux/amd64={}", self.amd64.sbom.display()),
            "--sbom".into(),
            format!("linux/arm64={}", self.arm64.sbom.display()),
        ]
    }
}

/// Build an image of data files for `linux/<arch>` into `<sandbox>/<arch>` (tag `v1`), with
/// its SBOM written beside it.
fn build(sb: &Sandbox, arch: &str) -> Built {
    write(&sb.join(format!("rootfs-{arch}/etc/platform")), arch);
    let profile = sb.join(format!("{arch}.yaml"));
    write(
        &profile,
        &format!(
            "name: demo/multi\nplatform: linux/{arch}\nbase:\n  rootfs: ./rootfs-{arch}\nselftest: {{enabled: false}}\nfiles:\n  - {{src: ./app, dst: /opt/app}}\n"
        ),
    );
    let layout = sb.join(arch);
    let sbom = sb.join(format!("{arch}.spdx.json"));
    let out = run(sb
        .gpuimg()
        .args(["build", "--json"])
        .arg(&profile)
        .arg("-o")
        .arg(format!("oci:{}:v1", layout.display()))
        .arg("--sbom")
        .arg(&sbom));
    assert!(out.status.success(), "{}", said(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut blobs = vec![v["config_digest"].as_str().unwrap().to_string()];
    for l in v["layers"].as_array().unwrap() {
        blobs.push(l["digest"].as_str().unwrap().to_string());
    }
    Built {
        layout,
        digest: v["manifest_digest"].as_str().unwrap().to_string(),
        sbom,
        blobs,
    }
}

/// Join the single-image layouts into `out`, whose `index.json` tags an image index (one
/// descriptor per image, with the platform its config states) as `tag`; the index's bytes.
fn join_index(layouts: &[&Path], out: &Path, tag: &str) -> Vec<u8> {
    std::fs::create_dir_all(out.join("blobs/sha256")).unwrap();
    std::fs::copy(layouts[0].join("oci-layout"), out.join("oci-layout")).unwrap();
    let mut manifests = Vec::new();
    for l in layouts {
        for e in std::fs::read_dir(l.join("blobs/sha256")).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), out.join("blobs/sha256").join(e.file_name())).unwrap();
        }
        let index: Value = serde_json::from_str(&read(&l.join("index.json"))).unwrap();
        let desc = &index["manifests"][0];
        let manifest: Value =
            serde_json::from_slice(&blob(l, desc["digest"].as_str().unwrap())).unwrap();
        let config: Value =
            serde_json::from_slice(&blob(l, manifest["config"]["digest"].as_str().unwrap()))
                .unwrap();
        manifests.push(json!({
            "mediaType": desc["mediaType"],
            "digest": desc["digest"],
            "size": desc["size"],
            "platform": {"architecture": config["architecture"], "os": config["os"]},
        }));
    }
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": manifests,
    }))
    .unwrap();
    let digest = digest_of(&index);
    std::fs::write(blob_path(out, &digest), &index).unwrap();
    write_top(out, &digest, index.len(), tag);
    index
}

/// `out/index.json` naming the index blob `digest` of `size` bytes as `tag`.
fn write_top(out: &Path, digest: &str, size: usize, tag: &str) {
    let top = json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": INDEX,
            "digest": digest,
            "size": size,
            "annotations": {REF_NAME: tag},
        }],
    });
    std::fs::write(out.join("index.json"), top.to_string()).unwrap();
}

fn blob_path(layout: &Path, digest: &str) -> PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"))
}

fn blob(layout: &Path, digest: &str) -> Vec<u8> {
    std::fs::read(blob_path(layout, digest)).unwrap()
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

fn num(v: &Value, key: &str) -> u64 {
    v["push"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no number `push.{key}` in {v}"))
}

/// The one manifest digest of the layout at `dir`.
fn layout_digest(dir: &Path) -> String {
    let index: Value = serde_json::from_str(&read(&dir.join("index.json"))).unwrap();
    assert_eq!(index["manifests"].as_array().unwrap().len(), 1, "{index}");
    index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `skopeo --override-arch ARCH copy docker://REF oci:DIR:v1`: the platform's image back.
fn pull_arch(reg: &Registry, repo_tag: &str, arch: &str, dir: &Path) {
    let mut c = reg.skopeo();
    c.args(["--override-arch", arch, "--override-os", "linux", "copy"])
        .args(reg.skopeo_tls("src-"))
        .arg(format!("docker://{}", reg.reference(repo_tag)))
        .arg(format!("oci:{}:v1", dir.display()));
    run_ok(&mut c);
}

/// Upload PUTs (the closing PUT of a blob's session) of `digest` since `mark`.
fn uploads_of(reg: &Registry, mark: usize, digest: &str) -> usize {
    reg.uploads_since(mark)
        .iter()
        .filter(|r| {
            r.method == "PUT"
                && r.status == 201
                && r.decoded_uri().contains(&format!("digest={digest}"))
        })
        .count()
}

/// Exit 2 with exactly one line on stderr, an `error:` saying `says`; nothing reached a registry.
fn assert_refused(out: &Output, says: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", said(out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{}", said(out));
    assert!(err.starts_with("error:"), "{}", said(out));
    assert!(err.contains(says), "wanted `{says}`: {}", said(out));
}

#[test]
fn an_index_is_pushed_whole_with_shared_blobs_once_and_each_platform_its_sbom() {
    let s = Setup::new();
    let reg = Registry::plain();
    // The fixture is an index as skopeo reads it, and the platforms share a layer.
    let raw = run_ok_bytes(
        reg.skopeo()
            .args(["inspect", "--raw"])
            .arg(format!("oci:{}:v1", s.layout.display())),
    );
    assert_eq!(raw, s.index, "skopeo reads another index from the fixture");
    let a: BTreeSet<&String> = s.amd64.blobs.iter().collect();
    let b: BTreeSet<&String> = s.arm64.blobs.iter().collect();
    let shared: Vec<&String> = a.intersection(&b).copied().collect();
    assert!(!shared.is_empty(), "no blob shared: {a:?} {b:?}");
    assert_ne!(s.amd64.digest, s.arm64.digest);
    let distinct = a.union(&b).count() as u64;

    let source = format!("oci:{}:v1", s.layout.display());
    let sbom_args = s.sbom_args();
    let sbom_args: Vec<&str> = sbom_args.iter().map(String::as_str).collect();
    let v = s.push_ok(&source, &reg.reference("demo/multi"), &sbom_args);

    // The tag is the index, byte for byte; the summary names it and each manifest.
    let index_digest = s.index_digest();
    assert_eq!(v["manifest_digest"], index_digest.as_str(), "{v}");
    assert_eq!(v["push"]["digest"], index_digest.as_str(), "{v}");
    assert_eq!(
        v["push"]["reference"],
        reg.reference("demo/multi:v1").as_str()
    );
    assert_eq!(reg.inspect_raw("demo/multi:v1").unwrap(), s.index);
    let manifests = v["push"]["manifests"].as_array().expect("push.manifests");
    assert_eq!(manifests.len(), 2, "{v}");
    for (m, (platform, built)) in manifests
        .iter()
        .zip([("linux/amd64", &s.amd64), ("linux/arm64", &s.arm64)])
    {
        assert_eq!(m["platform"], platform, "{v}");
        assert_eq!(m["digest"], built.digest.as_str(), "{v}");
        // Put by its digest before the index, once.
        let by_digest = format!("/v2/demo/multi/manifests/{}", built.digest);
        assert_eq!(
            reg.requests()
                .iter()
                .filter(|r| r.method == "PUT" && r.status == 201 && r.decoded_uri() == by_digest)
                .count(),
            1,
            "{}",
            reg.describe_log()
        );
    }
    assert_eq!(reg.count("PUT", "/v2/demo/multi/manifests/v1"), 1);

    // Every distinct blob went up once (a shared one too); the SBOM artifacts' blobs (the
    // empty config, each document) went up once each, found there the second time.
    for d in a.union(&b) {
        assert_eq!(uploads_of(&reg, 0, d), 1, "{d}:\n{}", reg.describe_log());
    }
    let empty_config = digest_of(b"{}");
    let sbom_blobs: BTreeSet<String> = [
        empty_config,
        digest_of(&std::fs::read(&s.amd64.sbom).unwrap()),
        digest_of(&std::fs::read(&s.arm64.sbom).unwrap()),
    ]
    .into_iter()
    .collect();
    let fresh = sbom_blobs.len() as u64;
    assert_eq!(num(&v, "blobs_uploaded"), distinct + fresh, "{v}");
    assert_eq!(num(&v, "blobs_existing"), 4 - fresh, "{v}");
    assert_eq!(num(&v, "blobs_mounted"), 0, "{v}");

    // Each platform's SBOM is a referrer of its own manifest (registry 2.8: the tag schema).
    for (m, built) in manifests.iter().zip([&s.amd64, &s.arm64]) {
        let hex = built.digest.trim_start_matches("sha256:");
        let referrers = reg
            .inspect_raw(&format!("demo/multi:sha256-{hex}"))
            .unwrap_or_else(|e| panic!("no referrers of {}: {e}", built.digest));
        let referrers: Value = serde_json::from_slice(&referrers).unwrap();
        let listed = referrers["manifests"].as_array().unwrap();
        assert_eq!(listed.len(), 1, "{referrers}");
        let sbom_digest = m["sbom_digest"].as_str().expect("an sbom_digest");
        assert_eq!(listed[0]["digest"], sbom_digest, "{referrers}");
        assert_eq!(listed[0]["artifactType"], "application/spdx+json");
        let art: Value = serde_json::from_slice(
            &reg.inspect_raw(&format!("demo/multi@{sbom_digest}"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(art["subject"]["digest"], built.digest.as_str(), "{art}");
        let doc = art["layers"][0]["digest"].as_str().unwrap();
        assert_eq!(
            doc,
            digest_of(&std::fs::read(&built.sbom).unwrap()),
            "{art}"
        );
    }

    // Each platform comes back as skopeo picks it from the index, with its digest.
    for (arch, built) in [("amd64", &s.amd64), ("arm64", &s.arm64)] {
        let back = s.sb.join(format!("back-{arch}"));
        pull_arch(&reg, "demo/multi:v1", arch, &back);
        assert_eq!(layout_digest(&back), built.digest, "{arch}");
    }

    // The same push again: everything is there, nothing is uploaded; with `--verify` every
    // blob the registry claims is read back once.
    let mark = reg.mark();
    let mut verify_args = sbom_args.clone();
    verify_args.push("--verify");
    let again = s.push_ok(&source, &reg.reference("demo/multi"), &verify_args);
    assert_eq!(again["push"]["digest"], index_digest.as_str(), "{again}");
    assert_eq!(num(&again, "blobs_uploaded"), 0, "{again}");
    assert_eq!(num(&again, "bytes_uploaded"), 0, "{again}");
    assert_eq!(num(&again, "blobs_existing"), distinct + 4, "{again}");
    assert_eq!(num(&again, "blobs_verified"), distinct + 4, "{again}");
    for d in a.union(&b) {
        let read_back = reg
            .requests_since(mark)
            .iter()
            .filter(|r| r.method == "GET" && r.decoded_uri() == format!("/v2/demo/multi/blobs/{d}"))
            .count();
        assert_eq!(read_back, 1, "{d}:\n{}", reg.describe_log());
    }
    assert_eq!(
        reg.uploads_since(mark),
        Vec::new(),
        "{}",
        reg.describe_log()
    );

    // An oci-archive of the same layout, to another repository: the same index, its blobs
    // mounted from the first (none uploaded but the SBOMs' own, already there too).
    let archive = s.sb.join("multi.tar");
    {
        let mut t = tar::Builder::new(std::fs::File::create(&archive).unwrap());
        for name in ["oci-layout", "index.json"] {
            t.append_path_with_name(s.layout.join(name), name).unwrap();
        }
        for e in std::fs::read_dir(s.layout.join("blobs/sha256")).unwrap() {
            let e = e.unwrap();
            let name = format!("blobs/sha256/{}", e.file_name().to_string_lossy());
            t.append_path_with_name(e.path(), name).unwrap();
        }
        t.finish().unwrap();
    }
    let mark = reg.mark();
    let v = s.push_ok(
        &format!("oci-archive:{}:v1", archive.display()),
        &reg.reference("demo/other:a1"),
        &[],
    );
    assert_eq!(v["push"]["digest"], index_digest.as_str(), "{v}");
    assert_eq!(reg.inspect_raw("demo/other:a1").unwrap(), s.index);
    assert_eq!(num(&v, "blobs_mounted"), distinct, "{v}");
    assert_eq!(
        reg.uploads_since(mark)
            .iter()
            .filter(|r| r.method == "PATCH" || r.method == "PUT")
            .count(),
        0,
        "{}",
        reg.describe_log()
    );
    let back = s.sb.join("back-other");
    pull_arch(&reg, "demo/other:a1", "arm64", &back);
    assert_eq!(layout_digest(&back), s.arm64.digest);
}

#[test]
fn an_index_push_cannot_do_whole_is_refused_in_one_line_before_any_request() {
    let s = Setup::new();
    // Port 1 on loopback: nothing answers, so a refusal that got that far would say so.
    let dest = "127.0.0.1:1/demo/multi";
    let source = format!("oci:{}:v1", s.layout.display());

    // An SBOM without its platform, for a platform the index lacks, or twice.
    let amd = s.amd64.sbom.display().to_string();
    for (sbom, says) in [
        (
            vec![amd.clone()],
            "name the platform as `--sbom PLATFORM=FILE`",
        ),
        (
            vec![format!("linux/s390x={amd}")],
            "the index has no manifest for `linux/s390x`; its platforms: linux/amd64, linux/arm64",
        ),
        (
            vec![format!("linux/amd64={amd}"), format!("linux/amd64={amd}")],
            "`--sbom` names `linux/amd64` twice",
        ),
    ] {
        let mut args = Vec::new();
        for f in &sbom {
            args.extend(["--sbom", f.as_str()]);
        }
        assert_refused(&s.push(&source, dest, &args), says);
    }

    // A single image takes one SBOM.
    assert_refused(
        &s.push(
            &format!("oci:{}:v1", s.amd64.layout.display()),
            dest,
            &["--sbom", &amd, "--sbom", &amd],
        ),
        "`--sbom` is given 2 times; a single image takes one SBOM",
    );

    // An index listing an index.
    let nested = s.sb.join("nested");
    let inner = join_index(&[&s.amd64.layout], &nested, "inner");
    let outer = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [{"mediaType": INDEX, "digest": digest_of(&inner), "size": inner.len()}],
    }))
    .unwrap();
    let outer_digest = digest_of(&outer);
    std::fs::write(blob_path(&nested, &outer_digest), &outer).unwrap();
    write_top(&nested, &outer_digest, outer.len(), "v1");
    assert_refused(
        &s.push(&format!("oci:{}:v1", nested.display()), dest, &[]),
        &format!("lists `{}`, itself an index", digest_of(&inner)),
    );

    // An index listing nothing, and one listing more manifests than gpuimg reads.
    let desc = json!({
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": s.amd64.digest,
        "size": blob(&s.layout, &s.amd64.digest).len(),
        "platform": {"architecture": "amd64", "os": "linux"},
    });
    for (count, says) in [
        (0, "lists no manifests".to_string()),
        (65, "lists 65 manifests, more than the 64 read".to_string()),
    ] {
        let index = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": INDEX,
            "manifests": vec![desc.clone(); count],
        }))
        .unwrap();
        let odd = s.sb.join(format!("odd-{count}"));
        join_index(&[&s.amd64.layout], &odd, "unused");
        let digest = digest_of(&index);
        std::fs::write(blob_path(&odd, &digest), &index).unwrap();
        write_top(&odd, &digest, index.len(), "v1");
        assert_refused(
            &s.push(&format!("oci:{}:v1", odd.display()), dest, &[]),
            &says,
        );
    }

    // A manifest whose layer is not there.
    let gone = s
        .arm64
        .blobs
        .iter()
        .find(|d| !s.amd64.blobs.contains(d))
        .unwrap();
    std::fs::remove_file(blob_path(&s.layout, gone)).unwrap();
    assert_refused(
        &s.push(&source, dest, &[]),
        &format!("The linux/arm64 manifest `{}`", s.arm64.digest),
    );
}
