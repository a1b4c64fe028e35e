//! Core metadata (`METADATA`, PEP 566/643): the headers resolution needs — `Name`, `Version`,
//! `Requires-Dist`, `Requires-Python` — from the email-header format (folded
//! lines joined; the body after the first blank line ignored).
//! Must never fail on a header it does not use; a `Requires-Dist` that does not parse is an
//! error naming the line (pip refuses such a wheel too).

use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use pep508_rs::{PackageName, Requirement};

#[derive(Debug, Clone)]
pub struct CoreMetadata {
    pub name: PackageName,
    pub version: Version,
    pub requires_dist: Vec<Requirement>,
    pub requires_python: Option<VersionSpecifiers>,
}

/// Every header as (lowercased name, value), folded lines joined, in order.
pub fn headers(bytes: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(bytes);
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some(last) = headers.last_mut() {
                last.1.push(' ');
                last.1.push_str(line.trim());
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    headers
}

pub fn parse(bytes: &[u8]) -> Result<CoreMetadata, String> {
    let headers = headers(bytes);
    let one = |k: &str| {
        headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let name = one("name").ok_or("its METADATA has no `Name`")?;
    let name =
        PackageName::from_str(name).map_err(|e| format!("its METADATA `Name: {name}`: {e}"))?;
    let version = one("version").ok_or("its METADATA has no `Version`")?;
    let version = Version::from_str(version)
        .map_err(|e| format!("its METADATA `Version: {version}`: {e}"))?;
    let mut requires_dist = Vec::new();
    for (_, v) in headers.iter().filter(|(n, _)| n == "requires-dist") {
        // pep508_rs 0.9 panics on some text (non-ASCII, a name ending in `.`): the checks
        // the profile's requirements pass come first.
        crate::requirement::check(v).map_err(|m| format!("its METADATA `Requires-Dist`: {m}"))?;
        requires_dist.push(
            Requirement::from_str(v)
                .map_err(|e| format!("its METADATA `Requires-Dist: {v}` does not parse: {e}"))?,
        );
    }
    let requires_python = match one("requires-python")
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        None => None,
        Some(s) if !s.is_ascii() => {
            return Err(format!(
                "its METADATA `Requires-Python: {}` holds a non-ASCII character",
                s.escape_debug()
            ))
        }
        Some(s) => Some(
            VersionSpecifiers::from_str(s)
                .map_err(|e| format!("its METADATA `Requires-Python: {s}`: {e}"))?,
        ),
    };
    Ok(CoreMetadata {
        name,
        version,
        requires_dist,
        requires_python,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_folded_lines_and_body() {
        let m = parse(
            b"Metadata-Version: 2.3\nName: Demo_Pkg\nVersion: 1.0.0\nRequires-Python: >=3.8\nRequires-Dist: idna<4,>=2.5\nRequires-Dist: PySocks!=1.5.7,>=1.5.6; extra ==\n  'socks'\nProvides-Extra: socks\nSummary: x\n\nRequires-Dist: body-is-not-a-header\n",
        )
        .unwrap();
        assert_eq!(m.name.as_ref(), "demo-pkg");
        assert_eq!(m.version.to_string(), "1.0.0");
        assert_eq!(m.requires_dist.len(), 2);
        assert!(m.requires_python.is_some());
        let e = parse(b"Name: x\nVersion: 1\nRequires-Dist: idna>>4\n").unwrap_err();
        assert!(e.contains("idna>>4"), "{e}");
        assert!(parse(b"Version: 1\n").unwrap_err().contains("Name"));
    }
}
