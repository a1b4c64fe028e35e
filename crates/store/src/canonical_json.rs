//! Canonical JSON shared by every stage that hashes or commits JSON (image blobs, the lock):
//! object keys sorted at every depth, whatever serde_json's map type (a dependency may turn on
//! its `preserve_order` feature) and whatever map type produced the value (oci-spec uses
//! HashMaps).

use serde_json::{Map, Value};

use crate::digest::Digest;

/// `v` with every object's keys in sorted order.
pub fn sorted(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sorted(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// Compact canonical bytes of `v` and their digest (for content-addressed blobs).
pub fn to_canonical<T: serde::Serialize>(v: &T) -> Result<(Vec<u8>, Digest), serde_json::Error> {
    let bytes = serde_json::to_vec(&sorted(serde_json::to_value(v)?))?;
    let d = Digest::of(&bytes);
    Ok((bytes, d))
}

/// Pretty canonical text of `v` (for files people read, such as the lock).
pub fn canonical_pretty(v: &Value) -> String {
    let s = sorted(v.clone());
    // A Value always serialises; fall back to compact output rather than panic.
    serde_json::to_string_pretty(&s).unwrap_or_else(|_| s.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_sorted_at_every_depth() {
        let mut m = std::collections::HashMap::new();
        m.insert("z", serde_json::json!({"b": 1, "a": [{"d": 1, "c": 2}]}));
        m.insert("a", serde_json::json!(null));
        let (bytes, _) = super::to_canonical(&m).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"a":null,"z":{"a":[{"c":2,"d":1}],"b":1}}"#
        );
    }
}
