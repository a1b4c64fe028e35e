//! `base.apt` against a fixture repository served on loopback: resolution (alternatives,
//! versioned virtual packages, version relations, Pre-Depends, Multi-Arch, conflicts),
//! installation (modes, links, dpkg database, merged-/usr), and every refusal of the apt client
//! with its one-line error and nothing written.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;
use gpuimg::lock::LockedPackage;
use gpuimg::plan::source_specs;
use gpuimg::profile::{self, Base};
use gpuimg::sources::Architecture;
use gpuimg_apt::{self as apt, AptError, AptOptions, PackagesSpec};
use gpuimg_fetch::observe::Observer;

struct Fixture {
    _dir: tempfile::TempDir,
    url: String,
    key: PathBuf,
    wrong_key: PathBuf,
    _server: Server,
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

fn fixture() -> &'static Fixture {
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let work = dir.path().join("work");
        let (home, key) = gen_key(dir.path(), "fixture");
        let (_, wrong_key) = gen_key(dir.path(), "other");
        let big: &'static [u8] = Box::leak(vec![7u8; 200_000].into_boxed_slice());
        let mut app = pkg("app", "1.0").field("Pre-Depends", "pre").field(
            "Depends",
            "nonexist | alt-b, virt (>= 2), lib (<< 2), tool:any, x1 | x2",
        );
        app.files = vec![
            ("/usr/bin/app", b"#!/bin/sh\necho app\n", 0o755),
            ("/usr/bin/app-suid", b"suid\n", 0o4755),
            ("/bin/app-legacy", b"legacy\n", 0o755),
            ("/etc/app.conf", b"conf=1\n", 0o644),
        ];
        app.symlinks = vec![("/usr/bin/app-link", "app")];
        app.hardlinks = vec![("/usr/bin/app-hard", "/usr/bin/app")];
        app.compression = "xz";
        let mut pre = pkg("pre", "1.0").field("Essential", "yes");
        pre.files = vec![("/usr/share/pre/pre.txt", b"pre\n", 0o644)];
        pre.compression = "zstd";
        let mut trunc = pkg("trunc", "1.0");
        trunc.files = vec![("/usr/share/trunc/big", big, 0o644)];
        trunc.compression = "none";
        let pkgs = vec![
            app,
            pre,
            pkg("lib", "1.0"),
            pkg("lib", "2.0"),
            pkg("alt-b", "1.0"),
            pkg("prov-old", "1.0").field("Provides", "virt (= 1)"),
            pkg("prov-new", "1.0").field("Provides", "virt (= 2)"),
            pkg("tool", "1.0").field("Multi-Arch", "allowed"),
            pkg("plain", "1.0"),
            pkg("x1", "1.0").field("Conflicts", "pre"),
            pkg("x2", "1.0"),
            pkg("needs-ghost", "1.0").field("Depends", "ghost (>= 1)"),
            pkg("bad-any", "1.0").field("Depends", "plain:any"),
            pkg("clash", "1.0").field("Depends", "c1"),
            pkg("c1", "1.0").field("Conflicts", "app"),
            pkg("tampered", "1.0"),
            trunc,
        ];
        let mut stanzas: Vec<String> = pkgs
            .iter()
            .map(|p| stanza(&root, &build_deb(&root, &work, p)))
            .collect();
        stanzas.push(stanza(&root, &evil_deb(&root, "evil", "../escape")));
        write_dist(&root, "stable", &stanzas, Some(&home));
        write_dist(&root, "unsigned", &stanzas, None);
        write_dist(&root, "tampered", &stanzas, Some(&home));
        let p = root.join("dists/tampered/main/binary-amd64/Packages.gz");
        let mut b = std::fs::read(&p).unwrap();
        let n = b.len();
        b[n - 9] ^= 1;
        std::fs::write(&p, b).unwrap();
        let server = serve(&root);
        server
            .faults
            .lock()
            .unwrap()
            .insert("/pool/main/trunc_1.0_amd64.deb".into(), Fault::Truncate);
        server
            .faults
            .lock()
            .unwrap()
            .insert("/pool/main/tampered_1.0_amd64.deb".into(), Fault::Corrupt);
        Fixture {
            url: server.url.clone(),
            key,
            wrong_key,
            _server: server,
            _dir: dir,
        }
    })
}

/// Collects warnings; drops progress.
#[derive(Default)]
struct Record {
    warnings: Vec<String>,
}

impl Observer for Record {
    fn message(&mut self, _: &str) {}
    fn warn(&mut self, text: &str) {
        self.warnings.push(text.to_string());
    }
    fn task_start(&mut self, _: &str, _: Option<u64>) {}
    fn task_progress(&mut self, _: u64) {}
    fn task_done(&mut self, _: &str, _: u64, _: &str) {}
}

struct Case {
    spec: PackagesSpec,
    arch: Architecture,
    dir: PathBuf,
    opts: AptOptions,
    _tmp: tempfile::TempDir,
}

/// A profile using the fixture (`extra` is YAML appended under `apt:`).
fn case(suite: &str, packages: &str, extra: &str) -> Case {
    let f = fixture();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(&f.key, tmp.path().join("repo.gpg")).unwrap();
    std::fs::copy(&f.wrong_key, tmp.path().join("wrong.gpg")).unwrap();
    let yaml = format!(
        "name: t\nbase:\n  apt:\n    mirror: ${{REPO}}\n    suite: {suite}\n    packages: [{packages}]\n    keyring: repo.gpg\n{extra}"
    );
    let url = f.url.clone();
    let p = profile::parse(&yaml, "t.yaml", tmp.path(), &|k| {
        (k == "REPO").then(|| url.clone())
    })
    .unwrap();
    let Base::Apt(spec) = p.base else {
        panic!("no apt base")
    };
    let mut opts = AptOptions::new(tmp.path().join("cache"));
    opts.apt_dir = tmp.path().join("no-host-apt");
    Case {
        spec: source_specs::apt_packages(&spec, tmp.path()),
        arch: source_specs::architecture(&p.platform),
        dir: tmp.path().to_path_buf(),
        opts,
        _tmp: tmp,
    }
}

impl Case {
    fn resolve(&self) -> Result<Vec<LockedPackage>, AptError> {
        apt::resolve(
            &self.spec,
            &self.arch.debian(),
            &self.opts,
            &mut Record::default(),
        )
    }

    fn install(
        &self,
        locked: Option<&[LockedPackage]>,
    ) -> (Result<apt::Installed, AptError>, PathBuf) {
        let dest = self.dir.join(format!("root-{}", rand_suffix()));
        std::fs::create_dir(&dest).unwrap();
        let r = apt::install(
            &self.spec,
            &self.arch.debian(),
            &self.opts,
            locked,
            &dest,
            &mut Record::default(),
        );
        (r, dest)
    }
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

fn names(l: &[LockedPackage]) -> Vec<String> {
    l.iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect()
}

fn is_empty_dir(p: &Path) -> bool {
    std::fs::read_dir(p).unwrap().next().is_none()
}

#[test]
fn resolves_alternatives_virtuals_versions_predepends_multiarch_conflicts() {
    let c = case("stable", "app", "");
    let got = c.resolve().unwrap();
    assert_eq!(
        names(&got),
        [
            "alt-b 1.0", // `nonexist | alt-b`: the first satisfiable alternative
            "app 1.0",
            "lib 1.0",      // `lib (<< 2)` rules out the newer 2.0
            "pre 1.0",      // Pre-Depends
            "prov-new 1.0", // `virt (>= 2)`: only `Provides: virt (= 2)` satisfies it
            "tool 1.0",     // `tool:any` with `Multi-Arch: allowed`
            "x2 1.0",       // `x1 | x2`: x1 conflicts with pre
        ]
    );
    let p = &got[1];
    assert_eq!(p.repository, c.spec.mirror.to_string());
    assert_eq!(p.filename, "pool/main/app_1.0_amd64.deb");
    // Deterministic: the same input gives the same set.
    assert_eq!(c.resolve().unwrap(), got);
}

#[test]
fn essential_set_on_request() {
    let c = case("stable", "alt-b", "    essential: true\n");
    assert_eq!(names(&c.resolve().unwrap()), ["alt-b 1.0", "pre 1.0"]);
}

#[test]
fn missing_dependency_names_the_chain() {
    let c = case("stable", "needs-ghost", "");
    let e = c.resolve().unwrap_err().to_string();
    assert_eq!(
        e,
        "Cannot install `needs-ghost`: `needs-ghost` depends on `ghost (>= 1)`, which no repository provides"
    );
    let c = case("stable", "nosuch", "");
    assert_eq!(
        c.resolve().unwrap_err().to_string(),
        "Package `nosuch` is not in any configured repository"
    );
    // Issue 34, item 8: a typo gets the nearest names of the indexes.
    let c = case("stable", "neds-ghost", "");
    assert_eq!(
        c.resolve().unwrap_err().to_string(),
        "Package `neds-ghost` is not in any configured repository (did you mean `needs-ghost`?)"
    );
}

/// Issue 34, item 8, through the CLI: the unknown package is reported at its entry in the
/// profile (`file:line:column`), with the nearest names, exit 2.
#[test]
fn an_unknown_package_is_placed_at_its_entry_with_the_nearest_names() {
    let f = fixture();
    let sb = Sandbox::new();
    std::fs::copy(&f.key, sb.join("repo.gpg")).unwrap();
    write(
        &sb.join("t.yaml"),
        "name: t\nbase:\n  apt:\n    mirror: ${REPO}\n    suite: stable\n    packages: [alt-b, neds-ghost]\n    keyring: repo.gpg\n",
    );
    let o = run(sb
        .gpuimg()
        .env("REPO", &f.url)
        .arg("lock")
        .arg(sb.join("t.yaml")));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("t.yaml:6:23: base.apt.packages: Package `neds-ghost` is not in any configured repository (did you mean `needs-ghost`?)"),
        "{err}"
    );
    assert_error(errors[0], &[sb.path()]);
}

/// Issue 34, item 8: a suite the repository does not have (no `dists/<suite>/InRelease` or
/// `Release`: a 404) is bad input at its `suite:` entry, naming the nearest known suites and
/// where they come from; so is a suite the host's apt sources do not list (`mirror: host`).
#[test]
fn an_unknown_suite_is_placed_at_its_entry_with_the_nearest_suites() {
    let f = fixture();
    let sb = Sandbox::new();
    std::fs::copy(&f.key, sb.join("repo.gpg")).unwrap();
    let url = f.url.trim_end_matches('/');
    let cases = [
        (
            "mirror: ${REPO}\n    suite: bookwrom\n".to_string(),
            format!(
                "t.yaml:5:12: base.apt.suite: Repository `{url}` has no suite `bookwrom` (no `dists/bookwrom/InRelease` or `Release`) (did you mean `bookworm`? from Debian's suite names and the host's apt sources)"
            ),
        ),
        (
            "mirror: host\n    suite: bookwrom\n".to_string(),
            "t.yaml:5:12: base.apt.suite: The host's apt sources (`/etc/apt`) have no `deb` entry for suite `bookwrom` (did you mean `bookworm`? from Debian's suite names and the host's apt sources)".to_string(),
        ),
        (
            "mirror: ${REPO}\n    suite: stable\n    repositories:\n      - url: ${REPO}\n        suite: stabel\n        keyring: repo.gpg\n".to_string(),
            format!(
                "t.yaml:8:16: base.apt.repositories.suite: Repository `{url}` has no suite `stabel` (no `dists/stabel/InRelease` or `Release`) (did you mean `stable`? from Debian's suite names and the host's apt sources)"
            ),
        ),
    ];
    for (apt, want) in cases {
        write(
            &sb.join("t.yaml"),
            &format!(
                "name: t\nbase:\n  apt:\n    {apt}    packages: [alt-b]\n    keyring: repo.gpg\n"
            ),
        );
        let o = run(sb
            .gpuimg()
            .env("REPO", &f.url)
            .arg("lock")
            .arg(sb.join("t.yaml")));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{err}");
        assert!(errors[0].contains(&want), "want {want}\n{err}");
        assert_error(errors[0], &[sb.path()]);
        assert!(!sb.join("t.lock.json").exists());
    }
}

#[test]
fn any_qualifier_needs_multi_arch_allowed() {
    let c = case("stable", "bad-any", "");
    let e = c.resolve().unwrap_err().to_string();
    assert!(
        e.contains(
            "`bad-any` depends on `plain:any`, which no repository provides (available: 1.0)"
        ),
        "{e}"
    );
}

#[test]
fn conflict_is_refused_and_named() {
    let c = case("stable", "app, clash", "");
    let e = c.resolve().unwrap_err().to_string();
    assert!(
        e.contains("`clash` depends on `c1`, but `c1 1.0` conflicts with `app 1.0`"),
        "{e}"
    );
}

#[test]
fn installs_files_modes_links_and_dpkg_database() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let c = case("stable", "app", "");
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
        std::process::Command::new("dpkg-query")
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
        std::process::Command::new("dpkg-query")
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
fn unsigned_repository_is_refused() {
    let c = case("unsigned", "app", "");
    let (r, dest) = c.install(None);
    assert_eq!(
        r.unwrap_err().to_string(),
        format!(
            "Repository `{}/dists/unsigned/` is not signed (no `InRelease`, no `Release.gpg`); set `trusted: true` to accept it unverified",
            fixture().url
        )
    );
    assert!(is_empty_dir(&dest));
}

#[test]
fn trusted_opt_out_warns() {
    let c = case("unsigned", "alt-b", "    trusted: true\n");
    let mut rec = Record::default();
    let got = apt::resolve(&c.spec, &c.arch.debian(), &c.opts, &mut rec).unwrap();
    assert_eq!(names(&got), ["alt-b 1.0"]);
    assert_eq!(rec.warnings.len(), 1);
    assert!(
        rec.warnings[0].contains("`trusted: true`"),
        "{:?}",
        rec.warnings
    );
}

/// Issue 34, item 9: a build says each warning and each progress line once. The
/// `trusted: true` warnings are said while the packages are resolved and installed, and the
/// install's record of them (`Installed::warnings`) was said again by the driver; the
/// packages are fetched for their control files, then found in the cache for the install.
#[test]
fn a_build_says_each_warning_once() {
    let f = fixture();
    let sb = Sandbox::new();
    write(
        &sb.join("t.yaml"),
        "name: t\nbase:\n  apt:\n    mirror: ${REPO}\n    suite: unsigned\n    packages: [alt-b]\n    trusted: true\nselftest: {enabled: false}\n",
    );
    let o = run(sb
        .gpuimg()
        .env("REPO", &f.url)
        .args(["build", "-o"])
        .arg(sb.join("out"))
        .arg(sb.join("t.yaml")));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert!(
        warnings.iter().any(|w| w.contains("`trusted: true`")),
        "{err}"
    );
    let mut once = warnings.clone();
    once.sort_unstable();
    once.dedup();
    assert_eq!(once.len(), warnings.len(), "a warning repeats:\n{err}");
    // Nor does a progress line: the packages the build reads again for the install were
    // counted as downloaded twice (`packages 1 files (... in 0.00s)`).
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    // The fetch tasks' lines (`packages 1 files (...)`, `indexes cached (1 files)`), not the
    // layers' (a component may be named `packages`).
    let labels: Vec<&str> = lines
        .iter()
        .filter(|l| l.ends_with(" files)") || l.contains(" files ("))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(labels.contains(&"packages"), "{err}");
    let mut distinct = labels.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        labels.len(),
        "a progress line repeats:\n{err}"
    );
}

#[test]
fn wrong_key_is_refused() {
    let c = case("stable", "app", "");
    let mut spec = c.spec.clone();
    spec.keyring = Some(c.dir.join("wrong.gpg"));
    let e = apt::resolve(&spec, &c.arch.debian(), &c.opts, &mut Record::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "Signature of `{}/dists/stable/InRelease` does not verify against `",
            fixture().url
        )) && e.ends_with("wrong.gpg`"),
        "{e}"
    );
}

#[test]
fn tampered_index_is_refused() {
    let c = case("tampered", "app", "");
    let e = c.resolve().unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "Checksum mismatch for `{}/dists/tampered/main/binary-amd64/Packages.gz`: expected `sha256:",
            fixture().url
        )),
        "{e}"
    );
}

#[test]
fn tampered_deb_is_refused_and_nothing_written() {
    let c = case("stable", "tampered", "");
    let (r, dest) = c.install(None);
    let e = r.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "Checksum mismatch for `{}/pool/main/tampered_1.0_amd64.deb`",
            fixture().url
        )),
        "{e}"
    );
    assert!(is_empty_dir(&dest));
}

#[test]
fn truncated_download_is_refused() {
    let c = case("stable", "trunc", "");
    let (r, dest) = c.install(None);
    let e = r.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "Download of `{}/pool/main/trunc_1.0_amd64.deb` is truncated: got ",
            fixture().url
        )),
        "{e}"
    );
    assert!(is_empty_dir(&dest));
}

#[test]
fn dotdot_path_is_refused_and_nothing_written() {
    let c = case("stable", "evil", "");
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
    let c = case("stable", "app", "");
    let locked = c.resolve().unwrap();
    let (r, first) = c.install(Some(&locked));
    r.unwrap();
    // Offline from a warm cache: the same tree.
    let mut off = case("stable", "app", "");
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
    apt::install(
        &c.spec,
        &c.arch.debian(),
        &c.opts,
        Some(&locked),
        &dest,
        &mut rec,
    )
    .unwrap();
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
            fixture().url,
            locked[1].sha256
        )
    );
    assert!(is_empty_dir(&dest));
}
