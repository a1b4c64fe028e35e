//! Explaining a resolution that has no answer: pubgrub's derivation (each step names the two
//! facts it joins), then, for every package the derivation says has no usable version, why
//! the versions in that range are not candidates (source only, wheels for other platforms,
//! `Requires-Python`, yanked, refused by `--hash`, skipped for unusable metadata: counted,
//! with one example), then where the profile's requirements and the constraints on the
//! packages it names were written.
//! A derivation of more than [`MAX_FACTS`] facts is summarised (per package: how many facts,
//! the versions' span, one example), so the message stays small whatever an index lists.
//! Must never invent a reason: every note comes from what the index listed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::ops::Bound;

use pep440_rs::Version;
use pubgrub::{DefaultStringReporter, DerivationTree, External, Reporter};

use super::solver::{Pkg, Provider, Range, ROOT};

/// How many versions of one package the notes name.
const NOTED_VERSIONS: usize = 3;
/// The most facts a derivation is shown with in full; a longer one is summarised.
pub const MAX_FACTS: usize = 40;
/// The most characters of index-controlled text a note shows.
const SHOWN_CHARS: usize = 300;
/// The most segments a range is shown with; a longer one reads as its span and count.
const SHOWN_SEGMENTS: usize = 4;

pub fn explain(tree: &DerivationTree<Pkg, Range, String>, provider: &Provider<'_, '_>) -> String {
    let mut facts = Vec::new();
    walk(tree, &mut |e| facts.push(e.clone()));
    let mut text = if facts.len() > MAX_FACTS {
        summary(&facts)
    } else {
        tidy(&DefaultStringReporter::report(tree))
    };
    let mut missing: Vec<(Pkg, Range)> = Vec::new();
    let mut mentioned = Vec::new();
    facts.iter().for_each(|e| match e {
        External::NoVersions(p, r) => missing.push((p.clone(), r.clone())),
        External::FromDependencyOf(p, _, d, _) => {
            mentioned.extend(p.name().cloned());
            mentioned.extend(d.name().cloned());
        }
        External::Custom(p, _, _) | External::NotRoot(p, _) => mentioned.extend(p.name().cloned()),
    });
    missing.sort_by(|a, b| a.0.cmp(&b.0));
    missing.dedup_by(|a, b| a.0 == b.0);
    let mut notes = Vec::new();
    for (p, range) in &missing {
        let Some(name) = p.name() else { continue };
        mentioned.push(name.clone());
        let Ok(c) = provider.candidates(name) else {
            continue;
        };
        if c.listed == 0 {
            notes.push(format!(
                "`{name}` is on none of the indexes searched: {}",
                c.searched.join(", ")
            ));
            continue;
        }
        let in_range = c.excluded.iter().rev().filter(|(v, _)| range.contains(v));
        for (n, (v, ex)) in in_range.enumerate() {
            if n == NOTED_VERSIONS {
                notes.push(format!(
                    "… and older versions of {name} for the same reasons"
                ));
                break;
            }
            if ex.sdist_only {
                notes.push(format!(
                    "{name} {v} has only a source distribution; gpuimg installs wheels and never builds from source"
                ));
            } else if !ex.other_tags.is_empty() {
                let tags: Vec<&str> = ex.other_tags.iter().map(String::as_str).collect();
                notes.push(format!(
                    "{name} {v} has wheels only for {}; the image needs {}",
                    tags.join(", "),
                    provider.target.accepts
                ));
            } else if !ex.requires_python.is_empty() {
                let rp: Vec<&str> = ex.requires_python.iter().map(String::as_str).collect();
                notes.push(format!(
                    "{name} {v} requires Python {} and the image has {}",
                    rp.join(" or "),
                    provider.target.python
                ));
            } else if ex.hash_refused {
                notes.push(format!(
                    "no wheel of {name} {v} has a sha256 the requirements' hashes allow"
                ));
            }
        }
        if let Some(sk) = provider.skipped.borrow().get(name) {
            let mut in_range = sk.versions.iter().filter(|(v, _)| range.contains(v));
            if let Some((newest, why)) = in_range.next_back() {
                let oldest = in_range.next().map(|(v, _)| v);
                let n = 1 + in_range.count() + usize::from(oldest.is_some());
                let why = clip(why);
                notes.push(match oldest {
                    None => format!("{name} {newest} was skipped: {why}"),
                    Some(o) => format!(
                        "{n} versions of {name} ({o} to {newest}) were skipped for unusable metadata; {name} {newest}: {why}"
                    ),
                });
            }
        }
        let (mut yanked, mut pre) = (0usize, 0usize);
        for cand in c.versions.iter().filter(|c| range.contains(&c.version)) {
            if cand.yanked {
                yanked += 1;
                if yanked > NOTED_VERSIONS {
                    continue;
                }
                notes.push(format!(
                    "{name} {} is yanked{}; only an exact `=={}` pin selects it",
                    cand.version,
                    cand.file
                        .yanked
                        .as_deref()
                        .filter(|r| !r.is_empty())
                        .map(|r| format!(" ({})", clip(r)))
                        .unwrap_or_default(),
                    cand.version
                ));
            } else if cand.version.any_prerelease() {
                pre += 1;
                if pre > NOTED_VERSIONS {
                    continue;
                }
                notes.push(format!(
                    "{name} {} is a pre-release; ask for it with a specifier that names a pre-release, or `--pre` in the requirements file",
                    cand.version
                ));
            }
        }
        for (n, what) in [(yanked, "yanked"), (pre, "pre-release")] {
            if n > NOTED_VERSIONS {
                notes.push(format!(
                    "… and {} more {what} versions of {name}",
                    n - NOTED_VERSIONS
                ));
            }
        }
    }
    for r in &provider.request.requirements {
        if mentioned.contains(&r.requirement.name) {
            notes.push(format!("{ROOT} asks `{}` ({})", r.text, r.origin));
        }
    }
    for c in &provider.request.constraints {
        if mentioned.contains(&c.requirement.name) {
            notes.push(format!("the constraint `{}` ({})", c.text, c.origin));
        }
    }
    notes.dedup();
    for n in notes {
        let _ = write!(text, "\nnote: {n}");
    }
    text
}

/// Text an index controls (a yanked reason, an error naming its URLs), at most
/// [`SHOWN_CHARS`] characters of it.
fn clip(s: &str) -> String {
    match s.char_indices().nth(SHOWN_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Each external fact of the tree once (a shared subtree is walked once).
fn walk(t: &DerivationTree<Pkg, Range, String>, f: &mut dyn FnMut(&External<Pkg, Range, String>)) {
    fn go(
        t: &DerivationTree<Pkg, Range, String>,
        seen: &mut BTreeSet<usize>,
        f: &mut dyn FnMut(&External<Pkg, Range, String>),
    ) {
        match t {
            DerivationTree::External(e) => f(e),
            DerivationTree::Derived(d) => {
                if d.shared_id.is_some_and(|id| !seen.insert(id)) {
                    return;
                }
                go(&d.cause1, seen, f);
                go(&d.cause2, seen, f);
            }
        }
    }
    go(t, &mut BTreeSet::new(), f)
}

/// A long derivation in a few lines: per package and kind of fact, how many there are, the
/// versions they span, and one of them.
fn summary(facts: &[External<Pkg, Range, String>]) -> String {
    // (package, kind) → (count, lowest and highest version named, an example).
    type Group = (usize, Option<Version>, Option<Version>, String);
    let mut groups: BTreeMap<(Pkg, u8), Group> = BTreeMap::new();
    for e in facts {
        let (p, kind, r) = match e {
            External::NotRoot(..) => continue,
            External::NoVersions(p, r) => (p, 0, r),
            External::FromDependencyOf(p, r, ..) => (p, 1, r),
            External::Custom(p, r, _) => (p, 2, r),
        };
        let g = groups.entry((p.clone(), kind)).or_insert_with(|| {
            let example = match e {
                External::NoVersions(p, r) => format!("no version of {p} fits {}", brief(r)),
                External::FromDependencyOf(Pkg::Root, _, d, dr) => {
                    format!("{ROOT} depends on {d} {}", brief(dr))
                }
                External::FromDependencyOf(p, r, d, dr) => {
                    format!("{p} {} depends on {d} {}", brief(r), brief(dr))
                }
                External::Custom(p, r, why) => {
                    format!("{p} {} is unusable: {}", brief(r), clip(why))
                }
                External::NotRoot(..) => String::new(),
            };
            (0, None, None, example)
        });
        g.0 += 1;
        if let Some((lo, hi)) = r.bounding_range() {
            if let Bound::Included(v) | Bound::Excluded(v) = lo {
                if g.1.as_ref().is_none_or(|l| v < l) {
                    g.1 = Some(v.clone());
                }
            }
            if let Bound::Included(v) | Bound::Excluded(v) = hi {
                if g.2.as_ref().is_none_or(|h| v > h) {
                    g.2 = Some(v.clone());
                }
            }
        }
    }
    let mut out = format!("the derivation has {} facts; in summary:", facts.len());
    for ((p, kind), (n, lo, hi, example)) in &groups {
        let what = match kind {
            0 => "no version left",
            1 => "dependencies",
            _ => "unusable",
        };
        let span = match (lo, hi) {
            _ if *p == Pkg::Root => String::new(),
            (Some(l), Some(h)) if l == h => format!("at {l}"),
            (Some(l), Some(h)) => format!("between {l} and {h}"),
            (Some(l), None) => format!("from {l}"),
            (None, Some(h)) => format!("up to {h}"),
            (None, None) => "at any version".into(),
        };
        let _ = write!(
            out,
            "\n  {n} fact{} on {p}{}{span} ({what}), e.g. {example}",
            if *n == 1 { "" } else { "s" },
            if span.is_empty() { "" } else { " " },
        );
    }
    tidy(&out)
}

/// A range as written (a single version as `==V`), or, with more than a few segments, how
/// many and the first and last of them.
fn brief(r: &Range) -> String {
    if let Some(v) = r.as_singleton() {
        return format!("=={v}");
    }
    let segments = r.iter().count();
    if segments <= SHOWN_SEGMENTS {
        return r.to_string();
    }
    let one = |(lo, hi): (&Bound<Version>, &Bound<Version>)| {
        brief(&Range::from_range_bounds((lo.clone(), hi.clone())))
    };
    match (r.iter().next(), r.iter().last()) {
        (Some(first), Some(last)) => {
            format!("({segments} ranges: {} | … | {})", one(first), one(last))
        }
        _ => r.to_string(),
    }
}

/// The report in PEP 440 words: the root has no version, and `>=V, <V.post0.dev0` (how an
/// `==V` that admits local versions reads as a range) is `==V`.
pub fn tidy(report: &str) -> String {
    let mut s = report.replace(&format!("{ROOT} 0 "), &format!("{ROOT} "));
    s = s.replace(&format!("{ROOT} at version 0 "), &format!("{ROOT} "));
    s = s.replace(&format!("{ROOT} 0,"), &format!("{ROOT},"));
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(i) = rest.find(">=") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let v_end = after.find([',', ' ', '\n', '|']).unwrap_or(after.len());
        let v = &after[..v_end];
        let tail = format!("{v}, <{v}.post0.dev0");
        if after.starts_with(&tail) {
            out.push_str("==");
            out.push_str(v);
            rest = &after[tail.len()..];
        } else {
            out.push_str(">=");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_ranges_and_index_text_are_shown_short() {
        let v = |s: &str| s.parse::<Version>().unwrap();
        let many = (0..50).fold(Range::empty(), |r, i| {
            r.union(&Range::singleton(v(&format!("1.{i}"))))
        });
        assert_eq!(brief(&many), "(50 ranges: ==1.0 | … | ==1.49)");
        assert_eq!(brief(&Range::singleton(v("2.0"))), "==2.0");
        let long = "x".repeat(10_000);
        assert_eq!(clip(&long).chars().count(), SHOWN_CHARS + 1);
        assert_eq!(clip("short"), "short");
    }

    #[test]
    fn exact_pins_read_as_pins() {
        assert_eq!(
            tidy("the profile 0 depends on a >=1.0, <1.0.post0.dev0 and b >=2, <3."),
            "the profile depends on a ==1.0 and b >=2, <3."
        );
        assert_eq!(
            tidy("dependencies of the profile at version 0 are unavailable because x"),
            "dependencies of the profile are unavailable because x"
        );
    }
}
