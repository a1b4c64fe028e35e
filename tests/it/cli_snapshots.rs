//! Snapshots of what the CLI says: every command's `--help`, representative error messages
//! with their exit codes, and `--json` outputs. The files in `tests/it/snapshots/` are the
//! reviewed wording; a change to any of them shows up as a failing test here.
//!
//! Reviewing a change: run `INSTA_UPDATE=always cargo test --test it cli_snapshots::`, then read
//! `git diff tests/it/snapshots` and commit the snapshots together with the change that caused
//! them. Under `CI=true` insta never writes, so a stale snapshot fails the run.
//!
//! Every run is isolated: no `SOURCE_DATE_EPOCH`, and `XDG_CONFIG_HOME` and `GPUIMG_CACHE`
//! point into a fresh temporary directory, which is also the working directory; that
//! directory's path is replaced by `[TMP]` before a snapshot is compared.

use crate::common;

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
        self.run_with(bin, args, &[])
    }

    /// As [`Sandbox::run`], with the variables `env` set too.
    fn run_with(&self, bin: Bin, args: &[&str], env: &[(&str, &str)]) -> Run {
        let out = common::run(
            self.dir
                .command(bin)
                .args(args)
                .env("NO_COLOR", "1")
                .envs(env.iter().copied()),
        );
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
    // Every command, found by walking the `Commands:` lists down from the top: a command added
    // gets its snapshot (and shows in its parent's) without this test naming it.
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    let mut seen = Vec::new();
    while let Some(cmd) = todo.pop() {
        let mut args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        args.push("--help");
        let r = sb.run(GPUIMG, &args);
        assert_eq!(r.code, Some(0), "{cmd:?}: {}", r.stderr);
        assert!(r.stderr.is_empty(), "{cmd:?}: {}", r.stderr);
        let name = if cmd.is_empty() {
            "help_gpuimg".to_string()
        } else {
            format!("help_gpuimg_{}", cmd.join("_").replace('-', "_"))
        };
        insta::assert_snapshot!(name.as_str(), r.stdout);
        for sub in subcommands(&r.stdout).into_iter().rev() {
            todo.push(cmd.iter().cloned().chain([sub]).collect());
        }
        seen.push(cmd.join(" "));
    }
    for cmd in [
        "push",
        "device-code list",
        "device-code prune",
        "cache prune",
    ] {
        assert!(seen.iter().any(|s| s == cmd), "`{cmd}` not found: {seen:?}");
    }
    let r = sb.run(SELFTEST, &["--help"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    insta::assert_snapshot!("help_gpuimg_selftest", r.stdout);
}

/// The subcommands a `--help` text lists under `Commands:` (not `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
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
        (
            "error_inspect_other_transport",
            vec!["inspect", "docker://busybox:latest"],
        ),
        ("error_inspect_no_path", vec!["inspect", "oci-archive:"]),
        (
            "error_inspect_missing_archive",
            vec!["inspect", "oci-archive:missing.tar"],
        ),
        (
            "error_build_output_empty_tag",
            vec!["build", good, "-o", "oci:out/x:"],
        ),
        (
            "error_build_bad_max_size",
            vec!["build", good, "--max-size", "lots"],
        ),
        (
            "error_build_tags_disagree",
            vec!["build", good, "-o", "oci-archive:x.tar:v1", "--tag", "v2"],
        ),
    ];
    for (name, args) in cases {
        let r = sb.run(GPUIMG, args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.render());
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
        insta::assert_snapshot!(*name, r.render());
    }
    let r = sb.run_with(GPUIMG, &["build", good], &[("SOURCE_DATE_EPOCH", "soon")]);
    assert_eq!(r.code, Some(2), "{}", r.render());
    insta::assert_snapshot!("error_bad_source_date_epoch", r.render());
    // Nothing was written by the failed builds.
    assert!(!sb.path().join("out").exists());
    assert!(!sb.path().join("x.tar").exists());
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
        (
            "json_catalog_list_python",
            &["catalog", "list", "python", "--json"],
            0,
        ),
        (
            "json_catalog_show_r580",
            &["catalog", "show", "R580", "--json"],
            0,
        ),
        ("json_cache_verify", &["cache", "verify", "--json"], 0),
        ("json_cache_prune", &["cache", "prune", "--json"], 0),
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

/// `-q` is the same everywhere: a command that succeeds prints nothing at all, and with
/// `--json` nothing but its JSON; an answer of "no" (exit 1) still says why on stdout.
#[test]
fn quiet_prints_nothing_but_json_on_success() {
    let sb = Sandbox::new();
    let p = sb.file(
        "p.yaml",
        "name: demo\nhost:\n  gpus: [H100]\n  driver: \">=550\"\nstack:\n  cuda: \"12.4\"\n",
    );
    let p = p.to_str().expect("utf-8 name");
    std::fs::create_dir_all(sb.path().join("rootfs/etc")).expect("mkdir");
    sb.file("rootfs/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n");
    let img = sb.file(
        "img.yaml",
        "name: quiet\nbase:\n  rootfs: ./rootfs\nconfig:\n  labels: {a: b}\n",
    );
    let img = img.to_str().expect("utf-8 name");
    let silent: &[&[&str]] = &[
        &["-q", "resolve", p],
        &["resolve", p, "-q"],
        &["-q", "lock", p],
        &["-q", "build", img, "-o", "oci:out/q"],
        &["-q", "build", img, "-o", "oci-archive:q.tar:v1"],
        &["-q", "inspect", "oci:out/q"],
        &["-q", "inspect", "--files", "out/q"],
        &["-q", "inspect", "--sizes", "out/q"],
        &["-q", "inspect", "oci-archive:q.tar"],
        &["-q", "catalog", "list", "gpus"],
        &["-q", "catalog", "show", "H100"],
        &["-q", "catalog", "why", "--gpu", "H100", "--cuda", "12.4"],
        &["-q", "cache", "verify"],
        &["-q", "cache", "prune"],
        &["-q", "completions", "bash"],
    ];
    for args in silent {
        let r = sb.run(GPUIMG, args);
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.render());
        assert_eq!(
            (r.stdout.as_str(), r.stderr.as_str()),
            ("", ""),
            "{args:?} is not quiet"
        );
    }
    // The same commands without -q do print something: the silence above is -q's.
    for args in silent {
        let loud: Vec<&str> = args.iter().copied().filter(|a| *a != "-q").collect();
        if loud.first() == Some(&"build") {
            continue; // a second build replaces the first: covered by the JSON runs below
        }
        let r = sb.run(GPUIMG, &loud);
        assert_eq!(r.code, Some(0), "{loud:?}: {}", r.render());
        assert!(
            !(r.stdout.is_empty() && r.stderr.is_empty()),
            "{loud:?} prints nothing even without -q"
        );
    }
    let json: &[&[&str]] = &[
        &["-q", "resolve", p, "--json"],
        &["-q", "lock", p, "--json"],
        &["-q", "build", img, "-o", "oci:out/q", "--json"],
        &["-q", "inspect", "oci-archive:q.tar", "--json"],
        &["-q", "inspect", "out/q", "--files", "--json"],
        &["-q", "inspect", "out/q", "--sizes", "--json"],
        &["-q", "catalog", "list", "drivers", "--json"],
        &["-q", "catalog", "show", "H100", "--json"],
        &["-q", "catalog", "why", "--gpu", "H100", "--json"],
        &["-q", "cache", "verify", "--json"],
        &["-q", "cache", "prune", "--json"],
    ];
    for args in json {
        let r = sb.run(GPUIMG, args);
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.render());
        assert!(r.stderr.is_empty(), "{args:?}: {}", r.stderr);
        serde_json::from_str::<serde_json::Value>(&r.stdout)
            .unwrap_or_else(|e| panic!("{args:?} printed invalid JSON ({e}): {}", r.stdout));
    }
    // A "no" is still explained under -q, on stdout, with exit 1.
    let r = sb.run(
        GPUIMG,
        &["-q", "catalog", "why", "--gpu", "V100", "--cuda", ">=13"],
    );
    assert_eq!(r.code, Some(1), "{}", r.render());
    assert!(r.stdout.starts_with("no: "), "{}", r.render());
}

/// `inspect --sizes` of a fixed image (two identical files stored once), and a build over
/// `--max-size`: exit 1, one line naming the image's size and the limit, nothing written.
#[test]
fn size_report_and_max_size() {
    let sb = Sandbox::new();
    let body = "0123456789abcdef".repeat(512);
    sb.file("a.bin", &body);
    sb.file("b.bin", &body);
    sb.file("run.sh", "#!/bin/sh\necho run\n");
    let p = sb.file(
        "p.yaml",
        "name: sized\nfiles:\n  - {src: ./a.bin, dst: /data/a.bin, mode: \"0644\"}\n  - {src: ./b.bin, dst: /data/b.bin, mode: \"0644\"}\n  - {src: ./run.sh, dst: /usr/local/bin/run, mode: \"0755\"}\nselftest: {enabled: false}\n",
    );
    let p = p.to_str().expect("utf-8 name");
    let epoch = [("SOURCE_DATE_EPOCH", "0")];
    let r = sb.run_with(GPUIMG, &["-q", "build", p, "-o", "out/sized"], &epoch);
    assert_eq!(r.code, Some(0), "{}", r.render());
    let r = sb.run(GPUIMG, &["inspect", "--sizes", "out/sized"]);
    assert_eq!(r.code, Some(0), "{}", r.render());
    insta::assert_snapshot!("sizes_text", r.render());
    let r = sb.run_with(
        GPUIMG,
        &["-q", "build", p, "-o", "out/small", "--max-size", "1kB"],
        &epoch,
    );
    assert_eq!(r.code, Some(1), "{}", r.render());
    insta::assert_snapshot!("error_build_over_max_size", r.render());
    assert!(!sb.path().join("out/small").exists());
}

/// `catalog list KIND --json` is one array holding a record per line of the text view, each
/// as `catalog show` prints it.
#[test]
fn catalog_list_json_matches_the_text_view() {
    let sb = Sandbox::new();
    for kind in [
        "gpus",
        "cuda",
        "drivers",
        "python",
        "pytorch",
        "tensorflow",
        "jax",
        "cudnn",
        "nccl",
        "sources",
    ] {
        let text = sb.run(GPUIMG, &["catalog", "list", kind]);
        let json = sb.run(GPUIMG, &["catalog", "list", kind, "--json"]);
        assert_eq!((text.code, json.code), (Some(0), Some(0)), "{kind}");
        let v: serde_json::Value = serde_json::from_str(&json.stdout)
            .unwrap_or_else(|e| panic!("{kind}: invalid JSON ({e}): {}", json.stdout));
        let records = v.as_array().expect("one JSON array");
        assert_eq!(records.len(), text.stdout.lines().count(), "{kind}");
        assert!(!records.is_empty(), "{kind}: no records");
    }
    let gpus = sb.run(GPUIMG, &["catalog", "list", "gpus", "--json"]);
    let gpus: serde_json::Value = serde_json::from_str(&gpus.stdout).expect("JSON");
    let h100 = (gpus.as_array().expect("array").iter())
        .find(|g| g["name"] == "H100")
        .cloned()
        .expect("H100 listed");
    let show = sb.run(GPUIMG, &["catalog", "show", "H100"]);
    let shown: serde_json::Value = serde_json::from_str(&show.stdout).expect("JSON");
    assert_eq!(h100, shown);
}
