//! The one cache key builder: every key in the cache (layer records, control fields,
//! resolutions, sketches) is
//! a sha256 over length-prefixed fields, and the first field is always [`KEY_FORMAT`], then
//! the key's purpose.
//!
//! Fields are written as (length as u64 LE, bytes), so no two different field sequences hash
//! the same bytes; lists are prefixed by their count. Only stable encodings go in: strings,
//! integers as little-endian bytes, digests, and enum values by their serde (profile) names
//! ([`serde_name`]); never `Debug` output, whose text may change with any refactor.
//! Changing what a key covers is a one-time miss for every entry, never a wrong hit: bump
//! [`KEY_FORMAT`] or the purpose's own version when an encoding changes meaning.

use sha2::{Digest as _, Sha256};

use crate::digest::Digest;

/// The key-format version every key starts with.
pub const KEY_FORMAT: &str = "gpuimg-key-v2";

/// A key being built: `Key::new("layer-v1").tool_version().str(..)...finish()`.
#[derive(Clone)]
pub struct Key {
    h: Sha256,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key { .. }")
    }
}

impl Key {
    /// A key for `purpose` (e.g. `"layer-v1"`, `"apt-base-v1"`): starts with [`KEY_FORMAT`].
    pub fn new(purpose: &str) -> Key {
        let mut k = Key { h: Sha256::new() };
        k.str(KEY_FORMAT).str(purpose);
        k
    }

    /// Add this gpuimg's version (`CARGO_PKG_VERSION`), for keys of output whose bytes this
    /// version's code decides.
    pub fn tool_version(mut self) -> Key {
        self.str(env!("CARGO_PKG_VERSION"));
        self
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Key {
        self.h.update((b.len() as u64).to_le_bytes());
        self.h.update(b);
        self
    }

    pub fn str(&mut self, s: &str) -> &mut Key {
        self.bytes(s.as_bytes())
    }

    pub fn u64(&mut self, v: u64) -> &mut Key {
        self.bytes(&v.to_le_bytes())
    }

    pub fn u32(&mut self, v: u32) -> &mut Key {
        self.bytes(&v.to_le_bytes())
    }

    pub fn bool(&mut self, v: bool) -> &mut Key {
        self.bytes(&[v as u8])
    }

    pub fn digest(&mut self, d: &Digest) -> &mut Key {
        self.str(&d.hex())
    }

    /// A list's length, before its items (so that lists of lists stay unambiguous).
    pub fn count(&mut self, n: usize) -> &mut Key {
        self.u64(n as u64)
    }

    /// Values by their serde names (e.g. strip classes: `static-libs`), count first.
    pub fn names<T: serde::Serialize>(&mut self, values: &[T]) -> &mut Key {
        self.count(values.len());
        for v in values {
            self.str(&serde_name(v));
        }
        self
    }

    pub fn finish(self) -> Digest {
        Digest::from_bytes(self.h.finalize().into())
    }
}

/// The serde name of a unit enum value (what a profile spells); the JSON text of anything
/// else, which serde keeps stable for plain values.
pub fn serde_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(e) => format!("<unserializable: {e}>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_length_prefixed_so_boundaries_matter() {
        let a = {
            let mut k = Key::new("t");
            k.str("ab").str("c");
            k.finish()
        };
        let b = {
            let mut k = Key::new("t");
            k.str("a").str("bc");
            k.finish()
        };
        let c = {
            let mut k = Key::new("t");
            k.str("abc");
            k.finish()
        };
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_ne!(b, c);
    }

    #[test]
    fn purpose_version_and_every_field_change_the_key() {
        let base = |purpose: &str, v: bool, n: u64| {
            let mut k = Key::new(purpose);
            if v {
                k = k.tool_version();
            }
            k.u64(n);
            k.finish()
        };
        let keys = [
            base("x", false, 1),
            base("y", false, 1),
            base("x", true, 1),
            base("x", false, 2),
        ];
        for i in 0..keys.len() {
            for j in i + 1..keys.len() {
                assert_ne!(keys[i], keys[j], "{i} vs {j}");
            }
        }
        assert_eq!(base("x", true, 7), base("x", true, 7), "deterministic");
    }

    #[test]
    fn the_format_version_comes_first_and_lists_are_counted() {
        let mut manual = Sha256::new();
        for f in [KEY_FORMAT.as_bytes(), b"p"] {
            manual.update((f.len() as u64).to_le_bytes());
            manual.update(f);
        }
        assert_eq!(
            Key::new("p").finish(),
            Digest::from_bytes(manual.finalize().into())
        );
        let two = |a: &[&str], b: &[&str]| {
            let mut k = Key::new("l");
            k.names(a).names(b);
            k.finish()
        };
        assert_ne!(two(&["a", "b"], &[]), two(&["a"], &["b"]));
    }

    #[test]
    fn enums_hash_by_their_profile_names() {
        /// Spelled as the profile's `strip:` classes are (kebab-case serde names).
        #[derive(serde::Serialize)]
        #[serde(rename_all = "kebab-case")]
        enum StripClass {
            StaticLibs,
            DebugSymbols,
            Docs,
        }
        assert_eq!(serde_name(&StripClass::StaticLibs), "static-libs");
        assert_eq!(serde_name(&StripClass::DebugSymbols), "debug-symbols");
        assert_eq!(serde_name(&StripClass::Docs), "docs");
        assert_eq!(serde_name(&3u8), "3");
    }
}
