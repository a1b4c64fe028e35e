//! Issue 37, items 2 and 5: `platforms: [linux/amd64, linux/arm64]` builds one OCI image index
//! with a manifest per platform, each resolved for its platform from the same sources (Debian
//! bookworm's `python3` for amd64 and arm64 from the host's apt sources, `pyyaml`'s compiled
//! wheel for each from the host's Python index) with its own self-test (the amd64 one Cargo
//! built, the arm64 one `scripts/build-selftest-arm64.sh` built). `skopeo inspect --raw` shows
//! the index; the layer both platforms have byte for byte (the `files:` data) is one blob; podman
//! runs each platform (`qemu-aarch64-static` registered with `binfmt_misc` for the test,
//! `common::arm64::Binfmt`): `uname -m` and the compiled extension answer for that machine, and
//! each self-test starts and says no driver. The index is pushed to the reference registry
//! (each manifest with its SBOM referrer, the shared blob once) and each platform copied back
//! with its digest; an oci-archive holds the index, a docker-archive takes one platform. The
//! lock holds a part per platform, and a
//! `--locked` build from an emptied cache gives the same index digest. `--platform` builds one.

use std::path::Path;
use std::process::Command;

use crate::common::arm64::{arm64_selftest, Binfmt};
use crate::common::*;

fn profile(sb: &Sandbox) -> std::path::PathBuf {
    std::fs::write(sb.join("app.txt"), "the same on every platform\n").unwrap();
    let p = sb.join("multi.yaml");
    std::fs::write(
        &p,
        format!(
            r#"name: multi
platforms: [linux/amd64, linux/arm64]
base:
  apt:
    mirror: host
    suite: bookworm
    packages: [base-files, base-passwd, libc6, python3]
files:
  - {{src: app.txt, dst: /opt/app/app.txt}}
python:
  packages: ["pyyaml>=6"]
host: {{gpus: [H100]}}
selftest:
  binary: {{linux/amd64: {}, linux/arm64: {}}}
"#,
            Bin::Selftest.path().display(),
            arm64_selftest().display()
        ),
    )
    .unwrap();
    p
}

fn build_json(cmd: &mut std::process::Command) -> serde_json::Value {
    serde_json::from_slice(&run_ok_bytes(cmd.arg("--json"))).unwrap()
}

#[test]
fn two_platforms_make_one_index_that_podman_runs_on_each() {
    let sb = Sandbox::new();
    let p = profile(&sb);
    let layout = sb.join("out");
    let oci = format!("oci:{}:v1", layout.display());

    run_ok(with_host_index(sb.gpuimg()).arg("lock").arg(&p));
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sb.join("multi.lock.json")).unwrap()).unwrap();
    for (platform, machine) in [("linux/amd64", "x86_64"), ("linux/arm64", "aarch64")] {
        let part = &lock["platforms"][platform]["artifacts"];
        let files: Vec<&str> = part
            .as_array()
            .unwrap_or_else(|| panic!("no {platform} part: {lock}"))
            .iter()
            .filter_map(|a| a["filename"].as_str())
            .collect();
        assert!(
            files
                .iter()
                .any(|f| f.to_lowercase().starts_with("pyyaml-") && f.contains(machine)),
            "{platform}: {files:?}"
        );
        let debian = if machine == "x86_64" {
            "amd64"
        } else {
            "arm64"
        };
        assert!(
            part.as_array()
                .unwrap()
                .iter()
                .any(|a| a["name"] == "python3.11-minimal" && a["architecture"] == debian),
            "{platform}: {part}"
        );
    }

    let built = build_json(
        with_host_index(sb.gpuimg())
            .arg("build")
            .arg(&p)
            .arg("--locked")
            .arg("-o")
            .arg(&oci),
    );
    let index = built["manifest_digest"].as_str().unwrap().to_string();
    assert_eq!(built["index_digest"], index.as_str());
    // The `files` layer is the same bytes on both platforms: one blob, counted.
    assert_eq!(built["shared_layers"], 1, "{built}");

    let raw = run_ok_bytes(Command::new("skopeo").args(["inspect", "--raw", &oci]));
    let raw: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(raw["mediaType"], "application/vnd.oci.image.index.v1+json");
    let platforms: Vec<(String, String)> = raw["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["platform"]["architecture"].as_str().unwrap().to_string(),
                m["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        platforms
            .iter()
            .map(|(a, _)| a.as_str())
            .collect::<Vec<_>>(),
        ["amd64", "arm64"]
    );
    for (arch, digest) in &platforms {
        // skopeo resolves the index to the platform's manifest, and copies it unchanged.
        let copy = sb.join(format!("copy-{arch}"));
        run_ok(Command::new("skopeo").args([
            "copy",
            "--override-arch",
            arch,
            &oci,
            &format!("oci:{}:x", copy.display()),
        ]));
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(copy.join("index.json")).unwrap()).unwrap();
        assert_eq!(
            index["manifests"][0]["digest"],
            digest.as_str(),
            "{arch}: {index}"
        );
    }
    let shared = shared_blobs(&layout, &raw);
    assert_eq!(shared.len(), 1, "{shared:?}");
    // `inspect` shows the index and each platform, the shared layer counted once.
    let shown: serde_json::Value =
        serde_json::from_slice(&run_ok_bytes(sb.gpuimg().args(["inspect", "--json", &oci])))
            .unwrap();
    assert_eq!(shown["index"]["digest"], index.as_str(), "{shown}");
    let listed: Vec<&str> = (shown["platforms"].as_array().unwrap().iter())
        .map(|p| p["platform"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["linux/amd64", "linux/arm64"]);
    assert_eq!(shown["all_platforms"]["shared_layers"], 1, "{shown}");

    let _binfmt = Binfmt::register();
    let dir = sb.join("podman");
    std::fs::create_dir_all(&dir).unwrap();
    for (platform, machine) in [("linux/amd64", "x86_64"), ("linux/arm64", "aarch64")] {
        let out = podman_run_with(
            &dir,
            &["--platform", platform, "--entrypoint", "python3"],
            &oci,
            &[
                "-c",
                "import os, yaml, yaml._yaml as c; print(os.uname().machine, yaml.__with_libyaml__, os.path.basename(c.__file__))",
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{platform}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            stdout.trim(),
            format!("{machine} True _yaml.cpython-311-{machine}-linux-gnu.so"),
            "{platform}"
        );
        // The image's own entrypoint: that platform's self-test starts and finds no driver.
        let out = podman_run_with(&dir, &["--platform", platform], &oci, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("gpuimg-selftest: No NVIDIA driver"),
            "{platform}: {stderr}"
        );
    }
    drop(_binfmt);

    // From an emptied cache, the lock builds the same index.
    let again = build_json(
        with_host_index(sb.gpuimg_with_cache(&sb.join("cache2")))
            .arg("build")
            .arg(&p)
            .arg("--locked")
            .arg("-o")
            .arg(sb.join("again")),
    );
    assert_eq!(again["manifest_digest"], index.as_str());

    // Pushed: the index by tag, each manifest by digest with its own SBOM as its referrer, the
    // shared blob uploaded once; each platform copies back with its digest.
    let reg = Registry::plain();
    let pushed = build_json(
        sb.gpuimg()
            .arg("build")
            .arg(&p)
            .arg("--locked")
            .arg("-o")
            .arg(format!("registry:{}", reg.reference("demo/multi:v1"))),
    );
    assert_eq!(pushed["push"]["digest"], index.as_str(), "{pushed}");
    let shared_digest = &shared[0];
    let uploads = reg
        .uploads_since(0)
        .iter()
        .filter(|r| {
            r.method == "PUT" && r.decoded_uri().contains(&format!("digest={shared_digest}"))
        })
        .count();
    assert_eq!(uploads, 1, "the shared layer went up once");
    for (arch, digest) in &platforms {
        let hex = digest.trim_start_matches("sha256:");
        let referrers = reg
            .inspect_raw(&format!("demo/multi:sha256-{hex}"))
            .unwrap_or_else(|e| panic!("no SBOM referrer of {digest}: {e}"));
        let referrers: serde_json::Value = serde_json::from_slice(&referrers).unwrap();
        assert_eq!(
            referrers["manifests"].as_array().unwrap().len(),
            1,
            "{referrers}"
        );
        let back = sb.join(format!("pulled-{arch}"));
        let mut c = reg.skopeo();
        c.args(["--override-arch", arch, "--override-os", "linux", "copy"])
            .args(reg.skopeo_tls("src-"))
            .arg(format!("docker://{}", reg.reference("demo/multi:v1")))
            .arg(format!("oci:{}:v1", back.display()));
        run_ok(&mut c);
        let got: serde_json::Value =
            serde_json::from_slice(&std::fs::read(back.join("index.json")).unwrap()).unwrap();
        assert_eq!(
            got["manifests"][0]["digest"],
            digest.as_str(),
            "{arch}: {got}"
        );
    }

    // An oci-archive holds the same index; a docker-archive holds one platform, so without
    // `--platform` it is one line and exit 2, nothing written.
    let archive = sb.join("multi.tar");
    let a = build_json(
        sb.gpuimg()
            .arg("build")
            .arg(&p)
            .arg("--locked")
            .arg("-o")
            .arg(format!("oci-archive:{}:v1", archive.display())),
    );
    assert_eq!(a["manifest_digest"], index.as_str());
    let raw_archive = run_ok_bytes(Command::new("skopeo").args([
        "inspect",
        "--raw",
        &format!("oci-archive:{}:v1", archive.display()),
    ]));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&raw_archive).unwrap(),
        raw
    );
    let docker = sb.join("multi.docker.tar");
    let out = run(sb
        .gpuimg()
        .arg("build")
        .arg(&p)
        .arg("--locked")
        .arg("-o")
        .arg(format!("docker-archive:{}", docker.display())));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("`--platform`"), "{stderr}");
    assert!(!docker.exists());
    let d = build_json(
        sb.gpuimg()
            .arg("build")
            .arg(&p)
            .arg("--locked")
            .args(["--platform", "linux/arm64"])
            .arg("-o")
            .arg(format!("docker-archive:{}", docker.display())),
    );
    assert_eq!(d["manifest_digest"], platforms[1].1.as_str());

    // `--platform` builds that platform's image alone: the index's arm64 manifest.
    let one = build_json(
        sb.gpuimg()
            .arg("build")
            .arg(&p)
            .arg("--locked")
            .arg("--platform")
            .arg("linux/arm64")
            .arg("-o")
            .arg(sb.join("one")),
    );
    assert_eq!(one["manifest_digest"], platforms[1].1.as_str());
    assert!(one.get("platforms").is_none(), "{one}");
}

/// Layer blobs named by more than one of the index's manifests.
fn shared_blobs(layout: &Path, index: &serde_json::Value) -> Vec<String> {
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for m in index["manifests"].as_array().unwrap() {
        let hex = m["digest"].as_str().unwrap().trim_start_matches("sha256:");
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(layout.join("blobs/sha256").join(hex)).unwrap())
                .unwrap();
        for l in manifest["layers"].as_array().unwrap() {
            *seen
                .entry(l["digest"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(d, _)| d)
        .collect()
}

/// The flags that name one file refuse a profile of several platforms in one line (exit 2,
/// nothing written) and work with `--platform`; `lock --platform` locks that platform's part
/// and keeps the others of a fresh lock; `resolve` answers per platform.
#[test]
fn one_file_flags_need_one_platform_and_lock_parts_are_kept() {
    let sb = Sandbox::new();
    std::fs::write(sb.join("data.txt"), "data\n").unwrap();
    let p = sb.join("two.yaml");
    std::fs::write(
        &p,
        "name: two\nplatforms: [linux/amd64, linux/arm64]\nfiles:\n  - {src: data.txt, dst: /data.txt}\nselftest: {enabled: false}\n",
    )
    .unwrap();
    let refused = |args: &[&str], says: &str| {
        let out = run(sb
            .gpuimg()
            .arg("build")
            .arg(&p)
            .args(args)
            .arg("-o")
            .arg(sb.join("out")));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!sb.join("out").exists());
    };
    let sbom = sb.join("sbom.json");
    let sbom = sbom.to_str().unwrap();
    refused(&["--sbom", sbom], "`--sbom FILE` writes one SBOM");
    refused(
        &["--selftest-binary", Bin::Selftest.path().to_str().unwrap()],
        "`--selftest-binary` names one binary",
    );
    refused(&["--platform", "linux/s390x"], "pick one of those");
    run_ok(
        sb.gpuimg()
            .arg("build")
            .arg(&p)
            .args(["--platform", "linux/arm64", "--sbom", sbom, "-o"])
            .arg(sb.join("out")),
    );
    assert!(std::path::Path::new(sbom).is_file());

    // `lock --platform` writes that part; a second for the other keeps the first.
    let lock_path = sb.join("two.lock.json");
    let parts = || -> Vec<String> {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&lock_path).unwrap()).unwrap();
        v["platforms"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    run_ok(
        sb.gpuimg()
            .arg("lock")
            .arg(&p)
            .args(["--platform", "linux/arm64"]),
    );
    assert_eq!(parts(), ["linux/arm64"]);
    let out = run(sb
        .gpuimg()
        .arg("build")
        .arg(&p)
        .arg("--locked")
        .arg("-o")
        .arg(sb.join("idx")));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no `linux/amd64` part"), "{stderr}");
    run_ok(
        sb.gpuimg()
            .arg("lock")
            .arg(&p)
            .args(["--platform", "linux/amd64"]),
    );
    assert_eq!(parts(), ["linux/amd64", "linux/arm64"]);
    let built = run_ok(
        sb.gpuimg()
            .arg("build")
            .arg(&p)
            .arg("--locked")
            .arg("-o")
            .arg(sb.join("idx")),
    );
    assert!(built.is_empty(), "{built}");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sb.join("idx/index.json")).unwrap()).unwrap();
    assert_eq!(
        index["manifests"][0]["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );

    // `resolve` answers for each platform, or for the one picked.
    let v: serde_json::Value = serde_json::from_slice(&run_ok_bytes(
        sb.gpuimg().args(["resolve", "--json"]).arg(&p),
    ))
    .unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["platforms"].as_array().unwrap().len(), 2, "{v}");
    let one: serde_json::Value = serde_json::from_slice(&run_ok_bytes(
        sb.gpuimg()
            .args(["resolve", "--json", "--platform", "linux/arm64"])
            .arg(&p),
    ))
    .unwrap();
    assert_eq!(one["ok"], true);
    assert!(one.get("platforms").is_none(), "{one}");
}
