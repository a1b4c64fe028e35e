//! The loader finds the wheels' CUDA libraries without `LD_LIBRARY_PATH`, on Debian bookworm
//! from the host's apt sources: NVIDIA's `nvidia-cuda-runtime-cu12` wheel from the real index
//! (through the host's own Python index configuration; about 1 MB) lands in `cuda-runtime`,
//! `/etc/ld.so.conf.d/gpuimg-python.conf` lists its library directory, and the `ld.so.cache`
//! in `metadata` (read back by the host's `ldconfig -p -C`) maps `libcudart.so.12` there.
//! And the one-provider rule across apt and wheels: a wheel carrying its own `libz.so.1`
//! (a copy of the host's zlib) beside Debian's `zlib1g` is refused naming both (exit 2).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const APT: &str = "base:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [base-files, base-passwd, libc6, python3]\nselftest: {enabled: false}\n";

/// `gpuimg` in `sb`, seeing the host's Python index configuration (a sandbox hides it).
fn gpuimg_host_index(sb: &Sandbox) -> Command {
    with_host_index(sb.gpuimg())
}

fn unpack(sb: &Sandbox, out: &Path) -> PathBuf {
    umoci_unpack(out, &sb.join("bundle"))
}

#[test]
fn the_cuda_runtime_wheel_is_in_ld_so_cache_from_its_own_directory() {
    let sb = Sandbox::new();
    let profile = sb.join("cudart.yaml");
    write(
        &profile,
        &format!(
            "name: cudart\n{APT}python:\n  packages: [\"nvidia-cuda-runtime-cu12==12.4.127\"]\n"
        ),
    );
    let out = sb.join("out");
    let json = run_ok(
        gpuimg_host_index(&sb)
            .args(["build", "--json", "-o"])
            .arg(&out)
            .arg(&profile),
    );
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let components: Vec<&str> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    // The SBOM's layer comes last, the wheel's just before it.
    assert_eq!(components.last(), Some(&"sbom"), "{components:?}");
    assert_eq!(
        components.iter().rev().nth(1),
        Some(&"cuda-runtime"),
        "{components:?}"
    );
    assert!(components.contains(&"metadata"), "{components:?}");

    let root = unpack(&sb, &out);
    let dir = "/usr/local/lib/python3.11/dist-packages/nvidia/cuda_runtime/lib";
    let conf = read(&root.join("etc/ld.so.conf.d/gpuimg-python.conf"));
    let listed: Vec<&str> = conf.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(listed, [dir], "{conf}");
    assert!(root.join(&dir[1..]).join("libcudart.so.12").is_file());

    require("ldconfig");
    let printed = run_ok(
        Command::new("ldconfig")
            .args(["-p", "-C"])
            .arg(root.join("etc/ld.so.cache")),
    );
    let entries: BTreeMap<&str, &str> = printed
        .lines()
        .filter_map(|l| {
            let (name, path) = l.trim().split_once(" => ")?;
            Some((name.split_whitespace().next()?, path))
        })
        .collect();
    assert_eq!(
        entries.get("libcudart.so.12").copied(),
        Some(format!("{dir}/libcudart.so.12").as_str()),
        "{printed}"
    );
    assert!(entries.contains_key("libc.so.6"), "{printed}");
}

#[test]
fn a_wheels_copy_of_a_debian_library_is_refused_naming_both() {
    let sb = Sandbox::new();
    let zlib = std::fs::canonicalize("/usr/lib/x86_64-linux-gnu/libz.so.1")
        .expect("the build host's zlib (scripts/install-deps.sh installs zlib1g)");
    let so = std::fs::read(zlib).unwrap();
    let wheel = WheelSpec::new("fakez", "1.0").file_mode("fakez/lib/libz.so.1", &so, 0o755);
    let files = sb.join("index/files");
    std::fs::create_dir_all(&files).unwrap();
    let path = wheel.write(&files);
    let sha = gpuimg_store::digest::Digest::of(&std::fs::read(&path).unwrap()).hex();
    let f = wheel.filename();
    write(
        &sb.join("index/simple/fakez/index.html"),
        &format!("<html><body><a href=\"../../files/{f}#sha256={sha}\">{f}</a></body></html>\n"),
    );
    let server = serve(&sb.join("index"));
    let profile = sb.join("dupz.yaml");
    write(
        &profile,
        &format!(
            "name: dupz\n{APT}python:\n  index: {}/simple/\n  packages: [fakez]\n",
            server.url
        ),
    );
    let o = run(sb
        .gpuimg()
        .args(["build", "-o"])
        .arg(sb.join("out"))
        .arg(&profile));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("`libz.so.1` is provided twice"), "{err}");
    assert_error(&err, &[sb.path()]);
    assert!(
        err.contains("package `zlib1g`") && err.contains("wheel `fakez`"),
        "{err}"
    );
    assert!(!sb.join("out").exists());
    // Picking Debian's copy builds; the wheel's stays out of ld.so.cache.
    write(
        &profile,
        &format!(
            "name: dupz\n{APT}libraries: {{libz.so.1: zlib1g}}\npython:\n  index: {}/simple/\n  packages: [fakez]\n",
            server.url
        ),
    );
    run_ok(
        sb.gpuimg()
            .args(["build", "-o"])
            .arg(sb.join("out"))
            .arg(&profile),
    );
    let root = unpack(&sb, &sb.join("out"));
    let cache = std::fs::read(root.join("etc/ld.so.cache")).unwrap();
    let needle = b"fakez/lib/libz.so.1";
    assert!(!cache.windows(needle.len()).any(|w| w == needle));
    assert!(!root.join("etc/ld.so.conf.d/gpuimg-python.conf").exists());
}
