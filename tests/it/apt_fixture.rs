//! The apt client's refusals and warnings through the CLI, against its fixture repository
//! (`common::apt_fixture`): an unknown package or suite placed at its entry in the profile, and
//! each warning and progress line of a build said once. The client's own cases are the crate's
//! tests (`crates/apt/tests/it`).

use crate::common;

use common::*;

/// Issue 34, item 8, through the CLI: the unknown package is reported at its entry in the
/// profile (`file:line:column`), with the nearest names, exit 2.
#[test]
fn an_unknown_package_is_placed_at_its_entry_with_the_nearest_names() {
    let f = apt_fixture();
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
    let f = apt_fixture();
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

/// Issue 34, item 9: a build says each warning and each progress line once. The
/// `trusted: true` warnings are said while the packages are resolved and installed, and the
/// install's record of them (`Installed::warnings`) was said again by the driver; the
/// packages are fetched for their control files, then found in the cache for the install.
#[test]
fn a_build_says_each_warning_once() {
    let f = apt_fixture();
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
