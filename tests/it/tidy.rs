//! Source tidiness the code review relies on: every source file (the root crate's and each
//! crate's in `crates/`) opens with a `//!` doc saying what it owns, stays under 800 lines,
//! each crate depends only on the crates ARCHITECTURE.md's crate table allows and each root
//! module only on what its module table allows, no file in the repository names a public package
//! registry's host (mirrors and indexes come from the build host or the profile), and no file
//! points to a document outside the repository (a clone must stand alone).

use std::path::{Path, PathBuf};

fn files(dir: &Path, ext: &[&str], out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, ext, out);
        } else if p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| ext.contains(&x))
        {
            out.push(p);
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace's crates under `crates/`: (directory, package name), in name order.
fn member_crates() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root().join("crates")).unwrap().flatten() {
        let manifest = e.path().join("Cargo.toml");
        if !manifest.is_file() {
            continue;
        }
        let doc = read_manifest(&manifest);
        let name = doc["package"]["name"].as_str().unwrap().to_string();
        out.push((e.path(), name));
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    assert!(!out.is_empty(), "no crate under crates/");
    out
}

fn read_manifest(path: &Path) -> toml_edit::DocumentMut {
    let text = std::fs::read_to_string(path).unwrap();
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `.rs` file of the root crate's `src/` and of each crate's `src/`.
fn source_files() -> Vec<PathBuf> {
    let mut v = Vec::new();
    files(&root().join("src"), &["rs"], &mut v);
    for (dir, _) in member_crates() {
        files(&dir.join("src"), &["rs"], &mut v);
    }
    v
}

#[test]
fn every_source_file_has_a_module_doc_and_a_sane_size() {
    let v = source_files();
    assert!(v.len() > 50, "found only {} files", v.len());
    for f in v {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            text.starts_with("//!"),
            "{} does not open with a `//!` doc",
            f.display()
        );
        let lines = text.lines().count();
        assert!(lines <= 800, "{} has {lines} lines: split it", f.display());
    }
}

#[test]
fn no_public_registry_host_is_named() {
    // Hosts assembled from parts so that this file does not name them either.
    let hosts = [
        ["deb", "debian", "org"].join("."),
        ["security", "debian", "org"].join("."),
        ["archive", "ubuntu", "com"].join("."),
        ["pypi", "org"].join("."),
        ["files", "pythonhosted", "org"].join("."),
        ["download", "pytorch", "org"].join("."),
        ["developer", "download", "nvidia", "com"].join("."),
        ["registry", "npmjs", "org"].join("."),
    ];
    let mut v = Vec::new();
    for d in [
        "src",
        "crates",
        "tests",
        "scripts",
        "profiles",
        "catalog",
        "templates",
    ] {
        let p = root().join(d);
        if p.is_dir() {
            files(&p, &["rs", "sh", "yaml", "yml", "md", "json"], &mut v);
        }
    }
    for f in ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"] {
        v.push(root().join(f));
    }
    for f in v {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for h in &hosts {
            assert!(!text.contains(h.as_str()), "{} names `{h}`", f.display());
        }
    }
}

/// Every file under `dir`, whatever its extension.
fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn no_file_points_outside_the_repository() {
    // Names assembled from parts so that this file does not name them either.
    let outside = [
        ["DESIGN", "md"].join("."),
        ["gpu-facts", "md"].join("."),
        ["..", "shared"].join("/"),
        ["", "work", "shared"].join("/"),
    ];
    let mut v = Vec::new();
    for d in [
        "src",
        "crates",
        "tests",
        "scripts",
        "profiles",
        "catalog",
        "templates",
        "data",
        ".ci",
    ] {
        let p = root().join(d);
        if p.is_dir() {
            all_files(&p, &mut v);
        }
    }
    for f in [
        "README.md",
        "ARCHITECTURE.md",
        "BENCHMARKS.md",
        "RELIABILITY.md",
    ] {
        v.push(root().join(f));
    }
    assert!(v.len() > 100, "found only {} files", v.len());
    let mut found = Vec::new();
    for f in v {
        // Binary seeds and fixtures are not text: nothing there is read by a person.
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let name = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
        for (i, line) in text.lines().enumerate() {
            for o in &outside {
                if line.contains(o.as_str()) {
                    found.push(format!("{name}:{}: names `{o}`", i + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "say the fact in the project's own words instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_profile_template_and_the_example_profiles_load() {
    let mut v = Vec::new();
    files(&root().join("templates"), &["yaml"], &mut v);
    files(&root().join("profiles"), &["yaml"], &mut v);
    assert!(v.len() >= 4, "{v:?}");
    for f in v {
        if let Err(e) = gpuimg_build::profile::load(&f, &|_| None) {
            panic!("{}: {e}", f.display());
        }
    }
}

/// The modules that read or write under a staging root: every file-system operation there goes
/// through `gpuimg_store::confined::Root` (root-confined resolution), never a plain path operation
/// that would follow a package's symlink out of the root.
const STAGING_ROOT_MODULES: &[&str] = &[
    "crates/apt/src/unpack.rs",
    "crates/apt/src/install.rs",
    "crates/apt/src/fixups.rs",
    "crates/apt/src/dpkgdb.rs",
    "crates/apt/src/ldcache.rs",
    "crates/apt/src/filecaps.rs",
    "crates/apt/src/account_requests.rs",
    "crates/apt/src/script_words.rs",
    "crates/apt/src/system.rs",
    "crates/apt/src/system_units.rs",
    "crates/apt/src/system_users.rs",
];

#[test]
fn staging_root_modules_use_only_the_confined_api() {
    // Path methods that touch the file system take no argument (`p.exists()`); the confined
    // API's take the path (`root.exists(p)`), so the two never look alike.
    let forbidden = [
        "std::fs",
        "fs_err",
        "os::unix::fs",
        "File::open",
        "File::create",
        "OpenOptions",
        "canonicalize",
        "rustix::fs",
        "libc::",
        ".exists()",
        ".is_file()",
        ".is_dir()",
        ".metadata()",
        ".symlink_metadata()",
        ".read_dir()",
        ".read_link()",
    ];
    for m in STAGING_ROOT_MODULES {
        let text = std::fs::read_to_string(root().join(m)).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for f in forbidden {
                assert!(
                    !code.contains(f),
                    "{m}:{}: `{f}` bypasses the root-confined API (use gpuimg_store::confined::Root): {line}",
                    n + 1
                );
            }
        }
    }
}

/// Issue 33, class 1: every program gpuimg starts is started through `host_program` (found in
/// `PATH`'s absolute directories, run from an empty directory); the self-test's hand-off to the
/// image's own entrypoint (`crates/selftest/src/exec.rs`, inside the container) is the one other
/// place. Issue 38: package code runs only in the build sandbox, whose `execve` (in its own
/// namespaces, `crates/sandbox/src/child.rs`) is the one call of the `exec` family.
#[test]
fn programs_are_started_only_through_host_program() {
    let allowed = [
        "crates/fetch/src/host_program.rs",
        "crates/selftest/src/exec.rs",
    ];
    let sandbox = "crates/sandbox/src/child.rs";
    for path in source_files() {
        let rel = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if allowed.contains(&rel.as_str()) || rel.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // Test code (`tests.rs`, `*_tests.rs`, and from the first `#[cfg(test)]` on) may start
        // what it likes.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or("");
            assert!(
                !line.contains("Command::new"),
                "{rel}:{}: a program started by bare `Command::new` may be found through the working directory; use `host_program::Isolated::command`",
                n + 1
            );
            assert!(
                rel == sandbox || !line.contains(&["libc::", "exec"].concat()),
                "{rel}:{}: an `exec` outside the build sandbox (package code runs only in `gpuimg-sandbox`)",
                n + 1
            );
        }
    }
}

type Table = std::collections::BTreeMap<String, Vec<String>>;

/// The table headed `header` in ARCHITECTURE.md's "Crate and module dependencies" section:
/// each row's first cell and the names in its second.
fn architecture_table(header: &str) -> Table {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let section = text
        .split("## Crate and module dependencies")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Crate and module dependencies` section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let table = section
        .split(header)
        .nth(1)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no `{header}` table"));
    let names = |cell: &str| -> Vec<String> {
        cell.split(',')
            .map(|c| c.trim().trim_matches('`').to_string())
            .filter(|c| !c.is_empty() && c != "—")
            .collect()
    };
    let mut out = Table::new();
    for line in table.lines().skip(2).take_while(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
        assert_eq!(cells.len(), 2, "bad table row: {line}");
        let first = names(cells[0]).pop().unwrap_or_default();
        out.insert(first, names(cells[1]));
    }
    assert!(!out.is_empty(), "the `{header}` table has no rows");
    out
}

/// Which crate each crate may depend on.
fn allowed_crates() -> Table {
    architecture_table("| crate | may depend on |")
}

/// Which module (or crate) each top-level module of `gpuimg-build` may use.
fn allowed_dependencies() -> Table {
    let out = architecture_table("| module | may use |");
    assert!(out.len() > 10, "found only {} rows", out.len());
    out
}

/// `crate::<module>` paths (as `<module>`) and `gpuimg_<name>::` paths (as the crate's package
/// name, `gpuimg-<name>`) in a source file's code: comments and everything from the first
/// `#[cfg(test)]` on do not count.
fn crate_imports(text: &str) -> Vec<(usize, String)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let name = |rest: &str| -> String {
        rest.chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
            .collect()
    };
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or_default();
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let m = name(rest);
            if !m.is_empty() {
                out.push((n + 1, m));
            }
        }
        let mut rest = line;
        while let Some(i) = rest.find("gpuimg_") {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + "gpuimg_".len()..];
            let m = name(rest);
            let word_start = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            if word_start && !m.is_empty() && rest[m.len()..].starts_with("::") {
                out.push((n + 1, format!("gpuimg-{}", m.replace('_', "-"))));
            }
        }
    }
    out
}

/// The `gpuimg-*` entries of a manifest's `[dependencies]` (the workspace's own crates).
fn workspace_dependencies(manifest: &Path) -> Vec<String> {
    let doc = read_manifest(manifest);
    let mut out: Vec<String> = doc
        .get("dependencies")
        .and_then(|d| d.as_table_like())
        .map(|d| {
            d.iter()
                .map(|(k, _)| k.to_string())
                .filter(|k| k.starts_with("gpuimg-"))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn crates_depend_only_on_what_the_crate_table_allows() {
    let allowed = allowed_crates();
    let mut crates = vec![(root(), "gpuimg".to_string())];
    crates.extend(member_crates());
    let mut bad = Vec::new();
    for (dir, name) in &crates {
        let Some(may) = allowed.get(name) else {
            bad.push(format!("crate `{name}` is not in the table"));
            continue;
        };
        let manifest = dir.join("Cargo.toml");
        for dep in workspace_dependencies(&manifest) {
            if !may.contains(&dep) {
                bad.push(format!(
                    "{}: `{name}` may not depend on `{dep}`",
                    manifest.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    for name in allowed.keys() {
        if !crates.iter().any(|(_, n)| n == name) {
            bad.push(format!("the table names `{name}`, which is no crate"));
        }
    }
    // What gpuimg-build's modules may use of the other crates, gpuimg-build may use.
    let build_may = allowed.get("gpuimg-build").cloned().unwrap_or_default();
    for (module, uses) in allowed_dependencies() {
        for u in uses.iter().filter(|u| u.starts_with("gpuimg-")) {
            if !build_may.contains(u) {
                bad.push(format!(
                    "module `{module}` may use `{u}`, which the crate `gpuimg-build` may not"
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "dependencies across ARCHITECTURE.md's crate table:\n{}",
        bad.join("\n")
    );
}

#[test]
fn modules_import_only_what_the_architecture_table_allows() {
    let allowed = allowed_dependencies();
    let src = root().join("crates/build/src");
    let mut v = Vec::new();
    files(&src, &["rs"], &mut v);
    let mut bad = Vec::new();
    for f in v {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if ["main", "bin", "lib"].contains(&top.as_str())
            || name == "tests.rs"
            || name.ends_with("_tests.rs")
        {
            continue;
        }
        let Some(may) = allowed.get(&top) else {
            bad.push(format!(
                "crates/build/src/{rel}: module `{top}` is not in the table"
            ));
            continue;
        };
        let text = std::fs::read_to_string(&f).unwrap();
        for (line, m) in crate_imports(&text) {
            if m != top && !may.contains(&m) {
                let what = if m.starts_with("gpuimg-") {
                    format!("the crate `{m}`")
                } else {
                    format!("`crate::{m}`")
                };
                bad.push(format!(
                    "crates/build/src/{rel}:{line}: `{top}` may not use {what}"
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "imports across ARCHITECTURE.md's module table:\n{}",
        bad.join("\n")
    );
}

#[test]
fn tests_start_the_binaries_only_through_the_sandbox() {
    // Patterns assembled from parts so that this file does not contain them either.
    let banned = [
        (["CARGO", "BIN", "EXE", ""].join("_"), "a binary's path"),
        (["cargo", "bin"].join("_"), "assert_cmd's constructor"),
        (["Command::new(", "Bin::"].concat(), "a binary's path"),
        (
            [".env(\"", "GPUIMG_CACHE\""].concat(),
            "`Sandbox::gpuimg_with_cache`",
        ),
        (
            [".env(\"", "XDG_CONFIG_HOME\""].concat(),
            "`Sandbox::config`",
        ),
        ([".env(\"", "HOME\""].concat(), "the sandbox's home"),
        (
            [".env(\"", "XDG_CACHE_HOME\""].concat(),
            "the sandbox's cache",
        ),
    ];
    let tests = root().join("tests");
    let support = tests.join("it/common");
    let mut v = Vec::new();
    files(&tests, &["rs"], &mut v);
    assert!(v.len() > 30, "found only {} files", v.len());
    let mut bad = Vec::new();
    for f in v.iter().filter(|f| !f.starts_with(&support)) {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            for (pattern, instead) in &banned {
                if line.contains(pattern.as_str()) {
                    bad.push(format!(
                        "{}:{}: `{pattern}`: use tests/it/common's Sandbox ({instead})",
                        f.strip_prefix(root()).unwrap().display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "tests that bypass the sandbox's isolation (XDG_CONFIG_HOME, GPUIMG_CACHE, HOME, SOURCE_DATE_EPOCH):\n{}",
        bad.join("\n")
    );
    // The sandbox itself sets every variable the binaries read for configuration and cache.
    let sandbox = std::fs::read_to_string(support.join("sandbox.rs")).unwrap();
    for var in [
        "XDG_CONFIG_HOME",
        "GPUIMG_CACHE",
        "HOME",
        "XDG_CACHE_HOME",
        "SOURCE_DATE_EPOCH",
    ] {
        assert!(
            sandbox.contains(&format!("\"{var}\"")),
            "tests/it/common/sandbox.rs does not set `{var}`"
        );
    }
}

/// Issue 36: the bounds of downloads and pushes run on the system's clock outside tests: no
/// source but the clock's own module gives them a manual one (`gpuimg_fetch::Clock::manual`,
/// which only a debug build has).
#[test]
fn only_tests_drive_the_manual_clock() {
    for path in source_files() {
        let rel = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel == "crates/fetch/src/clock.rs" || rel.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or("");
            assert!(
                !line.contains("Clock::manual(") && !line.contains("ManualClock::leak("),
                "{rel}:{}: only tests drive a manual clock: {line}",
                n + 1
            );
        }
    }
}
