//! One golden manifest digest for a fixed input: a `files:`-only image with explicit modes,
//! `SOURCE_DATE_EPOCH=0`, gzip and zstd. Any change to the bytes gpuimg writes (tar headers,
//! compressor settings, config or manifest JSON, annotations) changes these digests: that is a
//! contract change every user sees (their image digests change), so it must be deliberate and
//! go into the README changelog along with the new constants.

use crate::common;

use std::os::unix::fs::PermissionsExt;

const GZIP: &str = "sha256:92a94be3a26920ec2f4d1e3f397a36f609f422f5f712c0eb67435709c2d2d080";
const ZSTD: &str = "sha256:32a2be7d9a5c6b9aadb67eb477363e0d510cf1788da06695a9fa3ac5e648268a";

#[test]
fn a_fixed_input_builds_to_the_golden_digests() {
    let t = common::Sandbox::new();
    let d = t.path();
    common::write(&d.join("a.txt"), "hello\n");
    common::write(&d.join("run.sh"), "#!/bin/sh\necho run\n");
    common::write(
        &d.join("p.yaml"),
        "name: golden\nfiles:\n  - {src: ./a.txt, dst: /etc/golden/a.txt, mode: \"0644\"}\n  - {src: ./run.sh, dst: /usr/local/bin/run, mode: \"0755\"}\nconfig:\n  entrypoint: [/usr/local/bin/run]\n  env: {A: b}\n  labels: {org.example.k: v}\nselftest: {enabled: false}\n",
    );
    for (round, mode) in [(0, 0o644), (1, 0o600)] {
        // The sources' own modes (and mtimes) do not matter: the profile gives the modes.
        for f in ["a.txt", "run.sh"] {
            std::fs::set_permissions(d.join(f), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        for (compression, want) in [("gzip", GZIP), ("zstd", ZSTD)] {
            let out = common::run_ok(
                t.gpuimg_with_cache(&d.join(format!("cache-{round}")))
                    .env("SOURCE_DATE_EPOCH", "0")
                    .arg("build")
                    .arg(d.join("p.yaml"))
                    .arg("-o")
                    .arg(d.join(format!("out-{compression}-{round}")))
                    .args(["--compression", compression, "--json", "-q"]),
            );
            assert_eq!(
                common::manifest_digest(&out),
                want,
                "{compression} (sources {mode:o}): the output bytes changed"
            );
        }
    }
}

/// The golden gzip digest of an image with a file of more than 1 MiB, whose data gzip cuts
/// into blocks of its own (`layer::fragments`): the cut is part of the bytes.
const GZIP_LARGE_FILE: &str =
    "sha256:26efabda5b12540873ed246009b740a1023a6d812718c35bd253aaac8a8024d7";

#[test]
fn a_large_file_builds_to_its_golden_gzip_digest() {
    let t = common::Sandbox::new();
    let d = t.path();
    let big: String = (0..200_000u32)
        .map(|i| format!("{:08x}\n", i.wrapping_mul(2_654_435_761) % 65_521))
        .collect();
    common::write(&d.join("big.txt"), &big);
    common::write(&d.join("a.txt"), "hello\n");
    common::write(
        &d.join("p.yaml"),
        "name: golden\nfiles:\n  - {src: ./a.txt, dst: /etc/golden/a.txt, mode: \"0644\"}\n  - {src: ./big.txt, dst: /opt/big.txt, mode: \"0644\"}\nselftest: {enabled: false}\n",
    );
    let out = common::run_ok(
        t.gpuimg()
            .env("SOURCE_DATE_EPOCH", "0")
            .arg("build")
            .arg(d.join("p.yaml"))
            .arg("-o")
            .arg(d.join("out"))
            .args(["--compression", "gzip", "--json", "-q"]),
    );
    assert_eq!(
        common::manifest_digest(&out),
        GZIP_LARGE_FILE,
        "the output bytes changed"
    );
}
