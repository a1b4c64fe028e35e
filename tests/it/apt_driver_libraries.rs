//! The driver's user-space libraries never go into an image, from apt packages too: a signed
//! fixture repository's `libcuda1` (shipping `/usr/lib/x86_64-linux-gnu/libcuda.so.1`, as
//! Debian's does) pulled in by a dependency is refused naming the package (exit 2, one line,
//! nothing written), and again on a second build with the first's cache (the refusal comes
//! before the streamed layers are committed). cuda-compat's libcuda under
//! `/usr/local/cuda-12.4/compat/` is refused without `compat: forward` and built with it.

use crate::common;

use common::*;

fn repo() -> SignedRepo {
    let mut app = pkg("app", "1.0").field("Depends", "libcuda1");
    app.files = vec![("/usr/bin/app", b"#!/bin/sh\n", 0o755)];
    let mut libcuda = pkg("libcuda1", "550.54.15");
    libcuda.files = vec![(
        "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
        b"not the host's driver\n",
        0o644,
    )];
    libcuda.symlinks = vec![(
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "libcuda.so.550.54.15",
    )];
    let mut compat = pkg("cuda-compat-12-4", "550.54.15-1");
    compat.files = vec![(
        "/usr/local/cuda-12.4/compat/libcuda.so.550.54.15",
        b"forward compatibility\n",
        0o644,
    )];
    signed_repo(&[("stable", vec![&app, &libcuda, &compat])])
}

fn profile(sb: &Sandbox, r: &SignedRepo, packages: &str, extra: &str) -> std::path::PathBuf {
    r.keyring_into(sb.path());
    let p = sb.join("p.yaml");
    write(
        &p,
        &format!(
            "name: drv\nbase:\n  apt:\n    mirror: {}\n    suite: stable\n    packages: [{packages}]\n    keyring: repo.gpg\n{extra}",
            r.url
        ),
    );
    p
}

fn refused(sb: &Sandbox, p: &std::path::Path) -> String {
    let out = run(sb.gpuimg().args(["build", "-o"]).arg(sb.join("out")).arg(p));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{err}"
    );
    assert!(!sb.join("out").exists(), "nothing written");
    assert_error(&err, &[sb.path()]);
    err
}

#[test]
fn a_package_bringing_libcuda_is_refused_naming_it_every_time() {
    let r = repo();
    let sb = Sandbox::new();
    let p = profile(&sb, &r, "app", "");
    for _ in 0..2 {
        let err = refused(&sb, &p);
        assert!(err.contains("libcuda.so"), "{err}");
        assert!(err.contains("package `libcuda1`"), "{err}");
        assert!(err.contains("803"), "{err}");
    }
}

#[test]
fn cuda_compat_libcuda_only_with_compat_forward() {
    let r = repo();
    let sb = Sandbox::new();
    let err = refused(&sb, &profile(&sb, &r, "cuda-compat-12-4", ""));
    assert!(err.contains("package `cuda-compat-12-4`"), "{err}");
    assert!(err.contains("compat: forward"), "{err}");
    let p = profile(&sb, &r, "cuda-compat-12-4", "compat: forward\n");
    run_ok(
        sb.gpuimg()
            .args(["build", "-o"])
            .arg(sb.join("out"))
            .arg(&p),
    );
}
