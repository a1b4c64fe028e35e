//! Installation from the fixture repository: modes, links and hard links, merged-/usr, the dpkg
//! database as `dpkg-query` reads it, a `..` path refused with nothing written, and a locked set
//! installed offline and through a corrupted cache.

use std::path::Path;
use std::process::Command;

use crate::apt_repo::apt_fixture;
use crate::cmd::run_ok_bytes;
use crate::fixture::{case, is_empty_dir, Record};
use crate::fs::{read, tree};
use gpuimg_apt as apt;

#[test]
fn installs_files_modes_links_and_dpkg_database() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let c = case("stable", "app");
    let (r, root) = c.install(None);
    let installed = r.unwrap();
    assert_eq!(installed.packages.len(), 7);
    assert!(installed.warnings.is_empty(), "{:?}", installed.warnings);
    let m = |p: &str| std::fs::symlink_metadata(root.join(p)).unwrap();
    assert_eq!(m("usr/bin/app").permissions().mode() & 0o7777, 0o755);
    assert_eq!(m("usr/bin/app-suid").permissions().mode() & 0o7777, 0o4755);
    assert_eq!(m("usr/bin/app").uid(), 0);
    assert_eq!(
        std::fs::read_link(root.join("usr/bin/app-link")).unwrap(),
        Path::new("app")
    );
    assert_eq!(m("usr/bin/app-hard").ino(), m("usr/bin/app").ino());
    // merged-/usr: /bin is a link and the package's /bin file landed in /usr/bin.
    assert_eq!(
        std::fs::read_link(root.join("bin")).unwrap(),
        Path::new("usr/bin")
    );
    assert_eq!(read(&root.join("usr/bin/app-legacy")), "legacy\n");
    assert_eq!(read(&root.join("usr/share/pre/pre.txt")), "pre\n");
    // dpkg's view.
    let out = run_ok_bytes(
        Command::new("dpkg-query")
            .arg(format!(
                "--admindir={}",
                root.join("var/lib/dpkg").display()
            ))
            .args(["-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n"]),
    );
    let listed = String::from_utf8(out).unwrap();
    let want: Vec<String> = installed
        .packages
        .iter()
        .map(|p| format!("{} {} ii ", p.name, p.version))
        .collect();
    assert_eq!(listed.lines().collect::<Vec<_>>(), want);
    let list = read(&root.join("var/lib/dpkg/info/app.list"));
    assert!(list.starts_with("/.\n"), "{list}");
    assert!(list.contains("\n/bin/app-legacy\n"), "{list}");
    let out = run_ok_bytes(
        Command::new("dpkg-query")
            .arg(format!(
                "--admindir={}",
                root.join("var/lib/dpkg").display()
            ))
            .args(["-L", "app"]),
    );
    assert!(String::from_utf8(out)
        .unwrap()
        .contains("/usr/bin/app-suid"));
}

#[test]
fn dotdot_path_is_refused_and_nothing_written() {
    let c = case("stable", "evil");
    let (r, dest) = c.install(None);
    assert_eq!(
        r.unwrap_err().to_string(),
        "Package `evil` contains `../escape`, which escapes the image root"
    );
    assert!(is_empty_dir(&dest));
    assert!(!dest.parent().unwrap().join("escape").exists());
}

#[test]
fn locked_offline_and_corrupted_cache() {
    let c = case("stable", "app");
    let locked = c.resolve().unwrap();
    let (r, first) = c.install(Some(&locked));
    r.unwrap();
    // Offline from a warm cache: the same tree.
    let mut off = case("stable", "app");
    off.opts.cache_dir = c.opts.cache_dir.clone();
    off.opts.offline = true;
    // One job: nothing decoded ahead, every package streamed (the other unpack path).
    off.opts.jobs = 1;
    let (r, second) = off.install(Some(&locked));
    r.unwrap();
    assert_eq!(tree(&first), tree(&second));
    // A corrupted cache entry is detected and fetched again (online)...
    let blob = c
        .opts
        .cache_dir
        .join("debs-v1/sha256")
        .join(locked[1].sha256.hex());
    let mut b = std::fs::read(&blob).unwrap();
    b[100] ^= 1;
    std::fs::write(&blob, &b).unwrap();
    let mut rec = Record::default();
    let dest = c.dir.join("root-refetch");
    std::fs::create_dir(&dest).unwrap();
    apt::install(&c.spec, &c.arch, &c.opts, Some(&locked), &dest, &mut rec).unwrap();
    assert!(
        rec.warnings.iter().any(|w| w.contains("was corrupted")),
        "{:?}",
        rec.warnings
    );
    assert_eq!(tree(&first), tree(&dest));
    // ...and offline, a missing entry is named.
    std::fs::remove_file(&blob).unwrap();
    let (r, dest) = off.install(Some(&locked));
    let e = r.unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "`{}/pool/main/app_1.0_amd64.deb` (`{}`) is not in the cache and `--offline` forbids downloading",
            apt_fixture().url,
            locked[1].sha256
        )
    );
    assert!(is_empty_dir(&dest));
}
