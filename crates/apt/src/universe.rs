//! Every package the repositories offer for one architecture, indexed by name and by the
//! virtual names they provide. Stanzas are parsed in full only when the solver asks.
//!
//! An index is either scanned from its text (which yields its [`IndexMap`]) or added from a
//! recorded map over the cached text, whose stanzas are then read from the file one at a time.
//! Must never choose between packages (the solver does) or fetch anything.

use std::borrow::Cow;
use std::collections::HashMap;
use std::os::unix::fs::FileExt;

use gpuimg_store::digest::Digest;

use crate::control::{paragraphs, Paragraph};
use crate::index_map::IndexMap;
use crate::relation::{parse_alternatives, parse_list, Relation};
use crate::version::Version;
use crate::AptError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiArch {
    No,
    Same,
    Foreign,
    Allowed,
}

/// One package stanza, parsed.
#[derive(Debug, Clone)]
pub struct Package {
    pub repo: usize,
    pub name: String,
    pub version: Version,
    pub arch: String,
    pub multi_arch: MultiArch,
    pub priority: u8,
    pub pre_depends: Vec<Vec<Relation>>,
    pub depends: Vec<Vec<Relation>>,
    pub provides: Vec<Relation>,
    pub conflicts: Vec<Relation>,
    pub breaks: Vec<Relation>,
    pub filename: String,
    pub size: u64,
    pub sha256: Digest,
}

struct Stanza {
    text: usize,
    start: usize,
    end: usize,
}

/// Where an index's text is: in memory, or in the cache's file of it (read a stanza at a time).
enum Text {
    Memory(String),
    File(std::fs::File),
}

/// An index added from its map: looked up by binary search in the map's name orders.
struct Mapped {
    /// The id of its first stanza.
    first: usize,
    map: IndexMap,
    /// Where each stanza's name lies in `map.names`.
    spans: Vec<(usize, usize)>,
}

impl Mapped {
    fn name(&self, i: u32) -> &str {
        let (a, b) = self.spans[i as usize];
        &self.map.names[a..b]
    }

    fn named(&self, name: &str, out: &mut Vec<usize>) {
        let by = &self.map.by_name;
        let k = by.partition_point(|&i| self.name(i) < name);
        out.extend(
            by[k..]
                .iter()
                .take_while(|&&i| self.name(i) == name)
                .map(|&i| self.first + i as usize),
        );
    }

    fn providers(&self, name: &str, out: &mut Vec<usize>) {
        let p = &self.map.provides;
        let k = p.partition_point(|(_, n)| n.as_str() < name);
        out.extend(
            p[k..]
                .iter()
                .take_while(|(_, n)| n == name)
                .map(|(i, _)| self.first + *i as usize),
        );
    }
}

pub struct Universe {
    /// (repository index, index URL, text) per index file.
    texts: Vec<(usize, String, Text)>,
    stanzas: Vec<Stanza>,
    /// Names and provided names of the indexes scanned from their text.
    by_name: HashMap<String, Vec<usize>>,
    providers: HashMap<String, Vec<usize>>,
    /// The indexes added from their maps.
    mapped: Vec<Mapped>,
    essential: Vec<String>,
    arch: String,
}

impl Universe {
    pub fn new(arch: &str) -> Self {
        Universe {
            texts: Vec::new(),
            stanzas: Vec::new(),
            by_name: HashMap::new(),
            providers: HashMap::new(),
            mapped: Vec::new(),
            essential: Vec::new(),
            arch: arch.to_string(),
        }
    }

    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Add one decompressed `Packages` index of repository `repo`; returns its map (`None`
    /// when it cannot be mapped, e.g. a stanza past 4 GiB).
    pub fn add_index(
        &mut self,
        repo: usize,
        url: &str,
        text: String,
    ) -> Result<Option<IndexMap>, AptError> {
        let t = self.texts.len();
        let base = text.as_ptr() as usize;
        let mut map = Some(IndexMap {
            len: text.len() as u64,
            ..IndexMap::default()
        });
        for para in paragraphs(&text) {
            let para = para.map_err(|line| AptError::InvalidIndex {
                url: url.to_string(),
                message: format!("line {line} is not a field"),
            })?;
            let (Some(name), Some(arch)) = (para.get("Package"), para.get("Architecture")) else {
                return Err(AptError::InvalidIndex {
                    url: url.to_string(),
                    message: "a stanza lacks `Package` or `Architecture`".into(),
                });
            };
            if arch != self.arch && arch != "all" {
                continue;
            }
            let start = para.raw.as_ptr() as usize - base;
            let local = match map.as_mut().map(|m| m.push(start, para.raw.len(), name)) {
                Some(Ok(local)) => Some(local),
                _ => {
                    map = None;
                    None
                }
            };
            let id = self.stanzas.len();
            self.stanzas.push(Stanza {
                text: t,
                start,
                end: start + para.raw.len(),
            });
            self.by_name.entry(name.to_string()).or_default().push(id);
            if let Some(p) = para.get("Provides") {
                for rel in p.split(',') {
                    let n = rel.split(['(', ':']).next().unwrap_or("").trim();
                    if !n.is_empty() {
                        self.providers.entry(n.to_string()).or_default().push(id);
                        if let (Some(m), Some(l)) = (map.as_mut(), local) {
                            m.provides.push((l, n.to_string()));
                        }
                    }
                }
            }
            if para.get("Essential").is_some_and(|v| v == "yes") {
                self.essential.push(name.to_string());
                if let (Some(m), Some(l)) = (map.as_mut(), local) {
                    m.essential.push(l);
                }
            }
        }
        self.texts.push((repo, url.to_string(), Text::Memory(text)));
        if let Some(m) = map.as_mut() {
            m.finish();
        }
        Ok(map)
    }

    /// Add one index of repository `repo` from its recorded `map`, the text staying in `file`
    /// (of `len` bytes). `false` (and nothing added) when the map does not fit the file.
    pub fn add_mapped(
        &mut self,
        repo: usize,
        url: &str,
        file: std::fs::File,
        len: u64,
        map: IndexMap,
    ) -> bool {
        let Some(spans) = map.check(len) else {
            return false;
        };
        let t = self.texts.len();
        let first = self.stanzas.len();
        for (&start, &l) in map.starts.iter().zip(&map.lens) {
            self.stanzas.push(Stanza {
                text: t,
                start: start as usize,
                end: start as usize + l as usize,
            });
        }
        let m = Mapped { first, map, spans };
        for &i in &m.map.essential {
            self.essential.push(m.name(i).to_string());
        }
        self.mapped.push(m);
        self.texts.push((repo, url.to_string(), Text::File(file)));
        true
    }

    /// Names of `Essential: yes` packages, sorted and unique.
    pub fn essential(&self) -> Vec<String> {
        let mut e = self.essential.clone();
        e.sort();
        e.dedup();
        e
    }

    /// Stanza ids of real packages called `name`, in index order.
    pub fn named(&self, name: &str) -> Vec<usize> {
        let mut out = self.by_name.get(name).cloned().unwrap_or_default();
        for m in &self.mapped {
            m.named(name, &mut out);
        }
        out.sort_unstable();
        out
    }

    /// The names of real packages starting with `prefix`, sorted, once each. Scans every name.
    pub fn names_starting(&self, prefix: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .by_name
            .keys()
            .filter(|n| n.starts_with(prefix))
            .cloned()
            .collect();
        for m in &self.mapped {
            for &i in &m.map.by_name {
                let n = m.name(i);
                if n.starts_with(prefix) {
                    out.push(n.to_string());
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Up to three package names of the indexes nearest to `name` (a typo: at most two edits,
    /// or a third of the name), nearest first, then by name. Only asked on an error: it scans
    /// every name once.
    pub fn nearest_names(&self, name: &str) -> Vec<String> {
        let limit = 2.max(name.len() / 3);
        let mut near: Vec<(usize, String)> = Vec::new();
        let mut consider = |cand: &str| {
            if cand != name && cand.len().abs_diff(name.len()) <= limit {
                let d = strsim::damerau_levenshtein(name, cand);
                if d <= limit {
                    near.push((d, cand.to_string()));
                }
            }
        };
        for n in self.by_name.keys().chain(self.providers.keys()) {
            consider(n);
        }
        for m in &self.mapped {
            for &i in &m.map.by_name {
                consider(m.name(i));
            }
        }
        near.sort();
        near.dedup();
        near.into_iter().take(3).map(|(_, n)| n).collect()
    }

    /// Stanza ids of packages that provide `name` (once per `Provides` entry), in index order.
    pub fn providers(&self, name: &str) -> Vec<usize> {
        let mut out = self.providers.get(name).cloned().unwrap_or_default();
        for m in &self.mapped {
            m.providers(name, &mut out);
        }
        out.sort_unstable();
        out
    }

    /// Parse stanza `id` in full.
    pub fn package(&self, id: usize) -> Result<Package, AptError> {
        let s = &self.stanzas[id];
        let (repo, url, text) = &self.texts[s.text];
        let bad = |message: String| AptError::InvalidIndex {
            url: url.clone(),
            message,
        };
        let raw: Cow<'_, str> = match text {
            Text::Memory(t) => Cow::Borrowed(&t[s.start..s.end]),
            Text::File(f) => {
                let mut buf = vec![0; s.end - s.start];
                f.read_exact_at(&mut buf, s.start as u64)
                    .map_err(|e| bad(format!("reading a stanza from the cache: {e}")))?;
                Cow::Owned(String::from_utf8(buf).map_err(|_| bad("a stanza is not UTF-8".into()))?)
            }
        };
        let para: Paragraph<'_> = paragraphs(&raw)
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| bad("unreadable stanza".into()))?;
        let need = |f: &str| {
            para.get(f).ok_or_else(|| {
                bad(format!(
                    "package `{}` has no `{f}` field",
                    para.get("Package").unwrap_or("?")
                ))
            })
        };
        let name = need("Package")?.to_string();
        let ctx = |e: crate::relation::RelationError| bad(format!("package `{name}`: {e}"));
        let alts = |f: &str| para.get(f).map_or(Ok(Vec::new()), parse_alternatives);
        let list = |f: &str| para.get(f).map_or(Ok(Vec::new()), parse_list);
        let version = Version::parse(need("Version")?).map_err(|e| bad(e.to_string()))?;
        let sha256 = Digest::from_hex(need("SHA256")?).map_err(|e| bad(e.to_string()))?;
        let size = need("Size")?
            .parse::<u64>()
            .map_err(|_| bad(format!("package `{name}` has a bad `Size`")))?;
        Ok(Package {
            repo: *repo,
            version,
            arch: need("Architecture")?.to_string(),
            multi_arch: match para.get("Multi-Arch") {
                Some("same") => MultiArch::Same,
                Some("foreign") => MultiArch::Foreign,
                Some("allowed") => MultiArch::Allowed,
                _ => MultiArch::No,
            },
            priority: match para.get("Priority") {
                Some("required") => 0,
                Some("important") => 1,
                Some("standard") => 2,
                Some("optional") => 3,
                _ => 4,
            },
            pre_depends: alts("Pre-Depends").map_err(ctx)?,
            depends: alts("Depends").map_err(ctx)?,
            provides: list("Provides").map_err(ctx)?,
            conflicts: list("Conflicts").map_err(ctx)?,
            breaks: list("Breaks").map_err(ctx)?,
            filename: need("Filename")?.to_string(),
            size,
            sha256,
            name,
        })
    }
}
