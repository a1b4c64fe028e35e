//! Compressed blocks found again (`layer::fragments`): a gzip layer written anew (a new
//! `SOURCE_DATE_EPOCH`) reuses the compressed blocks of its large files from the earlier
//! blob in the cache, and its bytes are exactly those a build with an empty cache writes
//! (same manifest digest). A cache blob changed behind gpuimg's back is never trusted for a
//! block: the check by inflating fails and the block is compressed again, still to the same
//! bytes. `umoci unpack` reads the reused layer back (every digest verified) with the large
//! file's bytes intact; `cache prune` drops the records of blobs it removes.

use crate::common;

use std::path::Path;

use common::*;

/// `n` bytes of compressible text that differ by `seed`.
fn text(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let w = ["cublas ", "sm_90 ", "kernel ", "ptx\n", "fatbin "][(x % 5) as usize];
        out.extend_from_slice(w.as_bytes());
        out.extend_from_slice(format!("{:x} ", x % 4096).as_bytes());
    }
    out.truncate(n);
    out
}

struct Setup {
    t: Sandbox,
    big: Vec<u8>,
}

fn setup() -> Setup {
    let t = Sandbox::new();
    let d = t.path();
    let big = text(3 * (1 << 20) + 12_345, 7);
    std::fs::create_dir_all(d.join("app")).unwrap();
    std::fs::write(d.join("app/model.bin"), &big).unwrap();
    write(&d.join("app/small.txt"), "small\n");
    write(
        &d.join("p.yaml"),
        "name: reuse\nfiles:\n  - {src: ./app, dst: /opt/app}\nselftest: {enabled: false}\n",
    );
    Setup { t, big }
}

impl Setup {
    /// Build at `epoch` into `cache`; (manifest digest, stderr).
    fn build(&self, cache: &str, epoch: u64, out: &str) -> (String, String) {
        let d = self.t.path();
        let o = run(self
            .t
            .gpuimg_with_cache(&d.join(cache))
            .env("SOURCE_DATE_EPOCH", epoch.to_string())
            .arg("build")
            .arg(d.join("p.yaml"))
            .arg("-o")
            .arg(d.join(out))
            .args(["--compression", "gzip", "--tag", "t"]));
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "build failed: {stderr}");
        // The progress lines name what was reused; the last line the manifest digest.
        let digest = stderr
            .lines()
            .find_map(|l| l.strip_prefix("built "))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("no `built` line: {stderr}"))
            .to_string();
        (digest, stderr)
    }
}

fn records(cache: &Path) -> Vec<String> {
    match std::fs::read_dir(cache.join("fragments-v1")) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_layer_written_anew_reuses_its_large_files_blocks_and_is_what_a_fresh_build_writes() {
    require("umoci");
    let s = setup();
    let d = s.t.path();
    let (first, err) = s.build("warm", 1, "out1");
    assert!(!err.contains("reused"), "{err}");
    let recs = records(&d.join("warm"));
    assert_eq!(recs.len(), 1, "one blob holds the large file: {recs:?}");

    let (warm, err) = s.build("warm", 2, "out2");
    assert_ne!(warm, first, "a new epoch changes the headers");
    // 3 MiB + 12,345 bytes of the large file, every block of it.
    assert!(
        err.contains("3.2 MB of compressed blocks reused"),
        "stderr: {err}"
    );
    let (fresh, err) = s.build("cold", 2, "out2-fresh");
    assert!(!err.contains("reused"), "{err}");
    assert_eq!(warm, fresh, "reused blocks changed the layer's bytes");

    // umoci checks every digest; the large file reads back whole.
    let bundle = d.join("bundle");
    run_ok(
        std::process::Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:t", d.join("out2").display()))
            .arg(&bundle),
    );
    assert!(std::fs::read(bundle.join("rootfs/opt/app/model.bin")).unwrap() == s.big);
}

#[test]
fn a_changed_cache_blob_is_never_reused_and_prune_drops_its_records() {
    let s = setup();
    let d = s.t.path();
    s.build("warm", 1, "out1");
    let recs = records(&d.join("warm"));
    assert_eq!(recs.len(), 1);
    let blob = d
        .join("warm/blobs-v1/sha256")
        .join(recs[0].trim_end_matches(".json"));
    // Change every byte after the gzip header (in place: the same inode, size and mtime
    // class of change a disk error or another program would make).
    let mut bytes = std::fs::read(&blob).unwrap();
    for b in bytes.iter_mut().skip(10) {
        *b = b.wrapping_add(1);
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&blob)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
        .unwrap();
    let (warm, err) = s.build("warm", 3, "out3");
    assert!(!err.contains("reused"), "a changed blob was reused: {err}");
    let (fresh, _) = s.build("cold", 3, "out3-fresh");
    assert_eq!(warm, fresh);

    // Both outputs gone, the old blobs unreferenced once the layer records go too: prune
    // removes the blobs and their block records.
    for o in ["out1", "out3", "out3-fresh"] {
        std::fs::remove_dir_all(d.join(o)).unwrap();
    }
    std::fs::remove_dir_all(d.join("warm/layers-v2")).unwrap();
    run_ok(
        s.t.gpuimg_with_cache(&d.join("warm"))
            .args(["cache", "prune"]),
    );
    assert!(records(&d.join("warm")).is_empty());
}
