//! Shared helpers for the integration tests: run the built binary, make root filesystems,
//! drive umoci/skopeo/podman with the settings README.md's Development section gives (runc,
//! vfs storage, no network; no ulimits, no pids limit, cgroupfs).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn gpuimg() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuimg"));
    c.env_remove("SOURCE_DATE_EPOCH");
    c
}

/// Fail loudly when a tool the test needs is missing (scripts/install-deps.sh installs it).
pub fn require(tool: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "`{tool}` is not installed: run `bash scripts/install-deps.sh` (tests never skip)"
    );
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("failed to start {cmd:?}: {e}"));
    out
}

pub fn run_ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A root filesystem directory holding busybox (from Debian's busybox-static) and a few links.
pub fn busybox_rootfs(dir: &Path) -> PathBuf {
    require("busybox");
    let root = dir.join("rootfs");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::create_dir_all(root.join("tmp")).unwrap();
    let busybox = which("busybox");
    std::fs::copy(&busybox, root.join("bin/busybox")).unwrap();
    for l in ["sh", "echo", "cat", "id", "pwd", "env", "ls"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(l)).unwrap();
    }
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    root
}

pub fn which(tool: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(tool))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| panic!("`{tool}` not found on PATH"))
}

/// The manifest digest from `gpuimg build --json` output.
pub fn manifest_digest(json_out: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json_out.trim())
        .unwrap_or_else(|e| panic!("build --json printed invalid JSON ({e}): {json_out}"));
    v["manifest_digest"]
        .as_str()
        .expect("manifest_digest")
        .to_string()
}

/// Run an image with podman (runc, vfs, no network, cgroupfs) in a private store under `dir`.
pub fn podman_run(dir: &Path, image_ref: &str, extra: &[&str]) -> Output {
    require("podman");
    require("runc");
    let conf = dir.join("containers.conf");
    std::fs::write(
        &conf,
        "[containers]\ndefault_ulimits = []\npids_limit = 0\n[engine]\ncgroup_manager = \"cgroupfs\"\n",
    )
    .unwrap();
    let mut c = Command::new("podman");
    c.env("CONTAINERS_CONF", &conf)
        .arg("--root")
        .arg(dir.join("podman-root"))
        .arg("--runroot")
        .arg(dir.join("podman-run"))
        .args(["--storage-driver", "vfs", "--runtime", "runc"])
        .args(["run", "--rm", "--network=none"])
        .args(extra)
        .arg(image_ref);
    run(&mut c)
}

pub fn write(path: &Path, text: &str) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

/// A temporary directory whose path is a valid image reference: podman derives an image name
/// from the path, and names must be lowercase.
pub fn tmp() -> tempfile::TempDir {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    tempfile::Builder::new()
        .prefix(&format!("gpuimgtest-{}-{n}", std::process::id()))
        .rand_bytes(0)
        .tempdir()
        .unwrap()
}

/// Copy the build host's glibc (what `ldd` lists for `binary`) into `root`, so that a
/// dynamically linked program such as gpuimg-selftest runs in a busybox root filesystem.
pub fn add_glibc_for(root: &Path, binary: &Path) {
    let out = run_ok(Command::new("ldd").arg(binary));
    for line in out.lines() {
        let path = line
            .split_whitespace()
            .find(|w| w.starts_with('/'))
            .map(PathBuf::from);
        let Some(path) = path else { continue };
        let real = std::fs::canonicalize(&path).unwrap();
        let dest = root.join(path.strip_prefix("/").unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&real, &dest).unwrap();
    }
}

pub fn selftest_bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_gpuimg-selftest"));
    assert!(p.is_file(), "{} missing", p.display());
    p
}

/// (entry path, xattr name, value) of every PAX `SCHILY.xattr.*` record in the gzip layers of
/// the layout at `out`, sorted.
pub fn layer_xattrs(out: &Path) -> Vec<(String, String, Vec<u8>)> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(out.join("blobs/sha256"))
        .unwrap()
        .flatten()
    {
        let b = std::fs::read(e.path()).unwrap();
        if !b.starts_with(&[0x1f, 0x8b]) {
            continue;
        }
        let mut a = tar::Archive::new(flate2::read::MultiGzDecoder::new(&b[..]));
        for entry in a.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            if let Some(exts) = entry.pax_extensions().unwrap() {
                for x in exts {
                    let x = x.unwrap();
                    if let Some(n) = x.key().unwrap().strip_prefix("SCHILY.xattr.") {
                        found.push((path.clone(), n.to_string(), x.value_bytes().to_vec()));
                    }
                }
            }
        }
    }
    found.sort();
    found
}
