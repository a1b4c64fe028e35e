//! The environment is read in one place: `src/cli/settings.rs` (the settings phase), plus the
//! self-test binary's own edge (`crates/selftest/src/`), `gpuimg-entry`'s debug-build panic
//! trigger, and the debug-build test hooks named in [`DEBUG_HOOKS`] (each read on one line, in
//! code compiled into debug builds only; the module that reads it documents it). Any other
//! source file that reads or changes the process environment fails here, with the file and
//! line; the library takes explicit values instead.

use std::path::{Path, PathBuf};

/// Files (or directories, ending in `/`) allowed to read the environment.
const ALLOWED: &[&str] = &[
    "src/cli/settings.rs",
    "crates/selftest/src/",
    "crates/entry/src/lib.rs",
];

/// The debug-build test hooks: a line that reads one of these (and nothing else) is allowed
/// wherever it is. `GPUIMG_TEST_STOP_BEFORE_PERSIST`: `staging`'s stop point.
const DEBUG_HOOKS: &[&str] = &["\"GPUIMG_TEST_STOP_BEFORE_PERSIST\""];

/// What reading or changing the environment looks like in Rust source. `env!` and
/// `option_env!` are compile-time and allowed.
const READS: &[&str] = &[
    "env::var(",
    "env::var_os(",
    "env::vars(",
    "env::vars_os(",
    "env::set_var(",
    "env::remove_var(",
    "env::temp_dir(",
    "env::home_dir(",
    "use std::env",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir)
        .expect("read a source directory")
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `(line number, line)` of every line of `text` that reads the environment, comments and
/// doc comments left out.
fn env_reads(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let code = l.split("//").next().unwrap_or("");
            READS.iter().any(|r| code.contains(r)) && !DEBUG_HOOKS.iter().any(|h| code.contains(h))
        })
        .map(|(i, l)| (i + 1, l.trim().to_string()))
        .collect()
}

#[test]
fn only_the_settings_phase_reads_the_environment() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("crates"), &mut files);
    assert!(files.len() > 50, "found only {} files", files.len());
    let mut found = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(&root)
            .expect("under the root")
            .to_string_lossy()
            .into_owned();
        // A crate's own tests and benchmark drivers (`crates/*/tests/`) are test code, as
        // `tests/` is: only what ships is held to the rule.
        let crate_test_code = rel.starts_with("crates/") && rel.split('/').nth(2) != Some("src");
        if crate_test_code
            || ALLOWED
                .iter()
                .any(|a| rel == *a || (a.ends_with('/') && rel.starts_with(a)))
        {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("read a source file");
        for (n, line) in env_reads(&text) {
            found.push(format!("{rel}:{n}: {line}"));
        }
    }
    assert!(
        found.is_empty(),
        "the environment is read outside src/cli/settings.rs (take the value as an argument):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_settings_phase_is_where_the_reads_are() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("src/cli/settings.rs")).expect("settings.rs");
    assert!(!env_reads(&text).is_empty(), "settings.rs reads nothing?");
}

#[test]
fn the_scan_sees_every_form_and_skips_comments() {
    for code in [
        "let x = std::env::var(\"A\");",
        "    std::env::var_os(\"HOME\").filter(|v| !v.is_empty())",
        "for (k, v) in env::vars() {",
        "std::env::vars_os().count()",
        "unsafe { std::env::set_var(\"A\", \"1\") }",
        "std::env::remove_var(\"A\");",
        "let t = std::env::temp_dir();",
        "use std::env;",
        "use std::env::var;",
    ] {
        assert_eq!(env_reads(code).len(), 1, "missed: {code}");
    }
    for fine in [
        "// std::env::var(\"A\") in a comment",
        "//! `GPUIMG_CACHE` via std::env::var_os",
        "let v = env!(\"CARGO_PKG_VERSION\");",
        "let o = option_env!(\"X\");",
        "settings.env.get(\"GPUIMG_CACHE\")",
        "std::env::current_exe()",
        "let Some(want) = std::env::var_os(\"GPUIMG_TEST_STOP_BEFORE_PERSIST\") else {",
    ] {
        assert!(env_reads(fine).is_empty(), "flagged: {fine}");
    }
}
