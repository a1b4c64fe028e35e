//! A build killed mid-way (SIGKILL) leaves the previous output intact, and the next build
//! succeeds and cleans up the leftovers.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn sigkill_mid_build_keeps_previous_output() {
    require("umoci");
    let t = tmp();
    let root = busybox_rootfs(t.path());
    let p = t.path().join("p.yaml");
    write(&p, "name: big\nbase:\n  rootfs: ./rootfs\n");
    let out = t.path().join("out");
    let cache = t.path().join("cache");
    let build = |cache: &std::path::Path| {
        let mut c = gpuimg();
        c.env("GPUIMG_CACHE", cache)
            .arg("build")
            .arg(&p)
            .arg("-o")
            .arg(&out)
            .arg("--json");
        c
    };
    let first = manifest_digest(&run_ok(&mut build(&cache)));
    let index_before = std::fs::read(out.join("index.json")).unwrap();

    // Make the next build slow: about a hundred MB of poorly compressible data.
    let mut f = std::fs::File::create(root.join("big.bin")).unwrap();
    let mut x: u64 = 0x9E3779B97F4A7C15;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..120 {
        for chunk in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&buf).unwrap();
    }
    drop(f);

    let mut child = build(&cache).spawn().unwrap();
    // Wait until the build has started writing its layer, then kill it.
    let started = Instant::now();
    loop {
        let busy = std::fs::read_dir(cache.join("tmp"))
            .map(|r| {
                r.flatten()
                    .any(|e| e.metadata().map(|m| m.len() > (1 << 20)).unwrap_or(false))
            })
            .unwrap_or(false);
        if busy || started.elapsed() > Duration::from_secs(60) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the build finished before it could be killed"
    );

    // The previous layout is untouched and still valid.
    assert_eq!(std::fs::read(out.join("index.json")).unwrap(), index_before);
    let bundle = t.path().join("bundle");
    run_ok(
        std::process::Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", out.display()))
            .arg(&bundle),
    );
    assert!(bundle.join("rootfs/bin/busybox").is_file());
    assert!(!bundle.join("rootfs/big.bin").exists());

    // The next build succeeds, replaces the output and leaves no staging directories.
    let second = manifest_digest(&run_ok(&mut build(&cache)));
    assert_ne!(first, second);
    assert_ne!(std::fs::read(out.join("index.json")).unwrap(), index_before);
    let leftovers: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("gpuimg-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
