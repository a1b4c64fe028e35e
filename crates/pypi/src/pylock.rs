//! `python.requirements` given as a PEP 751 lock (`pylock.toml`, `pylock.NAME.toml`): each
//! `[[packages]]` entry becomes an exact pin (`name==version`, with its `marker`) whose
//! `wheels` sha256s are its only allowed files, so resolution re-derives exactly the locked set
//! for the image (hash-checking mode) and fails if it is not complete.
//! Must never take a package from a URL the file names (`vcs`, `directory`, `archive` entries
//! are refused): wheels come from the configured indexes, checked against the file's hashes.

use std::path::Path;
use std::str::FromStr;

use gpuimg_store::digest::Digest;

use super::requirements::{Line, Parsed, MAX_FILE_BYTES};
use super::PypiError;

/// Whether `path` names a PEP 751 lock file.
pub fn is_pylock(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("pylock.") && n.ends_with(".toml"))
}

pub fn read(path: &Path) -> Result<Parsed, PypiError> {
    use std::io::Read;
    let shown = path.display().to_string();
    let mut text = String::new();
    fs_err::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_string(&mut text))
        .map_err(|source| PypiError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    let bad = |m: String| PypiError::bad(&shown, m);
    let doc = text.parse::<toml_edit::DocumentMut>().map_err(|e| {
        bad(format!(
            "not TOML: {}",
            e.to_string().lines().next().unwrap_or("")
        ))
    })?;
    match doc.get("lock-version").and_then(|v| v.as_str()) {
        Some(v) if v.split('.').next() == Some("1") => {}
        other => {
            return Err(bad(format!(
                "`lock-version` is {other:?}; gpuimg reads version 1 locks"
            )))
        }
    }
    let packages = doc
        .get("packages")
        .and_then(|p| p.as_array_of_tables())
        .ok_or_else(|| bad("no `[[packages]]`".into()))?;
    let mut out = Parsed {
        require_hashes: true,
        ..Parsed::default()
    };
    for (i, p) in packages.iter().enumerate() {
        let origin = format!("{shown}: packages[{i}]");
        let get = |k: &str| p.get(k).and_then(|v| v.as_str());
        let name = get("name").ok_or_else(|| PypiError::bad(&origin, "no `name`"))?;
        for refused in ["vcs", "directory", "archive"] {
            if p.contains_key(refused) {
                return Err(PypiError::bad(
                    &origin,
                    format!(
                        "`{name}` comes from a `{refused}`; gpuimg installs wheels from indexes"
                    ),
                ));
            }
        }
        let version = get("version")
            .ok_or_else(|| PypiError::bad(&origin, format!("`{name}` has no `version`")))?;
        let mut text = format!("{name}=={version}");
        if let Some(m) = get("marker") {
            text.push_str(&format!("; {m}"));
        }
        crate::requirement::check(&text).map_err(|m| PypiError::bad(&origin, m.to_string()))?;
        let requirement = pep508_rs::Requirement::from_str(&text)
            .map_err(|e| PypiError::bad(&origin, format!("`{text}`: {e}")))?;
        let mut hashes = Vec::new();
        if let Some(wheels) = p.get("wheels").and_then(|w| w.as_array()) {
            for w in wheels.iter().filter_map(|w| w.as_inline_table()) {
                let sha = w
                    .get("hashes")
                    .and_then(|h| h.as_inline_table())
                    .and_then(|h| h.get("sha256"))
                    .and_then(|s| s.as_str());
                if let Some(sha) = sha {
                    hashes.push(Digest::from_hex(sha).map_err(|e| {
                        PypiError::bad(&origin, format!("`{name}`: a wheel's sha256: {e}"))
                    })?);
                }
            }
        }
        out.requirements.push(Line {
            requirement,
            text,
            origin,
            hashes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_become_exact_pins_with_their_wheel_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pylock.toml");
        let h = "c".repeat(64);
        std::fs::write(
            &p,
            format!(
                "lock-version = \"1.0\"\ncreated-by = \"x\"\n[[packages]]\nname = \"idna\"\nversion = \"3.10\"\nwheels = [{{ name = \"idna-3.10-py3-none-any.whl\", size = 1, hashes = {{ sha256 = \"{h}\" }} }}]\n[[packages]]\nname = \"winonly\"\nversion = \"1\"\nmarker = \"sys_platform == 'win32'\"\n"
            ),
        )
        .unwrap();
        assert!(is_pylock(&p) && !is_pylock(Path::new("requirements.toml")));
        let parsed = read(&p).unwrap();
        assert!(parsed.require_hashes);
        assert_eq!(parsed.requirements[0].text, "idna==3.10");
        assert_eq!(parsed.requirements[0].hashes.len(), 1);
        assert!(parsed.requirements[1]
            .text
            .ends_with("; sys_platform == 'win32'"));
        std::fs::write(
            &p,
            "lock-version = \"1.0\"\n[[packages]]\nname = \"x\"\nversion = \"1\"\nvcs = { type = \"git\", url = \"u\", commit-id = \"c\" }\n",
        )
        .unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("`vcs`"));
        std::fs::write(&p, "lock-version = \"2.0\"\n").unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("lock-version"));
    }
}
