//! The resolver: pubgrub over PEP 440 version ranges, packages being a distribution or one of
//! its extras (an extra depends on its distribution at the same version, as uv models it).
//! Candidates are a project's versions that have a wheel the image takes (`target`), newest
//! first, final releases before pre-releases (a pre-release only where asked for, by `--pre`
//! or a specifier naming one, or where nothing else fits), yanked files only for an exact
//! `==` pin, and only files whose sha256 a `--hash` allows when the requirement has hashes.
//! Dependencies come from each chosen wheel's metadata (never its body), markers evaluated
//! for the image; constraints narrow whatever requires their package, and a requirement whose
//! versions on the index a constraint rules out every one of makes its requirer unusable with
//! a fact naming both (the requirement, the constraint and where it was written).
//! A version is chosen only once its metadata is read and usable (it names the version and
//! admits the image's Python): one that is not is skipped and counted ([`Skipped`]), never
//! made a fact of the derivation, so what a hostile index lists costs one metadata read per
//! version, within the resolution's [`Meter`] (reads, wall time, and the segments of the
//! ranges versions are chosen from: pubgrub's memory grows with them).
//! Must never pick a file the image cannot install, and never build from source.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use pep440_rs::{Operator, Version, VersionSpecifier, VersionSpecifiers};
use pep508_rs::{ExtraName, PackageName, VersionOrUrl};
use pubgrub::{Dependencies, DependencyProvider, PackageResolutionStatistics};
use version_ranges::Ranges;

use super::budget::Meter;
use super::client::{Client, Project};
use super::filename::{sdist_version, WheelName};
use super::metadata::CoreMetadata;
use super::page::DistFile;
use super::request::{PythonRequest, Requirement};
use super::target::Target;
use super::PypiError;

pub type Range = Ranges<Version>;

/// A wheel's metadata and its size when learnt on the way.
pub type Meta = (CoreMetadata, Option<u64>);

/// A pubgrub package.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pkg {
    /// The profile's requirements.
    Root,
    Dist(PackageName),
    Extra(PackageName, ExtraName),
}

/// How many versions a fact about a constraint names.
const NAMED_VERSIONS: usize = 3;

/// How the root reads in explanations.
pub const ROOT: &str = "the profile";

impl std::fmt::Display for Pkg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pkg::Root => f.write_str(ROOT),
            Pkg::Dist(n) => write!(f, "{n}"),
            Pkg::Extra(n, e) => write!(f, "{n}[{e}]"),
        }
    }
}

impl Pkg {
    pub fn name(&self) -> Option<&PackageName> {
        match self {
            Pkg::Root => None,
            Pkg::Dist(n) | Pkg::Extra(n, _) => Some(n),
        }
    }
}

/// A version the image can install: its best wheel.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub version: Version,
    pub file: DistFile,
    /// The index (name) it came from.
    pub index: String,
    pub yanked: bool,
}

/// Why a version of a project is not a candidate, for explanations.
#[derive(Debug, Clone, Default)]
pub struct Excluded {
    /// Source distributions only.
    pub sdist_only: bool,
    /// Tags of wheels the image does not take.
    pub other_tags: BTreeSet<String>,
    /// `Requires-Python` of the files the interpreter fails.
    pub requires_python: BTreeSet<String>,
    /// Wheels whose sha256 no `--hash` allows.
    pub hash_refused: bool,
}

/// A project's candidates and what was left out.
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    /// Newest first.
    pub versions: Vec<Candidate>,
    pub excluded: BTreeMap<Version, Excluded>,
    pub searched: Vec<String>,
    pub listed: usize,
    /// Versions (without a local part) that candidates with a local part extend.
    pub with_local: BTreeSet<Version>,
}

/// The versions of one project skipped because their metadata is unusable, with why.
#[derive(Debug, Clone, Default)]
pub struct Skipped {
    pub versions: BTreeMap<Version, String>,
}

pub struct Provider<'p, 'a> {
    pub client: &'p Client<'a>,
    pub target: &'p Target,
    pub request: &'a PythonRequest,
    /// The profile's requirements whose markers hold for the image.
    root: Vec<&'a pep508_rs::Requirement>,
    /// Constraints whose markers hold, by package.
    constraints: HashMap<PackageName, Vec<&'a Requirement>>,
    /// Versions the profile pins with `==` (yanked files are candidates for them).
    exact: HashMap<PackageName, BTreeSet<Version>>,
    /// Packages whose specifiers name a pre-release.
    pre: BTreeSet<PackageName>,
    candidates: RefCell<HashMap<PackageName, Rc<Candidates>>>,
    pub metadata: RefCell<HashMap<(PackageName, Version), Rc<Meta>>>,
    /// Versions skipped for unusable metadata, by project.
    pub skipped: RefCell<HashMap<PackageName, Skipped>>,
    /// What the resolution has spent of its budget.
    pub meter: Meter,
    order: RefCell<HashMap<Pkg, usize>>,
}

/// The range of PEP 440 specifiers. `==V` (no wildcard, no local part) also takes `V+local`
/// as PEP 440 says (pubgrub's conversion would not) when `has_local(V)`: the project lists
/// such versions (else the plain singleton, which explains itself better).
pub fn range_of(specifiers: &VersionSpecifiers, has_local: &dyn Fn(&Version) -> bool) -> Range {
    let mut r = Range::full();
    for s in specifiers.iter() {
        r = r.intersection(&range_of_one(s, has_local));
    }
    r
}

fn range_of_one(s: &VersionSpecifier, has_local: &dyn Fn(&Version) -> bool) -> Range {
    let v = s.version();
    let plain = v.local().is_empty() && v.post().is_none() && v.dev().is_none();
    let exact = || {
        if plain && has_local(v) {
            let upper = v.clone().with_post(Some(0)).with_dev(Some(0));
            Range::from_range_bounds(v.clone()..upper)
        } else {
            Range::singleton(v.clone())
        }
    };
    match s.operator() {
        Operator::Equal => exact(),
        Operator::NotEqual => exact().complement(),
        _ => Range::from(s.clone()),
    }
}

/// A requirement that names a URL is refused.
fn no_url(r: &pep508_rs::Requirement) -> Result<(), String> {
    match &r.version_or_url {
        Some(VersionOrUrl::Url(u)) => Err(format!(
            "`{}` names the URL `{u}`; gpuimg takes wheels from indexes only",
            r.name
        )),
        _ => Ok(()),
    }
}

fn names_prerelease(r: &pep508_rs::Requirement) -> bool {
    matches!(&r.version_or_url, Some(VersionOrUrl::VersionSpecifier(s)) if s.iter().any(|s| s.version().any_prerelease()))
}

impl<'p, 'a> Provider<'p, 'a> {
    pub fn new(
        client: &'p Client<'a>,
        target: &'p Target,
        request: &'a PythonRequest,
    ) -> Result<Self, PypiError> {
        let mut root = Vec::new();
        let mut exact: HashMap<PackageName, BTreeSet<Version>> = HashMap::new();
        let mut pre = BTreeSet::new();
        for r in &request.requirements {
            let req = &r.requirement;
            if !req.evaluate_markers(&target.markers, &[]) {
                continue;
            }
            no_url(req).map_err(|m| PypiError::bad(&r.origin, m))?;
            if let Some(VersionOrUrl::VersionSpecifier(s)) = &req.version_or_url {
                for s in s.iter() {
                    if matches!(s.operator(), Operator::Equal | Operator::ExactEqual) {
                        exact
                            .entry(req.name.clone())
                            .or_default()
                            .insert(s.version().clone());
                    }
                }
            }
            if names_prerelease(req) {
                pre.insert(req.name.clone());
            }
            root.push(req);
        }
        let mut constraints: HashMap<PackageName, Vec<&Requirement>> = HashMap::new();
        for c in &request.constraints {
            let req = &c.requirement;
            if !req.evaluate_markers(&target.markers, &[]) {
                continue;
            }
            no_url(req).map_err(|m| PypiError::bad(&c.origin, m))?;
            if names_prerelease(req) {
                pre.insert(req.name.clone());
            }
            constraints.entry(req.name.clone()).or_default().push(c);
        }
        Ok(Provider {
            client,
            target,
            request,
            root,
            constraints,
            exact,
            pre,
            candidates: RefCell::default(),
            metadata: RefCell::default(),
            skipped: RefCell::default(),
            meter: Meter::new(request.budget),
            order: RefCell::default(),
        })
    }

    /// The root's dependencies (the profile's requirements whose markers hold).
    pub fn root_packages(&self) -> Vec<PackageName> {
        self.root.iter().map(|r| r.name.clone()).collect()
    }

    /// The range `r` asks for, narrowed by the constraints on its package.
    fn range(&self, r: &pep508_rs::Requirement) -> Result<Range, String> {
        let mut range = self.own_range(r)?;
        for c in self.constraints.get(&r.name).into_iter().flatten() {
            if let Some(VersionOrUrl::VersionSpecifier(s)) = &c.requirement.version_or_url {
                range = range.intersection(&range_of(s, &|v| self.has_local(&r.name, v)));
            }
        }
        Ok(range)
    }

    /// The range `r` asks for by itself.
    fn own_range(&self, r: &pep508_rs::Requirement) -> Result<Range, String> {
        no_url(r)?;
        Ok(match &r.version_or_url {
            Some(VersionOrUrl::VersionSpecifier(s)) => range_of(s, &|v| self.has_local(&r.name, v)),
            _ => Range::full(),
        })
    }

    fn has_local(&self, name: &PackageName, v: &Version) -> bool {
        self.candidates(name)
            .is_ok_and(|c| c.with_local.contains(v))
    }

    /// Why `r` cannot be met under the constraints on its package, when the index has versions
    /// `r` admits and the constraints rule out every one of them: the requirement, those
    /// versions (newest first, a few) and each constraint with where it was written.
    fn ruled_out(&self, r: &pep508_rs::Requirement) -> Result<Option<String>, PypiError> {
        let Some(cs) = self.constraints.get(&r.name) else {
            return Ok(None);
        };
        let (Ok(own), Ok(narrowed)) = (self.own_range(r), self.range(r)) else {
            return Ok(None);
        };
        let cands = self.candidates(&r.name)?;
        let takes = |c: &&Candidate| !c.yanked || self.yank_ok(&r.name, &c.version);
        let admitted: Vec<&Version> = cands
            .versions
            .iter()
            .filter(takes)
            .filter(|c| own.contains(&c.version))
            .map(|c| &c.version)
            .collect();
        if admitted.is_empty() || admitted.iter().any(|v| narrowed.contains(v)) {
            return Ok(None);
        }
        let mut shown: Vec<String> = admitted
            .iter()
            .take(NAMED_VERSIONS)
            .map(|v| format!("`{} {v}`", r.name))
            .collect();
        if admitted.len() > NAMED_VERSIONS {
            shown.push(format!("{} more", admitted.len() - NAMED_VERSIONS));
        }
        let constraints: Vec<String> = cs
            .iter()
            .map(|c| format!("`{}` ({})", c.text, c.origin))
            .collect();
        Ok(Some(format!(
            "because its requirement `{r}` admits only {} on the index, and the constraint {} rules out every one",
            shown.join(", "),
            constraints.join(" and ")
        )))
    }

    /// `name`'s candidates (memoised).
    pub fn candidates(&self, name: &PackageName) -> Result<Rc<Candidates>, PypiError> {
        if let Some(c) = self.candidates.borrow().get(name) {
            return Ok(c.clone());
        }
        let project = self.client.project(name)?;
        let c = Rc::new(self.build_candidates(&project));
        self.candidates.borrow_mut().insert(name.clone(), c.clone());
        Ok(c)
    }

    fn build_candidates(&self, project: &Project) -> Candidates {
        let name = &project.name;
        let allowed = self.request.hashes.get(name);
        let mut best: BTreeMap<Version, (usize, Reverse<Option<u64>>, Candidate)> = BTreeMap::new();
        let mut excluded: BTreeMap<Version, Excluded> = BTreeMap::new();
        for (file, index) in &project.files {
            let Some(w) = WheelName::parse(&file.filename) else {
                if let Some(v) = sdist_version(&file.filename, name) {
                    excluded.entry(v).or_default().sdist_only = true;
                }
                continue;
            };
            if &w.name != name {
                continue;
            }
            let ex = || Excluded {
                sdist_only: false,
                ..Excluded::default()
            };
            if let Some(rp) = &file.requires_python {
                if !rp.contains(&self.target.python) {
                    excluded
                        .entry(w.version.clone())
                        .or_insert_with(ex)
                        .requires_python
                        .insert(rp.to_string());
                    continue;
                }
            }
            let Some(rank) = self.target.rank(w.triples()) else {
                excluded
                    .entry(w.version.clone())
                    .or_insert_with(ex)
                    .other_tags
                    .insert(w.tag_text());
                continue;
            };
            if let Some(allowed) = allowed {
                if !file.sha256.is_some_and(|d| allowed.contains(&d)) {
                    excluded
                        .entry(w.version.clone())
                        .or_insert_with(ex)
                        .hash_refused = true;
                    continue;
                }
            }
            let cand = Candidate {
                version: w.version.clone(),
                file: file.clone(),
                index: index.clone(),
                yanked: file.yanked.is_some(),
            };
            // Preferred: a file not yanked, the better tag, the higher build number.
            let key = (
                rank + if cand.yanked { 1 << 20 } else { 0 },
                Reverse(w.build.as_ref().map(|b| b.0)),
            );
            match best.get(&w.version) {
                Some((r, b, _)) if (*r, *b) <= key => {}
                _ => {
                    best.insert(w.version.clone(), (key.0, key.1, cand));
                }
            }
        }
        for v in best.keys() {
            if let Some(e) = excluded.get_mut(v) {
                // A version with a usable wheel is not "sdist only".
                e.sdist_only = false;
            }
        }
        let with_local = best
            .keys()
            .filter(|v| v.is_local())
            .map(|v| v.clone().without_local())
            .collect();
        Candidates {
            with_local,
            versions: best.into_values().rev().map(|(_, _, c)| c).collect(),
            excluded,
            searched: project.searched.clone(),
            listed: project.files.len(),
        }
    }

    /// The candidate of `name` at `version`.
    pub fn candidate(&self, name: &PackageName, version: &Version) -> Option<Candidate> {
        let c = self.candidates.borrow().get(name)?.clone();
        // Newest first, one candidate per version.
        let i = c
            .versions
            .binary_search_by(|x| version.cmp(&x.version))
            .ok()?;
        c.versions.get(i).cloned()
    }

    /// Metadata of `name`'s candidate `version` (memoised).
    pub fn metadata_of(&self, name: &PackageName, version: &Version) -> Result<Rc<Meta>, String> {
        let key = (name.clone(), version.clone());
        if let Some(m) = self.metadata.borrow().get(&key) {
            return Ok(m.clone());
        }
        let cand = self
            .candidate(name, version)
            .ok_or_else(|| format!("{name} {version} is not a candidate"))?;
        let m = Rc::new(self.client.metadata(&cand.file)?);
        self.metadata.borrow_mut().insert(key, m.clone());
        Ok(m)
    }

    /// Whether `name`'s candidate `version` has usable metadata: read (one read of the budget
    /// when not read before), naming that version, admitting the image's Python. An unusable
    /// one is recorded in [`Provider::skipped`]; `Err` only when the budget is spent.
    fn usable(&self, name: &PackageName, version: &Version) -> Result<bool, PypiError> {
        if self
            .skipped
            .borrow()
            .get(name)
            .is_some_and(|s| s.versions.contains_key(version))
        {
            return Ok(false);
        }
        let known = self
            .metadata
            .borrow()
            .contains_key(&(name.clone(), version.clone()));
        if !known {
            self.meter.spend_read()?;
        }
        let why = match self.metadata_of(name, version) {
            Err(why) => Some(why),
            Ok(m) => self.unusable(name, version, &m.0),
        };
        match why {
            None => Ok(true),
            Some(why) => {
                self.skipped
                    .borrow_mut()
                    .entry(name.clone())
                    .or_default()
                    .versions
                    .insert(version.clone(), why);
                Ok(false)
            }
        }
    }

    /// Why the metadata read for `name` `version` rules that version out, if it does.
    fn unusable(
        &self,
        name: &PackageName,
        version: &Version,
        meta: &CoreMetadata,
    ) -> Option<String> {
        if &meta.name != name || &meta.version != version {
            return Some(format!(
                "its metadata names `{} {}`",
                meta.name, meta.version
            ));
        }
        match &meta.requires_python {
            Some(rp) if !rp.contains(&self.target.python) => Some(format!(
                "it requires Python {rp} and the image has {}",
                self.target.python
            )),
            _ => None,
        }
    }

    /// Whether a yanked `version` of `name` may be chosen (the profile pins it exactly).
    fn yank_ok(&self, name: &PackageName, version: &Version) -> bool {
        self.exact.get(name).is_some_and(|vs| {
            vs.iter()
                .any(|v| v == version || v == &version.clone().without_local())
        })
    }

    /// The dependencies a requirement list gives under `extras`, as pubgrub constraints.
    fn add_requirement(
        &self,
        out: &mut BTreeMap<Pkg, Range>,
        r: &pep508_rs::Requirement,
        this: &PackageName,
    ) -> Result<(), String> {
        let range = self.range(r)?;
        let mut add = |p: Pkg| {
            let e = out.entry(p).or_insert_with(Range::full);
            *e = e.intersection(&range);
        };
        if &r.name != this || !r.extras.is_empty() {
            add(Pkg::Dist(r.name.clone()));
        }
        for e in &r.extras {
            add(Pkg::Extra(r.name.clone(), e.clone()));
        }
        Ok(())
    }

    fn note_order(&self, p: &Pkg) {
        let mut o = self.order.borrow_mut();
        let n = o.len();
        o.entry(p.clone()).or_insert(n);
    }
}

impl DependencyProvider for Provider<'_, '_> {
    type P = Pkg;
    type V = Version;
    type VS = Range;
    type M = String;
    /// (class, conflicts, earlier first)
    type Priority = (u8, u32, Reverse<usize>);
    type Err = PypiError;

    fn prioritize(
        &self,
        package: &Pkg,
        range: &Range,
        stats: &PackageResolutionStatistics,
    ) -> Self::Priority {
        self.note_order(package);
        let class = match package {
            Pkg::Root => 3,
            _ if range.as_singleton().is_some() => 2,
            _ => 1,
        };
        let order = self
            .order
            .borrow()
            .get(package)
            .copied()
            .unwrap_or(usize::MAX);
        (class, stats.conflict_count(), Reverse(order))
    }

    fn choose_version(&self, package: &Pkg, range: &Range) -> Result<Option<Version>, PypiError> {
        let Some(name) = package.name() else {
            return Ok(Some(Version::new([0])));
        };
        self.meter
            .spend_range(name.as_ref(), range.iter().count() as u64)?;
        let cands = self.candidates(name)?;
        let usable = |c: &&Candidate| {
            range.contains(&c.version) && (!c.yanked || self.yank_ok(name, &c.version))
        };
        // Newest first; final releases before pre-releases unless pre-releases are asked for.
        let allow_pre = self.request.pre || self.pre.contains(name);
        let in_range = || cands.versions.iter().filter(usable);
        let finals = in_range().filter(|c| allow_pre || !c.version.any_prerelease());
        let pres = in_range().filter(|c| !allow_pre && c.version.any_prerelease());
        for c in finals.chain(pres) {
            if self.usable(name, &c.version)? {
                return Ok(Some(c.version.clone()));
            }
        }
        Ok(None)
    }

    fn should_cancel(&self) -> Result<(), PypiError> {
        self.meter.check_time()
    }

    fn get_dependencies(
        &self,
        package: &Pkg,
        version: &Version,
    ) -> Result<Dependencies<Pkg, Range, String>, PypiError> {
        let mut out: BTreeMap<Pkg, Range> = BTreeMap::new();
        let (name, extra) = match package {
            Pkg::Root => {
                let names = self.root_packages();
                self.client.prefetch(&names);
                for r in &self.root {
                    if let Some(why) = self.ruled_out(r)? {
                        return Ok(Dependencies::Unavailable(why));
                    }
                    let range = self.range(r).map_err(|m| PypiError::bad(ROOT, m))?;
                    let mut add = |p: Pkg| {
                        let e = out.entry(p).or_insert_with(Range::full);
                        *e = e.intersection(&range);
                    };
                    add(Pkg::Dist(r.name.clone()));
                    for e in &r.extras {
                        add(Pkg::Extra(r.name.clone(), e.clone()));
                    }
                }
                return Ok(Dependencies::Available(out.into_iter().collect()));
            }
            Pkg::Dist(n) => (n, None),
            Pkg::Extra(n, e) => (n, Some(e)),
        };
        let meta = match self.metadata_of(name, version) {
            Ok(m) => m,
            Err(why) => return Ok(Dependencies::Unavailable(why)),
        };
        let (meta, _) = &*meta;
        if let Some(why) = self.unusable(name, version, meta) {
            return Ok(Dependencies::Unavailable(why));
        }
        let env = &self.target.markers;
        let extras: Vec<ExtraName> = extra.into_iter().cloned().collect();
        // Without an extra, the requirements without one; with one, those it adds.
        let applies = |r: &&pep508_rs::Requirement| match extra {
            None => r.evaluate_markers(env, &[]),
            Some(_) => r.evaluate_markers(env, &extras) && !r.evaluate_markers(env, &[]),
        };
        let requirements: Vec<&pep508_rs::Requirement> =
            meta.requires_dist.iter().filter(applies).collect();
        // The pages of the constrained ones are read now, to check them against their
        // constraints; the rest after, all several at a time.
        let constrained: Vec<PackageName> = requirements
            .iter()
            .filter(|r| self.constraints.contains_key(&r.name))
            .map(|r| r.name.clone())
            .collect();
        self.client.prefetch(&constrained);
        if extra.is_some() {
            out.insert(Pkg::Dist(name.clone()), Range::singleton(version.clone()));
        }
        for r in requirements {
            if let Some(why) = self.ruled_out(r)? {
                return Ok(Dependencies::Unavailable(why));
            }
            if let Err(m) = self.add_requirement(&mut out, r, name) {
                return Ok(Dependencies::Unavailable(m));
            }
        }
        let names: Vec<PackageName> = out.keys().filter_map(|p| p.name().cloned()).collect();
        self.client.prefetch(&names);
        Ok(Dependencies::Available(out.into_iter().collect()))
    }
}
