//! Resolution against the fixture repository: alternatives, versioned virtual packages,
//! version relations, Pre-Depends, Multi-Arch, the essential set, conflicts, and the one-line
//! error of each refusal.

use crate::fixture::{case, case_with, names};

#[test]
fn resolves_alternatives_virtuals_versions_predepends_multiarch_conflicts() {
    let c = case("stable", "app");
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
    let c = case_with("stable", "alt-b", |s| s.essential = true);
    assert_eq!(names(&c.resolve().unwrap()), ["alt-b 1.0", "pre 1.0"]);
}

#[test]
fn missing_dependency_names_the_chain() {
    let c = case("stable", "needs-ghost");
    let e = c.resolve().unwrap_err().to_string();
    assert_eq!(
        e,
        "Cannot install `needs-ghost`: `needs-ghost` depends on `ghost (>= 1)`, which no repository provides"
    );
    let c = case("stable", "nosuch");
    assert_eq!(
        c.resolve().unwrap_err().to_string(),
        "Package `nosuch` is not in any configured repository"
    );
    // Issue 34, item 8: a typo gets the nearest names of the indexes.
    let c = case("stable", "neds-ghost");
    assert_eq!(
        c.resolve().unwrap_err().to_string(),
        "Package `neds-ghost` is not in any configured repository (did you mean `needs-ghost`?)"
    );
}

#[test]
fn any_qualifier_needs_multi_arch_allowed() {
    let c = case("stable", "bad-any");
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
    let c = case("stable", "app, clash");
    let e = c.resolve().unwrap_err().to_string();
    assert!(
        e.contains("`clash` depends on `c1`, but `c1 1.0` conflicts with `app 1.0`"),
        "{e}"
    );
}
