//! The build host's apt configuration: `sources.list`, `sources.list.d/*.list` (one-line) and
//! `sources.list.d/*.sources` (deb822, with `Signed-By`), and its trusted keyrings.
//!
//! Reads files under the given apt directory only; must never consult the network.

use std::path::{Path, PathBuf};

use crate::control::paragraphs;
use crate::AptError;

/// Where keys for a repository come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    File(PathBuf),
    /// An ASCII-armored key block written inline in a `.sources` file.
    Inline(String),
}

/// One `deb` entry of the host's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    pub uri: String,
    pub suites: Vec<String>,
    pub components: Vec<String>,
    /// `Signed-By`; empty means the host's trusted keyrings.
    pub signed_by: Vec<KeySource>,
}

/// Read every enabled `deb` entry under `apt_dir` (normally `/etc/apt`), in apt's order:
/// `sources.list` first, then `sources.list.d` sorted by file name.
pub fn host_entries(apt_dir: &Path) -> Result<Vec<HostEntry>, AptError> {
    let mut out = Vec::new();
    let main = apt_dir.join("sources.list");
    if main.is_file() {
        out.extend(parse_list_file(&main)?);
    }
    let dir = apt_dir.join("sources.list.d");
    for path in sorted_files(&dir)? {
        match path.extension().and_then(|e| e.to_str()) {
            Some("list") => out.extend(parse_list_file(&path)?),
            Some("sources") => out.extend(parse_sources_file(&path)?),
            _ => {}
        }
    }
    Ok(out)
}

/// The host's trusted keyrings: `trusted.gpg` and `trusted.gpg.d/*.{gpg,asc}`.
pub fn trusted_keyrings(apt_dir: &Path) -> Result<Vec<KeySource>, AptError> {
    let mut out = Vec::new();
    let legacy = apt_dir.join("trusted.gpg");
    if legacy.is_file() {
        out.push(KeySource::File(legacy));
    }
    for path in sorted_files(&apt_dir.join("trusted.gpg.d"))? {
        if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("gpg" | "asc")
        ) {
            out.push(KeySource::File(path));
        }
    }
    Ok(out)
}

fn sorted_files(dir: &Path) -> Result<Vec<PathBuf>, AptError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(AptError::io(dir)(e)),
    };
    let mut files = Vec::new();
    for entry in rd {
        let entry = entry.map_err(AptError::io(dir))?;
        files.push(entry.path());
    }
    files.sort();
    Ok(files)
}

fn parse_list_file(path: &Path) -> Result<Vec<HostEntry>, AptError> {
    let text = fs_err::read_to_string(path).map_err(AptError::io(path))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |message: &str| AptError::InvalidSources {
            path: path.to_path_buf(),
            line: i + 1,
            message: message.to_string(),
        };
        let (kind, rest) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| bad("Expected `deb URI SUITE [COMPONENT...]`"))?;
        if kind != "deb" {
            continue;
        }
        let mut rest = rest.trim_start();
        let mut signed_by = Vec::new();
        if let Some(opts) = rest.strip_prefix('[') {
            let close = opts
                .find(']')
                .ok_or_else(|| bad("Unclosed `[` in options"))?;
            for opt in opts[..close].split_whitespace() {
                if let Some(v) = opt.strip_prefix("signed-by=") {
                    signed_by.extend(v.split(',').map(|p| KeySource::File(PathBuf::from(p))));
                }
            }
            rest = opts[close + 1..].trim_start();
        }
        let mut words = rest.split_whitespace();
        let (Some(uri), Some(suite)) = (words.next(), words.next()) else {
            return Err(bad("Expected `deb URI SUITE [COMPONENT...]`"));
        };
        out.push(HostEntry {
            uri: uri.to_string(),
            suites: vec![suite.to_string()],
            components: words.map(str::to_string).collect(),
            signed_by,
        });
    }
    Ok(out)
}

fn parse_sources_file(path: &Path) -> Result<Vec<HostEntry>, AptError> {
    let text = fs_err::read_to_string(path).map_err(AptError::io(path))?;
    let mut out = Vec::new();
    for para in paragraphs(&text) {
        let para = para.map_err(|line| AptError::InvalidSources {
            path: path.to_path_buf(),
            line,
            message: "Expected `Field: value`".into(),
        })?;
        let words = |f: &str| -> Vec<String> {
            para.get(f)
                .map(|v| v.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default()
        };
        if !words("Types").iter().any(|t| t == "deb") {
            continue;
        }
        if para
            .get("Enabled")
            .is_some_and(|v| v.eq_ignore_ascii_case("no"))
        {
            continue;
        }
        let signed_by = match para.get("Signed-By") {
            Some(v) if v.contains("-----BEGIN") => {
                // Inline key: continuation lines, with `.` standing for empty lines.
                let block: Vec<&str> = v
                    .lines()
                    .map(|l| match l.trim() {
                        "." => "",
                        t => t,
                    })
                    .collect();
                vec![KeySource::Inline(block.join("\n"))]
            }
            Some(v) => v
                .split([',', ' ', '\n'])
                .filter(|s| !s.trim().is_empty())
                .map(|s| KeySource::File(PathBuf::from(s.trim())))
                .collect(),
            None => Vec::new(),
        };
        for uri in words("URIs") {
            out.push(HostEntry {
                uri,
                suites: words("Suites"),
                components: words("Components"),
                signed_by: signed_by.clone(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_list_and_deb822() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("sources.list.d")).unwrap();
        std::fs::write(
            d.join("sources.list"),
            "# x\ndeb [arch=amd64 signed-by=/k/a.gpg] http://m.example/d bookworm main contrib\ndeb-src http://m.example/d bookworm main\n",
        )
        .unwrap();
        std::fs::write(
            d.join("sources.list.d/x.sources"),
            "Types: deb deb-src\nURIs: http://m.example/e\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /k/b.gpg\n\nTypes: deb\nURIs: http://m.example/off\nSuites: x\nEnabled: no\n",
        )
        .unwrap();
        std::fs::write(
            d.join("sources.list.d/y.list.disabled"),
            "deb http://z/ a b\n",
        )
        .unwrap();
        let e = host_entries(d).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].uri, "http://m.example/d");
        assert_eq!(e[0].components, ["main", "contrib"]);
        assert_eq!(e[0].signed_by, [KeySource::File("/k/a.gpg".into())]);
        assert_eq!(e[1].suites, ["bookworm", "bookworm-updates"]);
        assert_eq!(e[1].signed_by, [KeySource::File("/k/b.gpg".into())]);
    }
}
