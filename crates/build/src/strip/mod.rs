//! Stage `strip`: drop whole files an image does not need at run time, by class (the profile's
//! `strip:` list; each class's rule is in `classes.rs`) and by the catalog's per-package data
//! ([`Rules`]: extra paths a class removes, paths it keeps, licence terms by file).
//!
//! Removes entries only; never rewrites a file's bytes. Whatever the class: licence, copyright
//! and notice files stay, a `.dist-info`/`.egg-info` directory stays whole (a package whose
//! files all went is still recorded), a file whose licence terms forbid leaving it out stays,
//! and so does every path the caller protects (the libraries `ld.so.cache` indexes), each
//! with the directories above it. A hard link that survives while its data carrier is
//! stripped keeps the data ([`Tree::retain`] moves it to the first surviving link), so no
//! link is left dangling. Keeping the records true (RECORD, dpkg's lists) is the caller's:
//! [`Stripped::removed`] says what went.

mod classes;
mod pattern;
mod rules;

use std::collections::{BTreeMap, BTreeSet, HashSet};

pub use pattern::PathPattern;
pub use rules::{Rules, Terms};

use crate::profile::StripClass;
use gpuimg_assemble::{EntryKind, Provenance, Tree};

/// Entries removed and their file bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    pub entries: u64,
    pub bytes: u64,
}

/// What one strip removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stripped {
    /// The removed paths, sorted.
    pub removed: BTreeSet<String>,
    /// The same per (class, owner), for the image's size report: an entry several classes
    /// match counts for the first of the profile's list; a file whose data a surviving hard
    /// link keeps counts as an entry with no bytes.
    pub by_class: BTreeMap<(StripClass, Provenance), Removed>,
}

impl Stripped {
    pub fn count(&self) -> usize {
        self.removed.len()
    }

    /// Entries removed, all classes.
    pub fn entries(&self) -> u64 {
        self.by_class.values().map(|r| r.entries).sum()
    }
}

/// Remove the entries of `tree` any of `classes` matches (`unused-libraries` and
/// `device-code` match nothing: the plan refuses them), except what must stay (see the module
/// doc) and the paths in `protect`.
pub fn strip(
    tree: &mut Tree,
    classes: &[StripClass],
    rules: &Rules,
    protect: &HashSet<String>,
) -> Stripped {
    if classes.is_empty() {
        return Stripped::default();
    }
    let has = |p: &str| tree.get(p).is_some();
    let mut drop: BTreeSet<String> = tree
        .iter()
        .filter(|e| {
            !always_kept(&e.path)
                && !protect.contains(&e.path)
                && rules.may_remove(&e.path)
                && classes
                    .iter()
                    .any(|c| classes::removes(*c, &e.path, rules, &has))
        })
        .map(|e| e.path.clone())
        .collect();
    // A kept entry keeps the directories above it.
    let kept_below: Vec<String> = tree
        .iter()
        .filter(|e| !drop.contains(&e.path))
        .flat_map(|e| parents(&e.path))
        .filter(|d| drop.contains(*d))
        .map(str::to_string)
        .collect();
    for d in kept_below {
        drop.remove(&d);
    }
    let by_class = account(tree, &drop, classes, rules);
    tree.retain(|e| !drop.contains(&e.path));
    Stripped {
        removed: drop,
        by_class,
    }
}

/// What removing `drop` from `tree` takes away, per (class, owner).
fn account(
    tree: &Tree,
    drop: &BTreeSet<String>,
    classes: &[StripClass],
    rules: &Rules,
) -> BTreeMap<(StripClass, Provenance), Removed> {
    let has = |p: &str| tree.get(p).is_some();
    // Files a surviving link still holds: their bytes stay in the layer.
    let held: HashSet<&str> = tree
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Hardlink { target } if !drop.contains(&e.path) => Some(target.as_str()),
            _ => None,
        })
        .collect();
    let mut out: BTreeMap<(StripClass, Provenance), Removed> = BTreeMap::new();
    for (e, p) in tree.iter_with_provenance() {
        if !drop.contains(&e.path) {
            continue;
        }
        let Some(class) =
            (classes.iter().copied()).find(|c| classes::removes(*c, &e.path, rules, &has))
        else {
            continue;
        };
        let bytes = match &e.kind {
            EntryKind::File { size, .. } if !held.contains(e.path.as_str()) => *size,
            _ => 0,
        };
        let r = out.entry((class, p.clone())).or_default();
        r.entries += 1;
        r.bytes += bytes;
    }
    out
}

/// Whether [`strip`] removes an entry at `path` by its path alone, whatever tree it is in
/// (a package database's line whose file the tree does not hold: its package was replayed
/// without writing it). A directory it names still stays where something below it stays; a
/// stray `.pyc` is not recognised without its tree.
pub fn would_remove(
    path: &str,
    classes: &[StripClass],
    rules: &Rules,
    protect: &HashSet<String>,
) -> bool {
    !always_kept(path)
        && !protect.contains(path)
        && rules.may_remove(path)
        && classes
            .iter()
            .any(|c| classes::removes(*c, path, rules, &|_| false))
}

/// Licence files, and package records.
fn always_kept(path: &str) -> bool {
    is_licence(path)
        || path
            .split('/')
            .any(|c| c.ends_with(".dist-info") || c.ends_with(".egg-info"))
}

fn is_licence(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    file == "copyright"
        || file.starts_with("license")
        || file.starts_with("licence")
        || file.starts_with("copying")
        || file.starts_with("notice")
}

/// The directories above `path` (`a/b/c` → `a/b`, `a`).
fn parents(path: &str) -> impl Iterator<Item = &str> {
    let mut p = path;
    std::iter::from_fn(move || {
        let i = p.rfind('/')?;
        p = &p[..i];
        Some(p)
    })
}

#[cfg(test)]
mod tests;
