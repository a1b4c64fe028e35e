//! Target `packages`: a repository's `Packages` index, as the apt client reads it: deb822
//! paragraphs into a `Universe`, each stanza parsed in full (versions, relations, digests,
//! sizes), then the solver over it.
//!
//! Seeds: a Debian-like index in tests/fuzz/corpus/packages/. Mutations add field names,
//! relation syntax and version strings. Properties: every stanza the index offers is found by
//! name and parses or fails with a typed error; version order is antisymmetric and transitive;
//! the solver ends (the harness bounds its time) with a set of distinct package names.

use arbitrary::{Result, Unstructured};
use gpuimg::sources::apt::parsers::{paragraphs, solve, Universe};
use gpuimg::sources::apt::{AptError, Version};

use crate::harness::{files, Target, Verdict};
use crate::mutate;

pub static TARGET: Target = Target {
    name: "packages",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 1_500,
};

fn seeds() -> Vec<Vec<u8>> {
    files("corpus", "packages")
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

const DICT: &[&[u8]] = &[
    b"Package: ",
    b"Version: ",
    b"Architecture: ",
    b"Depends: ",
    b"Pre-Depends: ",
    b"Provides: ",
    b"Conflicts: ",
    b"Breaks: ",
    b"Essential: yes",
    b"Multi-Arch: same",
    b"Multi-Arch: foreign",
    b"Multi-Arch: allowed",
    b"SHA256: ",
    b"Size: ",
    b"Filename: ",
    b"Priority: required",
    b" | ",
    b", ",
    b",",
    b"|",
    b" (>= ",
    b" (<= ",
    b" (<< ",
    b" (>> ",
    b" (= ",
    b" (> ",
    b" (",
    b")",
    b"(",
    b":any",
    b":native",
    b":amd64",
    b":",
    b"amd64",
    b"all",
    b"i386",
    b"1:",
    b"99999999999999999999:",
    b"-",
    b"~",
    b"+",
    b".",
    b"\n\n",
    b"\n ",
    b"\n\t",
    b"\n.\n",
    b"#",
    b"\r\n",
    b"\n",
    b" ",
    b"0",
    b"a",
    b"libc6",
    b"awk",
    b"dpkg",
    b"\xc3\xa9",
];

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    mutate::text(u, seeds, DICT)
}

fn typed(e: &AptError) -> std::result::Result<(), String> {
    match e {
        AptError::InvalidIndex { url, message } if url == URL && !message.is_empty() => Ok(()),
        AptError::UnknownPackage { .. } | AptError::Unsatisfiable { .. } => Ok(()),
        other => Err(format!("unexpected error: {other}")),
    }
}

const URL: &str = "fuzz/Packages";

fn check(input: &[u8]) -> Verdict {
    let text = String::from_utf8_lossy(input).into_owned();
    let mut u = Universe::new("amd64");
    if let Err(e) = u.add_index(0, URL, text.clone()) {
        return typed(&e).map(|()| "index refused");
    }
    let mut broken = false;
    let mut names = Vec::new();
    for para in paragraphs(&text).flatten() {
        let (Some(name), Some(arch)) = (para.get("Package"), para.get("Architecture")) else {
            continue;
        };
        if arch == "amd64" || arch == "all" {
            names.push(name.to_string());
        }
    }
    names.sort();
    names.dedup();
    let mut versions: Vec<Version> = Vec::new();
    for name in &names {
        let ids = u.named(name);
        if ids.is_empty() {
            return Err(format!("stanza `{name}` is not found by name"));
        }
        for &id in ids {
            match u.package(id) {
                Ok(p) => {
                    if &p.name != name {
                        return Err(format!("`{name}` resolved to stanza `{}`", p.name));
                    }
                    if versions.len() < 12 {
                        versions.push(p.version);
                    }
                }
                Err(e) => {
                    broken = true;
                    typed(&e)?
                }
            }
        }
        for &id in u.providers(name) {
            if let Err(e) = u.package(id) {
                typed(&e)?;
            }
        }
    }
    for a in &versions {
        for b in &versions {
            if a.cmp(b) != b.cmp(a).reverse() {
                return Err(format!("`{a}` vs `{b}` is not antisymmetric"));
            }
            for c in versions.iter().take(6) {
                if a <= b && b <= c && a > c {
                    return Err(format!("`{a}` <= `{b}` <= `{c}` but `{a}` > `{c}`"));
                }
            }
        }
    }
    let roots: Vec<String> = names.iter().take(3).cloned().collect();
    match solve(&u, &roots, true) {
        Ok(set) => {
            let mut seen: Vec<&str> = set.iter().map(|p| p.name.as_str()).collect();
            let n = seen.len();
            seen.sort();
            seen.dedup();
            if seen.len() != n {
                return Err("the solver chose two packages of one name".into());
            }
            Ok(if broken {
                "solved, a stanza refused"
            } else {
                "solved"
            })
        }
        Err(e) => typed(&e).map(|()| "solver refused"),
    }
}
