//! Unit tests of the lock format: v1 locks written by the previous gpuimg convert field for
//! field, v2 round trips through `Resolution` byte for byte, and bad locks are refused.

use std::path::Path;

use serde_json::{json, Value};

use super::*;

/// v1 locks written by `gpuimg lock` before lock v2 (tests/fixtures/locks/README.md).
const V1_FIXTURES: &[(&str, &str)] = &[
    (
        "example",
        include_str!("../../../../tests/fixtures/locks/example.v1.lock.json"),
    ),
    (
        "cuda-h200",
        include_str!("../../../../tests/fixtures/locks/cuda-h200.v1.lock.json"),
    ),
    (
        "torch-forward",
        include_str!("../../../../tests/fixtures/locks/torch-forward.v1.lock.json"),
    ),
    (
        "torch-nogpu",
        include_str!("../../../../tests/fixtures/locks/torch-nogpu.v1.lock.json"),
    ),
    (
        "plain",
        include_str!("../../../../tests/fixtures/locks/plain.v1.lock.json"),
    ),
];

fn value(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn p(name: &str) -> &Path {
    Path::new(name)
}

#[test]
fn v1_fixtures_convert_without_changing_a_field() {
    let mut debs = 0;
    for (name, text) in V1_FIXTURES {
        let v1 = value(text);
        assert_eq!(v1["version"], 1, "{name}");
        let lock = parse(text, p(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let v2 = value(&to_json(&lock));
        assert_eq!(v2["version"], 2, "{name}");
        // Every package, field for field, now tagged `deb`.
        let want: Vec<Value> = v1["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let mut p = p.clone();
                p["kind"] = json!("deb");
                p
            })
            .collect();
        assert_eq!(v2["artifacts"], Value::Array(want), "{name}");
        debs += lock.debs().count();
        // The resolution keeps every version, range, variant and warning as written.
        assert_eq!(v2["resolution"], v1["resolution"], "{name}");
        assert_eq!(v2["inputs"], v1["inputs"], "{name}");
        let keys: Vec<&String> = v2.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["artifacts", "inputs", "resolution", "version"],
            "{name}"
        );
    }
    assert_eq!(debs, 25 + 22, "the two apt fixtures' packages");
}

#[test]
fn v1_conversion_reaches_the_resolution_the_resolver_made() {
    let lock = parse(V1_FIXTURES[2].1, p("torch-forward")).unwrap();
    let r = lock.resolution.unwrap();
    let v = |c| r.version(c).map(|v| v.to_string());
    use crate::resolve::Component::*;
    assert_eq!(v(Cuda).as_deref(), Some("13.0.2"));
    assert_eq!(v(Pytorch).as_deref(), Some("2.11.0"));
    assert_eq!(v(Cudnn).as_deref(), Some("9.19.0.56"));
    assert_eq!(r.variants[&Pytorch], "cu130");
    assert_eq!(r.host.driver.to_string(), ">=535,<536 || >=580.65.06");
    assert_eq!(r.host.forward_compat_branches, vec![535]);
    assert_eq!(r.compat, crate::profile::CompatMode::Forward);
    assert_eq!(r.host.kernel_module, crate::profile::KernelModule::Open);
    assert_eq!(r.host.gpus[0].peak_bandwidth_gbps, Some(3350.0));
    assert!(r
        .require_cuda()
        .unwrap()
        .contains("brand=tesla,driver>=535"));

    let example = parse(V1_FIXTURES[0].1, p("example")).unwrap();
    let first = example.debs().next().unwrap();
    assert_eq!(first.name, "base-files");
    assert_eq!(first.repository, "host:bookworm");
    assert_eq!(
        first.sha256.to_string(),
        "sha256:3eb1ea6d85488f488cc2a163b98ad640ef88cee4c79287cf14e361aaf6206f47"
    );
    assert!(example.resolution.unwrap().components.is_empty());
}

#[test]
fn v2_round_trips_through_resolution_byte_for_byte() {
    for (name, text) in V1_FIXTURES {
        let once = to_json(&parse(text, p(name)).unwrap());
        let twice = to_json(&parse(&once, p(name)).unwrap());
        assert_eq!(once, twice, "{name}");
        assert_eq!(
            once,
            format!("{}\n", canonical_json(&value(&once))),
            "{name}"
        );
        // And the lock-side type alone: LockedResolution → Resolution → LockedResolution.
        let locked: LockedResolution =
            serde_json::from_value(value(&once)["resolution"].clone()).unwrap();
        let back = LockedResolution::from(Resolution::try_from(&locked).unwrap());
        assert_eq!(back, locked, "{name}");
    }
}

#[test]
fn fresh_resolutions_round_trip() {
    let catalog = crate::catalog::Catalog::embedded().unwrap();
    for body in [
        "",
        "host: {gpus: [H100, H200], driver: '>=535'}",
        "compat: strict\nhost: {gpus: [H100]}\nstack: {cuda: '12.4'}",
        "compat: forward\nhost: {gpus: [H100]}\nstack: {cuda: '13.0'}",
        "stack: {pytorch: '=2.11.0', cuda: '13.0'}",
        "host: {gpus: [H200], kernel_module: open}\nstack: {pytorch: '2.5', python: '3.11'}",
    ] {
        let text = format!("name: t\n{body}\n");
        let profile = crate::profile::parse(&text, "t.yaml", Path::new("."), &|_| None).unwrap();
        let r = crate::resolve::resolve(&profile, &catalog).unwrap();
        let locked = LockedResolution::from(&r);
        assert_eq!(Resolution::try_from(&locked).unwrap(), r, "{body}");
        let lock = Lock::new(&profile, r);
        let text = to_json(&lock);
        assert_eq!(parse(&text, p("t")).unwrap(), lock, "{body}");
        assert_eq!(value(&text)["version"], 2);
    }
}

fn deb(name: &str, arch: &str) -> LockedPackage {
    LockedPackage {
        name: name.into(),
        version: "1.0".into(),
        architecture: arch.into(),
        repository: "host:bookworm".into(),
        filename: format!("pool/main/{name}_1.0_{arch}.deb"),
        size: 42,
        sha256: gpuimg_store::digest::Digest::of(name.as_bytes()),
    }
}

#[test]
fn artifacts_are_tagged_by_kind_and_debs_replace() {
    let mut lock = Lock::default();
    lock.set_debs(vec![deb("a", "amd64"), deb("b", "all")]);
    let v = value(&to_json(&lock));
    assert_eq!(v["artifacts"][0]["kind"], "deb");
    assert_eq!(v["artifacts"][1]["filename"], "pool/main/b_1.0_all.deb");
    assert_eq!(v["artifacts"][0]["size"], 42);
    assert!(v.get("resolution").is_none() && v.get("inputs").is_none());
    lock.set_debs(vec![deb("c", "amd64")]);
    let names: Vec<&str> = lock.debs().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["c"]);
    assert_eq!(parse(&to_json(&lock), p("x")).unwrap(), lock);
}

fn wheel(name: &str) -> LockedWheel {
    LockedWheel {
        name: name.into(),
        version: "2.0".into(),
        filename: format!("{name}-2.0-py3-none-any.whl"),
        sha256: gpuimg_store::digest::Digest::of(name.as_bytes()),
        size: 7,
        index: "host".into(),
        requested: name == "requests",
        required_by: vec![format!("{name}>=2")],
    }
}

#[test]
fn wheels_are_artifacts_of_kind_wheel_after_the_debs() {
    let mut lock = Lock::default();
    lock.set_wheels(vec![wheel("urllib3"), wheel("requests")]);
    lock.set_debs(vec![deb("a", "amd64")]);
    let v = value(&to_json(&lock));
    let kinds: Vec<&str> = v["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["deb", "wheel", "wheel"]);
    let w = &v["artifacts"][1];
    assert_eq!(w["name"], "requests");
    assert_eq!(w["filename"], "requests-2.0-py3-none-any.whl");
    assert_eq!(w["index"], "host");
    assert_eq!(w["requested"], true);
    assert_eq!(w["required_by"], json!(["requests>=2"]));
    assert_eq!(w["size"], 7);
    let back = parse(&to_json(&lock), p("x")).unwrap();
    assert_eq!(back, lock);
    let names: Vec<&str> = back.wheels().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["requests", "urllib3"]);
    lock.set_wheels(vec![]);
    assert_eq!(lock.wheels().count(), 0);
    assert_eq!(lock.debs().count(), 1);
}

/// A v2 lock text with `edit` applied to its JSON.
fn edited(edit: impl FnOnce(&mut Value)) -> String {
    let mut lock = parse(V1_FIXTURES[1].1, p("f")).unwrap();
    lock.set_debs(vec![deb("a", "amd64")]);
    let mut v = value(&to_json(&lock));
    edit(&mut v);
    v.to_string()
}

#[test]
fn bad_locks_are_refused_with_one_line() {
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "version 9",
            edited(|v| v["version"] = json!(9)),
            "format version `9`",
        ),
        (
            "version 0",
            edited(|v| v["version"] = json!(0)),
            "format version `0`",
        ),
        (
            "version text",
            edited(|v| v["version"] = json!("2")),
            "invalid type",
        ),
        (
            "no version",
            edited(|v| v.as_object_mut().unwrap().retain(|k, _| k != "version")),
            "missing field `version`",
        ),
        ("garbage", "\u{1}not json at all".into(), "is not valid"),
        ("empty", String::new(), "is not valid"),
        ("array", "[1, 2]".into(), "is not valid"),
        ("empty object", "{}".into(), "missing field `version`"),
        (
            "size text",
            edited(|v| v["artifacts"][0]["size"] = json!("big")),
            "invalid type",
        ),
        (
            "kind wheel with deb fields",
            edited(|v| v["artifacts"][0]["kind"] = json!("wheel")),
            "unknown field `architecture`",
        ),
        (
            "unknown kind",
            edited(|v| v["artifacts"][0]["kind"] = json!("rpm")),
            "unknown variant `rpm`",
        ),
        (
            "no kind",
            edited(|v| {
                v["artifacts"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("kind")
                    .map(drop)
                    .unwrap_or(())
            }),
            "missing field `kind`",
        ),
        (
            "extra deb field",
            edited(|v| v["artifacts"][0]["extra"] = json!(1)),
            "unknown field `extra`",
        ),
        (
            "extra top field",
            edited(|v| v["packages"] = json!([])),
            "unknown field `packages`",
        ),
        (
            "bad digest",
            edited(|v| v["artifacts"][0]["sha256"] = json!("md5:00")),
            "is not valid",
        ),
        (
            "bad driver",
            edited(|v| v["resolution"]["host"]["driver"] = json!(">=x")),
            "`resolution.host.driver` is not a version range",
        ),
        (
            "bad component",
            edited(|v| v["resolution"]["components"]["torch"] = json!("2.5")),
            "`torch` in `resolution.components`",
        ),
        (
            "bad cc",
            edited(|v| v["resolution"]["compute_capabilities"] = json!(["nine"])),
            "`resolution.compute_capabilities` is not a version",
        ),
        (
            "bad compat",
            edited(|v| v["resolution"]["compat"] = json!("loose")),
            "unknown variant `loose`",
        ),
        (
            "v1 with artifacts",
            edited(|v| v["version"] = json!(1)),
            "unknown field `artifacts`",
        ),
        (
            "v1 deb fields",
            r#"{"version": 1, "packages": [{"name": "a"}]}"#.into(),
            "missing field `version` at line 1 column 41",
        ),
    ];
    for (what, text, want) in cases {
        let e = parse(&text, p("x.lock.json")).unwrap_err();
        let line = gpuimg_entry::error_line::chain(&e);
        assert!(line.contains(want), "{what}: {line}");
        assert!(line.starts_with("Lock `x.lock.json`"), "{what}: {line}");
        assert!(!line.contains('\n'), "{what}: {line}");
    }
}

#[test]
fn write_is_atomic_canonical_and_readable() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("p.lock.json");
    std::fs::write(&path, V1_FIXTURES[0].1).unwrap();
    let lock = read(&path).unwrap();
    write(&path, &lock).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, to_json(&lock));
    assert_eq!(read(&path).unwrap(), lock);
    let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "no temporary file left");
    let fresh = d.path().join("q.lock.json");
    write(&fresh, &lock).unwrap();
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    let e = read(&d.path().join("missing.lock.json")).unwrap_err();
    assert!(matches!(e, LockError::Read { .. }), "{e}");
}
