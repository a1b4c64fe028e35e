//! Canonical JSON: object keys sorted, no insignificant whitespace.
//!
//! oci-spec keeps labels and annotations in HashMaps; rebuilding every object with its keys
//! in sorted order gives the same bytes on every run and machine, whatever serde_json's map
//! type is (a dependency may turn on its `preserve_order` feature).

use serde_json::Value;

use crate::digest::Digest;

pub fn to_canonical<T: serde::Serialize>(v: &T) -> Result<(Vec<u8>, Digest), serde_json::Error> {
    let value = sorted(serde_json::to_value(v)?);
    let bytes = serde_json::to_vec(&value)?;
    let d = Digest::of(&bytes);
    Ok((bytes, d))
}

fn sorted(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
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
