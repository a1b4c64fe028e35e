//! The plan over synthetic facts: layer order, which keys two profiles share, which keys a
//! change moves, and the self-test's layers and config additions.

use std::path::Path;

use super::*;
use gpuimg_oci::layer::Compression;
use gpuimg_store::digest::Digest;

const LOPTS: LayerOptions = LayerOptions {
    compression: Compression::Gzip,
    epoch: 0,
};

fn profile(yaml: &str) -> Profile {
    crate::profile::parse(yaml, "p.yaml", Path::new("/nonexistent"), &|_| None)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn apt_profile(packages: &str, extra: &str) -> Profile {
    profile(&format!(
        "name: t\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [{packages}]\nselftest: {{enabled: false}}\n{extra}"
    ))
}

fn deb(name: &str, version: &str) -> LockedPackage {
    LockedPackage {
        name: name.into(),
        version: version.into(),
        architecture: "amd64".into(),
        repository: "host:bookworm".into(),
        filename: format!("pool/main/{name}_{version}_amd64.deb"),
        size: 1000,
        sha256: Digest::of(format!("{name} {version}").as_bytes()),
    }
}

/// (package, essential, priority, section)
fn facts(set: &[(&str, bool, &str, &str)]) -> Facts {
    let mut packages: Vec<LockedPackage> = set.iter().map(|(n, ..)| deb(n, "1.0")).collect();
    packages.sort();
    let metas = packages
        .iter()
        .map(|p| {
            let (_, essential, priority, section) =
                set.iter().find(|(n, ..)| *n == p.name).copied().unwrap();
            PackageMeta {
                name: p.name.clone(),
                essential,
                priority: Some(priority.into()),
                section: Some(section.into()),
                maintainer: None,
            }
        })
        .collect();
    Facts {
        apt: Some(AptFacts { packages, metas }),
        ..Facts::default()
    }
}

const BASE: &[(&str, bool, &str, &str)] = &[
    ("base-files", true, "required", "admin"),
    ("libc6", false, "required", "libs"),
    ("python3.11-minimal", false, "optional", "python"),
    ("curl", false, "optional", "web"),
];

fn keys(p: &Plan) -> Vec<(String, Digest)> {
    p.layers
        .iter()
        .map(|l| (l.component.clone(), l.key.expect("apt layers are keyed")))
        .collect()
}

fn key_of(p: &Plan, component: &str) -> Digest {
    keys(p)
        .into_iter()
        .find(|(c, _)| c == component)
        .unwrap_or_else(|| panic!("no layer {component}"))
        .1
}

#[test]
fn apt_layers_come_in_component_order_then_metadata() {
    let p = apt_profile("base-files, libc6, python3.11-minimal, curl", "");
    let plan = plan(&p, None, &facts(BASE), LOPTS).unwrap();
    let names: Vec<&str> = plan.layers.iter().map(|l| l.component.as_str()).collect();
    assert_eq!(names, ["os", "python", "packages", "metadata", "sbom"]);
    let install = plan.apt.as_ref().unwrap();
    assert_eq!(install.packages.len(), 4);
    match &plan.layers[0].inputs {
        Inputs::Debs { packages } => assert_eq!(packages, &["base-files", "libc6"]),
        other => panic!("{other:?}"),
    }
    assert!(matches!(plan.layers[3].inputs, Inputs::AptMetadata));
    assert!(plan.image.entrypoint.is_none());
}

#[test]
fn profiles_sharing_a_components_packages_share_its_key_and_a_new_package_moves_only_its_own() {
    let p = apt_profile("base-files", "");
    let a = plan(&p, None, &facts(BASE), LOPTS).unwrap();
    let mut more = BASE.to_vec();
    more.push(("xz-utils", false, "standard", "utils"));
    let b = plan(&p, None, &facts(&more), LOPTS).unwrap();
    for c in ["os", "python"] {
        assert_eq!(key_of(&a, c), key_of(&b, c), "{c}");
    }
    for c in ["packages", "metadata"] {
        assert_ne!(key_of(&a, c), key_of(&b, c), "{c}");
    }
    // A different profile file with the same packages and settings: the same keys.
    let other = apt_profile("base-files, libc6, curl", "config:\n  env: {A: b}\n");
    assert_eq!(
        keys(&plan(&other, None, &facts(BASE), LOPTS).unwrap()),
        keys(&a)
    );
    // Settings that shape the trees change every key (but the SBOM's: it lists packages,
    // not files).
    let stripped = apt_profile("base-files", "strip: [docs]\n");
    let s = plan(&stripped, None, &facts(BASE), LOPTS).unwrap();
    for ((c, k1), (_, k2)) in keys(&a).iter().zip(keys(&s)) {
        if c == "sbom" {
            assert_eq!(*k1, k2);
        } else {
            assert_ne!(*k1, k2, "{c}");
        }
    }
    let zstd = LayerOptions {
        compression: Compression::Zstd,
        epoch: 0,
    };
    let z = plan(&p, None, &facts(BASE), zstd).unwrap();
    assert_ne!(key_of(&a, "os"), key_of(&z, "os"));
}

#[test]
fn a_layers_override_moves_a_package_and_rekeys_only_what_it_touches() {
    let plain = plan(&apt_profile("curl", ""), None, &facts(BASE), LOPTS).unwrap();
    let moved = plan(
        &apt_profile("curl", "layers:\n  web: {deb: [curl]}\n"),
        None,
        &facts(BASE),
        LOPTS,
    )
    .unwrap();
    let names: Vec<&str> = moved.layers.iter().map(|l| l.component.as_str()).collect();
    assert_eq!(names, ["os", "python", "web", "metadata", "sbom"]);
    assert_eq!(key_of(&plain, "os"), key_of(&moved, "os"));
    assert_eq!(key_of(&plain, "python"), key_of(&moved, "python"));
    assert_ne!(key_of(&plain, "metadata"), key_of(&moved, "metadata"));
}

#[test]
fn rootfs_tarballs_are_keyed_up_front_directories_by_content() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("root.tar"), b"").unwrap();
    std::fs::write(d.path().join("a"), b"a").unwrap();
    let p = crate::profile::parse(
        "name: t\nbase:\n  rootfs: ./root.tar\nstrip: [man]\nfiles:\n  - {src: ./a, dst: /a}\n",
        "p.yaml",
        d.path(),
        &|_| None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let dir = plan(&p, None, &Facts::default(), LOPTS).unwrap();
    let names: Vec<&str> = dir.layers.iter().map(|l| l.component.as_str()).collect();
    assert_eq!(names, ["base", "files"]);
    assert!(dir.layers.iter().all(|l| l.key.is_none()));
    assert_eq!(dir.layers[0].strip, vec![StripClass::Man]);
    assert!(dir.layers[1].strip.is_empty(), "files are never stripped");
    let facts = |id| Facts {
        rootfs_identity: Some(id),
        ..Facts::default()
    };
    let t1 = plan(&p, None, &facts([1, 2, 3, 4, 5]), LOPTS).unwrap();
    let t2 = plan(&p, None, &facts([1, 2, 3, 4, 6]), LOPTS).unwrap();
    assert!(t1.layers[0].key.is_some());
    assert_ne!(
        t1.layers[0].key, t2.layers[0].key,
        "a touched tarball is read again"
    );
}

#[test]
fn the_selftest_adds_its_layers_annotation_and_wrapper_only_with_a_stack() {
    let p = profile(
        "name: t\nhost:\n  gpus: [H100]\nstack:\n  cuda: \"12\"\nconfig:\n  entrypoint: [python3]\n",
    );
    let catalog = crate::catalog::Catalog::embedded().unwrap();
    let r = crate::resolve::resolve(&p, &catalog).unwrap();
    assert!(wants_selftest(&p, Some(&r)));
    let e = plan(&p, Some(&r), &Facts::default(), LOPTS).unwrap_err();
    assert!(matches!(e, PlanError::Facts(_)), "{e}");
    let bin = SelftestBinary {
        path: "/x/gpuimg-selftest".into(),
        sha256: Digest::of(b"bin"),
    };
    let f = Facts {
        selftest: Some(bin.clone()),
        ..Facts::default()
    };
    let pl = plan(&p, Some(&r), &f, LOPTS).unwrap();
    let names: Vec<&str> = pl.layers.iter().map(|l| l.component.as_str()).collect();
    assert_eq!(names, ["selftest", "expect"]);
    assert_eq!(
        pl.image.annotations.get(ANN_SELFTEST_SHA256),
        Some(&bin.sha256.to_string())
    );
    let ep = pl.image.entrypoint.clone().unwrap();
    assert_eq!(ep.last().map(String::as_str), Some("python3"));
    assert_eq!(pl.image.env, r.image_env());
    match &pl.layers[1].inputs {
        Inputs::Expect { json } => assert_eq!(json, &expectation(&p, Some(&r)).to_json()),
        other => panic!("{other:?}"),
    }
    // Disabled: nothing of it.
    let off = profile(
        "name: t\nhost:\n  gpus: [H100]\nstack:\n  cuda: \"12\"\nselftest: {enabled: false}\n",
    );
    let pl = plan(&off, Some(&r), &Facts::default(), LOPTS).unwrap();
    assert!(pl.layers.is_empty() && pl.image.entrypoint.is_none());
}

#[test]
fn os_is_planned_even_without_packages_for_the_merged_usr_links() {
    let set = [("curl", false, "optional", "web")];
    let p = apt_profile("curl", "");
    let pl = plan(&p, None, &facts(&set), LOPTS).unwrap();
    let names: Vec<&str> = pl.layers.iter().map(|l| l.component.as_str()).collect();
    assert_eq!(names, ["os", "packages", "metadata", "sbom"]);
    match &pl.layers[0].inputs {
        Inputs::Debs { packages } => assert!(packages.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn facts_that_do_not_fit_the_base_are_refused() {
    let p = apt_profile("curl", "");
    assert!(plan(&p, None, &Facts::default(), LOPTS).is_err());
    let mut f = facts(BASE);
    if let Some(a) = &mut f.apt {
        a.metas.pop();
    }
    assert!(plan(&p, None, &f, LOPTS).is_err());
}

fn wheel(name: &str, version: &str, requested: bool) -> crate::lock::LockedWheel {
    crate::lock::LockedWheel {
        name: name.into(),
        version: version.into(),
        filename: format!("{name}-{version}-py3-none-any.whl"),
        sha256: Digest::of(format!("{name} {version}").as_bytes()),
        size: 100,
        index: "host".into(),
        requested,
        required_by: vec![format!("{name}>=1")],
    }
}

/// Facts with `wheels` whose libraries (none) and METADATA headers (none) are known.
fn with_wheels(mut f: Facts, wheels: Vec<crate::lock::LockedWheel>) -> Facts {
    f.wheel_headers = wheels
        .iter()
        .map(|w| (w.name.clone(), Vec::new()))
        .collect();
    let libraries = wheels
        .iter()
        .map(|w| (w.name.clone(), Vec::new()))
        .collect();
    f.python = Some(PythonInstall {
        wheels,
        python: gpuimg_pypi::ImagePython {
            version: (3, 11),
            full_version: "3.11.2".into(),
            interpreter: "/usr/bin/python3.11".into(),
            site_dir: "/usr/local/lib/python3.11/dist-packages".into(),
            scripts_dir: "/usr/local/bin".into(),
            glibc: (2, 36),
            machine: "x86_64".into(),
        },
        compiler: None,
        libraries,
    });
    f
}

#[test]
fn facts_the_wheel_jobs_produce_complete_the_plan_as_if_it_had_them() {
    let d = tempfile::tempdir().unwrap();
    let p = py_profile(d.path(), "curl", "python:\n  packages: [requests]\n");
    let set = vec![
        wheel("requests", "2.32.3", true),
        wheel("idna", "3.7", false),
    ];
    let known = with_wheels(facts(BASE), set.clone());
    let complete = plan(&p, None, &known, LOPTS).unwrap();
    let mut later = known.clone();
    later.wheel_headers.clear();
    if let Some(py) = later.python.as_mut() {
        py.libraries.clear();
    }
    let deferred = plan(&p, None, &later, LOPTS).unwrap();
    assert!(complete.derived.is_some() && deferred.derived.is_none());
    // The layers that wait are the apt install's (it writes `ld.so.cache`) and the SBOM;
    // every other key is known up front, and the same.
    for (a, b) in complete.layers.iter().zip(&deferred.layers) {
        assert_eq!(a.component, b.component);
        let waits = matches!(
            b.inputs,
            Inputs::Debs { .. } | Inputs::AptMetadata | Inputs::Sbom
        );
        assert_eq!(b.needs.contains(&Need::Derived), waits, "{}", b.component);
        // The wheel jobs produce what they wait for; a complete plan's jobs produce nothing.
        let produces = matches!(b.inputs, Inputs::Wheels { .. });
        assert_eq!(
            b.produces.contains(&Need::Derived),
            produces,
            "{}",
            b.component
        );
        assert!(
            a.produces.is_empty() && a.needs.is_empty(),
            "{}",
            a.component
        );
        match b.inputs {
            Inputs::AptMetadata | Inputs::Sbom => assert_eq!(b.key, None),
            _ => assert_eq!(a.key, b.key, "{}", b.component),
        }
    }
    let py = known.python.as_ref().unwrap();
    let derived = deferred
        .late
        .complete(&py.libraries, &known.wheel_headers)
        .unwrap();
    let want = complete.derived.as_ref().unwrap();
    assert_eq!(derived.metadata_key, want.metadata_key);
    assert_eq!(derived.sbom, want.sbom);
    assert_eq!(derived.sbom_key, want.sbom_key);
    let metadata = complete
        .layers
        .iter()
        .find(|l| matches!(l.inputs, Inputs::AptMetadata))
        .unwrap();
    assert_eq!(metadata.key, derived.metadata_key);
}

#[test]
fn the_wheels_are_one_layer_after_the_base_and_before_files_and_the_selftest() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a"), b"a").unwrap();
    let p = crate::profile::parse(
        "name: t\nbase:\n  apt:\n    suite: bookworm\n    packages: [curl]\npython:\n  packages: [requests]\nfiles:\n  - {src: ./a, dst: /a}\nstrip: [docs]\n",
        "p.yaml",
        d.path(),
        &|_| None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let f = with_wheels(
        facts(BASE),
        vec![
            wheel("requests", "2.32.3", true),
            wheel("idna", "3.7", false),
        ],
    );
    let pl = plan(&p, None, &f, LOPTS).unwrap();
    let names: Vec<&str> = pl.layers.iter().map(|l| l.component.as_str()).collect();
    assert_eq!(
        names,
        [
            "os",
            "python",
            "packages",
            "metadata",
            PYTHON_PACKAGES,
            "files",
            "sbom"
        ]
    );
    let layer = &pl.layers[4];
    assert!(matches!(layer.inputs, Inputs::Wheels { .. }));
    assert!(layer.key.is_some(), "keyed up front by the locked set");
    assert_eq!(
        layer.strip,
        [StripClass::Docs],
        "the wheels are stripped like every source (their RECORDs follow)"
    );
    assert_eq!(pl.python.as_ref().unwrap().wheels.len(), 2);
    // The strip classes are part of the wheel layer's key.
    let unstripped = crate::profile::parse(
        "name: t\nbase:\n  apt:\n    suite: bookworm\n    packages: [curl]\npython:\n  packages: [requests]\nfiles:\n  - {src: ./a, dst: /a}\n",
        "p.yaml",
        d.path(),
        &|_| None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let other = plan(&unstripped, None, &f, LOPTS).unwrap();
    assert_ne!(other.layers[4].key, layer.key);
    // Only the wheel layers keep the `.pyc` gpuimg compiles (none here: no compiler).
    assert_eq!(pl.strip_rules_for(layer).compiled_tag, None);
    // device-code prunes for the profile's GPUs: without any, it is refused.
    let p2 = crate::profile::parse(
        "name: t\nbase:\n  apt:\n    suite: bookworm\n    packages: [curl]\nstrip: [docs, device-code]\n",
        "p.yaml",
        d.path(),
        &|_| None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let e = plan(&p2, None, &facts(BASE), LOPTS).unwrap_err();
    assert!(matches!(e, PlanError::DeviceCodeWithoutGpus), "{e}");
    assert!(e.to_string().contains("host.gpus"), "{e}");
    // No wheels: no layer.
    let empty = plan(&p, None, &with_wheels(facts(BASE), vec![]), LOPTS).unwrap();
    assert!(!empty.layers.iter().any(|l| l.component == PYTHON_PACKAGES));
}

/// An apt profile with `python:` (its build context must exist).
fn py_profile(dir: &Path, packages: &str, extra: &str) -> Profile {
    crate::profile::parse(
        &format!(
            "name: t\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [{packages}]\nselftest: {{enabled: false}}\n{extra}"
        ),
        "p.yaml",
        dir,
        &|_| None,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_wheel_layer_key_is_the_locked_sets_and_nothing_else_of_the_profile() {
    let d = tempfile::tempdir().unwrap();
    let apt_profile = |packages: &str, extra: &str| py_profile(d.path(), packages, extra);
    let set = vec![
        wheel("requests", "2.32.3", true),
        wheel("idna", "3.7", false),
    ];
    let a = plan(
        &apt_profile("curl", "python:\n  packages: [requests]\n"),
        None,
        &with_wheels(facts(BASE), set.clone()),
        LOPTS,
    )
    .unwrap();
    // Another profile, other apt packages, another index and what-required-it: same key.
    let mut same = set.clone();
    for w in &mut same {
        w.index = "mirror".into();
        w.required_by = vec!["something else".into()];
    }
    let mut more_debs = BASE.to_vec();
    more_debs.push(("xz-utils", false, "standard", "utils"));
    let b = plan(
        &apt_profile(
            "curl, xz-utils",
            "python:\n  packages: ['requests>=2']\nconfig:\n  env: {A: b}\n",
        ),
        None,
        &with_wheels(facts(&more_debs), same),
        LOPTS,
    )
    .unwrap();
    assert_eq!(key_of(&a, PYTHON_PACKAGES), key_of(&b, PYTHON_PACKAGES));
    // What changes a byte changes the key: a wheel's file, REQUESTED, the compiler, the
    // interpreter, the layer settings.
    let p = apt_profile("curl", "python:\n  packages: [requests]\n");
    let rekey = |edit: &dyn Fn(&mut PythonInstall), lopts: LayerOptions| {
        let mut f = with_wheels(facts(BASE), set.clone());
        edit(f.python.as_mut().unwrap());
        key_of(&plan(&p, None, &f, lopts).unwrap(), PYTHON_PACKAGES)
    };
    let base = rekey(&|_| {}, LOPTS);
    assert_eq!(base, key_of(&a, PYTHON_PACKAGES));
    let changed = [
        rekey(&|p| p.wheels[1].sha256 = Digest::of(b"other"), LOPTS),
        // A dependency resolution took from `requests`: the install checks it again.
        rekey(
            &|p| p.wheels[1].required_by = vec!["requests 2.32.3".into()],
            LOPTS,
        ),
        rekey(&|p| p.wheels[1].requested = true, LOPTS),
        rekey(&|p| p.wheels.pop().map(drop).unwrap_or(()), LOPTS),
        rekey(
            &|p| {
                p.compiler = Some(gpuimg_wheel::HostPython {
                    path: "/usr/bin/python3.11".into(),
                    version: "3.11.2".into(),
                    magic: 3495,
                })
            },
            LOPTS,
        ),
        rekey(&|p| p.python.full_version = "3.11.9".into(), LOPTS),
        rekey(
            &|_| {},
            LayerOptions {
                compression: Compression::Zstd,
                epoch: 0,
            },
        ),
        rekey(
            &|_| {},
            LayerOptions {
                compression: Compression::Gzip,
                epoch: 1,
            },
        ),
    ];
    for (i, k) in changed.iter().enumerate() {
        assert_ne!(*k, base, "change {i}");
    }
    // The compiler's path does not change its output; its version does.
    let c = |path: &str, version: &str| {
        rekey(
            &|p| {
                p.compiler = Some(gpuimg_wheel::HostPython {
                    path: path.into(),
                    version: version.into(),
                    magic: 3495,
                })
            },
            LOPTS,
        )
    };
    assert_eq!(c("/a/python3.11", "3.11.2"), c("/b/python3", "3.11.2"));
    assert_ne!(c("/a/python3.11", "3.11.2"), c("/a/python3.11", "3.11.7"));
}

#[test]
fn the_sbom_lists_every_package_and_comes_last_only_when_there_are_packages() {
    let p = apt_profile("base-files, libc6, python3.11-minimal, curl", "");
    let pl = plan(&p, None, &facts(BASE), LOPTS).unwrap();
    let last = pl.layers.last().unwrap();
    assert_eq!(last.component, "sbom");
    assert!(matches!(last.inputs, Inputs::Sbom), "{:?}", last.inputs);
    let derived = pl.derived.as_ref().unwrap();
    assert_eq!(last.key, Some(derived.sbom_key));
    let doc: serde_json::Value = serde_json::from_slice(&derived.sbom).unwrap();
    let names: Vec<&str> = doc["packages"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["base-files", "curl", "libc6", "python3.11-minimal"]);
    // Nothing to list: no layer (the image is as it was), the document still exists.
    let pl = plan(&profile("name: t\n"), None, &Facts::default(), LOPTS).unwrap();
    assert!(pl.layers.iter().all(|l| l.component != "sbom"));
    assert!(!pl.derived.unwrap().sbom.is_empty());
}

#[test]
fn plans_for_two_platforms_share_the_jobs_whose_keys_are_equal() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("rootfs.tar"), b"").unwrap();
    let for_platform = |arch: &str, machine: &str| {
        let p = crate::profile::parse(
            &format!(
                "name: t\nplatform: linux/{arch}\nbase:\n  rootfs: ./rootfs.tar\nselftest: {{enabled: false}}\npython:\n  packages: [requests]\n"
            ),
            "p.yaml",
            d.path(),
            &|_| None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // A pure-Python wheel is one file for both; a compiled one is each platform's own.
        let mut numpy = wheel("numpy", "2.1.0", false);
        numpy.sha256 = Digest::of(format!("numpy for {machine}").as_bytes());
        let mut f = with_wheels(
            Facts::default(),
            vec![numpy, wheel("requests", "2.32.3", true)],
        );
        f.rootfs_identity = Some([1, 2, 3, 4, 5]);
        if let Some(py) = f.python.as_mut() {
            py.python.machine = machine.into();
        }
        plan(&p, None, &f, LOPTS).unwrap()
    };
    let amd64 = for_platform("amd64", "x86_64");
    let arm64 = for_platform("arm64", "aarch64");
    let shared = shared_jobs(&[&amd64, &arm64]);
    // The same tarball is the same layer; the wheel layer and the SBOM hold each platform's
    // own numpy.
    let components: Vec<&str> = shared
        .values()
        .map(|users| amd64.layers[users[0].1].component.as_str())
        .collect();
    assert_eq!(components, ["base"], "{shared:?}");
    assert_eq!(shared.values().next().unwrap(), &vec![(0, 0), (1, 0)]);
    // A plan shares nothing with itself alone.
    assert!(shared_jobs(&[&amd64]).is_empty());
    // Two platforms with the same wheels share those layers too (the same bytes).
    let pure = |arch: &str| {
        let mut p = for_platform(arch, "x86_64");
        p.layers.retain(|l| l.component != "sbom");
        p
    };
    let (a, b) = (pure("amd64"), pure("arm64"));
    assert_eq!(shared_jobs(&[&a, &b]).len(), 2);
}
