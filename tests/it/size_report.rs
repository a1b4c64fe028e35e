//! `gpuimg inspect --sizes` and `gpuimg build --max-size` on a real image (a root filesystem
//! with documentation stripped and duplicate files, plus `files:`): every number the report
//! gives is recomputed here from the layout itself — blob sizes, decompressed tar sizes, the
//! regular files and hard links of each tar — and the limit is checked at the exact image
//! size: one byte below fails with exit 1, one line naming both sizes and nothing written; at
//! the size the build succeeds.

use crate::common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use common::*;
use serde_json::Value;

fn put(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// What the test reads from one layer blob itself.
#[derive(Debug, Default)]
struct Measured {
    compressed: u64,
    tar: u64,
    /// Bytes of the regular files in the tar.
    files: u64,
    /// Hard links to a regular file of the same tar, and that file's bytes.
    links: u64,
    linked_bytes: u64,
}

fn measure(blob: &Path) -> Measured {
    let bytes = std::fs::read(blob).unwrap();
    let mut tar = Vec::new();
    flate2::read::MultiGzDecoder::new(&bytes[..])
        .read_to_end(&mut tar)
        .unwrap();
    let mut m = Measured {
        compressed: bytes.len() as u64,
        tar: tar.len() as u64,
        ..Measured::default()
    };
    let mut sizes: BTreeMap<String, u64> = BTreeMap::new();
    let mut a = tar::Archive::new(&tar[..]);
    for e in a.entries().unwrap() {
        let e = e.unwrap();
        let path = e.path().unwrap().display().to_string();
        match e.header().entry_type() {
            tar::EntryType::Regular => {
                m.files += e.size();
                sizes.insert(path, e.size());
            }
            tar::EntryType::Link => {
                let target = e.link_name().unwrap().unwrap().display().to_string();
                m.links += 1;
                m.linked_bytes += sizes[&target];
            }
            _ => {}
        }
    }
    m
}

#[test]
fn the_size_report_agrees_with_the_layout_and_max_size_gates_the_build() {
    let sb = Sandbox::new();
    let root = sb.join("rootfs");
    put(&root.join("etc/passwd"), b"root:x:0:0:root:/root:/bin/sh\n");
    let big: Vec<u8> = (0..50_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    put(&root.join("opt/a.bin"), &big);
    put(&root.join("opt/b.bin"), &big);
    put(&root.join("usr/share/doc/tool/README"), &[b'r'; 5000]);
    put(&root.join("usr/share/doc/tool/copyright"), b"MIT\n");
    put(&root.join("usr/share/man/man1/tool.1"), &[b'm'; 3000]);
    put(&sb.join("app/run.sh"), b"#!/bin/sh\necho run\n");
    let p = sb.join("p.yaml");
    write(
        &p,
        "name: sizes\nbase:\n  rootfs: ./rootfs\nfiles:\n  - {src: ./app, dst: /app}\nstrip: [docs, man]\nselftest: {enabled: false}\n",
    );
    let out = sb.join("out");
    let build = |out: &Path, extra: &[&str]| {
        run(sb
            .gpuimg()
            .env("SOURCE_DATE_EPOCH", "0")
            .args(["build", "-q", "--tag", "v1", "-o"])
            .arg(out)
            .arg(&p)
            .args(extra))
    };
    let first = build(&out, &["--json"]);
    assert!(first.status.success(), "{}", describe_output(&first));
    let built: Value = serde_json::from_slice(&first.stdout).unwrap();

    let report: Value = serde_json::from_str(&run_ok(
        sb.gpuimg().args(["inspect", "--sizes", "--json"]).arg(&out),
    ))
    .unwrap();

    // The image size: manifest, config and layer blobs, as they lie in the layout.
    let blob = |d: &str| {
        out.join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let index = json(&out.join("index.json"));
    let manifest_digest = index["manifests"][0]["digest"].as_str().unwrap();
    let manifest = json(&blob(manifest_digest));
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let len = |p: &Path| std::fs::metadata(p).unwrap().len();
    let descs = manifest["layers"].as_array().unwrap();
    let measured: Vec<Measured> = descs
        .iter()
        .map(|l| measure(&blob(l["digest"].as_str().unwrap())))
        .collect();
    let image_size = len(&blob(manifest_digest))
        + len(&blob(config_digest))
        + measured.iter().map(|m| m.compressed).sum::<u64>();
    assert_eq!(report["image_size"], image_size, "{report:#}");
    assert_eq!(built["image_size"], image_size, "{built:#}");

    // Per layer: blob, tar, stored file bytes and links as the tar holds them; before is
    // after plus what strip removed plus what was stored once.
    let rows = report["layers"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for ((row, m), desc) in rows.iter().zip(&measured).zip(descs) {
        assert_eq!(row["digest"], desc["digest"]);
        assert_eq!(row["recorded"], true);
        assert_eq!(row["compressed"], m.compressed, "{row:#}");
        assert_eq!(row["uncompressed"], m.tar, "{row:#}");
        assert_eq!(row["files"]["after"], m.files, "{row:#}");
        assert_eq!(row["duplicates"]["entries"], m.links, "{row:#}");
        assert_eq!(row["duplicates"]["bytes"], m.linked_bytes, "{row:#}");
        let before = row["files"]["before"].as_u64().unwrap();
        assert_eq!(
            before,
            m.files + m.linked_bytes + row["stripped"]["bytes"].as_u64().unwrap(),
            "{row:#}"
        );
    }
    let base = &rows[0];
    assert_eq!(base["component"], "base");
    assert_eq!(base["duplicates"]["entries"], 1);
    assert_eq!(base["duplicates"]["bytes"], big.len() as u64);
    assert_eq!(base["stripped"]["bytes"], 8000);
    // Per strip class: what each removed (the copyright file stays).
    assert_eq!(
        report["strip_classes"],
        serde_json::json!({"docs": {"entries": 1, "bytes": 5000}, "man": {"entries": 3, "bytes": 3000}}),
        "{report:#}"
    );
    // Per component: one layer each here, the same numbers.
    let comps = report["components"].as_array().unwrap();
    assert_eq!(comps.len(), 2);
    assert_eq!(comps[0]["component"], "base");
    assert_eq!(comps[0]["compressed"], base["compressed"]);
    // Per owner: the rootfs and the `files:` source, adding up to each layer's numbers.
    let owners = report["owners"].as_array().unwrap();
    for (i, row) in rows.iter().enumerate() {
        let mine: Vec<&Value> = owners
            .iter()
            .filter(|o| o["component"] == row["component"])
            .collect();
        assert!(!mine.is_empty(), "layer {i}: no owner");
        for k in ["before", "after"] {
            let sum: u64 = mine.iter().map(|o| o[k].as_u64().unwrap()).sum();
            assert_eq!(sum, row["files"][k], "layer {i} {k}: {report:#}");
        }
    }
    let rootfs = owners.iter().find(|o| o["owner"] == "rootfs").unwrap();
    assert_eq!(rootfs["component"], "base");
    // `files:` entries are owned by `files`: never a path of the build host.
    let files = owners.iter().find(|o| o["owner"] == "files").unwrap();
    assert_eq!(files["component"], "files");
    assert_eq!(files["after"], 19);
    // The totals are the layers' sums.
    assert_eq!(
        report["total"]["compressed"],
        measured.iter().map(|m| m.compressed).sum::<u64>()
    );
    assert_eq!(
        report["total"]["uncompressed"],
        measured.iter().map(|m| m.tar).sum::<u64>()
    );
    // The text form shows the same image size.
    let text = run_ok(sb.gpuimg().args(["inspect", "--sizes"]).arg(&out));
    assert!(
        text.contains(&format!(
            "({image_size} bytes: manifest, config and 2 layers)"
        )),
        "{text}"
    );
    assert!(
        text.contains("STRIP CLASS") && text.contains("rootfs"),
        "{text}"
    );

    // `--max-size` one byte below the image: exit 1, one line naming both, nothing written.
    let over = sb.join("over");
    let below = (image_size - 1).to_string();
    let r = build(&over, &["--max-size", &below]);
    let err = String::from_utf8_lossy(&r.stderr).into_owned();
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("({image_size} bytes")) && err.contains(&format!("({below} bytes)")),
        "{err}"
    );
    assert_error(&err, &[sb.path()]);
    assert!(r.stdout.is_empty());
    assert!(!over.exists(), "a refused build writes no output");
    // Exactly the image's size, or a unit above it: built, the same image.
    for limit in [image_size.to_string(), "1MB".to_string()] {
        let at = sb.join(format!("at-{limit}"));
        let r = build(&at, &["--max-size", &limit]);
        assert!(r.status.success(), "{limit}: {}", describe_output(&r));
        assert_eq!(
            json(&at.join("index.json"))["manifests"][0]["digest"],
            manifest_digest
        );
    }
}

fn describe_output(o: &std::process::Output) -> String {
    format!(
        "{:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
