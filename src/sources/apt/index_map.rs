//! A package index's map: where each stanza of one architecture lies in the decompressed
//! `Packages` text, the package it names, the virtual names it provides and whether it is
//! `Essential: yes` — all the [`Universe`](super::universe::Universe) needs before the solver
//! asks for a stanza, which is then read from the cached text alone.
//!
//! Kept in the cache's `index-maps-v1` bucket under the index's signed sha256 and the
//! architecture, so a changed request against unchanged indexes resolves without scanning
//! tens of megabytes of text. Used only while its stamp vouches for it (the cache's trust rule:
//! the full check of a map is scanning the text again, so anything else is a miss), and only
//! after [`IndexMap::check`] found it consistent with the file it maps.

use serde::{Deserialize, Serialize};

use crate::cache::{Bucket, Cache, Key};
use crate::digest::Digest;

/// The stanzas of one decompressed index kept for one architecture, in text order.
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
    /// (stanza, a name it provides).
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
        if !self.names.is_empty() {
            self.names.push('\n');
        }
        self.names.push_str(name);
        Ok(id)
    }

    /// The names of the stanzas, in order, if the map is consistent with a text of `len`
    /// bytes: as many names as stanzas, every stanza inside the text, every index in range.
    pub fn check(&self, len: u64) -> Option<Vec<&str>> {
        let n = self.starts.len();
        let names: Vec<&str> = if n == 0 {
            Vec::new()
        } else {
            self.names.split('\n').collect()
        };
        let inside = self
            .starts
            .iter()
            .zip(&self.lens)
            .all(|(&s, &l)| u64::from(s) + u64::from(l) <= len);
        let in_range = |i: &u32| (*i as usize) < n;
        (self.len == len
            && self.lens.len() == n
            && names.len() == n
            && inside
            && self.essential.iter().all(in_range)
            && self.provides.iter().all(|(i, _)| in_range(i)))
        .then_some(names)
    }
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
        m.push(0, 40, "a").unwrap();
        m.push(42, 50, "b").unwrap();
        m.essential.push(1);
        m.provides.push((0, "x".into()));
        assert_eq!(m.check(100), Some(vec!["a", "b"]));
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
        let mut prov = m;
        prov.provides.push((5, "y".into()));
        assert_eq!(prov.check(100), None, "a provider out of range");
        assert_eq!(IndexMap::default().check(0), Some(vec![]));
    }
}
