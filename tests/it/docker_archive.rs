//! `-o docker-archive:FILE[:TAG]`: the `docker save` format (`manifest.json`, `repositories`,
//! config and layer blobs) that `podman load` accepts and whose image runs; the same input
//! gives the same bytes; zstd is refused with one line, exit 2, nothing written.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

fn profile(dir: &Path) -> PathBuf {
    busybox_rootfs(dir);
    write(
        &dir.join("app/hello.sh"),
        "echo hello from the docker archive\n",
    );
    let p = dir.join("profile.yaml");
    write(
        &p,
        r#"name: demo/docker
base:
  rootfs: ./rootfs
files:
  - {src: ./app, dst: /opt/app, mode: "0755"}
config:
  entrypoint: ["/bin/sh", "/opt/app/hello.sh"]
"#,
    );
    p
}

fn build(t: &Sandbox, p: &Path, output: &str, extra: &[&str]) -> std::process::Output {
    run(t
        .gpuimg()
        .arg("build")
        .arg(p)
        .arg("-o")
        .arg(output)
        .args(extra))
}

/// The archive's entries in order, with their bytes.
fn entries(archive: &Path) -> Vec<(String, Vec<u8>)> {
    let mut a = tar::Archive::new(std::fs::File::open(archive).unwrap());
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().display().to_string();
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut body).unwrap();
            (name, body)
        })
        .collect()
}

#[test]
fn docker_archive_loads_into_podman_runs_and_is_reproducible() {
    require("skopeo");
    let t = Sandbox::new();
    let p = profile(t.path());
    let archive = t.path().join("img/demo.tar");
    let out = build(
        &t,
        &p,
        &format!("docker-archive:{}:v3", archive.display()),
        &["--json"],
    );
    assert!(out.status.success(), "{}", describe_out(&out));
    let json = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(
        v["output"],
        format!("docker-archive:{}", archive.display()).as_str()
    );
    let layers: Vec<String> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["digest"].as_str().unwrap().to_string())
        .collect();

    // What docker and podman read: manifest.json naming the config, tag and layers present in
    // the archive, each with the digest it is named by; entries sorted, fixed owner and time.
    let e = entries(&archive);
    let names: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    for want in ["manifest.json", "repositories"] {
        assert!(names.contains(&want), "{want} missing: {names:?}");
    }
    // No OCI layout files: podman would load it as an oci-archive, named after the tag.
    assert!(!names.contains(&"index.json") && !names.contains(&"oci-layout"));
    let body = |n: &str| e.iter().find(|(m, _)| m == n).unwrap().1.clone();
    let m: serde_json::Value = serde_json::from_slice(&body("manifest.json")).unwrap();
    assert_eq!(m.as_array().unwrap().len(), 1);
    assert_eq!(m[0]["RepoTags"], serde_json::json!(["demo/docker:v3"]));
    let config = m[0]["Config"].as_str().unwrap();
    assert_eq!(
        format!("sha256:{}", config.trim_start_matches("blobs/sha256/")),
        v["config_digest"].as_str().unwrap()
    );
    let listed: Vec<String> = m[0]["Layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let path = l.as_str().unwrap();
            let hex = path.trim_start_matches("blobs/sha256/");
            assert_eq!(gpuimg_store::digest::Digest::of(&body(path)).hex(), hex);
            format!("sha256:{hex}")
        })
        .collect();
    assert_eq!(listed, layers);
    let cfg: serde_json::Value = serde_json::from_slice(&body(config)).unwrap();
    assert_eq!(
        cfg["rootfs"]["diff_ids"].as_array().unwrap().len(),
        layers.len()
    );
    let repos: serde_json::Value = serde_json::from_slice(&body("repositories")).unwrap();
    assert!(repos["demo/docker"]["v3"].is_string(), "{repos}");
    let mut a = tar::Archive::new(std::fs::File::open(&archive).unwrap());
    for entry in a.entries().unwrap() {
        let h = entry.unwrap().header().clone();
        assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (0, 0));
        assert_eq!(h.mtime().unwrap(), 0);
    }

    // skopeo reads it as a docker-archive and finds the same image.
    let insp = run_ok(
        std::process::Command::new("skopeo")
            .arg("inspect")
            .arg(format!("docker-archive:{}", archive.display())),
    );
    let insp: serde_json::Value = serde_json::from_str(&insp).unwrap();
    assert_eq!(insp["Layers"].as_array().unwrap().len(), layers.len());

    // podman loads it under its tag and runs it.
    let loaded = podman_load(t.path(), &archive);
    assert!(loaded.status.success(), "{}", describe_out(&loaded));
    assert!(
        String::from_utf8_lossy(&loaded.stdout).contains("demo/docker:v3"),
        "{}",
        describe_out(&loaded)
    );
    let ran = podman_run(t.path(), "localhost/demo/docker:v3", &[]);
    assert!(ran.status.success(), "{}", describe_out(&ran));
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        "hello from the docker archive\n"
    );

    // The same input in a fresh cache gives the same bytes.
    let again = t.path().join("again.tar");
    let t2 = Sandbox::new();
    let out = run(t
        .gpuimg_with_cache(&t2.cache())
        .arg("build")
        .arg(&p)
        .arg("-o")
        .arg(format!("docker-archive:{}:v3", again.display())));
    assert!(out.status.success(), "{}", describe_out(&out));
    assert_eq!(
        std::fs::read(&archive).unwrap(),
        std::fs::read(&again).unwrap()
    );

    // A rebuild of the same tag replaces its own archive; another tag does not.
    let out = build(
        &t,
        &p,
        &format!("docker-archive:{}:v3", archive.display()),
        &[],
    );
    assert!(out.status.success(), "{}", describe_out(&out));
    let out = build(
        &t,
        &p,
        &format!("docker-archive:{}:v4", archive.display()),
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe_out(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`demo/docker:v3`"),
        "{}",
        describe_out(&out)
    );
    assert_eq!(
        std::fs::read(&archive).unwrap(),
        std::fs::read(&again).unwrap()
    );
}

#[test]
fn zstd_into_a_docker_archive_is_refused_in_one_line() {
    let t = Sandbox::new();
    let p = profile(t.path());
    let archive = t.path().join("z.tar");
    let out = build(
        &t,
        &p,
        &format!("docker-archive:{}", archive.display()),
        &["--compression", "zstd"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("zstd") && stderr.contains("docker-archive"),
        "{stderr}"
    );
    assert_error(&stderr, &[t.path()]);
    assert!(!archive.exists());
    assert!(!t.cache().exists());
}

#[test]
fn a_file_that_is_not_a_previous_archive_is_not_replaced() {
    let t = Sandbox::new();
    let p = profile(t.path());
    let archive = t.path().join("keep.tar");
    std::fs::write(&archive, b"precious").unwrap();
    let out = build(
        &t,
        &p,
        &format!("docker-archive:{}", archive.display()),
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Refusing to replace"), "{stderr}");
    assert_error(&stderr, &[t.path()]);
    assert_eq!(std::fs::read(&archive).unwrap(), b"precious");
}

fn describe_out(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
