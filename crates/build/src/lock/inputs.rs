//! `LockInputs`: the profile keys that resolution and fetching depend on, each as canonical
//! text, and a digest over them. A lock whose inputs differ from the profile's is stale.
//! `python.requirements` stands for the requirements file's bytes and those of the files it
//! includes (`-r`, `-c`), so an edit to any of them makes the lock stale; index URLs are kept
//! as their digests (they may carry credentials).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::profile::{Base, CompatMode, FindLink, KernelModule, Profile};
use gpuimg_store::digest::Digest;

use gpuimg_store::canonical_json::canonical_pretty as canonical_json;

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
        // One platform keeps the key it always had; an index records the whole list (every
        // platform's pipeline sees the same list, so all compute the same inputs).
        match profile.platforms.as_slice() {
            [_, _, ..] => {
                let names: Vec<String> = profile.platforms.iter().map(|p| p.to_string()).collect();
                keys.insert(
                    "platforms".to_string(),
                    serde_json::Value::from(names).to_string(),
                );
            }
            _ => {
                keys.insert("platform".to_string(), profile.platform.to_string());
            }
        }
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
        if let Some(py) = &profile.python {
            let list = |v: Vec<String>| serde_json::Value::from(v).to_string();
            keys.insert(
                "python.packages".into(),
                list(py.packages.iter().map(|p| p.value.clone()).collect()),
            );
            if let Some((written, path)) = &py.requirements {
                keys.insert(
                    "python.requirements".into(),
                    format!("{} {}", written.value, requirements_digest(path)),
                );
            }
            // Index URLs may carry credentials (`${VAR}` expanded): only their digest is kept.
            let secret = |u: &str| Digest::of(u.as_bytes()).to_string();
            if let Some(i) = &py.index {
                keys.insert("python.index".into(), secret(&i.value));
            }
            if !py.extra_indexes.is_empty() {
                keys.insert(
                    "python.extra-indexes".into(),
                    list(
                        py.extra_indexes
                            .iter()
                            .map(|(n, u)| format!("{n}={}", secret(&u.value)))
                            .collect(),
                    ),
                );
            }
            if !py.find_links.is_empty() {
                keys.insert(
                    "python.find-links".into(),
                    list(
                        py.find_links
                            .iter()
                            .map(|f| match f {
                                FindLink::Url(u) => secret(&u.value),
                                FindLink::Dir(d) => d.display().to_string(),
                            })
                            .collect(),
                    ),
                );
            }
        }
        let v = serde_json::to_value(&keys).unwrap_or(serde_json::Value::Null);
        let digest = Digest::of(canonical_json(&v).as_bytes());
        LockInputs { digest, keys }
    }
}

/// Files one requirements file may pull in through includes, at most.
const MAX_INCLUDES: usize = 64;
/// Bytes read of one requirements file.
const MAX_REQUIREMENTS_BYTES: u64 = 4 << 20;

/// A digest over the requirements file at `path` and every file it includes (`-r`, `-c`,
/// `--requirement`, `--constraint`, relative to the including file), in the order met. A file
/// that cannot be read counts as its error text: the lock is then stale, and resolution
/// names the problem.
fn requirements_digest(path: &std::path::Path) -> Digest {
    use std::io::Read;
    let mut all = Vec::new();
    let mut todo = vec![path.to_path_buf()];
    let mut seen = std::collections::BTreeSet::new();
    while let Some(p) = todo.pop() {
        if seen.len() >= MAX_INCLUDES || !seen.insert(p.clone()) {
            continue;
        }
        let mut text = String::new();
        let read = fs_err::File::open(&p)
            .and_then(|f| f.take(MAX_REQUIREMENTS_BYTES).read_to_string(&mut text));
        all.extend(p.display().to_string().into_bytes());
        all.push(0);
        match read {
            Ok(_) => all.extend(text.as_bytes()),
            Err(e) => all.extend(format!("unreadable: {e}").into_bytes()),
        }
        all.push(0);
        let dir = p.parent().map(|d| d.to_path_buf()).unwrap_or_default();
        let mut includes = Vec::new();
        for line in text.lines() {
            let line = line.split(" #").next().unwrap_or_default().trim();
            for opt in ["--requirement", "--constraint", "-r", "-c"] {
                if let Some(rest) = line.strip_prefix(opt) {
                    let target = rest.trim_start_matches('=').trim();
                    if !target.is_empty() && (rest.starts_with([' ', '=', '\t']) || opt.len() == 2)
                    {
                        includes.push(dir.join(target));
                    }
                    break;
                }
            }
        }
        // Depth first, in file order.
        todo.extend(includes.into_iter().rev());
    }
    Digest::of(&all)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_edit_to_an_included_requirements_file_changes_the_digest() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path().join("requirements.txt");
        std::fs::write(&top, "requests>=2\n-r more.txt\n--constraint=c.txt\n").unwrap();
        std::fs::write(d.path().join("more.txt"), "idna\n").unwrap();
        std::fs::write(d.path().join("c.txt"), "urllib3<3\n").unwrap();
        let a = super::requirements_digest(&top);
        assert_eq!(a, super::requirements_digest(&top));
        std::fs::write(d.path().join("c.txt"), "urllib3<2\n").unwrap();
        let b = super::requirements_digest(&top);
        assert_ne!(a, b, "a constraint file is covered");
        std::fs::write(d.path().join("more.txt"), "idna==3.7\n").unwrap();
        assert_ne!(
            b,
            super::requirements_digest(&top),
            "an included file is covered"
        );
    }
}
