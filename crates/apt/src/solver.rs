//! Dependency resolution over a [`Universe`]: Pre-Depends and Depends with alternatives,
//! virtual packages (versioned Provides), version relations, `:any`/`:native`, Conflicts and
//! Breaks.
//!
//! Deterministic and greedy, like apt: the first satisfiable alternative wins, and within it the
//! newest version (ties: repository order), after the versions a [`Preference`] fits, as apt's
//! pinning would put them. Must never pick a package that conflicts with one
//! already chosen; a failure names the chain of packages that led to it.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::prefer::Preference;
use crate::relation::{ArchQual, Relation};
use crate::universe::{MultiArch, Package, Universe};
use crate::AptError;

struct State<'u> {
    u: &'u Universe,
    /// Per package name: which of its versions come first (see `prefer.rs`).
    prefer: HashMap<&'u str, &'u Preference>,
    cache: HashMap<usize, Package>,
    selected: BTreeMap<String, usize>,
    /// Why each package was chosen: (parent, relation text); `None` for requested roots.
    why: HashMap<String, Option<(String, String)>>,
}

/// Resolve `roots` (plus the `Essential: yes` set when `essential`) to a closed package set,
/// sorted by name.
pub fn solve(u: &Universe, roots: &[String], essential: bool) -> Result<Vec<Package>, AptError> {
    solve_preferring(u, roots, essential, &[])
}

/// [`solve`], where the versions of a package that its preference in `prefer` fits come before
/// the rest (newest first within each).
pub fn solve_preferring<'u>(
    u: &'u Universe,
    roots: &[String],
    essential: bool,
    prefer: &'u [Preference],
) -> Result<Vec<Package>, AptError> {
    let mut st = State {
        u,
        prefer: prefer.iter().map(|p| (p.package.as_str(), p)).collect(),
        cache: HashMap::new(),
        selected: BTreeMap::new(),
        why: HashMap::new(),
    };
    let mut wanted: Vec<String> = roots.to_vec();
    if essential {
        wanted.extend(u.essential());
    }
    let mut queue = VecDeque::new();
    for name in &wanted {
        // A root may hold a version (`a=1.2-1`, `a (>= 1.2)`) and alternatives (`a | b`), as
        // the stack's packages do; the profile's were checked where they are written.
        let group = root_relations(name).map_err(|message| AptError::InvalidRoot {
            text: name.clone(),
            message,
        })?;
        if group.iter().try_fold(false, |acc, r| {
            Ok::<_, AptError>(acc || st.satisfied(r)?.is_some())
        })? {
            continue;
        }
        if group
            .iter()
            .all(|r| u.named(&r.name).is_empty() && u.providers(&r.name).is_empty())
        {
            return Err(AptError::UnknownPackage {
                name: name.clone(),
                near: group
                    .first()
                    .map(|r| u.nearest_names(&r.name))
                    .unwrap_or_default(),
            });
        }
        match st.choose(&group)? {
            Ok(id) => {
                let n = st.pkg(id)?.name.clone();
                st.why.insert(n.clone(), None);
                st.selected.insert(n.clone(), id);
                queue.push_back(n);
            }
            Err(reason) => {
                return Err(AptError::Unsatisfiable {
                    root: name.clone(),
                    chain: reason,
                })
            }
        }
    }
    while let Some(name) = queue.pop_front() {
        let id = st.selected[&name];
        let p = st.pkg(id)?;
        let groups: Vec<Vec<Relation>> = p.pre_depends.iter().chain(&p.depends).cloned().collect();
        for group in groups {
            if group.iter().try_fold(false, |acc, r| {
                Ok::<_, AptError>(acc || st.satisfied(r)?.is_some())
            })? {
                continue;
            }
            match st.choose(&group)? {
                Ok(cid) => {
                    let cname = st.pkg(cid)?.name.clone();
                    let rel = group
                        .iter()
                        .map(|r| r.to_string())
                        .collect::<Vec<_>>()
                        .join(" | ");
                    st.why.insert(cname.clone(), Some((name.clone(), rel)));
                    st.selected.insert(cname.clone(), cid);
                    queue.push_back(cname);
                }
                Err(reason) => {
                    let rel = group
                        .iter()
                        .map(|r| format!("`{r}`"))
                        .collect::<Vec<_>>()
                        .join(" | ");
                    return Err(AptError::Unsatisfiable {
                        root: st.root_of(&name),
                        chain: format!("{}`{name}` depends on {rel}, {reason}", st.chain(&name)),
                    });
                }
            }
        }
    }
    let ids: Vec<usize> = st.selected.values().copied().collect();
    ids.into_iter().map(|id| st.pkg(id).cloned()).collect()
}

/// A requested package as the solver takes it: a name, `name=version` (apt-get's spelling of
/// `name (= version)`), a Depends-style relation (`name (>= version)`) or alternatives of those
/// (`a | b (>= 2)`); one group, no commas.
pub fn root_relations(text: &str) -> Result<Vec<Relation>, String> {
    let alternatives: Vec<String> = text
        .split('|')
        .map(|alt| match alt.split_once('=') {
            Some((name, version)) if !name.contains(['(', '<', '>']) => {
                format!("{} (= {})", name.trim(), version.trim())
            }
            _ => alt.to_string(),
        })
        .collect();
    let joined = alternatives.join(" | ");
    let mut groups = crate::relation::parse_alternatives(&joined).map_err(|e| e.to_string())?;
    match (groups.pop(), groups.is_empty()) {
        (Some(group), true) if group.iter().all(|r| !r.name.is_empty()) => Ok(group),
        (None, _) => Err("empty".into()),
        _ => Err("one package or one group of alternatives, without commas".into()),
    }
}

impl State<'_> {
    fn pkg(&mut self, id: usize) -> Result<&Package, AptError> {
        if !self.cache.contains_key(&id) {
            let p = self.u.package(id)?;
            self.cache.insert(id, p);
        }
        Ok(&self.cache[&id])
    }

    fn arch_ok(&self, p: &Package, rel: &Relation) -> bool {
        let native = p.arch == self.u.arch() || p.arch == "all";
        match &rel.arch {
            ArchQual::None | ArchQual::Native => native,
            ArchQual::Any => p.multi_arch == MultiArch::Allowed,
            ArchQual::Named(a) => &p.arch == a || p.arch == "all",
        }
    }

    /// Whether `p` satisfies `rel` directly or through a Provides entry.
    fn provides(&self, p: &Package, rel: &Relation) -> bool {
        if p.name == rel.name {
            return self.arch_ok(p, rel) && rel.accepts(&p.version);
        }
        p.provides.iter().any(|pr| {
            pr.name == rel.name
                && match (&rel.constraint, &pr.constraint) {
                    (None, _) => true,
                    (Some(_), Some((crate::relation::Op::Eq, v))) => rel.accepts(v),
                    (Some(_), _) => false,
                }
                && (!matches!(rel.arch, ArchQual::Any) || p.multi_arch != MultiArch::No)
        })
    }

    /// A selected package satisfying `rel`, if any.
    fn satisfied(&mut self, rel: &Relation) -> Result<Option<usize>, AptError> {
        let mut ids: Vec<usize> = Vec::new();
        if let Some(&id) = self.selected.get(&rel.name) {
            ids.push(id);
        }
        ids.extend(
            self.u
                .providers(&rel.name)
                .into_iter()
                .filter(|id| self.selected.values().any(|s| s == id)),
        );
        for id in ids {
            self.pkg(id)?;
            if self.provides(&self.cache[&id], rel) {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Candidates for one relation, best first: real packages newest first, then providers by
    /// priority and name.
    fn candidates(&mut self, rel: &Relation) -> Result<Vec<usize>, AptError> {
        let mut real: Vec<usize> = self.u.named(&rel.name);
        for &id in &real {
            self.pkg(id)?;
        }
        real.retain(|id| self.provides(&self.cache[id], rel));
        real.sort_by(|a, b| {
            let (pa, pb) = (&self.cache[a], &self.cache[b]);
            pb.version
                .cmp(&pa.version)
                .then(pa.repo.cmp(&pb.repo))
                .then(a.cmp(b))
        });
        if !self.prefer.is_empty() {
            // The versions a preference fits first; a stable sort keeps the order above within
            // each part, and asks each candidate once.
            real.sort_by_cached_key(|id| {
                let p = &self.cache[id];
                let fits = self
                    .prefer
                    .get(p.name.as_str())
                    .is_none_or(|pr| pr.fits(&p.version.to_string()));
                !fits
            });
        }
        let mut virt: Vec<usize> = self.u.providers(&rel.name);
        for &id in &virt {
            self.pkg(id)?;
        }
        virt.retain(|id| self.provides(&self.cache[id], rel));
        virt.sort_by(|a, b| {
            let (pa, pb) = (&self.cache[a], &self.cache[b]);
            (pa.priority, &pa.name)
                .cmp(&(pb.priority, &pb.name))
                .then(pb.version.cmp(&pa.version))
                .then(pa.repo.cmp(&pb.repo))
        });
        real.extend(virt);
        Ok(real)
    }

    /// Pick the first installable candidate across the alternatives, or say why none is.
    fn choose(&mut self, group: &[Relation]) -> Result<Result<usize, String>, AptError> {
        let mut reasons = Vec::new();
        for rel in group {
            let cands = self.candidates(rel)?;
            if cands.is_empty() {
                reasons.push(format!("which no repository provides{}", self.near(rel)));
                continue;
            }
            for id in cands {
                let name = self.cache[&id].name.clone();
                if let Some(&sel) = self.selected.get(&name) {
                    let v = self.cache[&sel].version.clone();
                    reasons.push(format!("but `{name} {v}` is already selected"));
                    continue;
                }
                match self.conflict(id)? {
                    Some(c) => reasons.push(c),
                    None => return Ok(Ok(id)),
                }
            }
        }
        reasons.dedup();
        Ok(Err(reasons.join("; ")))
    }

    /// What exists under that name, for messages.
    fn near(&mut self, rel: &Relation) -> String {
        let mut versions: Vec<String> = Vec::new();
        for id in self.u.named(&rel.name) {
            if let Ok(p) = self.pkg(id) {
                versions.push(p.version.to_string());
            }
        }
        if versions.is_empty() {
            String::new()
        } else {
            format!(" (available: {})", versions.join(", "))
        }
    }

    /// A conflict between candidate `id` and the selected set, described.
    fn conflict(&mut self, id: usize) -> Result<Option<String>, AptError> {
        let sel: Vec<usize> = self.selected.values().copied().collect();
        for sid in sel {
            self.pkg(sid)?;
            let (c, s) = (&self.cache[&id], &self.cache[&sid]);
            for (a, b) in [(c, s), (s, c)] {
                for rel in a.conflicts.iter().chain(&a.breaks) {
                    if a.name != b.name && self.provides(b, rel) {
                        return Ok(Some(format!(
                            "but `{} {}` conflicts with `{} {}`",
                            a.name, a.version, b.name, b.version
                        )));
                    }
                }
            }
        }
        Ok(None)
    }

    fn chain(&self, name: &str) -> String {
        let mut parts = Vec::new();
        let mut cur = name.to_string();
        while let Some(Some((parent, rel))) = self.why.get(&cur) {
            parts.push(format!("`{parent}` depends on `{rel}`, "));
            cur = parent.clone();
            if parts.len() > 64 {
                break;
            }
        }
        parts.reverse();
        parts.concat()
    }

    fn root_of(&self, name: &str) -> String {
        let mut cur = name.to_string();
        for _ in 0..1000 {
            match self.why.get(&cur) {
                Some(Some((parent, _))) => cur = parent.clone(),
                _ => break,
            }
        }
        cur
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_take_names_versions_relations_and_alternatives() {
        let r = |t: &str| {
            root_relations(t).map(|g| g.iter().map(|r| r.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(r("libc6").unwrap(), ["libc6"]);
        assert_eq!(
            r("libnccl2=2.21.5-1+cuda12.4").unwrap(),
            ["libnccl2 (= 2.21.5-1+cuda12.4)"]
        );
        assert_eq!(r("python3 (>= 3.11)").unwrap(), ["python3 (>= 3.11)"]);
        assert_eq!(
            r("cuda-cudart-12-4 | libcudart12=12.4.131~12.4.1-1").unwrap(),
            ["cuda-cudart-12-4", "libcudart12 (= 12.4.131~12.4.1-1)"]
        );
        for bad in ["", "a, b", "a (>> ", "a | ", "(= 1)"] {
            assert!(r(bad).is_err(), "{bad:?}");
        }
    }
}
