//! The built binary: `gpuimg resolve` exit codes 0/1/2 and the shape of its `--json` output,
//! `gpuimg lock` writing a canonical lock beside the profile, staleness, and `catalog` queries.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{assert_error, Sandbox};

fn gpuimg(args: &[&str], sb: &Sandbox) -> Output {
    common::run(sb.gpuimg().args(args))
}

fn profile(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("name: demo\n{body}")).unwrap();
    p
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn compatible_profile_exits_0_with_documented_json() {
    let d = Sandbox::new();
    let p = profile(d.path(), "p.yaml", "host:\n  gpus: [H100, H200]\n  driver: \">=550\"\nstack:\n  cuda: \"12.4\"\n  python: \"3.11\"\n  pytorch: \"2.5\"\n");
    let out = gpuimg(&["resolve", p.to_str().unwrap(), "--json"], &d);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = json(&out);
    assert_eq!(j["ok"], true);
    assert_eq!(j["components"]["cuda"], "12.4.1");
    assert_eq!(j["components"]["pytorch"], "2.5.1");
    assert_eq!(j["components"]["python"], "3.11");
    assert_eq!(j["components"]["cudnn"], "9.1.0.70");
    assert_eq!(j["host"]["driver"], ">=550");
    assert_eq!(j["host"]["kernel"], ">=3.10");
    assert_eq!(j["host"]["gpus"], serde_json::json!(["H100", "H200"]));
    assert!(j["warnings"].is_array());
    let keys: Vec<&String> = j.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["components", "host", "ok", "warnings"]);
}

/// A GPU whose first driver no source gives (H200's) is never read as "any driver": minor says
/// so and names the only module flavour the catalog lists there; strict says no (exit 1).
#[test]
fn unknown_first_driver_is_said_not_assumed() {
    let d = Sandbox::new();
    let body = "host:\n  gpus: [H200]\n  driver: \"<535\"\nstack:\n  cuda: \"12.4\"\n";
    let p = profile(d.path(), "p.yaml", body);
    let out = gpuimg(&["resolve", p.to_str().unwrap()], &d);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("  host module proprietary\n"), "{text}");
    assert!(
        text.contains("warning: Unverified fact decides part of this answer: H200's first driver is not known; the first release known to drive it is 550.40.65"),
        "{text}"
    );
    let p = profile(d.path(), "s.yaml", &format!("compat: strict\n{body}"));
    let out = gpuimg(&["resolve", p.to_str().unwrap()], &d);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("no: ")
            && text.contains("H200's first driver is not known")
            && text.contains("compat is strict [profile]"),
        "{text}"
    );
}

#[test]
fn incompatible_profile_exits_1_with_explanation() {
    let d = Sandbox::new();
    let p = profile(
        d.path(),
        "p.yaml",
        "host:\n  gpus: [V100]\nstack:\n  pytorch: \"=2.15.0\"\n",
    );
    let out = gpuimg(&["resolve", p.to_str().unwrap(), "--json"], &d);
    assert_eq!(out.status.code(), Some(1));
    let j = json(&out);
    assert_eq!(j["ok"], false);
    let e = j["explanation"].as_str().unwrap();
    assert!(
        e.contains("V100 is sm_70") && e.contains("wheel-inspection"),
        "{e}"
    );
    assert!(
        e.contains("hint: `stack.pytorch: \"2.14\"` would work"),
        "{e}"
    );
    // Text mode says the same, exit code 1.
    let out = gpuimg(&["resolve", p.to_str().unwrap()], &d);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("no: "));
}

/// Issue 34, item 8: a "no" in `--json` is data: each candidate ruled out (`value`) with the
/// facts that rule it out (`fact`, `source`) and their conclusion, and the hints as a list.
#[test]
fn incompatible_json_gives_structured_reasons_and_hints() {
    let d = Sandbox::new();
    let p = profile(
        d.path(),
        "p.yaml",
        "host:\n  gpus: [V100]\nstack:\n  pytorch: \"=2.15.0\"\n",
    );
    let out = gpuimg(&["resolve", p.to_str().unwrap(), "--json"], &d);
    assert_eq!(out.status.code(), Some(1));
    let j = json(&out);
    assert_eq!(j["ok"], false);
    assert!(j["summary"].as_str().is_some_and(|s| !s.is_empty()), "{j}");
    let hints = j["hints"].as_array().unwrap();
    assert_eq!(hints.len(), 1, "{j}");
    assert!(
        hints[0]
            .as_str()
            .unwrap()
            .starts_with("`stack.pytorch: \"2.14\"` would work"),
        "{j}"
    );
    let reasons = j["reasons"].as_array().unwrap();
    assert!(!reasons.is_empty(), "{j}");
    let mut facts = Vec::new();
    for r in reasons {
        let value = r["value"].as_str().unwrap();
        assert!(value.starts_with("pytorch 2.15.0"), "{r}");
        assert!(
            r["conclusion"]
                .as_str()
                .is_some_and(|c| c.contains("cannot run on V100")),
            "{r}"
        );
        assert!(r["unverified"].is_boolean(), "{r}");
        for f in r["facts"].as_array().unwrap() {
            let keys: Vec<&String> = f.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["fact", "source", "unverified"], "{f}");
            let sources: Vec<&str> = f["source"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
                .collect();
            facts.push((f["fact"].as_str().unwrap().to_string(), sources.join(",")));
        }
    }
    assert!(facts.iter().any(|(f, _)| f == "V100 is sm_70"), "{facts:?}");
    assert!(
        facts
            .iter()
            .any(|(f, s)| f.contains("wheels carry code for") && s.contains("wheel-inspection")),
        "{facts:?}"
    );
    // The human answer is unchanged: one `no:` text, the hints as `hint:` lines.
    let text = gpuimg(&["resolve", p.to_str().unwrap()], &d);
    assert_eq!(text.status.code(), Some(1));
    let said = String::from_utf8_lossy(&text.stdout);
    assert_eq!(
        said.trim_end(),
        format!("no: {}", j["explanation"].as_str().unwrap()),
        "{said}"
    );
}

#[test]
fn bad_input_exits_2_with_one_clear_line() {
    let d = Sandbox::new();
    let cases = [
        (
            "host:\n  gpus: [H1000]\n",
            "Unknown GPU `H1000` (did you mean `H100`?)",
        ),
        (
            "stack:\n  cuda: \"12.x\"\n",
            "p.yaml:3:9: `stack.cuda`: `12.x` is not a version constraint",
        ),
        (
            "host:\n  driver: \">=560,<550\"\n",
            "`host.driver: >=560,<550` can match no version at all",
        ),
    ];
    for (body, want) in cases {
        let p = profile(d.path(), "p.yaml", body);
        let out = gpuimg(&["resolve", p.to_str().unwrap(), "--json"], &d);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body}: {err}");
        assert!(err.contains(want), "{body}: want {want:?} in {err:?}");
        assert_error(&err, &[d.path()]);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn plain_profile_resolves_empty() {
    let d = Sandbox::new();
    let p = profile(d.path(), "p.yaml", "");
    let out = gpuimg(&["resolve", p.to_str().unwrap(), "--json"], &d);
    assert_eq!(out.status.code(), Some(0));
    let j = json(&out);
    assert_eq!(j["components"], serde_json::json!({}));
    assert_eq!(j["host"]["gpus"], serde_json::json!([]));
}

#[test]
fn lock_is_written_canonical_and_goes_stale() {
    let d = Sandbox::new();
    let p = profile(
        d.path(),
        "web.yaml",
        "host:\n  gpus: [H100]\nstack:\n  cuda: \"12.4\"\n",
    );
    let out = gpuimg(&["lock", p.to_str().unwrap()], &d);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lock_file = d.path().join("web.lock.json");
    let text = std::fs::read_to_string(&lock_file).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["resolution"]["components"]["cuda"], "12.4.1");
    assert_eq!(v["version"], 2);
    assert_eq!(
        text,
        format!("{}\n", gpuimg_build::lock::canonical_json(&v)),
        "lock is canonical JSON"
    );
    // Same inputs, same bytes.
    gpuimg(&["lock", p.to_str().unwrap()], &d);
    assert_eq!(std::fs::read_to_string(&lock_file).unwrap(), text);

    let prof = gpuimg_build::profile::load(&p, &|_| None).unwrap();
    let lock = gpuimg_build::lock::read(&lock_file).unwrap();
    assert_eq!(gpuimg_build::lock::lock_path(&prof), lock_file);
    gpuimg_build::lock::check_fresh(&prof, &lock).unwrap();
    std::fs::write(
        &p,
        "name: demo\nhost:\n  gpus: [H100]\nstack:\n  cuda: \"12.6\"\n",
    )
    .unwrap();
    let prof = gpuimg_build::profile::load(&p, &|_| None).unwrap();
    let e = gpuimg_build::lock::check_fresh(&prof, &lock)
        .unwrap_err()
        .to_string();
    assert!(e.contains("a different `stack.cuda`"), "{e}");
}

#[test]
fn catalog_queries() {
    let d = Sandbox::new();
    let out = gpuimg(&["catalog", "list", "gpus"], &d);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.starts_with("H200")));
    let out = gpuimg(&["catalog", "show", "R580"], &d);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json(&out)["branch"], 580);
    let out = gpuimg(&["catalog", "show", "pytorch", "2.5.1"], &d);
    assert_eq!(json(&out)["version"], "2.5.1");
    let out = gpuimg(&["catalog", "list", "gpu-ish"], &d);
    assert_eq!(out.status.code(), Some(2));
    // `why` answers without a profile.
    let out = gpuimg(
        &[
            "catalog",
            "why",
            "--gpu",
            "V100",
            "--pytorch",
            "=2.15.0",
            "--json",
        ],
        &d,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(json(&out)["explanation"]
        .as_str()
        .unwrap()
        .contains("cannot run on V100"));
    let out = gpuimg(
        &[
            "catalog", "why", "--gpu", "H200", "--cuda", "12.4", "--json",
        ],
        &d,
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json(&out)["components"]["cuda"], "12.4.1");
    let out = gpuimg(&["catalog", "why", "--gpu", "H1000"], &d);
    assert_eq!(out.status.code(), Some(2));
    // One error line; the suggestion is a hint after a blank line.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr,
        "error: Unknown GPU `H1000`\n\nhint: did you mean `H100`?\n"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn catalog_overlay_flag_and_config_dir() {
    let d = Sandbox::new();
    let overlay = d.path().join("site.yaml");
    std::fs::write(
        &overlay,
        "sources:\n- {id: site-notes, url: 'https://example.invalid/notes'}\ngpus:\n- {name: SiteGPU, cc: '9.0', arch: hopper, datacenter: true, modules: [open], min_driver: '575', source: [site-notes]}\n",
    )
    .unwrap();
    let out = gpuimg(
        &[
            "catalog",
            "why",
            "--gpu",
            "SiteGPU",
            "--cuda",
            "12.4",
            "--json",
            "--catalog",
            overlay.to_str().unwrap(),
        ],
        &d,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out)["host"]["driver"], ">=575");
    // The same file in $XDG_CONFIG_HOME/gpuimg/catalog.d is picked up without the flag.
    let cfg = d.config().join("gpuimg/catalog.d");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::copy(&overlay, cfg.join("site.yaml")).unwrap();
    let out = gpuimg(&["catalog", "why", "--gpu", "SiteGPU", "--json"], &d);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 34, item 9: the shipped profiles and the template resolve without a warning.
#[test]
fn shipped_profiles_resolve_without_warnings() {
    let sb = Sandbox::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join("profiles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.push(root.join("templates/profile.yaml"));
    paths.sort();
    assert!(paths.len() >= 6, "{paths:?}");
    for p in paths {
        // The stack's answer: `resolve` of a profile with a framework reads the base's
        // packages (and with `python:` asks the index), which a test has no network for.
        let stack_only: String = {
            let text = std::fs::read_to_string(&p).unwrap();
            let mut keep = true;
            let mut out = String::new();
            for line in text.lines() {
                if !line.starts_with([' ', '#']) && !line.is_empty() {
                    let key = line.split(':').next().unwrap_or("");
                    keep = ["host", "stack", "compat"].contains(&key);
                }
                if keep {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            out
        };
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let stack_file = profile(sb.path(), &name, &stack_only);
        let o = common::run(sb.gpuimg().args(["resolve", "--json"]).arg(&stack_file));
        assert_eq!(o.status.code(), Some(0), "{}: {o:?}", p.display());
        let warnings: Vec<String> = json(&o)["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect();
        assert!(warnings.is_empty(), "{}: {warnings:?}", p.display());
    }
}

/// Issue 34, item 8: a version the catalog has never heard of is bad input (exit 2) at its
/// position, naming the known releases, not a "no" (exit 1) with a hint to another version.
#[test]
fn a_version_that_does_not_exist_is_bad_input_naming_the_known_ones() {
    let d = Sandbox::new();
    for (body, at, what, known) in [
        (
            "stack:\n  cuda: \"12.99\"\n",
            "p.yaml:3:9:",
            "matches no cuda release",
            "12.4",
        ),
        (
            "stack:\n  python: \"3.11\"\n  pytorch: \"3.7\"\n",
            "p.yaml:4:12:",
            "matches no pytorch release",
            "2.5",
        ),
    ] {
        let p = profile(d.path(), "p.yaml", body);
        let out = gpuimg(&["resolve", p.to_str().unwrap()], &d);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body}: {err}");
        assert!(err.contains(at) && err.contains(what), "{body}: {err}");
        assert_error(&err, &[d.path()]);
        assert!(
            err.contains("known: ") && err.contains(known),
            "{body}: {err}"
        );
    }
}

/// Issue 37, item 4: a Grace GPU (GH200, GB200, GB300, GB10) comes only in arm64 hosts, so an
/// amd64 image for it (`platform: linux/amd64`, or no platform: the default) is a "no", exit
/// code 1, naming the GPU's fact and its source, from `resolve` and `build` alike; in a mixed
/// list only the Grace GPU is named; `platform: linux/arm64` resolves.
#[test]
fn a_grace_gpu_on_an_amd64_platform_is_a_no_naming_the_fact() {
    let d = Sandbox::new();
    for (name, body) in [
        ("default.yaml", "host:\n  gpus: [GH200]\n"),
        (
            "mixed.yaml",
            "platform: linux/amd64\nhost:\n  gpus: [H100, GH200]\nstack:\n  cuda: \"12.8\"\n",
        ),
    ] {
        let p = profile(d.path(), name, body);
        let out = gpuimg(&["resolve", p.to_str().unwrap()], &d);
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{name}: {said}");
        assert_error(&said, &[d.path()]);
        let json_out = gpuimg(&["resolve", p.to_str().unwrap(), "--json"], &d);
        assert_eq!(json_out.status.code(), Some(1));
        let j = json(&json_out);
        let facts = &j["reasons"][0]["facts"];
        assert_eq!(facts[0]["fact"], "GH200 comes only in arm64 hosts", "{j}");
        assert_eq!(facts[0]["source"], serde_json::json!(["nv-gh200"]), "{j}");
        // `build` says the same "no", before it reads or writes anything else.
        let out = common::run(d.gpuimg().arg("build").arg(&p).arg("-o").arg(d.join("out")));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert_error(&err, &[d.path()]);
        assert!(!d.join("out").exists());
    }
    let p = profile(
        d.path(),
        "arm64.yaml",
        "platform: linux/arm64\nhost:\n  gpus: [H100, GH200]\nstack:\n  cuda: \"12.8\"\n",
    );
    let out = gpuimg(&["resolve", p.to_str().unwrap(), "--json"], &d);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        json(&out)["host"]["gpus"],
        serde_json::json!(["H100", "GH200"])
    );
}
