//! A package index's map: where each stanza of one architecture lies in the decompressed
//! `Packages` text, the package it names, the virtual names it provides and whether it is
//! `Essential: yes` — all the [`Universe`](crate::universe::Universe) needs before the solver
//! asks for a stanza, which is then read from the cached text alone.
//!
//! Kept in the cache's `index-maps-v1` bucket under the index's signed sha256 and the
//! architecture, so a changed request against unchanged indexes resolves without scanning
//! tens of megabytes of text. Used only while its stamp vouches for it (the cache's trust rule:
//! the full check of a map is scanning the text again, so anything else is a miss), and only
//! after [`IndexMap::check`] found it consistent with the file it maps.

use serde::{Deserialize, Serialize};

use gpuimg_store::cache::{Bucket, Cache, Key};
use gpuimg_store::digest::Digest;

/// The stanzas of one decompressed index kept for one architecture, in text order, with the
/// orders a lookup by name needs.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexMap {
    /// Bytes of the text mapped.
    pub len: u64,
    /// Each stanza's first byte.
    pub starts: Vec<u32>,
    /// Each stanza's length (without the blank line that ends it).
    pub lens: Vec<u32>,
    /// Each stanza's `Package`, one per line.
    pub names: String,
    /// The stanzas in name order (text order among equal names).
    pub by_name: Vec<u32>,
    /// (stanza, a name it provides), in name order (text order among equal names).
    pub provides: Vec<(u32, String)>,
    /// The stanzas that say `Essential: yes`.
    pub essential: Vec<u32>,
}

impl IndexMap {
    /// Add one stanza.
    pub fn push(&mut self, start: usize, len: usize, name: &str) -> Result<u32, String> {
        if name.contains('\n') {
            return Err(format!("package name `{name}` spans lines"));
        }
        let id = u32::try_from(self.starts.len()).map_err(|_| "too many stanzas".to_string())?;
        let too_big = |_| "the index is larger than 4 GiB".to_string();
        self.starts.push(u32::try_from(start).map_err(too_big)?);
        self.lens.push(u32::try_from(len).map_err(too_big)?);
        if !self.names.is_empty() || id > 0 {
            self.names.push('\n');
        }
        self.names.push_str(name);
        Ok(id)
    }

    /// Make the name orders, once every stanza is pushed.
    pub fn finish(&mut self) {
        let spans = spans(&self.names);
        let name = |i: &u32| &self.names[spans[*i as usize].0..spans[*i as usize].1];
        let mut by_name: Vec<u32> = (0..self.starts.len() as u32).collect();
        by_name.sort_by(|a, b| name(a).cmp(name(b)));
        self.by_name = by_name;
        self.provides.sort_by(|a, b| a.1.cmp(&b.1));
    }

    /// Where each stanza's name lies in [`IndexMap::names`], if the map is consistent with a
    /// text of `len` bytes: as many names as stanzas, every stanza inside the text, every
    /// index in range, the name orders a permutation in order.
    pub fn check(&self, len: u64) -> Option<Vec<(usize, usize)>> {
        let n = self.starts.len();
        let spans = if n == 0 {
            Vec::new()
        } else {
            spans(&self.names)
        };
        let inside = self
            .starts
            .iter()
            .zip(&self.lens)
            .all(|(&s, &l)| u64::from(s) + u64::from(l) <= len);
        let in_range = |i: &u32| (*i as usize) < n;
        if self.len != len
            || self.lens.len() != n
            || spans.len() != n
            || !inside
            || !self.essential.iter().all(in_range)
            || !self.provides.iter().all(|(i, _)| in_range(i))
            || self.by_name.len() != n
            || !self.by_name.iter().all(in_range)
        {
            return None;
        }
        let name = |i: u32| &self.names[spans[i as usize].0..spans[i as usize].1];
        let mut seen = vec![false; n];
        for &i in &self.by_name {
            if std::mem::replace(&mut seen[i as usize], true) {
                return None;
            }
        }
        let sorted = self.by_name.windows(2).all(|w| name(w[0]) <= name(w[1]))
            && self.provides.windows(2).all(|w| w[0].1 <= w[1].1);
        sorted.then_some(spans)
    }
}

/// (start, end) of each line of `names`.
fn spans(names: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in names.split('\n') {
        out.push((at, at + line.len()));
        at += line.len() + 1;
    }
    out
}

/// The map's key: the decompressed index's sha256, the architecture and this gpuimg (a change
/// to what the universe indexes maps again).
pub fn key(plain: &Digest, arch: &str) -> Digest {
    let mut k = Key::new("apt-index-map-v1").tool_version();
    k.digest(plain).str(arch);
    k.finish()
}

/// The recorded map of the index whose decompressed text has sha256 `plain`, if trusted.
pub fn recorded(cache: &Cache, plain: &Digest, arch: &str) -> Option<IndexMap> {
    let rec = cache
        .read_record(Bucket::IndexMaps, &key(plain, arch))
        .ok()??;
    if !rec.trusted {
        return None;
    }
    serde_json::from_slice(&rec.bytes).ok()
}

/// Record a map (it only saves work next time: a failure is no error).
pub fn remember(cache: &Cache, plain: &Digest, arch: &str, map: &IndexMap) {
    let _ = cache.put_record(Bucket::IndexMaps, &key(plain, arch), map);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_refuses_a_map_that_does_not_fit_its_text() {
        let mut m = IndexMap {
            len: 100,
            ..IndexMap::default()
        };
        m.push(0, 40, "b").unwrap();
        m.push(42, 50, "a").unwrap();
        m.essential.push(1);
        m.provides.push((1, "y".into()));
        m.provides.push((0, "x".into()));
        m.finish();
        assert_eq!(m.by_name, vec![1, 0]);
        assert_eq!(m.provides, vec![(0, "x".into()), (1, "y".into())]);
        assert_eq!(m.check(100), Some(vec![(0, 1), (2, 3)]));
        assert_eq!(m.check(99), None, "another text");
        let mut past = m.clone();
        past.lens[1] = 59;
        assert_eq!(past.check(100), None, "a stanza past the end");
        let mut names = m.clone();
        names.names.push_str("\nc");
        assert_eq!(names.check(100), None, "more names than stanzas");
        let mut ess = m.clone();
        ess.essential.push(2);
        assert_eq!(ess.check(100), None, "an essential stanza out of range");
        let mut prov = m.clone();
        prov.provides.push((5, "z".into()));
        assert_eq!(prov.check(100), None, "a provider out of range");
        let mut order = m.clone();
        order.by_name = vec![0, 1];
        assert_eq!(order.check(100), None, "names out of order");
        let mut twice = m.clone();
        twice.by_name = vec![1, 1];
        assert_eq!(twice.check(100), None, "a stanza twice");
        let mut unsorted = m;
        unsorted.provides.reverse();
        assert_eq!(unsorted.check(100), None, "provided names out of order");
        assert_eq!(IndexMap::default().check(0), Some(vec![]));
    }

    #[test]
    fn an_empty_name_keeps_its_line() {
        let mut m = IndexMap {
            len: 10,
            ..IndexMap::default()
        };
        m.push(0, 1, "").unwrap();
        m.push(2, 1, "b").unwrap();
        m.finish();
        assert_eq!(m.check(10), Some(vec![(0, 0), (1, 2)]));
    }
}
