//! Output paths stay where the user put them: a profile's `name:` follows the distribution
//! spec's repository-name grammar and `--tag` its tag grammar (narrowed to the image spec's
//! ref-name grammar, which umoci and skopeo enforce). A bad one is one line on
//! stderr with exit 2 and nothing written anywhere (no `out/`, no cache, nothing climbing
//! out); good ones give images umoci and skopeo accept.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;

/// Every path under `root` with its contents (files) or kind (others).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let t = e.file_type().unwrap();
            let v = if t.is_dir() {
                todo.push(p.clone());
                b"<dir>".to_vec()
            } else if t.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                b"<other>".to_vec()
            };
            m.insert(p, v);
        }
    }
    m
}

/// A working directory six levels below the test's root, so that a name climbing out of
/// `out/` lands inside the root, where the snapshot sees it.
fn deep_workdir(root: &Path) -> PathBuf {
    let w = root.join("1/2/3/4/5/6/work");
    std::fs::create_dir_all(&w).unwrap();
    busybox_rootfs(&w);
    w
}

/// Run `gpuimg build` in `work` (default output `out/<name>`) and assert the failure
/// contract; returns stderr.
fn refused(root: &Sandbox, work: &Path, profile: &str, args: &[&str], needle: &str) -> String {
    let p = work.join("profile.yaml");
    write(&p, profile);
    let before = snapshot(root);
    let out = run(root
        .gpuimg()
        .current_dir(work)
        .arg("build")
        .arg("profile.yaml")
        .args(args));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{profile:?} {args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(needle), "expected `{needle}` in: {stderr}");
    assert_error(&stderr, &[root.path()]);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let after = snapshot(root);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "{profile:?} {args:?} wrote something"
    );
    assert!(!root.join("cache").exists());
    stderr
}

#[test]
fn names_outside_the_grammar_are_refused_at_load_with_their_position() {
    let t = Sandbox::new();
    let work = deep_workdir(t.path());
    let long = format!("\"{}\"", "a".repeat(256));
    let names = [
        "a/../../../x",
        "a/../../../../../../../x",
        "../x",
        "..",
        ".",
        "./x",
        "x/./y",
        "/abs",
        "\"/\"",
        "a/",
        "a//b",
        "Demo",
        "UPPER/case",
        "\"a b\"",
        "\"a\\nb\"",
        "\"a\\tb\"",
        "a:b",
        "a@b",
        "-lead",
        "trail-",
        "_lead",
        "a___b",
        "a..b",
        "a.-b",
        "caf\u{e9}",
        "\"\"",
        "\"a\\0b\"",
        long.as_str(),
    ];
    for name in names {
        let profile = format!("name: {name}\nbase:\n  rootfs: ./rootfs\n");
        let e = refused(&t, &work, &profile, &[], "profile.yaml:1:7: name:");
        assert!(
            e.contains("is not a valid image name") || e.contains("NUL character is not allowed"),
            "{e}"
        );
    }
}

#[test]
fn tags_outside_the_grammar_are_refused_before_anything_is_written() {
    let t = Sandbox::new();
    let work = deep_workdir(t.path());
    let profile = "name: demo\nbase:\n  rootfs: ./rootfs\n";
    let long = "t".repeat(129);
    for tag in [
        "../x",
        "..",
        "",
        " ",
        "a b",
        "a\nb",
        "latest\n",
        "a\tb",
        ".hidden",
        "-dash",
        "_",
        "_under",
        "trail.",
        "trail-",
        "a..b",
        "a__b",
        "a---b",
        "a/b",
        "/abs",
        "a:b",
        "a@sha256",
        "caf\u{e9}",
        long.as_str(),
    ] {
        let arg = format!("--tag={tag}");
        let e = refused(&t, &work, profile, &[&arg], "`--tag`");
        assert!(e.contains("is not a valid tag"), "{e}");
    }
    // With an explicit output too: nothing is created there either.
    let e = refused(
        &t,
        &work,
        profile,
        &["--tag", "../../escape", "-o", "oci-archive:img.tar"],
        "`--tag`",
    );
    assert!(e.contains("`../../escape`"), "{e}");
}

#[test]
fn names_and_tags_inside_the_grammar_build_images_the_tools_accept() {
    require("umoci");
    require("skopeo");
    let t = Sandbox::new();
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    busybox_rootfs(&work);
    let max_tag = format!("v{}", "1".repeat(127));
    let cases = [
        ("org/team/cuda.runtime", "v1.2.3"),
        ("a__b/c---d", "a--b"),
        ("x9", max_tag.as_str()),
        ("plain", "Mixed.Case-tag_1"),
    ];
    for (name, tag) in cases {
        write(
            &work.join("profile.yaml"),
            &format!("name: {name}\nbase:\n  rootfs: ./rootfs\n"),
        );
        run_ok(
            t.gpuimg()
                .current_dir(&work)
                .args(["build", "profile.yaml", "--tag", tag]),
        );
        // The default output is out/<name>, nested as the name's components say.
        let out = work.join("out").join(name);
        assert!(out.join("index.json").is_file(), "{}", out.display());
        let bundle = t.path().join(format!("bundle-{}", name.replace('/', "_")));
        run_ok(
            std::process::Command::new("umoci")
                .args(["unpack", "--rootless", "--image"])
                .arg(format!("{}:{tag}", out.display()))
                .arg(&bundle),
        );
        assert!(bundle.join("rootfs/bin/busybox").is_file());
        let v: serde_json::Value = serde_json::from_str(&run_ok(
            std::process::Command::new("skopeo")
                .arg("inspect")
                .arg(format!("oci:{}:{tag}", out.display())),
        ))
        .unwrap();
        assert_eq!(v["Architecture"], "amd64", "{v}");
    }
    // Nothing but `out/` (and the inputs) appeared in the working directory.
    let mut names: Vec<String> = std::fs::read_dir(&work)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["out", "profile.yaml", "rootfs"]);
}

/// Issue 33, class 8: `--sbom` never lands on the output it describes: not on the archive
/// (by any spelling of its path), not inside the layout's own structure. Refused before
/// anything is written.
#[test]
fn an_sbom_over_the_output_is_refused_before_anything_is_written() {
    let t = Sandbox::new();
    let work = deep_workdir(t.path());
    let profile = "name: demo\nbase:\n  rootfs: ./rootfs\nselftest: {enabled: false}\n";
    for args in [
        &["--sbom", "img.tar", "-o", "oci-archive:img.tar"][..],
        &["--sbom", "./x/../img.tar", "-o", "oci-archive:img.tar"],
        &["--sbom", "img.tar", "-o", "docker-archive:img.tar"],
        &["--sbom", "out/index.json", "-o", "oci:out"],
        &["--sbom", "out/blobs/sha256/x", "-o", "oci:out"],
        &["--sbom", "out", "-o", "oci:out"],
        &["--sbom", "out/demo/index.json"],
    ] {
        refused(&t, &work, profile, args, "would be written over the output");
    }
    // Beside the output is fine.
    run_ok(t.gpuimg().current_dir(&work).args([
        "build",
        "profile.yaml",
        "--sbom",
        "img.spdx.json",
        "-o",
        "oci-archive:img.tar",
    ]));
    assert!(work.join("img.spdx.json").is_file() && work.join("img.tar").is_file());
}

/// Issue 34, item 7: a misspelt transport is bad input with the nearest one suggested, never a
/// directory named `oci-achive:x.tar`.
#[test]
fn an_unknown_transport_is_refused_with_the_nearest_one() {
    let t = Sandbox::new();
    let work = deep_workdir(t.path());
    let profile = "name: demo\nbase:\n  rootfs: ./rootfs\nselftest: {enabled: false}\n";
    for (o, near) in [
        ("oci-achive:x.tar", "did you mean `oci-archive:`?"),
        ("docker-archve:x.tar", "did you mean `docker-archive:`?"),
        ("ocii:dir", "did you mean `oci:`?"),
        ("regsitry:localhost:5000/a/b", "did you mean `registry:`?"),
        ("out:v1", "is written `./out:v1`"),
    ] {
        refused(&t, &work, profile, &["-o", o], near);
    }
}
