//! Registry credentials where docker, podman and skopeo keep them: the auth files the settings
//! phase lists (`$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers/auth.json`,
//! `~/.config/containers/auth.json`, `$DOCKER_CONFIG/config.json`, `~/.docker/config.json`, in
//! that order), each read for `credHelpers` (a `docker-credential-NAME get` per registry),
//! `auths` (`auth`: base64 `user:password`, or `identitytoken`) and `credsStore` (the helper
//! for every registry). The first file that knows the registry answers.
//!
//! Secrets never reach a message or `Debug` output. Files are capped in size; a helper runs
//! with a deadline and its output is capped.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine;

use super::RegistryError;

/// The largest auth file read (they hold a few entries).
const MAX_AUTH_FILE: u64 = 4 << 20;
/// How long a credential helper may take, and the most it may print.
const HELPER_DEADLINE: Duration = Duration::from_secs(60);
const MAX_HELPER_OUTPUT: u64 = 1 << 20;

/// The auth files to look in, in order, each with the setting that named it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthFiles {
    pub files: Vec<(PathBuf, String)>,
    /// Where `docker-credential-NAME` helpers are looked for: the absolute directories of the
    /// host's `PATH` (never the working directory).
    pub helper_dirs: Vec<PathBuf>,
}

/// What a registry is sent.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    Basic {
        user: String,
        password: String,
    },
    /// An OAuth2 refresh token (`identitytoken`), exchanged at the token endpoint.
    IdentityToken(String),
}

/// Credentials and where they came from (for messages: `auths` of FILE, helper NAME).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub secret: Secret,
    pub source: String,
}

impl Credentials {
    /// The user name shown in messages (never the secret).
    pub fn user(&self) -> &str {
        match &self.secret {
            Secret::Basic { user, .. } => user,
            Secret::IdentityToken(_) => "<identity token>",
        }
    }

    /// The `Authorization: Basic …` value, for basic credentials.
    pub fn basic_header(&self) -> Option<String> {
        match &self.secret {
            Secret::Basic { user, password } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )),
            Secret::IdentityToken(_) => None,
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials({} from {}, <hidden>)",
            self.user(),
            self.source
        )
    }
}

#[derive(serde::Deserialize, Default)]
struct AuthFile {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: std::collections::BTreeMap<String, String>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
}

#[derive(serde::Deserialize, Default)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

/// Find the credentials for `registry` (`HOST[:PORT]`) and `repo`: `Ok(None)` when no file
/// names the registry. A malformed file, an undecodable entry or a failing helper is an error
/// naming the file.
pub fn find(
    files: &AuthFiles,
    registry: &str,
    repo: &str,
) -> Result<Option<Credentials>, RegistryError> {
    for (path, setting) in &files.files {
        let Some(file) = read_file(path, setting)? else {
            continue;
        };
        if let Some(helper) = file.cred_helpers.get(registry) {
            return run_helper(helper, registry, path, &files.helper_dirs);
        }
        if let Some((key, entry)) = best_entry(&file, registry, repo) {
            return decode_entry(entry, path, &key).map(Some);
        }
        if let Some(store) = &file.creds_store {
            if let Some(c) = run_helper(store, registry, path, &files.helper_dirs)? {
                return Ok(Some(c));
            }
        }
    }
    Ok(None)
}

fn read_file(path: &Path, setting: &str) -> Result<Option<AuthFile>, RegistryError> {
    let bad = |reason: String| RegistryError::AuthFile {
        path: path.display().to_string(),
        setting: setting.to_string(),
        reason,
    };
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(e.to_string())),
    };
    let mut bytes = Vec::new();
    f.take(MAX_AUTH_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(e.to_string()))?;
    if bytes.len() as u64 > MAX_AUTH_FILE {
        return Err(bad(format!("it is larger than {MAX_AUTH_FILE} bytes")));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| bad(format!("it is not valid JSON: {e}")))
}

/// The `auths` key for `registry` with the longest repository path that `repo` is under
/// (podman allows `HOST/NAMESPACE` keys); keys may carry a scheme and docker's `/v1/`.
fn best_entry<'a>(
    file: &'a AuthFile,
    registry: &str,
    repo: &str,
) -> Option<(String, &'a AuthEntry)> {
    let full = format!("{registry}/{repo}");
    file.auths
        .iter()
        .filter_map(|(k, e)| {
            let norm = normalize_key(k);
            let matches = norm == registry
                || (full.starts_with(&norm) && full.as_bytes().get(norm.len()) == Some(&b'/'))
                || norm == full;
            matches.then(|| (norm.len(), k.clone(), e))
        })
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, k, e)| (k, e))
}

fn normalize_key(k: &str) -> String {
    let k = k
        .strip_prefix("https://")
        .or_else(|| k.strip_prefix("http://"))
        .unwrap_or(k);
    let k = k
        .strip_suffix("/v1/")
        .or_else(|| k.strip_suffix("/v2/"))
        .unwrap_or(k);
    k.trim_end_matches('/').to_string()
}

fn decode_entry(e: &AuthEntry, path: &Path, key: &str) -> Result<Credentials, RegistryError> {
    let source = format!("`auths` of {}", path.display());
    let bad = |reason: &str| RegistryError::AuthFile {
        path: path.display().to_string(),
        setting: format!("its entry `{key}`"),
        reason: reason.to_string(),
    };
    if let Some(t) = e.identitytoken.as_deref().filter(|t| !t.is_empty()) {
        return Ok(Credentials {
            secret: Secret::IdentityToken(t.to_string()),
            source,
        });
    }
    if let Some(a) = e.auth.as_deref().filter(|a| !a.is_empty()) {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(a.trim())
            .map_err(|_| bad("`auth` is not base64"))?;
        let text = String::from_utf8(raw).map_err(|_| bad("`auth` is not UTF-8"))?;
        let Some((user, password)) = text.split_once(':') else {
            return Err(bad("`auth` is not `user:password`"));
        };
        return Ok(Credentials {
            secret: Secret::Basic {
                user: user.to_string(),
                password: password.to_string(),
            },
            source,
        });
    }
    match (&e.username, &e.password) {
        (Some(u), Some(p)) => Ok(Credentials {
            secret: Secret::Basic {
                user: u.clone(),
                password: p.clone(),
            },
            source,
        }),
        _ => Err(bad("it has neither `auth` nor `identitytoken`")),
    }
}

#[derive(serde::Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username", default)]
    username: String,
    #[serde(rename = "Secret", default)]
    secret: String,
}

/// Run `docker-credential-NAME get` with the registry on stdin. `Ok(None)` when the helper
/// knows no credentials for it (it says "credentials not found").
fn run_helper(
    name: &str,
    registry: &str,
    file: &Path,
    dirs: &[PathBuf],
) -> Result<Option<Credentials>, RegistryError> {
    let program = format!("docker-credential-{name}");
    let fail = |reason: String| RegistryError::Helper {
        program: program.clone(),
        file: file.display().to_string(),
        reason,
    };
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(fail(
            "the helper's name may hold only letters, digits, `-`, `_` and `.`".into(),
        ));
    }
    // The user's environment is kept (a helper needs `HOME`, `PATH`, cloud profiles), but the
    // helper is found only in `PATH`'s absolute directories and started from an empty one.
    let path = gpuimg_fetch::host_program::find_in(&program, dirs)
        .ok_or_else(|| fail("it is not in an absolute directory of `PATH`".into()))?;
    let iso = gpuimg_fetch::host_program::Isolated::new()
        .map_err(|e| fail(format!("no empty directory to start it from: {e}")))?;
    let mut child = iso
        .command(&path)
        .ok_or_else(|| fail("its path is not absolute".into()))?
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("it could not be started: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A helper that exits without reading its input is answered by its status below.
        let _ = stdin.write_all(registry.as_bytes());
    }
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut err = Vec::new();
        if let Some(s) = stdout {
            let _ = s.take(MAX_HELPER_OUTPUT).read_to_end(&mut out);
        }
        if let Some(s) = stderr {
            let _ = s.take(MAX_HELPER_OUTPUT).read_to_end(&mut err);
        }
        (out, err)
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() > HELPER_DEADLINE => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!(
                    "it did not answer within {} s",
                    HELPER_DEADLINE.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(fail(e.to_string())),
        }
    };
    let (out, err) = reader
        .join()
        .map_err(|_| fail("reading its output failed".into()))?;
    let said = String::from_utf8_lossy(if out.is_empty() { &err } else { &out })
        .trim()
        .to_string();
    if !status.success() {
        if said.to_ascii_lowercase().contains("credentials not found") {
            return Ok(None);
        }
        let first = said.lines().next().unwrap_or("").to_string();
        return Err(fail(format!("it exited with {status}: {first}")));
    }
    let answer: HelperAnswer = serde_json::from_slice(&out)
        .map_err(|_| fail("its answer is not the JSON `{\"Username\", \"Secret\"}`".into()))?;
    let source = format!("{program} (from {})", file.display());
    let secret = if answer.username == "<token>" {
        Secret::IdentityToken(answer.secret)
    } else {
        Secret::Basic {
            user: answer.username,
            password: answer.secret,
        }
    };
    Ok(Some(Credentials { secret, source }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, json: &str) -> AuthFiles {
        let p = dir.join("auth.json");
        std::fs::write(&p, json).unwrap();
        AuthFiles {
            files: vec![
                (dir.join("missing.json"), "REGISTRY_AUTH_FILE".into()),
                (p, "~/.docker/config.json".into()),
            ],
            helper_dirs: Vec::new(),
        }
    }

    #[test]
    fn auths_entries_match_by_host_and_longest_namespace() {
        let d = tempfile::tempdir().unwrap();
        // "u:p" and "v:q" and "w:r"
        let f = files(
            d.path(),
            r#"{"auths": {"https://r.example:5000/v1/": {"auth": "dTpw"},
                          "r.example:5000/team": {"auth": "djpx"},
                          "other.example": {"username": "w", "password": "r"}}}"#,
        );
        let c = find(&f, "r.example:5000", "x/y").unwrap().unwrap();
        assert_eq!(c.user(), "u");
        assert_eq!(c.basic_header().unwrap(), "Basic dTpw");
        let c = find(&f, "r.example:5000", "team/img").unwrap().unwrap();
        assert_eq!(c.user(), "v");
        assert_eq!(
            find(&f, "r.example:5000", "teamster/img")
                .unwrap()
                .unwrap()
                .user(),
            "u"
        );
        assert_eq!(find(&f, "other.example", "a").unwrap().unwrap().user(), "w");
        assert!(find(&f, "r.example", "a").unwrap().is_none());
        assert!(!format!("{c:?}").contains("djpx"));
    }

    #[test]
    fn malformed_files_and_entries_are_errors() {
        let d = tempfile::tempdir().unwrap();
        let f = files(d.path(), "{not json");
        let e = find(&f, "r.example", "a").unwrap_err().to_string();
        assert!(
            e.contains("auth.json") && e.contains("not valid JSON"),
            "{e}"
        );
        let f = files(d.path(), r#"{"auths": {"r.example": {"auth": "!!!"}}}"#);
        let e = find(&f, "r.example", "a").unwrap_err().to_string();
        assert!(e.contains("not base64"), "{e}");
        let f = files(
            d.path(),
            r#"{"credHelpers": {"r.example": "../../bin/sh"}}"#,
        );
        let e = find(&f, "r.example", "a").unwrap_err().to_string();
        assert!(e.contains("may hold only"), "{e}");
    }
}
