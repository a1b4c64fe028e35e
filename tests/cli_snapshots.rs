//! Snapshots of what the CLI says: every command's `--help`, representative error messages
//! with their exit codes, and `--json` outputs. The files in `tests/snapshots/` are the
//! reviewed wording; a change to any of them shows up as a failing test here.
//!
//! Reviewing a change: run `INSTA_UPDATE=always cargo test --test cli_snapshots`, then read
//! `git diff tests/snapshots` and commit the snapshots together with the change that caused
//! them. Under `CI=true` insta never writes, so a stale snapshot fails the run.
//!
//! Every run is isolated: no `SOURCE_DATE_EPOCH`, and `XDG_CONFIG_HOME` and `GPUIMG_CACHE`
//! point into a fresh temporary directory, which is also the working directory; that
//! directory's path is replaced by `[TMP]` before a snapshot is compared.

mod common;

use std::path::{Path, PathBuf};

use common::Bin;

/// A fresh directory to run in, with its own config and cache directories.
struct Sandbox {
    dir: common::Sandbox,
}

impl Sandbox {
    fn new() -> Self {
        Sandbox {
            dir: common::Sandbox::new(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Write `body` to `name` inside the sandbox and return its relative name.
    fn file(&self, name: &str, body: &str) -> PathBuf {
        std::fs::write(self.path().join(name), body).expect("write a test file");
        PathBuf::from(name)
    }

    /// Run `bin` with `args` in the sandbox: exit code, stdout and stderr, temp paths masked.
    fn run(&self, bin: Bin, args: &[&str]) -> Run {
        let out = common::run(self.dir.command(bin).args(args).env("NO_COLOR", "1"));
        let mask = |b: &[u8]| {
            let s = String::from_utf8_lossy(b).into_owned();
            // The canonical path too, in case the temp dir sits behind a symlink.
            let canon = self.path().canonicalize().unwrap_or(self.path().into());
            s.replace(&canon.display().to_string(), "[TMP]")
                .replace(&self.path().display().to_string(), "[TMP]")
        };
        Run {
            code: out.status.code(),
            stdout: mask(&out.stdout),
            stderr: mask(&out.stderr),
        }
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The whole outcome as one text: the exit code, then each non-empty stream.
    fn render(&self) -> String {
        let mut s = format!("exit: {:?}\n", self.code);
        if !self.stdout.is_empty() {
            s.push_str(&format!("--- stdout\n{}", self.stdout));
        }
        if !self.stderr.is_empty() {
            s.push_str(&format!("--- stderr\n{}", self.stderr));
        }
        s
    }
}

const GPUIMG: Bin = Bin::Gpuimg;
const SELFTEST: Bin = Bin::Selftest;

/// `--help` of every command and subcommand, each exiting 0 with the text on stdout.
#[test]
fn help_texts() {
    let sb = Sandbox::new();
    let commands: &[&[&str]] = &[
        &[],
        &["build"],
        &["inspect"],
        &["resolve"],
        &["lock"],
        &["catalog"],
        &["catalog", "list"],
        &["catalog", "show"],
        &["catalog", "why"],
        &["catalog", "matrix"],
        &["verify-host"],
        &["cache"],
        &["cache", "verify"],
        &["cache", "prune"],
        &["completions"],
    ];
    for cmd in commands {
        let mut args = cmd.to_vec();
        args.push("--help");
        let r = sb.run(GPUIMG, &args);
        assert_eq!(r.code, Some(0), "{cmd:?}: {}", r.stderr);
        assert!(r.stderr.is_empty(), "{cmd:?}: {}", r.stderr);
        let name = if cmd.is_empty() {
            "help_gpuimg".to_string()
        } else {
            format!("help_gpuimg_{}", cmd.join("_").replace('-', "_"))
        };
        insta::assert_snapshot!(name, r.stdout);
    }
    let r = sb.run(SELFTEST, &["--help"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    insta::assert_snapshot!("help_gpuimg_selftest", r.stdout);
}

/// Bad input: one clear message on stderr, exit 2, nothing on stdout.
#[test]
fn error_messages() {
    let sb = Sandbox::new();
    let good = sb.file("good.yaml", "name: demo\n");
    let good = good.to_str().expect("utf-8 name");
    let syntax = sb.file("syntax.yaml", "name: demo\nhost:\n  gpus: [H100\n");
    let gpu = sb.file("gpu.yaml", "name: demo\nhost:\n  gpus: [H1000]\n");
    let cases: &[(&str, Vec<&str>)] = &[
        ("error_missing_profile", vec!["resolve", "missing.yaml"]),
        (
            "error_profile_syntax",
            vec!["resolve", syntax.to_str().expect("utf-8 name")],
        ),
        (
            "error_unknown_gpu",
            vec!["resolve", gpu.to_str().expect("utf-8 name")],
        ),
        ("error_bad_tag", vec!["build", good, "--tag", "bad tag!"]),
        (
            "error_unknown_compression",
            vec!["build", good, "--compression", "brotli"],
        ),
        ("error_unknown_command", vec!["frobnicate"]),
        (
            "error_unknown_catalog_kind",
            vec!["catalog", "list", "gpu-s"],
        ),
    ];
    for (name, args) in cases {
        let r = sb.run(GPUIMG, args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.render());
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
        insta::assert_snapshot!(*name, r.render());
    }
    // Nothing was written by the failed builds.
    assert!(!sb.path().join("out").exists());
}

/// `--json` outputs: one JSON object (or one JSON answer) on stdout.
#[test]
fn json_outputs() {
    let sb = Sandbox::new();
    let p = sb.file(
        "p.yaml",
        "name: demo\nhost:\n  gpus: [H100]\n  driver: \">=550\"\nstack:\n  cuda: \"12.4\"\n",
    );
    let p = p.to_str().expect("utf-8 name");
    let cases: &[(&str, &[&str], i32)] = &[
        ("json_resolve", &["resolve", p, "--json"], 0),
        ("json_lock", &["lock", p, "--json"], 0),
    ];
    for (name, args, code) in cases {
        let r = sb.run(GPUIMG, args);
        assert_eq!(r.code, Some(*code), "{args:?}: {}", r.render());
        serde_json::from_str::<serde_json::Value>(&r.stdout)
            .unwrap_or_else(|e| panic!("{args:?} printed invalid JSON ({e}): {}", r.stdout));
        insta::assert_snapshot!(*name, r.render());
    }
    // The lock that `lock --json` names was written, holding as many artifacts as it says.
    let lock: serde_json::Value = serde_json::from_slice(
        &std::fs::read(sb.path().join("p.lock.json")).expect("lock --json wrote p.lock.json"),
    )
    .expect("the lock is JSON");
    assert_eq!(lock["artifacts"].as_array().map(Vec::len), Some(0));
}

/// `gpuimg completions SHELL` prints a script for each shell, naming every command; bash's
/// defines the `_gpuimg` function and registers it, and completes the values of `--compression`.
#[test]
fn completion_scripts() {
    let sb = Sandbox::new();
    let r = sb.run(GPUIMG, &["completions", "bash"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert!(r.stdout.contains("_gpuimg()"), "{}", r.stdout);
    assert!(
        r.stdout.contains("complete -F _gpuimg"),
        "bash script does not register _gpuimg"
    );
    assert!(
        r.stdout.contains("gzip zstd"),
        "--compression values missing"
    );
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let r = sb.run(GPUIMG, &["completions", shell]);
        assert_eq!(r.code, Some(0), "{shell}: {}", r.stderr);
        for cmd in [
            "build",
            "inspect",
            "resolve",
            "lock",
            "catalog",
            "verify-host",
            "cache",
        ] {
            assert!(r.stdout.contains(cmd), "{shell}: `{cmd}` is not completed");
        }
    }
    let r = sb.run(GPUIMG, &["completions", "tcsh"]);
    assert_eq!(r.code, Some(2), "{}", r.render());
    assert!(r.stdout.is_empty());
    insta::assert_snapshot!("error_completions_unknown_shell", r.render());
}
