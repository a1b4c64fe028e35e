//! Root filesystems and images: a busybox root filesystem (with the host's glibc when a
//! dynamically linked program must run in it), the manifest digest of `build --json`, PAX
//! xattr records of layers, and podman with the settings README.md's Development section
//! gives (runc, vfs storage, no network; no ulimits, no pids limit, cgroupfs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::cmd::{require, run, run_ok, which};

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
    podman_run_with(dir, extra, image_ref, &[])
}

/// [`podman_run`] with `args` after the image (the command's arguments).
pub fn podman_run_with(dir: &Path, extra: &[&str], image_ref: &str, args: &[&str]) -> Output {
    let mut c = podman(dir);
    c.args(["run", "--rm", "--network=none"])
        .args(extra)
        .arg(image_ref)
        .args(args);
    run(&mut c)
}

/// `podman load -i archive` into the private store under `dir` (the one [`podman_run`] uses);
/// returns podman's output, which names the loaded image.
pub fn podman_load(dir: &Path, archive: &Path) -> Output {
    let mut c = podman(dir);
    c.arg("load").arg("-i").arg(archive);
    run(&mut c)
}

/// podman (runc, vfs, cgroupfs, no ulimits or pids limit) with its store under `dir`.
pub fn podman(dir: &Path) -> Command {
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
        .args(["--storage-driver", "vfs", "--runtime", "runc"]);
    c
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

/// Unpack the `latest` image of the OCI layout `out` with `umoci unpack --rootless` into
/// `bundle`; returns its root filesystem.
pub fn umoci_unpack(out: &Path, bundle: &Path) -> std::path::PathBuf {
    super::cmd::require("umoci");
    super::cmd::run_ok(
        std::process::Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", out.display()))
            .arg(bundle),
    );
    bundle.join("rootfs")
}
