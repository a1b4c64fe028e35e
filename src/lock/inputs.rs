//! `LockInputs`: the profile keys that resolution and fetching depend on, each as canonical
//! text, and a digest over them. A lock whose inputs differ from the profile's is stale.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::profile::{Base, CompatMode, KernelModule, Profile};

use crate::canonical_json::canonical_pretty as canonical_json;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockInputs {
    /// sha256 over the canonical JSON of `keys`.
    pub digest: Digest,
    /// `stack.cuda` → `"12.4"`, `host.gpus` → `["H100"]`, ... (absent keys are left out).
    pub keys: BTreeMap<String, String>,
}

impl LockInputs {
    pub fn of(profile: &Profile) -> LockInputs {
        let mut keys = BTreeMap::new();
        keys.insert("platform".to_string(), profile.platform.to_string());
        keys.insert(
            "compat".to_string(),
            match profile.compat {
                CompatMode::Strict => "strict",
                CompatMode::Minor => "minor",
                CompatMode::Forward => "forward",
            }
            .to_string(),
        );
        let h = &profile.host;
        if !h.gpus.is_empty() {
            let names: Vec<&str> = h.gpus.iter().map(|g| g.value.as_str()).collect();
            keys.insert(
                "host.gpus".into(),
                serde_json::Value::from(names).to_string(),
            );
        }
        if let Some(d) = &h.driver {
            keys.insert("host.driver".into(), d.value.clone());
        }
        if let Some(k) = &h.kernel {
            keys.insert("host.kernel".into(), k.value.clone());
        }
        keys.insert(
            "host.kernel_module".into(),
            match h.kernel_module {
                KernelModule::Open => "open",
                KernelModule::Proprietary => "proprietary",
                KernelModule::Any => "any",
            }
            .into(),
        );
        let s = &profile.stack;
        for (name, v) in [
            ("cuda", &s.cuda),
            ("cudnn", &s.cudnn),
            ("nccl", &s.nccl),
            ("python", &s.python),
            ("pytorch", &s.pytorch),
            ("tensorflow", &s.tensorflow),
            ("jax", &s.jax),
        ] {
            if let Some(v) = v {
                keys.insert(format!("stack.{name}"), v.value.clone());
            }
        }
        if let Base::Apt(apt) = &profile.base {
            let v = serde_json::to_value(apt.as_ref()).unwrap_or(serde_json::Value::Null);
            keys.insert("base.apt".into(), canonical_json(&v));
        }
        let v = serde_json::to_value(&keys).unwrap_or(serde_json::Value::Null);
        let digest = Digest::of(canonical_json(&v).as_bytes());
        LockInputs { digest, keys }
    }
}
