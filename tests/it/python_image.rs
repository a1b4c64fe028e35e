//! Python packages from the real index, through the build host's own configuration (its pip
//! and uv settings and variables, pip's default index when they name none), installed on
//! Debian bookworm's `python3` from the host's apt sources (`mirror: host`): `requests` with
//! its dependencies, a compiled wheel (`pyyaml`) and a console script (`normalizer`, from
//! `charset-normalizer`), with `.pyc` compiled. The image is `umoci unpack`ed and run under
//! podman: `importlib.metadata` lists exactly the locked wheels plus Debian's own python3-*
//! distributions, the compiled module imports from its `.pyc`, the console script runs and
//! `pip check` passes; a locked rebuild with an emptied cache gives the same digest.

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;

use common::*;

const PROFILE: &str = r#"name: py-requests
base:
  apt:
    mirror: host
    suite: bookworm
    packages: [base-files, base-passwd, libc6, ca-certificates, python3, python3-pip]
python:
  packages: ["requests>=2.31", "pyyaml>=6"]
  compile: true
selftest: {enabled: false}
config:
  entrypoint: ["python3", "-c"]
"#;

/// `gpuimg` in `sb` with `cache`, seeing the host's Python index configuration (a sandbox
/// hides it from every other test).
fn gpuimg(sb: &Sandbox, cache: &str) -> Command {
    let mut c = with_host_index(sb.gpuimg_with_cache(&sb.join(cache)));
    c.env("SOURCE_DATE_EPOCH", "1700000000");
    c
}

/// What the test asks of the image's python3, printed as one JSON object.
const CHECKS: &str = r#"
import importlib.metadata as m, json, subprocess, sys, yaml
def run(*argv):
    p = subprocess.run(list(argv), capture_output=True, text=True)
    return [p.returncode, p.stdout + p.stderr]
print(json.dumps({
    "dists": [[d.metadata["Name"], d.version, (d.read_text("INSTALLER") or "-").strip()]
              for d in m.distributions()],
    "yaml": "%s %s" % (yaml.__with_libyaml__, yaml.safe_load("a: [1, 2]")),
    "yaml_cached": sys.modules["yaml"].__cached__,
    "import_trace": run(sys.executable, "-v", "-c", "import yaml")[1],
    "normalizer": run("/usr/local/bin/normalizer", "--version"),
    "pip_check": run(sys.executable, "-m", "pip", "check"),
}))
"#;

fn build(sb: &Sandbox, cache: &str, out: &str) -> serde_json::Value {
    let json = run_ok(
        gpuimg(sb, cache)
            .args(["build", "--locked", "--json", "-o"])
            .arg(sb.join(out))
            .arg(sb.join("p.yaml")),
    );
    serde_json::from_str(json.trim()).unwrap()
}

/// Run the image `out` with podman options `extra` and the arguments `args` (its entrypoint is
/// `python3 -c`); it must succeed. Its stdout.
fn in_image(sb: &Sandbox, out: &str, extra: &[&str], args: &[&str]) -> String {
    let ran = podman(sb, out, extra, args);
    assert!(ran.status.success(), "{}", describe_run(&ran));
    String::from_utf8_lossy(&ran.stdout).into_owned()
}

fn podman(sb: &Sandbox, out: &str, extra: &[&str], args: &[&str]) -> std::process::Output {
    let image = format!("oci:{}:latest", sb.join(out).display());
    podman_run_with(sb.path(), extra, &image, args)
}

#[test]
fn requests_pyyaml_and_a_console_script_from_the_real_index_run_under_podman() {
    require("umoci");
    let sb = Sandbox::new();
    write(&sb.join("p.yaml"), PROFILE);
    run_ok(gpuimg(&sb, "cache-a").arg("lock").arg(sb.join("p.yaml")));
    let lock: serde_json::Value = serde_json::from_str(&read(&sb.join("p.lock.json"))).unwrap();
    let mut locked = BTreeSet::new();
    let mut debian_py = BTreeSet::new();
    for a in lock["artifacts"].as_array().unwrap() {
        match a["kind"].as_str().unwrap() {
            "wheel" => {
                assert_eq!(a["index"], "host", "{a}");
                locked.insert(format!(
                    "{} {}",
                    a["name"].as_str().unwrap(),
                    a["version"].as_str().unwrap()
                ));
            }
            "deb" => {
                let n = a["name"].as_str().unwrap();
                if n.starts_with("python3-") && !n.ends_with("-minimal") {
                    debian_py.insert(n.to_string());
                }
            }
            k => panic!("unexpected artifact kind {k}"),
        }
    }
    for want in [
        "requests",
        "pyyaml",
        "urllib3",
        "idna",
        "certifi",
        "charset-normalizer",
    ] {
        assert!(
            locked.iter().any(|l| l.starts_with(&format!("{want} "))),
            "{want} not locked: {locked:?}"
        );
    }
    assert_eq!(locked.len(), 6, "{locked:?}");

    let a = build(&sb, "cache-a", "out-a");
    let components: Vec<&str> = a["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    // The SBOM's layer comes last, the wheels' just before it.
    assert_eq!(components.last(), Some(&"sbom"), "{components:?}");
    assert_eq!(
        components.iter().rev().nth(1),
        Some(&"python-packages"),
        "{components:?}"
    );

    // One run of the image's python3 gathers everything (each podman run copies the layers).
    let report = in_image(&sb, "out-a", &[], &[CHECKS]);
    let r: serde_json::Value =
        serde_json::from_str(report.trim()).unwrap_or_else(|e| panic!("{e}: {report}"));

    // importlib.metadata: exactly the locked wheels, plus Debian's own distributions (from
    // python3-pip and what it pulls), which gpuimg did not install.
    let mut ours = BTreeSet::new();
    let mut others = BTreeSet::new();
    for d in r["dists"].as_array().unwrap() {
        let name = d[0]
            .as_str()
            .unwrap()
            .to_lowercase()
            .replace(['_', '.'], "-");
        if d[2] == "gpuimg" {
            ours.insert(format!("{name} {}", d[1].as_str().unwrap()));
        } else {
            others.insert(name);
        }
    }
    assert_eq!(
        ours, locked,
        "the wheels gpuimg installed are exactly the locked set"
    );
    assert!(
        others.contains("pip") && others.contains("setuptools") && others.contains("wheel"),
        "Debian's own: {others:?} (from {debian_py:?})"
    );

    // The compiled module imports, from the .pyc gpuimg wrote; the console script runs; pip
    // finds nothing broken.
    assert_eq!(r["yaml"], "True {'a': [1, 2]}", "{r}");
    assert_eq!(
        r["yaml_cached"],
        "/usr/local/lib/python3.11/dist-packages/yaml/__pycache__/__init__.cpython-311.pyc"
    );
    assert!(
        r["import_trace"].as_str().unwrap().contains(
            "code object from '/usr/local/lib/python3.11/dist-packages/yaml/__pycache__/__init__.cpython-311.pyc'"
        ),
        "yaml is loaded from its .pyc: {}",
        r["import_trace"]
    );
    assert_eq!(r["normalizer"][0], 0, "{r}");
    assert!(
        r["normalizer"][1]
            .as_str()
            .unwrap()
            .contains("Charset-Normalizer"),
        "{r}"
    );
    assert_eq!(r["pip_check"][0], 0, "{r}");
    assert!(
        r["pip_check"][1]
            .as_str()
            .unwrap()
            .contains("No broken requirements found"),
        "{r}"
    );

    // The unpacked image holds no trace of the build host.
    let bundle = sb.join("bundle");
    run_ok(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", sb.join("out-a").display()))
            .arg(&bundle),
    );
    let site = bundle.join("rootfs/usr/local/lib/python3.11/dist-packages");
    assert!(site.join("requests/__init__.py").is_file());
    for entry in tree(&bundle.join("rootfs/usr/local")) {
        assert!(
            !entry.contains(".gpuimg-tmp") && !entry.contains("/root/"),
            "{entry}"
        );
    }

    // The same lock with an emptied cache: the same image.
    let b = build(&sb, "cache-b", "out-b");
    assert_eq!(a["manifest_digest"], b["manifest_digest"]);
}
