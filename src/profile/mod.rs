//! Stage 1, `profile`: read a profile file into a validated [`Profile`].
//!
//! Owns the v1 profile contract (DESIGN.md): parsing, `${VAR}` expansion, unknown-key and type
//! errors with file:line:column, paths made relative to the profile's directory.
//! Must never touch the network or resolve versions: constraints are kept as written, with
//! their positions, for `resolve`.

mod error;
mod expand;
mod located;
mod schema;
mod validate;

use std::path::{Path, PathBuf};

pub use error::ProfileError;
pub use expand::expand_vars;
pub use located::Located;
pub use schema::{
    AptRepoSpec, AptSpec, BandwidthFloors, CompatMode, ConfigSpec, FileSpec, HostSpec,
    KernelModule, OnFailure, SelftestLevel, SelftestSpec, StackSpec, StripClass,
};
pub use validate::{Base, FileEntry, Platform};

/// A loaded, validated profile.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The path as the user gave it (used in messages).
    pub file: String,
    /// Directory that relative paths are resolved against.
    pub dir: PathBuf,
    /// The profile text after `${VAR}` expansion (the lock hashes it).
    pub text: String,
    pub name: crate::reference::RepoName,
    pub platform: Platform,
    pub base: Base,
    pub host: HostSpec,
    pub stack: StackSpec,
    pub compat: CompatMode,
    pub files: Vec<FileEntry>,
    pub strip: Vec<StripClass>,
    pub selftest: SelftestSpec,
    pub config: ConfigSpec,
}

/// Load and validate the profile at `path`, expanding `${VAR}` from the process environment.
pub fn load(path: &Path) -> Result<Profile, ProfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let dir = path
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .unwrap_or(Path::new("."))
        .to_path_buf();
    parse(&text, &path.display().to_string(), &dir, &|k| {
        std::env::var(k).ok()
    })
}

/// Parse profile text. `file` is used in messages; `dir` anchors relative paths.
pub fn parse(
    text: &str,
    file: &str,
    dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Profile, ProfileError> {
    let expanded = expand_vars(text, file, env)?;
    let raw: schema::RawProfile =
        serde_saphyr::from_str(&expanded).map_err(|e| syntax_error(file, &expanded, &e))?;
    validate::validate(raw, file, dir, expanded)
}

fn syntax_error(file: &str, text: &str, e: &serde_saphyr::Error) -> ProfileError {
    let (line, column) = e
        .location()
        .map(|l| (l.line() as usize, l.column() as usize))
        .unwrap_or((1, 1));
    let mut message = e.without_snippet().to_string();
    // The library appends " at line L, column C"; we print the position in front instead.
    if let Some(idx) = message.rfind(" at line ") {
        message.truncate(idx);
    }
    let mut message = capitalise(message.lines().next().unwrap_or("").trim());
    if !message.contains('`') {
        if let Some(key) = key_at(text, line, column) {
            message = format!("`{key}`: {message}");
        }
    }
    ProfileError::Syntax {
        file: file.to_string(),
        line,
        column,
        message,
    }
}

/// The mapping key written on `line` before `column` (`  enabled: maybe` → `enabled`).
fn key_at(text: &str, line: usize, column: usize) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let before: String = l.chars().take(column.saturating_sub(1)).collect();
    let (key, _) = before.rsplit_once(':')?;
    let key = key
        .trim()
        .trim_start_matches("- ")
        .trim_start_matches('{')
        .trim();
    let key = key.rsplit([',', '{']).next()?.trim();
    (!key.is_empty() && !key.contains(' ')).then(|| key.to_string())
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Profile, ProfileError> {
        parse(s, "p.yaml", Path::new("/nonexistent"), &|_| None)
    }

    #[test]
    fn minimal_profile() {
        let p = parse_str("name: demo\n").unwrap();
        assert_eq!(p.name, "demo");
        assert_eq!(p.platform.architecture, "amd64");
        assert!(matches!(p.base, Base::None));
    }

    #[test]
    fn unknown_key_has_position() {
        let e = parse_str("name: demo\nconfig:\n  entrypint: [sh]\n").unwrap_err();
        let s = e.to_string();
        assert!(
            s.starts_with("p.yaml:3:3: Unknown field `entrypint`"),
            "{s}"
        );
    }

    #[test]
    fn wrong_type_has_position() {
        let e = parse_str("name: demo\nselftest:\n  enabled: maybe\n").unwrap_err();
        assert!(e.to_string().starts_with("p.yaml:3:12:"), "{e}");
    }

    #[test]
    fn missing_name() {
        let e = parse_str("platform: linux/amd64\n").unwrap_err();
        assert!(e.to_string().contains("name"), "{e}");
    }

    #[test]
    fn both_bases_refused() {
        let e =
            parse_str("name: x\nbase:\n  rootfs: ./r.tar\n  apt: {suite: bookworm}\n").unwrap_err();
        assert!(e.to_string().contains("exactly one of"), "{e}");
    }
}
