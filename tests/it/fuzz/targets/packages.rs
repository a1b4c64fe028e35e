//! Target `packages`: a repository's `Packages` index, as the apt client reads it: deb822
//! paragraphs into a `Universe`, each stanza parsed in full (versions, relations, digests,
//! sizes), then the solver over it.
//!
//! Seeds: a Debian-like index in tests/fuzz/corpus/packages/. Mutations add field names,
//! relation syntax and version strings. Properties: every stanza the index offers is found by
//! name and parses or fails with a typed error; version order is antisymmetric and transitive;
//! the solver ends (the harness bounds its time) with a set of distinct package names; the
//! index's map, over the same text in a file, finds the same stanzas with the same contents.

use arbitrary::{Result, Unstructured};
use gpuimg_apt::parsers::{paragraphs, solve, IndexMap, Package, Universe};
use gpuimg_apt::{AptError, Version};

use crate::fuzz::harness::{files, Target, Verdict};
use crate::fuzz::mutate;

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
        // A root taken from a mutated index's names that is no package text.
        AptError::InvalidRoot { message, .. } if !message.is_empty() => Ok(()),
        other => Err(format!("unexpected error: {other}")),
    }
}

const URL: &str = "fuzz/Packages";

fn check(input: &[u8]) -> Verdict {
    let text = String::from_utf8_lossy(input).into_owned();
    let mut u = Universe::new("amd64");
    let map = match u.add_index(0, URL, text.clone()) {
        Ok(map) => map,
        Err(e) => return typed(&e).map(|()| "index refused"),
    };
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
        for id in ids {
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
        for id in u.providers(name) {
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
    if let Some(map) = map {
        same_through_map(&u, &text, &map, &names)?;
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

/// A universe built from `map` over the text in a file answers as `u` (scanned from the text)
/// does: the same stanzas by name and by provided name, the same essential set, each stanza
/// parsed to the same package or refused alike.
fn same_through_map(
    u: &Universe,
    text: &str,
    map: &IndexMap,
    names: &[String],
) -> std::result::Result<(), String> {
    use std::io::Write;
    let mut file = tempfile::tempfile().map_err(|e| e.to_string())?;
    file.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    let mut m = Universe::new("amd64");
    if !m.add_mapped(0, URL, file, text.len() as u64, map.clone()) {
        return Err("an index's own map does not fit it".into());
    }
    if m.essential() != u.essential() {
        return Err("the map gives another essential set".into());
    }
    for name in names {
        if m.named(name) != u.named(name) || m.providers(name) != u.providers(name) {
            return Err(format!("the map finds other stanzas for `{name}`"));
        }
        for id in u.named(name).into_iter().chain(u.providers(name)) {
            let describe = |r: std::result::Result<Package, AptError>| match r {
                Ok(p) => format!("{} {} {} {}", p.name, p.version, p.filename, p.sha256),
                Err(e) => format!("error: {e}"),
            };
            let (a, b) = (describe(u.package(id)), describe(m.package(id)));
            if a != b {
                return Err(format!("stanza {id}: `{a}` scanned, `{b}` through the map"));
            }
        }
    }
    Ok(())
}
