//! Stack pins become packages, with no network: wheels named like NVIDIA's and PyTorch's,
//! served by a loopback PEP 503 index, for the Python of a rootfs's dpkg database.
//! `stack.cuda: "12.4"` with no framework locks `nvidia-cuda-runtime-cu12` 12.4.x (the
//! catalog's `stack_wheels`), which builds into the `cuda-runtime` layer; `stack.pytorch`
//! locks `torch` at the resolved version, the variant the index installs for it (asked before
//! the resolution); a `stack.cuda` that variant contradicts is a "no" (exit 1) naming the pin
//! and what the index installs; `resolve`, `lock` and `build` give the same answer; without
//! `python:` a pinned stack is a warning saying the image carries none of it.
//! One CUDA minor per image: `stack.cuda: "12.8"` holds cuBLAS and NVRTC, which cuDNN requires
//! unpinned, to 12.8 (the catalog's `cuda_components`), says which wheels it cannot hold, and
//! a cuDNN that needs a newer cuBLAS is a "no" naming that requirement; without the pin, the
//! image states the minor its wheels need, not the newest the catalog knows.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

const STATUS: &str = "\
Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u10\n\n\
Package: python3\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-1+b1\n\n\
Package: python3.11\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n\n\
Package: libpython3.11-stdlib\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n";

struct Setup {
    sb: Sandbox,
    url: String,
    _server: Server,
}

fn setup() -> Setup {
    setup_with(vec![
        WheelSpec::new("nvidia-cuda-runtime-cu12", "12.4.127")
            .file("nvidia/cuda_runtime/lib/libcudart.so.12", "12.4\n"),
        WheelSpec::new("nvidia-cuda-runtime-cu12", "12.6.77")
            .file("nvidia/cuda_runtime/lib/libcudart.so.12", "12.6\n"),
        WheelSpec::new("nvidia-cuda-runtime", "13.2.86")
            .file("nvidia/cu13/lib/libcudart.so.13", "13.2\n"),
        WheelSpec::new("cuda-toolkit", "13.2.2").requires("nvidia-cuda-runtime==13.2.86"),
        WheelSpec::new("torch", "2.15.0")
            .file("torch/__init__.py", "")
            .requires("cuda-toolkit==13.2.2"),
        // As a framework's own index serves it: another variant than the default index's.
        WheelSpec::new("torch", "2.14.1+cu126")
            .file("torch/__init__.py", "")
            .requires("nvidia-cuda-runtime-cu12==12.6.77"),
    ])
}

/// A rootfs with Python 3.11 and a loopback index of `wheels`.
fn setup_with(wheels: Vec<WheelSpec>) -> Setup {
    let sb = Sandbox::new();
    write(&sb.join("rootfs/var/lib/dpkg/status"), STATUS);
    let server = serve(&wheel_index(sb.path(), &wheels));
    let url = format!("{}/simple/", server.url);
    Setup {
        sb,
        url,
        _server: server,
    }
}

impl Setup {
    fn profile(&self, stack: &str) -> PathBuf {
        let p = self.sb.join("stack.yaml");
        write(
            &p,
            &format!(
                "name: stack\nbase:\n  rootfs: ./rootfs\nhost:\n  gpus: [H200]\nstack:\n{stack}selftest: {{enabled: false}}\npython:\n  index: {}\n",
                self.url
            ),
        );
        p
    }

    /// `gpuimg lock` of `p`, which must succeed; its standard error.
    fn lock_ok(&self, p: &Path) -> String {
        let out = run(self.sb.gpuimg().arg("lock").arg(p));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    }

    fn lock_json(&self) -> serde_json::Value {
        serde_json::from_str(&read(&self.sb.join("stack.lock.json"))).unwrap()
    }

    /// `gpuimg build --locked --json` of `p` into `out`; the JSON it prints.
    fn build_locked(&self, p: &Path) -> serde_json::Value {
        let json = run_ok(
            self.sb
                .gpuimg()
                .args(["build", "--locked", "--json", "-o"])
                .arg(self.sb.join("out"))
                .arg(p),
        );
        serde_json::from_str(json.trim()).unwrap()
    }

    fn locked_wheels(&self) -> Vec<(String, String)> {
        self.lock_json()["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["kind"] == "wheel")
            .map(|a| {
                (
                    a["name"].as_str().unwrap().to_string(),
                    a["version"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }
}

#[test]
fn a_cuda_pin_without_a_framework_locks_nvidias_runtime_wheel() {
    let s = setup();
    let p = s.profile("  cuda: \"12.4\"\n");
    s.lock_ok(&p);
    assert_eq!(
        s.locked_wheels(),
        [(
            "nvidia-cuda-runtime-cu12".to_string(),
            "12.4.127".to_string()
        )]
    );
    let v = s.build_locked(&p);
    let components: Vec<&str> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    // The wheel's layer, then the SBOM listing it.
    assert_eq!(components, ["base", "cuda-runtime", "sbom"]);

    // The metadata follows the installed runtime: its version from the wheel's METADATA, the
    // driver floor per `compat: minor` (the major's .0), arch>= the H200's 9.0.
    let wheel = read_dir_names(&s.sb.join("index/files"))
        .into_iter()
        .find(|n| n.starts_with("nvidia_cuda_runtime_cu12-12.4"))
        .unwrap();
    let version = wheel.split('-').nth(1).unwrap().to_string();
    let info = inspect(&s.sb, &s.sb.join("out"));
    let env = env_of(&info);
    assert_eq!(env.get("CUDA_VERSION"), Some(&version), "{env:?}");
    assert_eq!(
        env.get("NVIDIA_REQUIRE_CUDA").map(String::as_str),
        Some("cuda>=12.0,arch>=9.0"),
        "{env:?}"
    );
    let ann = annotations_of(&info);
    assert_eq!(
        ann.get("io.gpuimg.cuda-library.nvidia-cuda-runtime-cu12"),
        Some(&version),
        "{ann:?}"
    );
}

/// A framework's own index serves another variant than the one the default index serves
/// (`torch 2.14.1+cu126` where the catalog's default for 2.14.1 is cu130): the lock's
/// resolution follows what is installed (cu126 on CUDA 12.6, the driver floor of CUDA 12), and
/// the build says so; the image's metadata follows the installed runtime.
#[test]
fn the_resolution_follows_the_framework_variant_the_index_installs() {
    let s = setup();
    let p = s.profile("  pytorch: \"2.14\"\n  python: \"3.11\"\n");
    let err = s.lock_ok(&p);
    assert!(
        err.contains("the index installs torch 2.14.1 (cu126) for Python 3.11 (x86_64): the stack is resolved for it"),
        "{err}"
    );
    assert_error(
        line_with(&err, "the index installs torch 2.14."),
        &[s.sb.path()],
    );
    assert!(s
        .locked_wheels()
        .contains(&("torch".to_string(), "2.14.1+cu126".to_string())));
    let lock = s.lock_json();
    let r = &lock["resolution"];
    assert_eq!(r["variants"]["pytorch"], "cu126", "{r}");
    assert_eq!(r["components"]["pytorch"], "2.14.1", "{r}");
    let cuda = r["components"]["cuda"].as_str().unwrap();
    assert!(cuda.starts_with("12.6."), "{r}");
    assert_eq!(r["cuda_driver_floor"], "12.0", "{r}");

    let v = s.build_locked(&p);
    assert!(v["manifest_digest"].is_string(), "{v}");
    let env = env_of(&inspect(&s.sb, &s.sb.join("out")));
    assert_eq!(
        env.get("CUDA_VERSION").map(String::as_str),
        Some("12.6.77"),
        "{env:?}"
    );
    assert_eq!(
        env.get("NVIDIA_REQUIRE_CUDA").map(String::as_str),
        Some("cuda>=12.0,arch>=9.0"),
        "{env:?}"
    );
}

/// Without `stack.python` the resolution takes the newest Python the framework has wheels for
/// (3.15 for torch 2.15.0); the image has only the base's interpreter, so `lock` and `build`
/// resolve again for the base's 3.11 and say so, instead of refusing a pin nobody wrote.
#[test]
fn without_a_python_pin_the_stack_is_resolved_for_the_bases_python() {
    let s = setup();
    let p = s.profile("  pytorch: \"2.15\"\n");
    let err = s.lock_ok(&p);
    assert!(
        err.contains("the base installs Python 3.11 (")
            && err.contains("): the stack is resolved for it"),
        "{err}"
    );
    assert_error(
        line_with(&err, "the base installs Python 3.11 ("),
        &[s.sb.path()],
    );
    let lock = s.lock_json();
    assert_eq!(lock["resolution"]["components"]["python"], "3.11", "{lock}");
    assert!(s
        .locked_wheels()
        .contains(&("torch".to_string(), "2.15.0".to_string())));
    // The same without a lock.
    let out = run(s
        .sb
        .gpuimg()
        .args(["build", "-q", "-o"])
        .arg(s.sb.join("out"))
        .arg(&p));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_dir_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn inspect(sb: &Sandbox, out: &Path) -> serde_json::Value {
    let json = run_ok(sb.gpuimg().args(["inspect", "--json"]).arg(out));
    serde_json::from_str(&json).unwrap()
}

/// Every `KEY=VALUE` string anywhere under a `Env` key.
fn env_of(v: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    walk(v, &mut |k, x| {
        if k == "Env" {
            for e in x.as_array().into_iter().flatten() {
                if let Some((a, b)) = e.as_str().and_then(|s| s.split_once('=')) {
                    out.insert(a.to_string(), b.to_string());
                }
            }
        }
    });
    out
}

/// Every string under an `annotations` key whose name starts with `io.gpuimg.`.
fn annotations_of(v: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    walk(v, &mut |k, x| {
        if k == "annotations" || k == "labels" {
            for (a, b) in x.as_object().into_iter().flatten() {
                if let (true, Some(b)) = (a.starts_with("io.gpuimg."), b.as_str()) {
                    out.insert(a.clone(), b.to_string());
                }
            }
        }
    });
    out
}

fn walk(v: &serde_json::Value, f: &mut dyn FnMut(&str, &serde_json::Value)) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                f(k, x);
                walk(x, f);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
        _ => {}
    }
}

#[test]
fn a_pytorch_pin_locks_torch_and_a_contradicting_cuda_pin_is_a_no() {
    let s = setup();
    let p = s.profile("  pytorch: \"2.15\"\n  python: \"3.11\"\n");
    s.lock_ok(&p);
    let wheels = s.locked_wheels();
    assert!(
        wheels.contains(&("torch".to_string(), "2.15.0".to_string())),
        "{wheels:?}"
    );
    assert!(
        wheels.contains(&("nvidia-cuda-runtime".to_string(), "13.2.86".to_string())),
        "{wheels:?}"
    );

    // The framework's device code: the SM list of the catalog record for torch 2.15.0 on
    // the default index, read here from the catalog file itself.
    run_ok(
        s.sb.gpuimg()
            .args(["build", "--locked", "-o"])
            .arg(s.sb.join("out"))
            .arg(&p),
    );
    let catalog: serde_json::Value =
        serde_saphyr::from_str(include_str!("../../catalog/pytorch.yaml")).unwrap();
    let release = catalog["pytorch"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["version"].as_str() == Some("2.15.0"))
        .unwrap();
    let variant = release["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["pypi"].as_bool() == Some(true))
        .unwrap();
    let sms: Vec<String> = variant["sm"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| format!("sm_{}", v.as_str().unwrap().replace('.', "")))
        .collect();
    let info = inspect(&s.sb, &s.sb.join("out"));
    let ann = annotations_of(&info);
    assert_eq!(
        ann.get("io.gpuimg.device-code.sm"),
        Some(&sms.join(",")),
        "{ann:?}"
    );
    assert_eq!(
        ann.get("io.gpuimg.cuda-library.nvidia-cuda-runtime")
            .map(String::as_str),
        Some("13.2.86")
    );
    let env = env_of(&info);
    assert_eq!(env.get("CUDA_VERSION").map(String::as_str), Some("13.2.86"));
    assert_eq!(
        env.get("NVIDIA_REQUIRE_CUDA").map(String::as_str),
        Some("cuda>=13.0,arch>=9.0"),
        "{env:?}"
    );

    let p = s.profile("  cuda: \"13.0\"\n  pytorch: \"2.15\"\n  python: \"3.11\"\n");
    let out = run(s.sb.gpuimg().arg("lock").arg(&p));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_error(&err, &[s.sb.path()]);
    // Decided before any wheel is resolved: the pin, and what the index installs for
    // `torch==2.15.0` (its default build, cu132), each with its source.
    assert!(err.contains("stack.cuda is `13.0` [profile]"), "{err}");
    assert!(
        err.contains("the index installs torch 2.15.0 (cu132), built for CUDA 13.2 [index]"),
        "{err}"
    );
}

#[test]
fn a_stack_pin_without_python_is_a_warning_naming_it() {
    let s = setup();
    let p = s.sb.join("nopy.yaml");
    write(
        &p,
        "name: nopy\nbase:\n  rootfs: ./rootfs\nhost:\n  gpus: [H200]\nstack:\n  cuda: \"12.4\"\nselftest: {enabled: false}\n",
    );
    let out = run(s
        .sb
        .gpuimg()
        .args(["build", "-o"])
        .arg(s.sb.join("nopy-out"))
        .arg(&p));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("`stack.cuda` pinned, but without `python:` the image carries none of it"),
        "{err}"
    );
    assert_error(
        line_with(&err, "`stack.cuda` pinned, but witho"),
        &[s.sb.path()],
    );
}

/// Issue 34, item 2: with `pytorch: "2.14"` and `driver: "<550"` the catalog picks cu126, but
/// an index that serves only the default build installs cu130. The "no" cites the index for
/// the CUDA it forces (never `stack.cuda … [profile]`, which the profile does not set), offers
/// no `stack.cuda` hint (it cannot change what the index serves), and every hint it prints,
/// followed as printed, locks: the profile's own keys, and an index serving cu126.
#[test]
fn a_no_caused_by_the_index_cites_the_index_and_every_hint_it_prints_works() {
    let sb = Sandbox::new();
    write(&sb.join("rootfs/var/lib/dpkg/status"), STATUS);
    let default = vec![
        WheelSpec::new("nvidia-cuda-runtime", "13.0.96")
            .file("nvidia/cu13/lib/libcudart.so.13", "13.0\n"),
        WheelSpec::new("nvidia-cuda-runtime-cu12", "12.6.77")
            .file("nvidia/cuda_runtime/lib/libcudart.so.12", "12.6\n"),
        WheelSpec::new("torch", "2.14.1")
            .file("torch/__init__.py", "")
            .requires("nvidia-cuda-runtime==13.0.96"),
    ];
    let cu126 = vec![WheelSpec::new("torch", "2.14.1+cu126")
        .file("torch/__init__.py", "")
        .requires("nvidia-cuda-runtime-cu12==12.6.77")];
    let a = serve(&wheel_index(&sb.join("a"), &default));
    let b = serve(&wheel_index(&sb.join("b"), &cu126));
    let profile = |driver: &str, compat: &str, extra: &str| {
        let p = sb.join("stack.yaml");
        write(
            &p,
            &format!(
                "name: stack\nbase:\n  rootfs: ./rootfs\nhost:\n  gpus: [H100]\n  driver: \"{driver}\"\nstack:\n  pytorch: \"2.14\"\n  python: \"3.11\"\ncompat: {compat}\nselftest: {{enabled: false}}\npython:\n  index: {}/simple/\n{extra}",
                a.url
            ),
        );
        p
    };
    let lock = |p: &Path| run(sb.gpuimg().arg("lock").arg(p));

    let out = lock(&profile("<550", "minor", ""));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_error(&err, &[sb.path()]);
    assert!(
        err.contains("the index installs torch 2.14.1 (cu130), built for CUDA 13.0 [index]"),
        "{err}"
    );
    assert!(!err.contains("stack.cuda is"), "blames the profile: {err}");
    let hints: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("hint: "))
        .collect();
    assert!(hints.len() >= 2, "{err}");
    assert!(
        hints.iter().all(|h| !h.starts_with("`stack.cuda")),
        "{hints:?}"
    );
    for hint in hints {
        let (driver, compat, extra) = if let Some(rest) = hint.strip_prefix("`host.driver: \"") {
            (
                rest.split('"').next().unwrap().to_string(),
                "minor",
                String::new(),
            )
        } else if let Some(rest) = hint.strip_prefix("`compat: ") {
            (
                "<550".into(),
                rest.split('`').next().unwrap(),
                String::new(),
            )
        } else if hint.starts_with("an index that serves torch 2.14.1 (cu126) would work") {
            (
                "<550".into(),
                "minor",
                format!("  extra-indexes: [\"{}/simple/\"]\n", b.url),
            )
        } else {
            panic!("a hint this test cannot follow: {hint}");
        };
        let out = lock(&profile(&driver, compat, &extra));
        assert!(
            out.status.success(),
            "hint `{hint}` followed, and: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// NVIDIA's CUDA 12 wheels at 12.8 and 12.9, and cuDNN requiring cuBLAS as `cublas` says.
fn cuda_minor_setup(cublas: &str) -> Setup {
    let lib =
        |name: &str, version: &str, path: &str| WheelSpec::new(name, version).file(path, "x\n");
    setup_with(vec![
        lib(
            "nvidia-cuda-runtime-cu12",
            "12.8.90",
            "nvidia/cuda_runtime/lib/libcudart.so.12",
        ),
        lib(
            "nvidia-cuda-runtime-cu12",
            "12.9.79",
            "nvidia/cuda_runtime/lib/libcudart.so.12",
        ),
        lib(
            "nvidia-cublas-cu12",
            "12.8.4.1",
            "nvidia/cublas/lib/libcublas.so.12",
        ),
        lib(
            "nvidia-cublas-cu12",
            "12.9.1.4",
            "nvidia/cublas/lib/libcublas.so.12",
        ),
        lib(
            "nvidia-cuda-nvrtc-cu12",
            "12.8.93",
            "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
        ),
        lib(
            "nvidia-cuda-nvrtc-cu12",
            "12.9.86",
            "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
        ),
        lib(
            "nvidia-cufft-cu12",
            "11.3.3.83",
            "nvidia/cufft/lib/libcufft.so.11",
        ),
        // cuFFT is numbered on its own: 11.4.1.4 is CUDA 12.9's (cuda-toolkit 12.9.1).
        lib(
            "nvidia-cufft-cu12",
            "11.4.1.4",
            "nvidia/cufft/lib/libcufft.so.11",
        ),
        lib(
            "nvidia-cudnn-cu12",
            "9.10.2.21",
            "nvidia/cudnn/lib/libcudnn.so.9",
        )
        .requires(cublas)
        .requires("nvidia-cuda-nvrtc-cu12")
        .requires("nvidia-cufft-cu12"),
    ])
}

#[test]
fn a_cuda_pin_holds_the_wheels_cudnn_pulls_to_its_minor() {
    let s = cuda_minor_setup("nvidia-cublas-cu12");
    let p = s.profile("  cuda: \"12.8\"\n  cudnn: \"9.10\"\n");
    let err = s.lock_ok(&p);
    let wheels = s.locked_wheels();
    for (name, version) in [
        ("nvidia-cuda-runtime-cu12", "12.8.90"),
        ("nvidia-cublas-cu12", "12.8.4.1"),
        ("nvidia-cuda-nvrtc-cu12", "12.8.93"),
        ("nvidia-cudnn-cu12", "9.10.2.21"),
        // Numbered on its own, held all the same: the toolkit's metapackage says which.
        ("nvidia-cufft-cu12", "11.3.3.83"),
    ] {
        assert!(
            wheels.contains(&(name.to_string(), version.to_string())),
            "{name} {version} not in {wheels:?}: {err}"
        );
    }

    s.build_locked(&p);
    let info = inspect(&s.sb, &s.sb.join("out"));
    let env = env_of(&info);
    assert_eq!(
        env.get("CUDA_VERSION").map(String::as_str),
        Some("12.8.90"),
        "{env:?}"
    );
    let ann = annotations_of(&info);
    assert_eq!(
        ann.get("io.gpuimg.cuda-library.nvidia-cublas-cu12")
            .map(String::as_str),
        Some("12.8.4.1"),
        "{ann:?}"
    );
}

#[test]
fn a_requirement_no_wheel_of_the_pinned_minor_meets_is_a_no_naming_it() {
    let s = cuda_minor_setup("nvidia-cublas-cu12>=12.9");
    let p = s.profile("  cuda: \"12.8\"\n  cudnn: \"9.10\"\n");
    let out = run(s.sb.gpuimg().arg("lock").arg(&p));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_error(&err, &[s.sb.path()]);
    // The requirement, its requirer, what the index has, and the pin that rules it out.
    assert!(err.contains("`nvidia-cublas-cu12>=12.9`"), "{err}");
    assert!(
        err.contains("nvidia-cudnn-cu12 at version 9.10.2.21"),
        "{err}"
    );
    assert!(err.contains("`nvidia-cublas-cu12 12.9.1.4`"), "{err}");
    assert!(
        err.contains("`nvidia-cublas-cu12>=12.8.3.14,<=12.8.5.5`"),
        "{err}"
    );
    assert!(err.contains("`stack.cuda: \"12.8\"` resolved to"), "{err}");
    assert!(!s.sb.join("stack.lock.json").exists());
}

/// Without `stack.cuda` the resolution takes the newest CUDA 12 the catalog knows (12.9), but
/// the wheels cuDNN pulls are all 12.8: the image needs 12.8 from the driver, and says so.
#[test]
fn without_a_cuda_pin_the_image_states_the_minor_its_wheels_need() {
    let s = setup_with(vec![
        WheelSpec::new("nvidia-cublas-cu12", "12.8.4.1")
            .file("nvidia/cublas/lib/libcublas.so.12", "x\n"),
        WheelSpec::new("nvidia-cuda-nvrtc-cu12", "12.8.93")
            .file("nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "x\n"),
        WheelSpec::new("nvidia-cudnn-cu12", "9.10.2.21")
            .file("nvidia/cudnn/lib/libcudnn.so.9", "x\n")
            .requires("nvidia-cublas-cu12")
            .requires("nvidia-cuda-nvrtc-cu12"),
    ]);
    // `compat: strict`: the driver floor is the minor itself.
    let p = s.profile("  cudnn: \"9.10\"\ncompat: strict\n");
    let err = s.lock_ok(&p);
    assert!(
        err.contains("the Python packages need CUDA 12.8 (`nvidia-cublas-cu12 12.8.4.1`"),
        "{err}"
    );
    assert_error(
        line_with(&err, "the Python packages need CUDA "),
        &[s.sb.path()],
    );
    let lock = s.lock_json();
    let cuda = lock["resolution"]["components"]["cuda"].as_str().unwrap();
    assert!(cuda.starts_with("12.8."), "{lock}");
    assert_eq!(lock["resolution"]["cuda_driver_floor"], "12.8", "{lock}");
    // `resolve` gives the same answer: it resolves the wheels too.
    let out = run(s.sb.gpuimg().args(["resolve", "--json"]).arg(&p));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["components"], lock["resolution"]["components"], "{r}");

    s.build_locked(&p);
    let env = env_of(&inspect(&s.sb, &s.sb.join("out")));
    assert!(
        env.get("CUDA_VERSION")
            .is_some_and(|v| v.starts_with("12.8")),
        "{env:?}"
    );
    assert_eq!(
        env.get("NVIDIA_REQUIRE_CUDA").map(String::as_str),
        Some("cuda>=12.8,arch>=9.0"),
        "{env:?}"
    );
}

/// The profile's own requirement, not a package's: the "no" names it the same way.
#[test]
fn a_profile_requirement_the_pinned_minor_rules_out_is_a_no_naming_it() {
    let s = cuda_minor_setup("nvidia-cublas-cu12");
    let p = s.profile("  cuda: \"12.8\"\n");
    write(
        &p,
        &read(&p).replace(
            "python:\n",
            "python:\n  packages: [\"nvidia-cublas-cu12>=12.9\"]\n",
        ),
    );
    let out = run(s.sb.gpuimg().arg("lock").arg(&p));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_error(&err, &[s.sb.path()]);
    assert!(
        err.contains("dependencies of the profile are unavailable because its requirement `nvidia-cublas-cu12>=12.9`"),
        "{err}"
    );
    assert!(
        err.contains("`nvidia-cublas-cu12>=12.8.3.14,<=12.8.5.5`"),
        "{err}"
    );
    assert!(!s.sb.join("stack.lock.json").exists());
}

/// Issue 35, item 1: `resolve`, `lock` and `build` resolve once, with the same facts, so they
/// give the same answer. With `pytorch: "2.14"` and `driver: "<550"` against an index that
/// serves only torch 2.14.1's default build (cu130), all three say the same "no", citing the
/// index (`resolve` used to say ok for cu126, which `lock` then refused); with an index that
/// serves cu126 searched first, all three say ok for cu126, and `resolve --offline` answers
/// the same from the cache.
#[test]
fn resolve_lock_and_build_give_the_same_answer() {
    let sb = Sandbox::new();
    write(&sb.join("rootfs/var/lib/dpkg/status"), STATUS);
    let default = vec![
        WheelSpec::new("nvidia-cuda-runtime", "13.0.96")
            .file("nvidia/cu13/lib/libcudart.so.13", "13.0\n"),
        WheelSpec::new("nvidia-cuda-runtime-cu12", "12.6.77")
            .file("nvidia/cuda_runtime/lib/libcudart.so.12", "12.6\n"),
        WheelSpec::new("torch", "2.14.1")
            .file("torch/__init__.py", "")
            .requires("nvidia-cuda-runtime==13.0.96"),
    ];
    let cu126 = vec![WheelSpec::new("torch", "2.14.1+cu126")
        .file("torch/__init__.py", "")
        .requires("nvidia-cuda-runtime-cu12==12.6.77")];
    let a = serve(&wheel_index(&sb.join("a"), &default));
    let b = serve(&wheel_index(&sb.join("b"), &cu126));
    let p = sb.join("stack.yaml");
    let profile = |extra: &str| {
        write(
            &p,
            &format!(
                "name: stack\nbase:\n  rootfs: ./rootfs\nhost:\n  gpus: [H100]\n  driver: \"<550\"\nstack:\n  pytorch: \"2.14\"\n  python: \"3.11\"\nselftest: {{enabled: false}}\npython:\n  index: {}/simple/\n{extra}",
                a.url
            ),
        );
    };
    let all = |p: &Path| {
        let cmds: [Vec<&str>; 3] = [
            vec!["resolve"],
            vec!["lock"],
            vec!["build", "-q", "-o", "out"],
        ];
        cmds.map(|args| {
            let out = run(sb.gpuimg().args(&args).arg(p));
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (args[0], out.status.code(), text)
        })
    };

    profile("");
    for (cmd, code, text) in all(&p) {
        assert_eq!(code, Some(1), "{cmd}: {text}");
        assert!(
            text.contains("the index installs torch 2.14.1 (cu130), built for CUDA 13.0 [index]"),
            "{cmd}: {text}"
        );
    }
    assert!(!sb.join("stack.lock.json").exists());

    profile(&format!("  extra-indexes: [\"{}/simple/\"]\n", b.url));
    for (cmd, code, text) in all(&p) {
        assert_eq!(code, Some(0), "{cmd}: {text}");
    }
    let lock: serde_json::Value = serde_json::from_str(&read(&sb.join("stack.lock.json"))).unwrap();
    assert_eq!(lock["resolution"]["variants"]["pytorch"], "cu126", "{lock}");
    let resolved = |offline: bool| {
        let mut cmd = sb.gpuimg();
        cmd.args(["resolve", "--json"]);
        if offline {
            cmd.arg("--offline");
        }
        let out = run(cmd.arg(&p));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    for offline in [false, true] {
        let r = resolved(offline);
        assert_eq!(
            r["components"], lock["resolution"]["components"],
            "offline {offline}: {r}"
        );
    }
}

/// An index serving several builds of one release (`2.14.1`, `+cu126`, `+cu130`): what it is
/// asked to install before the resolution is what the Python resolution then installs (the
/// newest local build), so the check after it only confirms; the lock says so.
#[test]
fn the_variant_asked_for_is_the_variant_installed() {
    let s = setup_with(vec![
        WheelSpec::new("nvidia-cuda-runtime", "13.0.96")
            .file("nvidia/cu13/lib/libcudart.so.13", "13.0\n"),
        WheelSpec::new("nvidia-cuda-runtime-cu12", "12.6.77")
            .file("nvidia/cuda_runtime/lib/libcudart.so.12", "12.6\n"),
        WheelSpec::new("torch", "2.14.1")
            .file("torch/__init__.py", "")
            .requires("nvidia-cuda-runtime==13.0.96"),
        WheelSpec::new("torch", "2.14.1+cu126")
            .file("torch/__init__.py", "")
            .requires("nvidia-cuda-runtime-cu12==12.6.77"),
        WheelSpec::new("torch", "2.14.1+cu130")
            .file("torch/__init__.py", "")
            .requires("nvidia-cuda-runtime==13.0.96"),
    ]);
    let p = s.profile("  pytorch: \"2.14\"\n  python: \"3.11\"\n");
    let err = s.lock_ok(&p);
    assert!(
        err.contains("the index installs torch 2.14.1 (cu130)"),
        "{err}"
    );
    assert_error(
        line_with(&err, "the index installs torch 2.14."),
        &[s.sb.path()],
    );
    assert!(s
        .locked_wheels()
        .contains(&("torch".to_string(), "2.14.1+cu130".to_string())));
    assert_eq!(s.lock_json()["resolution"]["variants"]["pytorch"], "cu130");
}
