//! Target `wheel`: a wheel as the installer receives it (`gpuimg_wheel::install`): the zip
//! (directory, local headers, stored and deflated members), `WHEEL`, `METADATA`, `RECORD`
//! and `entry_points.txt`, all from the fuzz bytes.
//!
//! Seeds are wheels built in memory with the zip crate: a pure one, one with `.data` schemes
//! and entry points, one with a `#!python` script; and, replayed as it is, one whose directory
//! holds 2,000,000 real entries (106 MB: a reader that loads it before counting holds 1.2 GB,
//! past the harness's memory cap). Mutations are text and byte edits of the whole archive (so
//! most break a CRC or a `RECORD` hash and are refused; the zip directory, names and sizes are
//! what gets exercised) and directory edits (`zip_edit`: end records claiming millions of
//! entries or gigabytes of directory, an entry repeated or renamed to another's name); one
//! seed has a deflated member over 1 MiB, which the installer leaves in the wheel.
//! Properties: the installer never panics; a wheel whose directory names a path twice is never
//! installed; an accepted wheel's tree lies under the image's scheme directories, every file
//! in it was written under the staging root or is read from the wheel itself, such a file
//! reads back as exactly its size or not at all, and nothing appears beside the staging root.

use std::io::Write as _;

use arbitrary::{Result, Unstructured};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use gpuimg_assemble::{DataSource, EntryKind};
use gpuimg_fetch::observe::Silent;
use gpuimg_pypi::ImagePython;
use gpuimg_pypi::{FetchedWheel, PinnedWheel};
use gpuimg_store::digest::Digest;
use gpuimg_wheel::WheelError;
use sha2::Digest as _;

use crate::fuzz::harness::{work_dir, Target, Verdict};
use crate::fuzz::{mutate, zip_edit};

pub static TARGET: Target = Target {
    name: "wheel",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 1_500,
};

const NAME: &str = "demo";

/// A wheel of `files` (path, bytes, unix mode) with a truthful RECORD.
fn wheel(files: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let di = "demo-1.0.dist-info";
    let mut all: Vec<(String, Vec<u8>, u32)> = files
        .iter()
        .map(|(p, d, m)| (p.to_string(), d.to_vec(), *m))
        .collect();
    all.push((
        format!("{di}/METADATA"),
        b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n".to_vec(),
        0o644,
    ));
    all.push((
        format!("{di}/WHEEL"),
        b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec(),
        0o644,
    ));
    let mut record = String::new();
    for (p, d, _) in &all {
        let h = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(d));
        record.push_str(&format!("{p},sha256={h},{}\n", d.len()));
    }
    record.push_str(&format!("{di}/RECORD,,\n"));
    all.push((format!("{di}/RECORD"), record.into_bytes(), 0o644));
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (i, (p, d, m)) in all.iter().enumerate() {
        let method = if i % 2 == 0 {
            zip::CompressionMethod::Deflated
        } else {
            zip::CompressionMethod::Stored
        };
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .unix_permissions(*m);
        z.start_file(p.as_str(), o).expect("a member");
        z.write_all(d).expect("its bytes");
    }
    z.finish().expect("a zip").into_inner()
}

fn seeds() -> Vec<Vec<u8>> {
    // Deflated first and over 1 MiB (in a few KiB): left in the wheel, read back checked.
    let big = b"\x7fELF sm_90 ".repeat((1 << 20) / 11 + 5);
    vec![
        wheel(&[
            ("demo/lib/libbig.so", &big, 0o755),
            ("demo/__init__.py", b"", 0o644),
        ]),
        wheel(&[
            ("demo/__init__.py", b"X = 1\n", 0o644),
            ("demo/cli.py", b"def main():\n    pass\n", 0o644),
        ]),
        wheel(&[
            ("demo/__init__.py", b"", 0o644),
            ("demo/tool", b"#!/bin/sh\necho hi\n", 0o755),
            ("demo-1.0.data/scripts/run", b"#!python\nprint(1)\n", 0o755),
            ("demo-1.0.data/headers/demo.h", b"int x;\n", 0o644),
            ("demo-1.0.data/data/share/demo/x.txt", b"x\n", 0o644),
            ("demo-1.0.data/purelib/extra.py", b"", 0o644),
            (
                "demo-1.0.dist-info/entry_points.txt",
                b"[console_scripts]\ndemo = demo.cli:main\n[gui_scripts]\ng = demo:main [x]\n",
                0o644,
            ),
        ]),
        // Last: never mutated (`mutate_input`), replayed once per run.
        zip_edit::with_more_entries(&wheel(&[("demo/__init__.py", b"", 0o644)]), 2_000_000),
    ]
}

const DICT: &[&[u8]] = &[
    b"../",
    b"/",
    b"\\",
    b".dist-info/",
    b".data/",
    b"scripts/",
    b"RECORD",
    b",sha256=",
    b"\"",
    b"PK\x01\x02",
    b"PK\x03\x04",
    b"PK\x05\x06",
    b"\xff\xff\xff\xff",
    b"\xa1\x81",
    b"\xed\x41",
    b"#!python",
    b"[console_scripts]\n",
];

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let small = &seeds[..seeds.len() - 1];
    if u.ratio(1, 3)? {
        let seed = mutate::pick_seed(u, small)?;
        let mut data = zip_edit::edit(u, seed)?;
        if u.ratio(1, 4)? {
            mutate::havoc(u, &mut data, 4, DICT, small)?;
        }
        return Ok(data);
    }
    mutate::text(u, small, DICT)
}

/// What a refusal was, for the tally.
fn refused(e: &WheelError) -> &'static str {
    match e {
        WheelError::TooManyEntries { .. } => "refused, too many entries",
        WheelError::Duplicate { .. } | WheelError::SamePath { .. } => "refused, a name twice",
        WheelError::Zip { source, .. } if source.to_string().contains("over the cap") => {
            "refused, a directory over the cap"
        }
        _ => "refused",
    }
}

fn python() -> ImagePython {
    ImagePython {
        version: (3, 11),
        full_version: "3.11.2".into(),
        interpreter: "/usr/bin/python3.11".into(),
        site_dir: "/usr/local/lib/python3.11/dist-packages".into(),
        scripts_dir: "/usr/local/bin".into(),
        glibc: (2, 36),
        machine: "x86_64".into(),
    }
}

fn check(input: &[u8]) -> Verdict {
    let work = work_dir("wheel");
    let case = tempfile::tempdir_in(&work).map_err(|e| e.to_string())?;
    let path = case.path().join("demo-1.0-py3-none-any.whl");
    std::fs::write(&path, input).map_err(|e| e.to_string())?;
    let staging = case.path().join("staging");
    std::fs::create_dir(&staging).map_err(|e| e.to_string())?;
    let w = FetchedWheel {
        pin: PinnedWheel {
            name: NAME.into(),
            version: "1.0".into(),
            filename: "demo-1.0-py3-none-any.whl".into(),
            sha256: Digest::of(input),
            size: input.len() as u64,
            index: "host".into(),
            requested: true,
            required_by: vec!["demo".into()],
        },
        path,
    };
    let set = [w.pin.clone()];
    let result = gpuimg_wheel::install(&[w], &set, &python(), None, true, &staging, &mut Silent);
    let beside: Vec<String> = std::fs::read_dir(case.path())
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "staging" && n != "demo-1.0-py3-none-any.whl")
        .collect();
    if !beside.is_empty() {
        return Err(format!("written beside the staging root: {beside:?}"));
    }
    let tree = match result {
        Ok(tree) => tree,
        Err(e) => return Ok(refused(&e)),
    };
    let mut names: Vec<Vec<u8>> = zip_edit::names(input);
    for n in &mut names {
        while n.last() == Some(&b'/') {
            n.pop();
        }
    }
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "installed a wheel whose directory names `{}` twice",
            String::from_utf8_lossy(&w[0])
        ));
    }
    let mut archived = false;
    for e in tree.iter() {
        if !e.path.starts_with("usr/local/") && !["usr", "usr/local"].contains(&e.path.as_str()) {
            return Err(format!("`{}` is outside the scheme", e.path));
        }
        match &e.kind {
            EntryKind::File {
                data: DataSource::Path { path, .. },
                ..
            } if !path.starts_with(&staging) => {
                return Err(format!("`{}` reads `{}`", e.path, path.display()));
            }
            // A file left in the wheel: read from the input and nothing else, and read back as
            // exactly its size or refused.
            EntryKind::File {
                size,
                data: DataSource::Archived(a),
            } => {
                archived = true;
                if a.archive.as_path() != case.path().join("demo-1.0-py3-none-any.whl") {
                    return Err(format!("`{}` reads `{}`", e.path, a.archive.display()));
                }
                if let Ok(Some(bytes)) = tree.read_file(&e.path, *size) {
                    if bytes.len() as u64 != *size {
                        return Err(format!("`{}` read back as {} bytes", e.path, bytes.len()));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(if archived {
        "installed, a file left in the wheel"
    } else {
        "installed"
    })
}
