//! Stack pins become packages, with no network: wheels named like NVIDIA's and PyTorch's,
//! served by a loopback PEP 503 index, for the Python of a rootfs's dpkg database.
//! `stack.cuda: "12.4"` with no framework locks `nvidia-cuda-runtime-cu12` 12.4.x (the
//! catalog's `stack_wheels`), which builds into the `cuda-runtime` layer; `stack.pytorch`
//! locks `torch` at the resolved version; a `stack.cuda` that the framework's own pins
//! contradict is a "no" (exit 1) naming the pin and the wheel with what required it.

mod common;

use std::path::{Path, PathBuf};

use common::*;

const STATUS: &str = "\
Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u10\n\n\
Package: python3\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-1+b1\n\n\
Package: python3.11\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n\n\
Package: libpython3.11-stdlib\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6+deb12u6\n";

fn index(dir: &Path, wheels: &[WheelSpec]) -> PathBuf {
    let root = dir.join("index");
    std::fs::create_dir_all(root.join("files")).unwrap();
    let mut pages: std::collections::BTreeMap<String, String> = Default::default();
    for w in wheels {
        let path = w.write(&root.join("files"));
        let sha = gpuimg::digest::Digest::of(&std::fs::read(&path).unwrap()).hex();
        let f = w.filename();
        pages
            .entry(w.name.to_lowercase().replace(['_', '.'], "-"))
            .or_default()
            .push_str(&format!(
                "<a href=\"../../files/{f}#sha256={sha}\">{f}</a><br/>\n"
            ));
    }
    for (project, links) in pages {
        write(
            &root.join("simple").join(&project).join("index.html"),
            &format!("<html><body>\n{links}</body></html>\n"),
        );
    }
    root
}

struct Setup {
    sb: Sandbox,
    url: String,
    _server: Server,
}

fn setup() -> Setup {
    let sb = Sandbox::new();
    write(&sb.join("rootfs/var/lib/dpkg/status"), STATUS);
    let wheels = vec![
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
    ];
    let server = serve(&index(sb.path(), &wheels));
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

    fn locked_wheels(&self) -> Vec<(String, String)> {
        let lock: serde_json::Value =
            serde_json::from_str(&read(&self.sb.join("stack.lock.json"))).unwrap();
        lock["artifacts"]
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
    run_ok(s.sb.gpuimg().arg("lock").arg(&p));
    assert_eq!(
        s.locked_wheels(),
        [(
            "nvidia-cuda-runtime-cu12".to_string(),
            "12.4.127".to_string()
        )]
    );
    let json = run_ok(
        s.sb.gpuimg()
            .args(["build", "--locked", "--json", "-o"])
            .arg(s.sb.join("out"))
            .arg(&p),
    );
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let components: Vec<&str> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    assert_eq!(components, ["base", "cuda-runtime"]);
}

#[test]
fn a_pytorch_pin_locks_torch_and_a_contradicting_cuda_pin_is_a_no() {
    let s = setup();
    let p = s.profile("  pytorch: \"2.15\"\n  python: \"3.11\"\n");
    run_ok(s.sb.gpuimg().arg("lock").arg(&p));
    let wheels = s.locked_wheels();
    assert!(
        wheels.contains(&("torch".to_string(), "2.15.0".to_string())),
        "{wheels:?}"
    );
    assert!(
        wheels.contains(&("nvidia-cuda-runtime".to_string(), "13.2.86".to_string())),
        "{wheels:?}"
    );

    let p = s.profile("  cuda: \"13.0\"\n  pytorch: \"2.15\"\n  python: \"3.11\"\n");
    let out = run(s.sb.gpuimg().arg("lock").arg(&p));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("`stack.cuda: \"13.0\"`"), "{err}");
    assert!(err.contains("`nvidia-cuda-runtime 13.2.86`"), "{err}");
    assert!(err.contains("cuda-toolkit 13.2.2"), "{err}");
}
