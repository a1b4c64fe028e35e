//! The syntax of what a Python requirement names, checked the same way wherever it is written
//! (the profile's `python:`, a requirements file, a pylock, a wheel's metadata): a PEP 508
//! requirement string that names no URL ([`check`]), and an index or find-links URL
//! ([`index_url`]).
//!
//! The root's `profile` checks what the user wrote with it, this crate what files and indexes
//! say. Must never resolve, fetch or read a file: it judges one string.

use std::str::FromStr;

/// Why a requirement string or an index URL is refused; each names the text (escaped) and
/// says what is wrong, for the caller to place (`profile.yaml:3:5`, `requirements.txt:2`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    #[error("`{text}` is not a PEP 508 requirement: {why}")]
    NotPep508 { text: String, why: String },
    #[error("`{text}` names a URL; gpuimg takes wheels from indexes and `python.find-links` only")]
    NamesUrl { text: String },
    #[error("`{text}` is not a URL: {why}")]
    NotUrl { text: String, why: String },
    #[error("`{text}` has no host")]
    NoHost { text: String },
    #[error("`{text}`: the scheme `{scheme}` is not supported (http, https or file)")]
    Scheme { text: String, scheme: String },
}

/// Check one PEP 508 requirement string: its syntax, and that it names no URL (wheels come
/// from indexes and find-links only).
pub fn check(text: &str) -> Result<(), SyntaxError> {
    let not_pep508 = |why: String| SyntaxError::NotPep508 {
        text: text.escape_debug().to_string(),
        why,
    };
    // pep508_rs 0.9 panics on some non-ASCII text (it slices inside a character); requirements
    // are ASCII.
    if !text.is_ascii() {
        return Err(not_pep508("it holds a non-ASCII character".into()));
    }
    // ... and on a name ending in `.`, `-` or `_` (its parser takes it, its name check panics).
    let name_end = text
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .last();
    if matches!(name_end, Some('.' | '-' | '_')) {
        return Err(not_pep508("a name must end with a letter or digit".into()));
    }
    let r = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(text)
        .map_err(|e| not_pep508(first_line(&e.message.to_string())))?;
    if matches!(r.version_or_url, Some(pep508_rs::VersionOrUrl::Url(_))) {
        return Err(SyntaxError::NamesUrl {
            text: text.escape_debug().to_string(),
        });
    }
    Ok(())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// An index or find-links URL: http, https or file, with a host for http(s).
pub fn index_url(text: &str) -> Result<url::Url, SyntaxError> {
    let shown = || text.escape_debug().to_string();
    let u = url::Url::from_str(text).map_err(|e| SyntaxError::NotUrl {
        text: shown(),
        why: e.to_string(),
    })?;
    match u.scheme() {
        "http" | "https" if u.host_str().is_some_and(|h| !h.is_empty()) => Ok(u),
        "file" => Ok(u),
        "http" | "https" => Err(SyntaxError::NoHost { text: shown() }),
        other => Err(SyntaxError::Scheme {
            text: shown(),
            scheme: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_are_pep_508_without_urls() {
        for ok in [
            "requests",
            "requests>=2.31,<3",
            "torch[opt]==2.5.1; platform_machine == \"x86_64\"",
            "numpy; python_version < \"3.12\"",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for bad in [
            "requests>=>2",
            "-e .",
            "numpy; python_version <",
            "9x =",
            "socks; extra == 'x'\u{fffd}",
            "id. <4",
            "x- ; python_version > '3'",
        ] {
            let e = check(bad).unwrap_err();
            assert!(matches!(e, SyntaxError::NotPep508 { .. }), "{bad}: {e}");
            assert!(
                e.to_string().contains("is not a PEP 508 requirement"),
                "{bad}: {e}"
            );
        }
        let e = check("pkg @ https://example.invalid/pkg.whl").unwrap_err();
        assert!(e.to_string().contains("names a URL"), "{e}");
    }

    #[test]
    fn index_urls_are_http_https_or_file() {
        assert!(index_url("https://x/simple").is_ok());
        assert!(index_url("file:///srv/simple").is_ok());
        assert_eq!(
            index_url("ftp://x/simple").unwrap_err(),
            SyntaxError::Scheme {
                text: "ftp://x/simple".into(),
                scheme: "ftp".into()
            }
        );
        assert!(matches!(
            index_url("not a url").unwrap_err(),
            SyntaxError::NotUrl { .. }
        ));
    }
}
