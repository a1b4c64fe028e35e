//! Canonical JSON: object keys sorted at every level, two-space indentation, so the same lock
//! is the same bytes on every machine whatever map type produced it.

use serde_json::{Map, Value};

fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), sorted(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// `v` as pretty JSON with sorted keys.
pub fn canonical_json(v: &Value) -> String {
    // A Value always serialises; fall back to compact output rather than panic.
    let s = sorted(v);
    serde_json::to_string_pretty(&s).unwrap_or_else(|_| s.to_string())
}
