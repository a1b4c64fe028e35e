//! Bad `python:` keys, requirement strings, URLs and paths: one line naming file:line:column
//! and the key, exit 2, nothing written, whichever command loads the profile; a malformed
//! resolution budget variable: one line naming it.

use crate::common;

use common::*;

/// Run `gpuimg resolve` and `gpuimg build` on `yaml`; both must refuse it with `needle`.
fn refused(yaml: &str, needle: &str) -> String {
    let t = Sandbox::new();
    let p = t.join("p.yaml");
    write(&p, yaml);
    write(&t.join("requirements.txt"), "requests\n");
    let mut last = String::new();
    for args in [vec!["resolve"], vec!["build", "-o", "out"]] {
        let out = run(t.gpuimg().args(&args).arg(&p));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
        assert!(stderr.contains(needle), "expected `{needle}` in: {stderr}");
        assert_error(&stderr, &[t.path()]);
        assert!(!t.join("out").exists(), "output written despite the error");
        last = stderr;
    }
    last
}

#[test]
fn an_unknown_python_key_points_at_itself() {
    let e = refused(
        "name: x\npython:\n  packages: [a]\n  indx: http://i/simple\n",
        "p.yaml:4:3:",
    );
    assert!(e.contains("`indx`"), "{e}");
}

#[test]
fn a_bad_requirement_string_points_at_its_position() {
    let e = refused(
        "name: x\npython:\n  packages:\n    - requests\n    - \"numpy>=>1\"\n",
        "p.yaml:5:7: python.packages:",
    );
    assert!(e.contains("numpy>=>1") && e.contains("PEP 508"), "{e}");
    refused(
        "name: x\npython:\n  packages: [\"pkg @ https://host.invalid/pkg.whl\"]\n",
        "names a URL",
    );
}

#[test]
fn bad_index_urls_and_names_point_at_their_position() {
    let e = refused(
        "name: x\npython:\n  index: ftp://i/simple\n",
        "p.yaml:3:10: python.index:",
    );
    assert!(e.contains("scheme `ftp`"), "{e}");
    refused(
        "name: x\npython:\n  extra-indexes: [\"not a url\"]\n",
        "p.yaml:3:19: python.extra-indexes:",
    );
    refused(
        "name: x\npython:\n  extra-indexes: [\"host=http://i/simple\"]\n",
        "`host` is reserved",
    );
    refused(
        "name: x\npython:\n  compile: maybe\n",
        "p.yaml:3:12: python.compile:",
    );
}

#[test]
fn requirements_and_find_links_stay_in_the_context() {
    refused(
        "name: x\npython:\n  requirements: /etc/hostname\n",
        "p.yaml:3:17: python.requirements:",
    );
    let e = refused(
        "name: x\npython:\n  requirements: ./missing.txt\n",
        "python.requirements",
    );
    assert!(e.contains("does not exist"), "{e}");
    refused(
        "name: x\npython:\n  find-links: [./requirements.txt]\n",
        "is not a directory",
    );
}

#[test]
fn a_malformed_budget_variable_is_refused_naming_it() {
    let t = Sandbox::new();
    let p = t.join("p.yaml");
    write(
        &p,
        "name: x\npython:\n  packages: [a]\n  index: http://127.0.0.1:9/simple\n",
    );
    for (var, value) in [
        ("GPUIMG_PYTHON_MAX_WHEEL_SIZE", "8 parsecs"),
        ("GPUIMG_PYTHON_METADATA_READS", "lots"),
        ("GPUIMG_PYTHON_RESOLVE_SECONDS", "-5"),
        ("GPUIMG_PYTHON_RANGE_SEGMENTS", "1e6"),
    ] {
        let out = run(t.gpuimg().env(var, value).arg("lock").arg(&p));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
        assert!(
            stderr.contains(var) && stderr.contains(value),
            "{var}: {stderr}"
        );
        assert_error(&stderr, &[t.path()]);
    }
}
