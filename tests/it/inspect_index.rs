//! `gpuimg inspect` of an image index (issue 37, item 5): a layout (and an oci-archive of it)
//! whose tag names an index of two platform manifests shows the index, then each platform as a
//! single image shows it (summary, `--files`, `--sizes`, their JSON), or the one `--platform`
//! names; an unknown platform, a nested index and an index of too many manifests are one line,
//! exit 2; a descriptor without a platform reads `unknown`.
//!
//! The fixture joins two single-platform images gpuimg built from one root filesystem of plain
//! files (amd64; arm64 without a self-test and with one `files:` entry more) into one layout
//! holding an index, as a `platforms:` build will write it (the rootfs layer is one blob for
//! both); `skopeo inspect --raw` confirms the fixture is an index.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("invalid JSON ({e}): {text}"))
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Build the profile `yaml` in `sb` into the layout `out`.
fn build(sb: &Sandbox, yaml: &str, out: &str) {
    write(&sb.join("p.yaml"), yaml);
    run_ok(
        sb.gpuimg()
            .arg("build")
            .arg(sb.join("p.yaml"))
            .arg("-o")
            .arg(sb.join(out)),
    );
}

/// The single manifest descriptor of the layout `dir`.
fn descriptor(dir: &Path) -> Value {
    let index = parse(&read(&dir.join("index.json")));
    let m = &index["manifests"];
    assert_eq!(m.as_array().map(Vec::len), Some(1), "{index}");
    m[0].clone()
}

/// Put `bytes` into `layout`'s blobs; their descriptor.
fn put_blob(layout: &Path, media_type: &str, bytes: &[u8]) -> Value {
    let digest = sha256(bytes);
    let path = layout.join("blobs/sha256").join(&digest["sha256:".len()..]);
    std::fs::write(&path, bytes).expect("write blob");
    json!({"mediaType": media_type, "digest": digest, "size": bytes.len()})
}

/// Every blob of `from` copied into `to`.
fn copy_blobs(from: &Path, to: &Path) {
    let dst = to.join("blobs/sha256");
    std::fs::create_dir_all(&dst).expect("blobs dir");
    for e in std::fs::read_dir(from.join("blobs/sha256"))
        .expect("blobs")
        .flatten()
    {
        std::fs::copy(e.path(), dst.join(e.file_name())).expect("copy blob");
    }
}

/// An index blob listing `manifests`, its descriptor tagged `tag`.
fn index_entry(layout: &Path, tag: &str, manifests: Vec<Value>) -> Value {
    let index = json!({"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests});
    let bytes = serde_json::to_vec(&index).expect("index JSON");
    let mut d = put_blob(layout, INDEX, &bytes);
    d["annotations"] = json!({"org.opencontainers.image.ref.name": tag});
    d
}

/// The two-platform fixture in `sb`: `amd/` and `arm/` built, joined into `both/`, whose
/// `index.json` tags the index `latest` (and, after it, the malformed indexes `nested`,
/// `many`, `bare` and `disguised`: an index listed as a manifest). The amd64 and arm64
/// manifest descriptors.
fn two_platforms(sb: &Sandbox) -> (Value, Value) {
    let root = sb.join("rootfs");
    write(&root.join("etc/hostname"), "two\n");
    write(&root.join("usr/share/data/table.txt"), "1 2 3\n");
    write(&sb.join("arm-only.txt"), "arm64 data\n");
    build(
        sb,
        "name: two\nplatform: linux/amd64\nbase:\n  rootfs: ./rootfs\n",
        "amd",
    );
    build(
        sb,
        "name: two\nplatform: linux/arm64\nbase:\n  rootfs: ./rootfs\nfiles:\n  - {src: ./arm-only.txt, dst: /opt/arm-only.txt}\nselftest: {enabled: false}\n",
        "arm",
    );
    let both = sb.join("both");
    copy_blobs(&sb.join("amd"), &both);
    copy_blobs(&sb.join("arm"), &both);
    write(
        &both.join("oci-layout"),
        "{\"imageLayoutVersion\":\"1.0.0\"}",
    );
    let with_platform = |mut d: Value, arch: &str| {
        d.as_object_mut().expect("descriptor").remove("annotations");
        d["platform"] = json!({"architecture": arch, "os": "linux"});
        d
    };
    let amd = with_platform(descriptor(&sb.join("amd")), "amd64");
    let arm = with_platform(descriptor(&sb.join("arm")), "arm64");
    let latest = index_entry(&both, "latest", vec![amd.clone(), arm.clone()]);
    let inner = latest.clone();
    let nested = index_entry(&both, "nested", vec![amd.clone(), inner]);
    let many = index_entry(&both, "many", vec![amd.clone(); 65]);
    let mut bare_arm = arm.clone();
    bare_arm
        .as_object_mut()
        .expect("descriptor")
        .remove("platform");
    let bare = index_entry(&both, "bare", vec![amd.clone(), bare_arm]);
    let mut disguised = latest.clone();
    disguised["mediaType"] = json!(MANIFEST);
    disguised["platform"] = json!({"architecture": "arm64", "os": "linux"});
    disguised
        .as_object_mut()
        .expect("descriptor")
        .remove("annotations");
    let disguised = index_entry(&both, "disguised", vec![amd.clone(), disguised]);
    let layout = json!({"schemaVersion": 2, "manifests": [latest, nested, many, bare, disguised]});
    write(&both.join("index.json"), &layout.to_string());
    (amd, arm)
}

fn inspect(sb: &Sandbox, image: &str, args: &[&str]) -> String {
    run_ok(sb.gpuimg().args(["inspect", image]).args(args))
}

/// `inspect ARGS` refused: exit 2, one line on stderr, nothing on stdout; the line.
fn refused(sb: &Sandbox, image: &str, args: &[&str]) -> String {
    let mut c = sb.gpuimg();
    c.args(["inspect", image]).args(args);
    let o = run(&mut c);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{}", describe(&c, &o));
    assert!(o.stdout.is_empty(), "{}", describe(&c, &o));
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

/// The single-image JSON `single` as a platform of an index shows it: without a tag.
fn untagged(mut single: Value) -> Value {
    single["tag"] = Value::Null;
    single
}

#[test]
fn an_index_shows_each_platform_as_its_single_image_does() {
    common::require("skopeo");
    let sb = Sandbox::new();
    let (amd, arm) = two_platforms(&sb);
    let layout = format!("oci:{}", sb.join("both").display());

    // The fixture is an index as skopeo reads it.
    let raw =
        run_ok(Command::new("skopeo").args(["inspect", "--raw", &format!("{layout}:latest")]));
    let raw = parse(&raw);
    assert_eq!(raw["mediaType"], INDEX, "{raw}");
    assert_eq!(raw["manifests"][1]["platform"]["architecture"], "arm64");

    // The summary: the index's head, then each platform's section.
    let text = inspect(&sb, &layout, &[]);
    assert!(
        text.starts_with("tag:       latest\nindex:     sha256:"),
        "{text}"
    );
    assert!(
        text.contains("\nplatforms: linux/amd64, linux/arm64\n"),
        "{text}"
    );
    for (d, platform) in [(&amd, "linux/amd64"), (&arm, "linux/arm64")] {
        let head = format!(
            "\n== {platform} {} ==\ndigest:    {}\nplatform:  {platform}\n",
            d["digest"].as_str().unwrap(),
            d["digest"].as_str().unwrap()
        );
        assert!(text.contains(&head), "{head} missing from {text}");
    }
    // The rootfs layer is the same blob in both: counted once in the total.
    assert!(
        text.contains("1 layer shared by several platforms, stored once)"),
        "{text}"
    );

    // The JSON: the index, then each platform's single-image JSON beside its descriptor.
    let v = parse(&inspect(&sb, &layout, &["--json"]));
    assert_eq!(v["index"]["tag"], "latest");
    assert_eq!(v["index"]["media_type"], INDEX);
    assert_eq!(v["all_platforms"]["shared_layers"], 1);
    let platforms = v["platforms"].as_array().expect("platforms");
    assert_eq!(platforms.len(), 2);
    let files = parse(&inspect(&sb, &layout, &["--files", "--json"]));
    let sizes = parse(&inspect(&sb, &layout, &["--sizes", "--json"]));
    let unused = parse(&inspect(&sb, &layout, &["--unused", "--json"]));
    for (i, (d, dir, platform)) in [(&amd, "amd", "linux/amd64"), (&arm, "arm", "linux/arm64")]
        .into_iter()
        .enumerate()
    {
        let single =
            |args: &[&str]| parse(&inspect(&sb, &sb.join(dir).display().to_string(), args));
        for (v, mode) in [
            (&v, "--json"),
            (&files, "--files"),
            (&sizes, "--sizes"),
            (&unused, "--unused"),
        ] {
            let p = &v["platforms"][i];
            assert_eq!(p["platform"], platform, "{mode}");
            assert_eq!(p["digest"], d["digest"], "{mode}");
            assert_eq!(p["size"], d["size"], "{mode}");
            assert_eq!(p["media_type"], MANIFEST, "{mode}");
            let own = if mode == "--json" {
                untagged(single(&["--json"]))
            } else {
                single(&[mode, "--json"])
            };
            assert_eq!(p["image"], own, "{mode} {platform}");
        }
    }
    // Each platform's own files.
    let paths = |i: usize| -> Vec<String> {
        files["platforms"][i]["image"]["files"]
            .as_array()
            .expect("files")
            .iter()
            .filter_map(|f| f["path"].as_str().map(str::to_string))
            .collect()
    };
    assert!(paths(0).contains(&"/etc/hostname".to_string()));
    assert!(!paths(0).contains(&"/opt/arm-only.txt".to_string()));
    assert!(paths(1).contains(&"/opt/arm-only.txt".to_string()));

    // `--files` and `--sizes` as text: each platform in turn, headed by its platform; with
    // `--platform`, only that one (by `os/arch`, or as the index names it).
    for mode in ["--files", "--sizes"] {
        let all = inspect(&sb, &layout, &[mode]);
        let amd_head = format!("\n== linux/amd64 {} ==\n", amd["digest"].as_str().unwrap());
        let arm_head = format!("\n== linux/arm64 {} ==\n", arm["digest"].as_str().unwrap());
        let (a, b) = (all.find(&amd_head), all.find(&arm_head));
        assert!(
            matches!((a, b), (Some(a), Some(b)) if a < b),
            "{mode}: {all}"
        );
        let single = inspect(&sb, &sb.join("arm").display().to_string(), &[mode]);
        assert!(
            all.ends_with(&format!("{arm_head}{single}")),
            "{mode}: {all}"
        );
        let one = inspect(&sb, &layout, &[mode, "--platform", "linux/arm64"]);
        assert!(one.contains(&arm_head) && !one.contains(&amd_head), "{one}");
        assert!(one.ends_with(&format!("{arm_head}{single}")), "{one}");
    }
    let one = parse(&inspect(
        &sb,
        &layout,
        &["--json", "--platform", "linux/amd64"],
    ));
    assert_eq!(one["platforms"].as_array().map(Vec::len), Some(1));
    assert_eq!(one["platforms"][0]["digest"], amd["digest"]);
    assert!(one.get("all_platforms").is_none(), "{one}");

    // A platform the index does not have: exit 2 naming those it has.
    let e = refused(&sb, &layout, &["--platform", "linux/riscv64"]);
    assert!(e.contains("`linux/riscv64`"), "{e}");
    assert!(e.contains("platforms: linux/amd64, linux/arm64"), "{e}");
    let e = refused(&sb, &layout, &["--files", "--platform", "linux"]);
    assert!(e.contains("platforms: linux/amd64, linux/arm64"), "{e}");

    // `--platform` on a single image: its own is accepted, another refused.
    let amd_dir = sb.join("amd").display().to_string();
    assert_eq!(
        inspect(&sb, &amd_dir, &["--platform", "linux/amd64"]),
        inspect(&sb, &amd_dir, &[])
    );
    let e = refused(&sb, &amd_dir, &["--platform", "linux/arm64"]);
    assert!(
        e.contains("`linux/amd64`") && e.contains("`linux/arm64`"),
        "{e}"
    );

    // A descriptor without a platform reads `unknown`, and is chosen by that name.
    let bare = parse(&inspect(&sb, &layout, &["--tag", "bare", "--json"]));
    assert_eq!(bare["platforms"][1]["platform"], "unknown");
    let text = inspect(&sb, &layout, &["--tag", "bare", "--platform", "unknown"]);
    assert!(
        text.contains("\nplatforms: linux/amd64, unknown\n"),
        "{text}"
    );
    assert!(text.contains("\n== unknown sha256:"), "{text}");

    // A nested index and one of too many manifests: one line, exit 2.
    let e = refused(&sb, &layout, &["--tag", "nested"]);
    assert!(e.contains("itself an index"), "{e}");
    let e = refused(&sb, &layout, &["--tag", "many", "--files"]);
    assert!(e.contains("65 manifests, more than the 64 read"), "{e}");
    let e = refused(
        &sb,
        &layout,
        &["--tag", "disguised", "--platform", "linux/arm64"],
    );
    assert!(e.contains("itself an index"), "{e}");
}

#[test]
fn an_archive_of_an_index_reads_as_its_layout() {
    common::require("skopeo");
    let sb = Sandbox::new();
    let (amd, arm) = two_platforms(&sb);
    let layout = format!("oci:{}", sb.join("both").display());
    // Tarred as it is.
    run_ok(
        Command::new("tar")
            .arg("-cf")
            .arg(sb.join("both.tar"))
            .arg("-C")
            .arg(sb.join("both"))
            .args(["oci-layout", "index.json", "blobs"]),
    );
    let archive = format!("oci-archive:{}", sb.join("both.tar").display());
    for args in [
        &[][..],
        &["--json"],
        &["--files"],
        &["--files", "--json"],
        &["--sizes"],
        &["--sizes", "--json"],
        &["--platform", "linux/arm64", "--files"],
    ] {
        assert_eq!(
            inspect(&sb, &archive, args),
            inspect(&sb, &layout, args),
            "inspect {args:?} differs between archive and layout"
        );
    }
    // Copied by skopeo, every platform: the same index and manifests.
    run_ok(Command::new("skopeo").args([
        "copy",
        "--all",
        "--preserve-digests",
        &format!("{layout}:latest"),
        &format!("oci-archive:{}:latest", sb.join("copied.tar").display()),
    ]));
    let copied = format!("oci-archive:{}", sb.join("copied.tar").display());
    let ours = parse(&inspect(&sb, &layout, &["--json"]));
    let theirs = parse(&inspect(&sb, &copied, &["--json"]));
    assert_eq!(theirs["index"]["digest"], ours["index"]["digest"]);
    let digests = |v: &Value| -> Vec<Value> {
        v["platforms"]
            .as_array()
            .expect("platforms")
            .iter()
            .map(|p| p["digest"].clone())
            .collect()
    };
    assert_eq!(
        digests(&theirs),
        vec![amd["digest"].clone(), arm["digest"].clone()]
    );
    assert_eq!(digests(&ours), digests(&theirs));
}
