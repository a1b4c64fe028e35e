//! Image references parsed at the edge: a profile's `name:` ([`RepoName`]) and `--tag` ([`Tag`]).
//!
//! Both follow the OCI distribution spec's grammars, so a name or tag gpuimg accepts is one
//! umoci, skopeo and registries accept, and a name used as a path under `out/` never climbs
//! out of it (no `..`, no empty or absolute components). Owns the grammars only; no I/O.

use std::fmt;
use std::path::{Path, PathBuf};

/// The most bytes a repository name may have (what registries commonly enforce).
pub const MAX_NAME_LEN: usize = 255;
/// The most bytes a tag may have (`{0,127}` after the first character).
pub const MAX_TAG_LEN: usize = 128;

/// Why a name or tag was refused: one short clause, shown after the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReferenceError(String);

/// A repository name: path components `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*` separated by `/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoName(String);

impl RepoName {
    /// Check `s` against the distribution spec's repository-name grammar.
    pub fn parse(s: &str) -> Result<RepoName, ReferenceError> {
        if s.is_empty() {
            return Err(err("the name is empty"));
        }
        if s.len() > MAX_NAME_LEN {
            return Err(err(format!(
                "the name is {} bytes long; at most {MAX_NAME_LEN} are allowed",
                s.len()
            )));
        }
        for (i, component) in s.split('/').enumerate() {
            check_component(component, i)?;
        }
        Ok(RepoName(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a relative path (`a/b` → `a/b`); never absolute, never with `..`.
    pub fn as_path(&self) -> PathBuf {
        Path::new(&self.0).to_path_buf()
    }
}

fn check_component(c: &str, index: usize) -> Result<(), ReferenceError> {
    let which = format!("path component {} (`{}`)", index + 1, c.escape_debug());
    if c.is_empty() {
        return Err(err(format!(
            "path component {} is empty (a leading, trailing or doubled `/`)",
            index + 1
        )));
    }
    if c == ".." || c == "." {
        return Err(err(format!(
            "path component {} is `{c}`; a name may not climb or stay in place",
            index + 1
        )));
    }
    let bytes = c.as_bytes();
    if let Some(&b) = bytes
        .iter()
        .find(|b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(b)))
    {
        return Err(err(format!(
            "{which} holds {}; only lowercase letters, digits and the separators `.`, `_`, `__`, `-` are allowed",
            describe(b)
        )));
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err(err(format!(
            "{which} must start and end with a lowercase letter or digit"
        )));
    }
    // Runs of separators: `.`, `_`, `__` or one or more `-`, always between alphanumerics.
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let run = &c[start..i];
        let ok = run == "." || run == "_" || run == "__" || run.bytes().all(|b| b == b'-');
        if !ok {
            return Err(err(format!(
                "{which} has the separator `{run}`; separators are `.`, `_`, `__` or dashes"
            )));
        }
    }
    Ok(())
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for RepoName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<Path> for RepoName {
    fn as_ref(&self) -> &Path {
        Path::new(&self.0)
    }
}

impl PartialEq<str> for RepoName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for RepoName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// A tag: the distribution spec's `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`, narrowed to what the
/// image spec allows in `org.opencontainers.image.ref.name` (umoci and skopeo refuse the
/// rest): letters and digits joined by single `.`, `_`, `-` or by `--`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(String);

impl Tag {
    /// Check `s` against both grammars.
    pub fn parse(s: &str) -> Result<Tag, ReferenceError> {
        let bytes = s.as_bytes();
        let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
            return Err(err("the tag is empty"));
        };
        if s.len() > MAX_TAG_LEN {
            return Err(err(format!(
                "the tag is {} bytes long; at most {MAX_TAG_LEN} are allowed",
                s.len()
            )));
        }
        if let Some(&b) = bytes
            .iter()
            .find(|b| !(b.is_ascii_alphanumeric() || b"._-".contains(b)))
        {
            return Err(err(format!(
                "the tag holds {}; only letters, digits, `.`, `_` and `-` are allowed",
                describe(b)
            )));
        }
        if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
            return Err(err("a tag starts and ends with a letter or digit"));
        }
        for run in s.split(|c: char| c.is_ascii_alphanumeric()) {
            if !matches!(run, "" | "." | "_" | "-" | "--") {
                return Err(err(format!(
                    "the tag has the separator `{run}`; separators are one `.`, `_` or `-`, or `--`"
                )));
            }
        }
        Ok(Tag(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Tag {
    /// `latest`.
    fn default() -> Self {
        Tag("latest".into())
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for Tag {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Tag {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tag::parse(s)
    }
}

impl std::str::FromStr for RepoName {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RepoName::parse(s)
    }
}

fn err(s: impl Into<String>) -> ReferenceError {
    ReferenceError(s.into())
}

/// A byte as a reader sees it: `/`, a space, a newline, or its code.
fn describe(b: u8) -> String {
    match b {
        b' ' => "a space".into(),
        b'\n' => "a newline".into(),
        b'\t' => "a tab".into(),
        b'\r' => "a carriage return".into(),
        b'/' => "`/`".into(),
        0x21..=0x7e => format!("`{}`", b as char),
        b if b >= 0x80 => "a non-ASCII character".into(),
        b => format!("the control character 0x{b:02x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_grammar_accepts() {
        for ok in [
            "a",
            "demo",
            "cuda-runtime",
            "org/cuda.runtime",
            "a/b/c",
            "a__b",
            "a_b",
            "a---b",
            "a.b-c_d__e",
            "0",
            "9x/y9",
        ] {
            assert!(RepoName::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn names_the_grammar_refuses() {
        let long = "a".repeat(MAX_NAME_LEN + 1);
        for bad in [
            "",
            "/",
            "/a",
            "a/",
            "a//b",
            "..",
            "a/..",
            "a/../../../x",
            "./a",
            "a/./b",
            ".a",
            "a.",
            "-a",
            "a-",
            "_a",
            "a___b",
            "a..b",
            "a.-b",
            "a_-b",
            "A",
            "Demo",
            "a b",
            "a\nb",
            "a\0b",
            "a:b",
            "a@b",
            "é",
            long.as_str(),
        ] {
            assert!(RepoName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tags_the_grammar_accepts() {
        let max = "t".repeat(MAX_TAG_LEN);
        for ok in [
            "latest",
            "v1.2.3",
            "1",
            "A-b_c.D",
            "a--b",
            "12.0-cudnn9_rc1",
            max.as_str(),
        ] {
            assert!(Tag::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn tags_the_grammar_refuses() {
        let long = "t".repeat(MAX_TAG_LEN + 1);
        for bad in [
            "",
            "../x",
            ".x",
            "-x",
            "_",
            "_x",
            "x_",
            "x.",
            "x..y",
            "a__b",
            "a---b",
            "a-_b",
            "a/b",
            "a b",
            " a",
            "a\n",
            "a\tb",
            "a:b",
            "a@sha256",
            "ä",
            "a\0",
            long.as_str(),
        ] {
            assert!(Tag::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn messages_say_what_is_wrong() {
        let e = RepoName::parse("a/../x").unwrap_err().to_string();
        assert!(e.contains("`..`"), "{e}");
        let e = RepoName::parse("a//b").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = Tag::parse("a b").unwrap_err().to_string();
        assert!(e.contains("a space"), "{e}");
    }
}
