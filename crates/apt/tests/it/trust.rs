//! What the client refuses to trust: an unsigned repository (and the `trusted: true` opt-out's
//! warning), a wrong key, a tampered index, a tampered or truncated `.deb`; nothing is written.

use crate::apt_repo::apt_fixture;
use crate::fixture::{case, case_with, is_empty_dir, names, Record};
use gpuimg_apt as apt;

#[test]
fn unsigned_repository_is_refused() {
    let c = case("unsigned", "app");
    let (r, dest) = c.install(None);
    assert_eq!(
        r.unwrap_err().to_string(),
        format!(
            "Repository `{}/dists/unsigned/` is not signed (no `InRelease`, no `Release.gpg`); set `trusted: true` to accept it unverified",
            apt_fixture().url
        )
    );
    assert!(is_empty_dir(&dest));
}

#[test]
fn trusted_opt_out_warns() {
    let c = case_with("unsigned", "alt-b", |s| s.trusted = true);
    let mut rec = Record::default();
    let got = apt::resolve(&c.spec, &c.arch, &c.opts, &mut rec).unwrap();
    assert_eq!(names(&got), ["alt-b 1.0"]);
    assert_eq!(rec.warnings.len(), 1);
    assert!(
        rec.warnings[0].contains("`trusted: true`"),
        "{:?}",
        rec.warnings
    );
}

#[test]
fn wrong_key_is_refused() {
    let c = case("stable", "app");
    let mut spec = c.spec.clone();
    spec.keyring = Some(c.dir.join("wrong.gpg"));
    let e = apt::resolve(&spec, &c.arch, &c.opts, &mut Record::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "Signature of `{}/dists/stable/InRelease` does not verify against `",
            apt_fixture().url
        )) && e.ends_with("wrong.gpg`"),
        "{e}"
    );
}

#[test]
fn tampered_index_is_refused() {
    let c = case("tampered", "app");
    let e = c.resolve().unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "Checksum mismatch for `{}/dists/tampered/main/binary-amd64/Packages.gz`: expected `sha256:",
            apt_fixture().url
        )),
        "{e}"
    );
}

#[test]
fn tampered_deb_is_refused_and_nothing_written() {
    let c = case("stable", "tampered");
    let (r, dest) = c.install(None);
    let e = r.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "Checksum mismatch for `{}/pool/main/tampered_1.0_amd64.deb`",
            apt_fixture().url
        )),
        "{e}"
    );
    assert!(is_empty_dir(&dest));
}

#[test]
fn truncated_download_is_refused() {
    let c = case("stable", "trunc");
    let (r, dest) = c.install(None);
    let e = r.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "Download of `{}/pool/main/trunc_1.0_amd64.deb` is truncated: got ",
            apt_fixture().url
        )),
        "{e}"
    );
    assert!(is_empty_dir(&dest));
}
