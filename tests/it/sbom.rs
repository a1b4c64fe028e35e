//! The SBOM: an SPDX 2.3 document that the SPDX project's own validator (`pyspdxtools`, from
//! the spdx-tools package, installed by this test into a venv with the host's pip and its
//! index configuration) accepts, listing exactly the packages `dpkg-query -W` and
//! `importlib.metadata` see in the image (Debian bookworm from the host's apt sources, two
//! wheels from a fixture index), with the lock's checksums and the wheels' licences; in the
//! image at /usr/share/gpuimg/sbom.spdx.json, in the last layer, and beside the output with
//! `--sbom FILE`. A GPU image's SBOM carries the stack, driver floor, NVIDIA_REQUIRE_CUDA and
//! self-test digest as annotations on the image's package.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::*;

/// `pyspdxtools` in a venv under the test target's temporary directory, made once with the
/// host's `python3 -m venv` and pip (which reads the host's index configuration: the
/// variables in `PYTHON_INDEX_VARS` and pip's configuration files pass through).
fn pyspdxtools() -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("spdx-tools-0.8.5");
    let tool = venv.join("bin/pyspdxtools");
    if tool.is_file() {
        return tool;
    }
    require("python3");
    let _ = std::fs::remove_dir_all(&venv);
    run_ok(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    let out =
        run(Command::new(venv.join("bin/pip")).args(["install", "--quiet", "spdx-tools==0.8.5"]));
    assert!(
        out.status.success() && tool.is_file(),
        "installing spdx-tools with the host's pip failed (the test needs it; check the host's Python index configuration): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    tool
}

/// Validate `doc` with pyspdxtools: exit 0 and no complaint.
fn validate(doc: &Path) {
    let out = run(Command::new(pyspdxtools()).arg("-i").arg(doc));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "pyspdxtools refused {}: {said}",
        doc.display()
    );
    assert!(
        !said.to_lowercase().contains("invalid") && !said.to_lowercase().contains("error"),
        "pyspdxtools complained about {}: {said}",
        doc.display()
    );
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(400)])
        )
    })
}

/// PEP 503 normalisation.
fn norm(name: &str) -> String {
    let mut out = String::new();
    for c in name.to_lowercase().chars() {
        let c = if "._-".contains(c) { '-' } else { c };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out
}

/// The SBOM's packages of one kind (`deb` / `wheel`, by SPDXID) as name → package.
fn packages(doc: &serde_json::Value, kind: &str) -> BTreeMap<String, serde_json::Value> {
    doc["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["SPDXID"]
                .as_str()
                .unwrap()
                .starts_with(&format!("SPDXRef-{kind}-"))
        })
        .map(|p| (p["name"].as_str().unwrap().to_string(), p.clone()))
        .collect()
}

fn run_in(sb: &Sandbox, image: &str, args: &[&str]) -> String {
    let out = podman_run_with(sb.path(), &[], image, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_sbom_lists_exactly_the_image_packages_and_validates() {
    let sb = Sandbox::new();
    let wheels = [
        WheelSpec::new("sbom-demo", "1.2.0")
            .file("sbom_demo/__init__.py", "")
            .header("Author-email: Jane Doe <jane@example.org>")
            .header("License-Expression: MIT OR LicenseRef-Demo-Terms")
            .requires("oldlicence"),
        WheelSpec::new("oldlicence", "0.3")
            .file("oldlicence.py", "")
            .header("Author: Bob")
            .header("License: BSD-ish, see the LICENSE file"),
    ];
    let server = serve(&wheel_index(sb.path(), &wheels));
    let profile = sb.join("sbom.yaml");
    write(
        &profile,
        &format!(
            "name: sbom-demo\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [base-files, base-passwd, libc6, coreutils, dpkg, python3]\nselftest: {{enabled: false}}\npython:\n  index: {}/simple/\n  packages: [sbom-demo]\n",
            server.url
        ),
    );
    run_ok(sb.gpuimg().arg("lock").arg(&profile));
    let lock = json(&std::fs::read(sb.join("sbom.lock.json")).unwrap());
    let out = sb.join("out");
    let beside = sb.join("reports/sbom.spdx.json");
    let built = run_ok(
        sb.gpuimg()
            .args(["build", "--locked", "--json", "-o"])
            .arg(&out)
            .arg("--sbom")
            .arg(&beside)
            .arg(&profile),
    );
    let v = json(built.as_bytes());
    let components: Vec<&str> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    assert_eq!(components.last(), Some(&"sbom"), "{components:?}");
    assert_eq!(v["sbom"], beside.display().to_string().as_str());

    // The document beside the output is the one in the image, and pyspdxtools accepts it.
    validate(&beside);
    let image = format!("oci:{}:latest", out.display());
    let inside = run_in(&sb, &image, &["cat", "/usr/share/gpuimg/sbom.spdx.json"]);
    let written = std::fs::read(&beside).unwrap();
    assert_eq!(inside.as_bytes(), written.as_slice());
    let doc = json(&written);
    assert_eq!(doc["spdxVersion"], "SPDX-2.3");
    assert_eq!(doc["creationInfo"]["created"], "1970-01-01T00:00:00Z");

    // Debian: exactly what dpkg sees, with the lock's versions and checksums.
    let dpkg = run_in(
        &sb,
        &image,
        &["dpkg-query", "-W", "-f", "${Package} ${Version}\\n"],
    );
    let seen: BTreeSet<(String, String)> = dpkg
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    assert!(seen.len() > 10, "{dpkg}");
    let debs = packages(&doc, "deb");
    let listed: BTreeSet<(String, String)> = debs
        .iter()
        .map(|(n, p)| (n.clone(), p["versionInfo"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(listed, seen, "SBOM debs vs dpkg-query -W");
    let locked: BTreeMap<String, String> = lock["artifacts"]
        .as_array()
        .unwrap_or_else(|| panic!("no artifacts in the lock: {lock}"))
        .iter()
        .filter(|p| p["kind"] == "deb")
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["sha256"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (name, p) in &debs {
        assert_eq!(p["checksums"][0]["algorithm"], "SHA256");
        let want = locked[name].trim_start_matches("sha256:");
        assert_eq!(p["checksums"][0]["checksumValue"], want, "{name}");
        assert_eq!(p["filesAnalyzed"], false);
        assert_eq!(p["licenseDeclared"], "NOASSERTION");
    }
    assert!(
        debs["libc6"]["supplier"]
            .as_str()
            .unwrap()
            .starts_with("Organization: GNU Libc Maintainers"),
        "{}",
        debs["libc6"]
    );

    // Wheels: exactly what importlib.metadata sees, with their licences and checksums.
    let py = run_in(
        &sb,
        &image,
        &[
            "python3",
            "-c",
            "import importlib.metadata as m\nfor d in m.distributions(): print(d.metadata['Name'], d.version)",
        ],
    );
    let seen: BTreeSet<(String, String)> = py
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(n, v)| (norm(n), v.to_string()))
        .collect();
    let whls = packages(&doc, "wheel");
    let listed: BTreeSet<(String, String)> = whls
        .iter()
        .map(|(n, p)| (norm(n), p["versionInfo"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(listed, seen, "SBOM wheels vs importlib.metadata");
    assert_eq!(
        listed,
        BTreeSet::from([
            ("oldlicence".to_string(), "0.3".to_string()),
            ("sbom-demo".to_string(), "1.2.0".to_string())
        ])
    );
    let demo = &whls["sbom-demo"];
    assert_eq!(demo["licenseDeclared"], "MIT OR LicenseRef-Demo-Terms");
    assert_eq!(
        doc["hasExtractedLicensingInfos"][0]["licenseId"],
        "LicenseRef-Demo-Terms"
    );
    assert_eq!(demo["supplier"], "Person: Jane Doe (jane@example.org)");
    let old = &whls["oldlicence"];
    assert_eq!(old["licenseDeclared"], "NOASSERTION");
    assert_eq!(
        old["licenseComments"],
        "METADATA License: BSD-ish, see the LICENSE file"
    );
    assert_eq!(old["supplier"], "Person: Bob");
    for w in &wheels {
        let file = sb.join("index/files").join(w.filename());
        let sha = gpuimg_store::digest::Digest::of(&std::fs::read(file).unwrap()).hex();
        assert_eq!(whls[&w.name]["checksums"][0]["checksumValue"], sha.as_str());
    }
    // The image contains each package.
    let contained = doc["relationships"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["relationshipType"] == "CONTAINS")
        .count();
    assert_eq!(contained, debs.len() + whls.len());

    // Built again (another tag, the cache warm): the same document.
    let again = sb.join("again.spdx.json");
    run_ok(
        sb.gpuimg()
            .args(["build", "--locked", "--tag", "two", "-o"])
            .arg(sb.join("out2"))
            .arg("--sbom")
            .arg(&again)
            .arg(&profile),
    );
    assert_eq!(std::fs::read(&again).unwrap(), written);
}

#[test]
fn a_gpu_images_sbom_carries_the_gpu_facts() {
    let t = Sandbox::new();
    let root = busybox_rootfs(t.path());
    add_glibc_for(&root, Bin::Selftest.path());
    let p = t.path().join("gpu.yaml");
    write(
        &p,
        "name: gpu-demo\nbase:\n  rootfs: ./rootfs\nhost:\n  gpus: [H200]\n  driver: \">=550\"\nstack:\n  cuda: \"12.4\"\n",
    );
    let sbom = t.path().join("gpu.spdx.json");
    let built = run_ok(
        t.gpuimg()
            .arg("build")
            .arg(&p)
            .arg("-o")
            .arg(t.path().join("out"))
            .arg("--sbom")
            .arg(&sbom)
            .arg("--json"),
    );
    // No package to list: no SBOM layer, the image is as before; the file is still written.
    let v = json(built.as_bytes());
    let comps: Vec<&str> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    assert_eq!(comps, ["base", "selftest", "expect"]);
    validate(&sbom);
    let doc = json(&std::fs::read(&sbom).unwrap());
    let root = &doc["packages"][0];
    assert_eq!(root["SPDXID"], "SPDXRef-Image");
    assert_eq!(root["primaryPackagePurpose"], "CONTAINER");
    let notes: BTreeMap<String, String> = root["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let (k, v) = a["comment"].as_str().unwrap().split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    assert!(
        notes["io.gpuimg.stack.cuda"].starts_with("12.4"),
        "{notes:?}"
    );
    assert!(notes["CUDA_VERSION"].starts_with("12.4"), "{notes:?}");
    assert!(
        notes["NVIDIA_REQUIRE_CUDA"].contains("cuda>=12"),
        "{notes:?}"
    );
    assert_eq!(notes["io.gpuimg.host.driver"], ">=550", "{notes:?}");
    assert_eq!(notes["io.gpuimg.compute-capabilities"], "9.0", "{notes:?}");
    let selftest = gpuimg_store::digest::Digest::of(&std::fs::read(Bin::Selftest.path()).unwrap());
    assert_eq!(notes["io.gpuimg.selftest.sha256"], selftest.to_string());
}

#[test]
fn sbom_over_a_directory_is_refused_before_building() {
    let t = Sandbox::new();
    busybox_rootfs(t.path());
    let p = t.path().join("p.yaml");
    write(&p, "name: plain\nbase:\n  rootfs: ./rootfs\n");
    let dir = t.path().join("taken");
    std::fs::create_dir(&dir).unwrap();
    let out = run(t
        .gpuimg()
        .arg("build")
        .arg(&p)
        .arg("-o")
        .arg(t.path().join("out"))
        .arg("--sbom")
        .arg(&dir));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("directory"), "{stderr}");
    assert_error(&stderr, &[t.path()]);
    assert!(!t.path().join("out").exists());
}
