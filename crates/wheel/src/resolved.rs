//! What resolution took from each wheel's metadata, checked against the wheel itself before it
//! is installed: the dependency edges the pins record (`PinnedWheel::required_by` holds
//! `demo 1.0` or `demo[extra] 1.0` on each dependency resolution took from `demo` 1.0's
//! metadata, and the lock keeps them) against the `Requires-Dist` of the installed wheel's own
//! `METADATA` (names by PEP 503). Resolution may read metadata from a PEP 658 file, a cache or
//! range reads; the wheel installed is the file the lock pins by sha256. A dependency resolution
//! took that the wheel does not declare, or an unconditional one (no marker) it did not take,
//! means resolution read other metadata than this wheel's: the wheel is refused.
//! Must never evaluate markers: a declared requirement with a marker need not be an edge.

use std::collections::{BTreeMap, BTreeSet};

use crate::filename::normalize;
use crate::prepare::{same_version, Prepared};
use crate::WheelError;
use gpuimg_pypi::PinnedWheel;

/// The dependencies resolution took from each pinned wheel (by normalised name), from `set`'s
/// `required_by` edges; a `required_by` that is no `name[extra] version` of a wheel in `set`
/// (a profile's requirement) is none.
pub fn edges(set: &[PinnedWheel]) -> BTreeMap<String, BTreeSet<String>> {
    let version_of: BTreeMap<String, &str> = set
        .iter()
        .map(|p| (normalize(&p.name), p.version.as_str()))
        .collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for dep in set {
        let dep_name = normalize(&dep.name);
        for by in &dep.required_by {
            let Some((who, version)) = by.split_once(' ') else {
                continue;
            };
            let who = normalize(who.split_once('[').map_or(who, |(n, _)| n));
            if who != dep_name
                && version_of
                    .get(&who)
                    .is_some_and(|v| same_version(v, version))
            {
                out.entry(who).or_default().insert(dep_name.clone());
            }
        }
    }
    out
}

/// Every wheel of `prepared` declares each dependency resolution took from it (`edges` of
/// the whole resolution), and resolution took each it declares without a marker.
pub fn check(
    prepared: &[Prepared],
    edges: &BTreeMap<String, BTreeSet<String>>,
) -> Result<(), WheelError> {
    let none = BTreeSet::new();
    for p in prepared {
        let own = &p.project;
        let names = |unconditional: bool| -> BTreeSet<String> {
            p.requires
                .iter()
                .filter(|r| !unconditional || r.marker.is_true())
                .map(|r| normalize(r.name.as_ref()))
                .filter(|n| n != own)
                .collect()
        };
        let (declared, always) = (names(false), names(true));
        let taken = edges.get(own).unwrap_or(&none);
        if taken.is_subset(&declared) && always.is_subset(taken) {
            continue;
        }
        let show = |set: &BTreeSet<String>, odd: &dyn Fn(&String) -> Option<&'static str>| {
            if set.is_empty() {
                return "nothing".to_string();
            }
            set.iter()
                .map(|n| match odd(n) {
                    Some(mark) => format!("`{n}` ({mark})"),
                    None => format!("`{n}`"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(WheelError::NotTheResolvedRequires {
            wheel: p.label.clone(),
            declared: show(&declared, &|n| {
                (always.contains(n) && !taken.contains(n)).then_some("not taken")
            }),
            resolved: show(taken, &|n| {
                (!declared.contains(n)).then_some("not declared")
            }),
        });
    }
    Ok(())
}
