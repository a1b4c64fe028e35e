//! Target `profile`: profile YAML through `profile::parse` (`${VAR}` expansion, the YAML
//! parser, the schema and validation), as `gpuimg build` reads a profile.
//!
//! Seeds are the project's real profiles (templates/, profiles/, the resolver examples) and
//! the hand-written ones in tests/fuzz/corpus/profile/. Mutations insert YAML syntax, profile
//! keys and `${VAR}` references whose values hold newlines, quotes and flow syntax. Properties:
//! an error names the file with a position; an accepted profile has a name, and every
//! `files.dst` is a relative path without `..` or empty components, with a mode of at most
//! 0o7777.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};
use gpuimg_build::profile;

use crate::fuzz::harness::{files, repo, work_dir, Target, Verdict};
use crate::fuzz::mutate;

pub static TARGET: Target = Target {
    name: "profile",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 6_000,
};

fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for dir in ["templates", "profiles", "tests/resolve_examples"] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        v.sort();
        out.extend(v.iter().filter_map(|p| std::fs::read(p).ok()));
    }
    out.extend(files("corpus", "profile").into_iter().map(|(_, b)| b));
    out
}

const DICT: &[&[u8]] = &[
    b": ",
    b"- ",
    b"\n",
    b"\n  ",
    b"\n    ",
    b"\t",
    b"#",
    b" #",
    b"'",
    b"\"",
    b"[",
    b"]",
    b"{",
    b"}",
    b",",
    b"&a ",
    b"*a",
    b"<<: *a",
    b"!!str ",
    b"!!int ",
    b"!!binary ",
    b"? ",
    b"|",
    b">-",
    b"---\n",
    b"...\n",
    b"~",
    b"null",
    b"true",
    b"0755",
    b"+755",
    b"0o755",
    b"1e9999",
    b"-1",
    b"4294967296",
    b"\\0",
    b"\0",
    b"\xef\xbb\xbf",
    b"\r\n",
    b"name: ",
    b"files:\n  - ",
    b"src: ",
    b"dst: ",
    b"mode: ",
    b"base:\n  ",
    b"rootfs: ",
    b"apt:\n    ",
    b"suite: ",
    b"mirror: ",
    b"keyring: ",
    b"repositories: ",
    b"host:\n  ",
    b"gpus: ",
    b"driver: ",
    b"stack:\n  ",
    b"cuda: ",
    b"selftest:\n  ",
    b"min-gpus: ",
    b"config:\n  ",
    b"env: ",
    b"entrypoint: ",
    b"labels: ",
    b"context: ",
    b"platform: ",
    b"linux/amd64",
    b"/",
    b"..",
    b"../",
    b"/etc/shadow",
    b"./motd",
    b"${N}",
    b"${NL}",
    b"${QUOTE}",
    b"${FLOW}",
    b"${MAP}",
    b"${EMPTY}",
    b"${DOLLAR}",
    b"${HASH}",
    b"${UNSET}",
    b"$${N}",
    b"${",
    b"${1x}",
    b"${N",
    b"}",
];

/// The environment `${VAR}` reads: values that try to break out of a scalar.
fn env(name: &str) -> Option<String> {
    Some(
        match name {
            "N" => "3",
            "NL" => "x\nfiles:\n  - {src: ./motd, dst: /etc/motd}\n",
            "QUOTE" => "a'b\"c",
            "FLOW" => "[a, {b: c}]",
            "MAP" => "k: v",
            "EMPTY" => "",
            "DOLLAR" => "${N}",
            "HASH" => "# not a comment",
            "NUL" => "a\0b",
            "LONG" => "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            _ => return None,
        }
        .to_string(),
    )
}

/// The profile's directory: a few of the files the seeds name (`src: ./motd`, a rootfs).
fn context() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = work_dir("profile").join("context");
        let _ = std::fs::create_dir_all(d.join("etc"));
        for f in [
            "motd",
            "app",
            "rootfs.tar.gz",
            "r.tar",
            "vendor.gpg",
            "etc/conf",
        ] {
            let _ = std::fs::write(d.join(f), b"x\n");
        }
        d
    })
}

/// Words of the YAML library's own messages that must not reach the user (RELIABILITY.md, class 8).
const INTERNALS: &[&str] = &[
    "Budget breached",
    "ScalarBytes",
    "saphyr",
    "serde",
    "Error {",
    "DuplicateKeyPolicy",
    "Option<",
];

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    // A profile is read as UTF-8 first: keep inputs valid so they reach the parser.
    let data = mutate::text(u, seeds, DICT)?;
    Ok(String::from_utf8_lossy(&data).into_owned().into_bytes())
}

fn check(input: &[u8]) -> Verdict {
    // `profile::load` refuses a file that is not UTF-8 before parsing.
    let Ok(text) = std::str::from_utf8(input) else {
        return Ok("not UTF-8");
    };
    match profile::parse(text, "fuzz.yaml", context(), &env) {
        Err(e) => {
            let s = e.to_string();
            if !s.starts_with("fuzz.yaml:") {
                return Err(format!("error does not name the file and position: {s}"));
            }
            if s.trim_end().len() <= "fuzz.yaml:1:1:".len() {
                return Err(format!("error says nothing: {s:?}"));
            }
            if let Some(w) = INTERNALS.iter().find(|w| s.contains(*w)) {
                return Err(format!("error shows the library's internals (`{w}`): {s}"));
            }
            Ok("refused")
        }
        Ok(p) => {
            if p.name.is_empty() {
                return Err("accepted a profile with an empty name".into());
            }
            for f in &p.files {
                let bad = f.dst.is_empty()
                    || f.dst.starts_with('/')
                    || f.dst
                        .split('/')
                        .any(|c| c.is_empty() || c == "." || c == "..");
                if bad {
                    return Err(format!("accepted `files.dst` `{}`", f.dst));
                }
                if f.mode.is_some_and(|m| m > 0o7777) {
                    return Err(format!(
                        "accepted mode {:o} for `{}`",
                        f.mode.unwrap_or(0),
                        f.dst
                    ));
                }
            }
            Ok("accepted")
        }
    }
}
