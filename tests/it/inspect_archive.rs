//! `gpuimg inspect oci-archive:FILE[:TAG]`: an archive gpuimg built reads exactly as the same
//! image's layout does, and as `skopeo inspect` reads it; hostile or damaged archives are one
//! line on stderr, exit 2, and nothing is written anywhere (the archive is read in place).

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn gpuimg(dir: &Path) -> Command {
    let mut c = common::isolated_in(dir, common::Bin::Gpuimg);
    c.env("SOURCE_DATE_EPOCH", "0");
    c
}

use common::{assert_error, run, run_ok as ok, write};

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("invalid JSON ({e}): {text}"))
}

/// A small image's profile and root filesystem in `dir`, with env, labels and cmd.
fn project(dir: &Path) {
    write(
        &dir.join("rootfs/etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\n",
    );
    write(&dir.join("rootfs/usr/bin/hello"), "#!/bin/sh\necho hello\n");
    write(&dir.join("extra.txt"), "extra\n");
    write(
        &dir.join("p.yaml"),
        "name: archive\nbase:\n  rootfs: ./rootfs\nfiles:\n  - {src: ./extra.txt, dst: /opt/extra.txt}\nconfig:\n  cmd: [/usr/bin/hello]\n  env: {GREETING: hi}\n  labels: {org.example.team: gpu, org.example.tier: \"2\"}\n",
    );
}

/// Build the project into `output` (`oci:...` or `oci-archive:...`); the manifest digest.
fn build(dir: &Path, output: &str, extra: &[&str]) -> String {
    let out = ok(gpuimg(dir)
        .args(["build", "p.yaml", "-o", output, "--json"])
        .args(extra));
    json(&out)["manifest_digest"]
        .as_str()
        .expect("manifest_digest")
        .to_string()
}

/// Every path under `dir` (to see that a refused inspect wrote nothing).
fn tree(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if e.file_type().expect("file type").is_dir() {
                todo.push(p.clone());
            }
            out.insert(p);
        }
    }
    out
}

#[test]
fn an_archive_reads_as_its_layout_and_as_skopeo_reads_it() {
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    project(dir);
    let from_layout = build(dir, "oci:layout", &[]);
    let from_archive = build(dir, "oci-archive:img.tar", &[]);
    assert_eq!(from_layout, from_archive, "one image, two containers");

    for args in [&["--json"][..], &["--files", "--json"], &[], &["--files"]] {
        let a = ok(gpuimg(dir)
            .args(["inspect", "oci-archive:img.tar"])
            .args(args));
        let l = ok(gpuimg(dir).args(["inspect", "oci:layout"]).args(args));
        assert_eq!(a, l, "inspect {args:?} differs between archive and layout");
    }
    let ours = json(&ok(gpuimg(dir).args([
        "inspect",
        "oci-archive:img.tar",
        "--json",
    ])));
    assert_eq!(ours["manifest_digest"], from_archive.as_str());
    assert_eq!(ours["tag"], "latest");
    assert_eq!(ours["config"]["Labels"]["org.example.team"], "gpu");
    let text = ok(gpuimg(dir).args(["inspect", "oci-archive:img.tar"]));
    assert!(text.contains("\n  org.example.tier=2\n"), "{text}");
    assert!(text.contains("\n  GREETING=hi\n"), "{text}");

    let skopeo = Command::new("skopeo")
        .args(["inspect", "oci-archive:img.tar"])
        .current_dir(dir)
        .output()
        .expect("skopeo is installed by scripts/install-deps.sh");
    assert!(
        skopeo.status.success(),
        "skopeo: {}",
        String::from_utf8_lossy(&skopeo.stderr)
    );
    let theirs = json(&String::from_utf8_lossy(&skopeo.stdout));
    assert_eq!(theirs["Digest"], ours["manifest_digest"]);
    let our_layers: Vec<&Value> = (ours["layers"].as_array().expect("layers").iter())
        .map(|l| &l["digest"])
        .collect();
    let their_layers: Vec<&Value> = theirs["Layers"]
        .as_array()
        .expect("Layers")
        .iter()
        .collect();
    assert_eq!(our_layers, their_layers);
    assert_eq!(theirs["Labels"], ours["config"]["Labels"]);
    assert_eq!(theirs["Env"], ours["config"]["Env"]);
    assert_eq!(
        format!(
            "{}/{}",
            theirs["Os"].as_str().unwrap_or("?"),
            theirs["Architecture"].as_str().unwrap_or("?")
        ),
        ours["platform"].as_str().expect("platform")
    );
    let files = json(&ok(gpuimg(dir).args([
        "inspect",
        "--files",
        "--json",
        "oci-archive:img.tar",
    ])));
    let paths: Vec<&str> = (files["files"].as_array().expect("files").iter())
        .filter_map(|f| f["path"].as_str())
        .collect();
    for p in ["/usr/bin/hello", "/opt/extra.txt", "/etc/passwd"] {
        assert!(paths.contains(&p), "{p} missing from {paths:?}");
    }
}

#[test]
fn an_archive_tag_is_chosen_by_reference_or_flag() {
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    project(dir);
    let digest = build(dir, "oci-archive:img.tar:v1", &[]);
    for image in ["oci-archive:img.tar:v1", "oci-archive:img.tar"] {
        let v = json(&ok(gpuimg(dir).args(["inspect", "--json", image])));
        assert_eq!(
            (v["tag"].as_str(), v["manifest_digest"].as_str()),
            (Some("v1"), Some(&*digest))
        );
    }
    let v = json(&ok(gpuimg(dir).args([
        "inspect",
        "--json",
        "--tag",
        "v1",
        "oci-archive:img.tar",
    ])));
    assert_eq!(v["tag"], "v1");
    let out = run(gpuimg(dir).args(["inspect", "oci-archive:img.tar:v2"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "error: No image tagged `v2` in `img.tar`; tags: v1"
    );
    // `-o oci:DIR:TAG` sets the tag; a different `--tag` is refused before anything is built.
    let out = run(gpuimg(dir).args(["build", "p.yaml", "-o", "oci:two:a", "--tag", "b"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("disagree"));
    assert_error(&String::from_utf8_lossy(&out.stderr), &[dir]);
    assert!(!dir.join("two").exists());
}

/// A tar holding `entries`: (name, kind, data); kind `'0'` file, `'2'` symlink, `'1'` hard
/// link (data is the link target), `'5'` directory.
fn tar_of(entries: &[(&str, u8, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::new(*kind));
        match kind {
            b'1' | b'2' => {
                h.set_size(0);
                b.append_link(&mut h, name, String::from_utf8_lossy(data).as_ref())
                    .expect("append a link");
            }
            _ => {
                h.set_size(data.len() as u64);
                // Raw names (set_path would refuse `..`): a hostile archive has them.
                let bytes = name.as_bytes();
                h.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
                h.set_cksum();
                b.append(&h, &data[..]).expect("append");
            }
        }
    }
    b.into_inner().expect("finish the tar")
}

/// Expect `inspect IMAGE` to fail in one line naming `needle`, writing nothing under `dir`.
fn refused(dir: &Path, image: &str, needle: &str) {
    let before = tree(dir);
    let out = run(gpuimg(dir).args(["inspect", image]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{image}: {stderr}");
    assert!(out.stdout.is_empty(), "{image}: stdout {:?}", out.stdout);
    assert_eq!(stderr.lines().count(), 1, "{image}: not one line: {stderr}");
    assert!(stderr.starts_with("error: "), "{image}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{image}: want `{needle}` in {stderr}"
    );
    assert_error(&stderr, &[dir]);
    assert_eq!(before, tree(dir), "{image}: inspect wrote something");
}

#[test]
fn hostile_and_damaged_archives_are_refused_in_one_line() {
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    project(dir);
    build(dir, "oci-archive:good.tar", &[]);
    build(dir, "oci:layout", &[]);
    let good = std::fs::read(dir.join("good.tar")).expect("good.tar");
    let layout = b"{\"imageLayoutVersion\":\"1.0.0\"}".to_vec();
    let index = std::fs::read(dir.join("layout/index.json")).expect("index.json");
    // Cut in the middle of the largest entry's data (wherever its header lies).
    let cut = {
        let mut a = tar::Archive::new(&good[..]);
        let (pos, size) = a
            .entries()
            .expect("good.tar lists")
            .map(|e| e.expect("an entry"))
            .map(|e| (e.raw_file_position(), e.size()))
            .max_by_key(|(_, size)| *size)
            .expect("good.tar has entries");
        (pos + size / 2) as usize
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "symlink.tar",
            tar_of(&[
                ("oci-layout", b'0', layout.clone()),
                ("index.json", b'2', b"/etc/passwd".to_vec()),
            ]),
            "entry `index.json` is a symbolic link",
        ),
        (
            "hardlink.tar",
            tar_of(&[("oci-layout", b'1', b"/etc/hostname".to_vec())]),
            "entry `oci-layout` is a hard link",
        ),
        (
            "twice.tar",
            tar_of(&[
                ("oci-layout", b'0', layout.clone()),
                ("index.json", b'0', index.clone()),
                ("./index.json", b'0', b"{}".to_vec()),
            ]),
            "entry `index.json` appears twice",
        ),
        (
            "nolayout.tar",
            tar_of(&[("index.json", b'0', index.clone())]),
            "no `oci-layout` entry",
        ),
        ("empty.tar", Vec::new(), "no `oci-layout` entry"),
        ("garbage.tar", vec![0xa5; 4096], "not a readable tar file"),
        (
            "truncated.tar",
            good[..cut].to_vec(),
            "the archive is truncated",
        ),
        (
            "huge.tar",
            tar_of(&[
                ("oci-layout", b'0', layout.clone()),
                ("index.json", b'0', vec![b' '; (16 << 20) + 1]),
            ]),
            "larger than the 16777216 bytes",
        ),
        (
            "noblobs.tar",
            tar_of(&[
                ("oci-layout", b'0', layout.clone()),
                ("index.json", b'0', index.clone()),
            ]),
            "the archive has no such entry",
        ),
    ];
    for (name, bytes, needle) in &cases {
        std::fs::write(dir.join(name), bytes).expect("write a case");
        refused(dir, &format!("oci-archive:{name}"), needle);
    }
    // A damaged blob: the manifest's bytes changed, its name kept.
    let manifest = json(&String::from_utf8_lossy(&index))["manifests"][0]["digest"]
        .as_str()
        .expect("a manifest")
        .to_string();
    let entry = format!("blobs/sha256/{}", &manifest[7..]);
    std::fs::write(
        dir.join("corrupt.tar"),
        tar_of(&[
            ("oci-layout", b'0', layout.clone()),
            ("index.json", b'0', index.clone()),
            (&entry, b'0', b"{\"schemaVersion\":2}".to_vec()),
        ]),
    )
    .expect("write corrupt.tar");
    refused(dir, "oci-archive:corrupt.tar", "does not match its digest");
    refused(dir, "oci-archive:layout", "is a directory");
    refused(dir, "oci-archive:missing.tar", "missing.tar");
    // Issue 34, item 7: a file named as a layout points at `oci-archive:`; a missing path
    // says so.
    refused(dir, "oci:good.tar", "an archive is read as `oci-archive:");
    refused(dir, "good.tar", "an archive is read as `oci-archive:");
    refused(dir, "nothere", "`nothere` does not exist");
    refused(dir, "oci-achive:good.tar", "did you mean `oci-archive:`?");
    // Issue 33, class 12: files that are not regular are refused without blocking or reading
    // forever: a FIFO archive, a device, procfs, and a layout whose index is a FIFO.
    let fifo = dir.join("fifo.tar");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    refused(dir, "oci-archive:fifo.tar", "is a FIFO");
    refused(dir, "oci-archive:/dev/zero", "is a character device");
    refused(dir, "oci-archive:/proc/self/environ", "is on procfs");
    std::fs::remove_file(dir.join("layout/index.json")).expect("rm index.json");
    let made = Command::new("mkfifo")
        .arg(dir.join("layout/index.json"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    refused(dir, "oci:layout", "is a FIFO");
}

#[test]
fn entries_that_climb_out_are_never_written() {
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path().join("work");
    std::fs::create_dir_all(&dir).expect("mkdir");
    project(&dir);
    build(&dir, "oci:layout", &[]);
    // The real layout's files, then entries named to land outside if anything extracted them.
    let mut entries: Vec<(String, u8, Vec<u8>)> = Vec::new();
    for rel in ["oci-layout", "index.json"] {
        entries.push((
            rel.into(),
            b'0',
            std::fs::read(dir.join("layout").join(rel)).expect("read"),
        ));
    }
    for e in std::fs::read_dir(dir.join("layout/blobs/sha256"))
        .expect("blobs")
        .flatten()
    {
        let name = format!("blobs/sha256/{}", e.file_name().to_string_lossy());
        entries.push((name, b'0', std::fs::read(e.path()).expect("blob")));
    }
    for evil in [
        "../evil",
        "../../evil2",
        "/tmp/gpuimg-evil-abs",
        "blobs/sha256/../../evil3",
    ] {
        entries.push((evil.into(), b'0', b"owned\n".to_vec()));
    }
    let refs: Vec<(&str, u8, Vec<u8>)> = (entries.iter())
        .map(|(n, k, d)| (n.as_str(), *k, d.clone()))
        .collect();
    std::fs::write(dir.join("evil.tar"), tar_of(&refs)).expect("write evil.tar");
    let before = tree(t.path());
    let a = ok(gpuimg(&dir).args(["inspect", "--files", "--json", "oci-archive:evil.tar"]));
    let l = ok(gpuimg(&dir).args(["inspect", "--files", "--json", "oci:layout"]));
    assert_eq!(a, l, "the extra entries changed the listing");
    assert_eq!(before, tree(t.path()), "inspect wrote something");
    assert!(!Path::new("/tmp/gpuimg-evil-abs").exists());
}
