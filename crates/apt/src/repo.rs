//! The repositories a profile names: `mirror` (`host`, a URL) with `suite`/`components`, plus
//! `repositories:` entries, each with the keys that must sign it.
//!
//! Must never fetch; turns configuration into [`Repo`] values only.

use std::path::Path;

use crate::hostconf::{host_entries, trusted_keyrings, HostEntry, KeySource};
use crate::spec::{Mirror, PackagesSpec};
use crate::AptError;

/// Where a repository's `Release` lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dist {
    /// `<base>/dists/<suite>/` with `<component>/binary-<arch>/Packages*`.
    Suite(String),
    /// A flat repository: `<base>/<path>` holds `Release` and `Packages*` directly.
    Flat(String),
}

/// One repository to read indexes from.
#[derive(Debug, Clone)]
pub struct Repo {
    /// Base URL, no trailing `/`; `.deb` file names are relative to it.
    pub base: String,
    pub dist: Dist,
    pub components: Vec<String>,
    /// Keys that must sign it (empty only when `trusted`).
    pub keys: Vec<KeySource>,
    pub trusted: bool,
    /// How the lock names it: `host:<suite>` for the host's sources (so a lock holds no mirror
    /// host name and follows each build machine's configuration), else the base URL.
    pub lock_id: String,
}

impl Repo {
    /// The directory holding `InRelease`/`Release`, ending in `/`.
    pub fn dist_url(&self) -> String {
        match &self.dist {
            Dist::Suite(s) => format!("{}/dists/{s}/", self.base),
            Dist::Flat(p) => {
                let p = p.trim_matches('/');
                if p.is_empty() || p == "." {
                    format!("{}/", self.base)
                } else {
                    format!("{}/{p}/", self.base)
                }
            }
        }
    }
}

/// Every repository the spec names, in priority order (the first wins a tie between equal
/// versions). `apt_dir` is the host's apt directory (normally `/etc/apt`).
pub fn repos_from_spec(spec: &PackagesSpec, apt_dir: &Path) -> Result<Vec<Repo>, AptError> {
    let keyring = |k: &Option<std::path::PathBuf>| -> Result<Vec<KeySource>, AptError> {
        match k {
            Some(p) => Ok(vec![KeySource::File(p.clone())]),
            None => trusted_keyrings(apt_dir),
        }
    };
    let suite = spec.suite.clone();
    let mut out = Vec::new();
    if let Mirror::Url(mirror) = &spec.mirror {
        let base = mirror.trim_end_matches('/').to_string();
        out.push(Repo {
            lock_id: base.clone(),
            base,
            dist: Dist::Suite(suite),
            components: spec.components.clone(),
            keys: keyring(&spec.keyring)?,
            trusted: spec.trusted,
        });
    } else {
        let entries = host_entries(apt_dir)?;
        for e in &entries {
            for s in &e.suites {
                let ours = s == &suite
                    || s.strip_prefix(suite.as_str())
                        .is_some_and(|r| r.starts_with('-'));
                if !ours {
                    continue;
                }
                let components: Vec<String> = spec
                    .components
                    .iter()
                    .filter(|c| e.components.is_empty() || e.components.contains(c))
                    .cloned()
                    .collect();
                if components.is_empty() && s != &suite {
                    continue;
                }
                let keys = match (&spec.keyring, e.signed_by.is_empty()) {
                    (Some(_), _) | (None, true) => keyring(&spec.keyring)?,
                    (None, false) => e.signed_by.clone(),
                };
                // `host:<suite>` is the entry [`base_url`] maps it back to; another repository
                // under the same suite name (a vendor's `bookworm main`) is locked by its URL,
                // as a profile's own repository is.
                let base = e.uri.trim_end_matches('/').to_string();
                let lock_id = if first_for(&entries, s).is_some_and(|f| f.uri == e.uri) {
                    format!("host:{s}")
                } else {
                    base.clone()
                };
                out.push(Repo {
                    base,
                    dist: Dist::Suite(s.clone()),
                    components,
                    keys,
                    trusted: spec.trusted,
                    lock_id,
                });
            }
        }
        // A component the profile asks for that the host does not enable for the suite itself
        // (Debian's `non-free` on a host with `main` only) is taken from the suite's own
        // entries (`-updates`/`-security` keep what the host enables): the profile decides
        // what goes into the image, the host only which mirror serves it. Of the suite's own
        // entries, those that already serve one of the profile's components take them: a
        // third-party repository under the same suite name (`bookworm stable`) does not have
        // Debian's components, and asking it for them would fail the build.
        let own = |r: &Repo| matches!(&r.dist, Dist::Suite(s) if *s == suite);
        let missing: Vec<String> = spec
            .components
            .iter()
            .filter(|c| !out.iter().any(|r| own(r) && r.components.contains(c)))
            .cloned()
            .collect();
        let serving = out.iter().any(|r| own(r) && !r.components.is_empty());
        for r in out
            .iter_mut()
            .filter(|r| own(r) && (!serving || !r.components.is_empty()))
        {
            r.components.extend(missing.iter().cloned());
        }
        out.retain(|r| !r.components.is_empty());
        if out.is_empty() {
            return Err(AptError::NoHostSources {
                dir: apt_dir.display().to_string(),
                near: crate::suites::nearest_suites(&suite, apt_dir),
                suite,
            });
        }
    }
    for r in &spec.repositories {
        let flat = r.suite.ends_with('/');
        // `url: host`: the build host's mirror of that suite, with the components the profile
        // names (Debian's `bookworm-security` `non-free` on a host that enables `main` only).
        if r.url == "host" && !flat {
            let entries = host_entries(apt_dir)?;
            let Some(e) = first_for(&entries, &r.suite) else {
                return Err(AptError::NoHostSources {
                    dir: apt_dir.display().to_string(),
                    near: crate::suites::nearest_suites(&r.suite, apt_dir),
                    suite: r.suite.clone(),
                });
            };
            let keys = match (&r.keyring, e.signed_by.is_empty()) {
                (Some(_), _) | (None, true) => keyring(&r.keyring)?,
                (None, false) => e.signed_by.clone(),
            };
            out.push(Repo {
                base: e.uri.trim_end_matches('/').to_string(),
                dist: Dist::Suite(r.suite.clone()),
                components: if r.components.is_empty() {
                    vec!["main".to_string()]
                } else {
                    r.components.clone()
                },
                keys,
                trusted: r.trusted,
                lock_id: format!("host:{}", r.suite),
            });
            continue;
        }
        let base = r.url.trim_end_matches('/').to_string();
        out.push(Repo {
            lock_id: base.clone(),
            base,
            dist: if flat {
                Dist::Flat(r.suite.clone())
            } else {
                Dist::Suite(r.suite.clone())
            },
            components: if flat || !r.components.is_empty() {
                r.components.clone()
            } else {
                vec!["main".to_string()]
            },
            keys: keyring(&r.keyring)?,
            trusted: r.trusted,
        });
    }
    Ok(out)
}

/// The base URL for a lock's `repository` value: `host:<suite>` through the host's sources.
pub fn base_url(lock_id: &str, apt_dir: &Path) -> Result<String, AptError> {
    let Some(suite) = lock_id.strip_prefix("host:") else {
        return Ok(lock_id.trim_end_matches('/').to_string());
    };
    let entries = host_entries(apt_dir)?;
    first_for(&entries, suite)
        .map(|e| e.uri.trim_end_matches('/').to_string())
        .ok_or_else(|| AptError::NoHostSources {
            dir: apt_dir.display().to_string(),
            suite: suite.to_string(),
            near: crate::suites::nearest_suites(suite, apt_dir),
        })
}

/// The host entry `host:<suite>` stands for: the first that lists the suite.
fn first_for<'a>(entries: &'a [HostEntry], suite: &str) -> Option<&'a HostEntry> {
    entries.iter().find(|e| e.suites.iter().any(|s| s == suite))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(components: &str) -> PackagesSpec {
        PackagesSpec {
            mirror: Mirror::Host,
            suite: "bookworm".into(),
            components: components.split(", ").map(str::to_string).collect(),
            keyring: None,
            trusted: false,
            essential: false,
            packages: Vec::new(),
            repositories: Vec::new(),
            system: false,
        }
    }

    /// An apt configuration directory with `file` (below it) holding `text`.
    fn host(file: &str, text: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sources.list.d")).unwrap();
        std::fs::write(dir.path().join(file), text).unwrap();
        dir
    }

    #[test]
    fn host_mirror_takes_components_the_host_does_not_enable_from_the_suites_own_entries() {
        let dir = host(
            "sources.list.d/debian.sources",
            "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /k.gpg\n\n\
             Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\nComponents: main contrib\nSigned-By: /k.gpg\n",
        );
        let repos = repos_from_spec(&spec("main, contrib, non-free"), dir.path()).unwrap();
        let got: Vec<(String, Vec<String>)> = repos
            .iter()
            .map(|r| (r.lock_id.clone(), r.components.clone()))
            .collect();
        let v = |s: &[&str]| s.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            [
                (
                    "host:bookworm".to_string(),
                    v(&["main", "contrib", "non-free"])
                ),
                ("host:bookworm-updates".to_string(), v(&["main"])),
                (
                    "host:bookworm-security".to_string(),
                    v(&["main", "contrib"])
                ),
            ]
        );
        // Only a component the host lacks: the suite's own entry alone.
        let repos = repos_from_spec(&spec("non-free"), dir.path()).unwrap();
        assert_eq!(repos.len(), 1);
        assert_eq!(repos[0].lock_id, "host:bookworm");
        assert_eq!(repos[0].components, ["non-free"]);
    }

    #[test]
    fn a_second_repository_under_the_same_suite_name_is_locked_by_its_url() {
        let dir = host(
            "sources.list",
            "deb [signed-by=/k.gpg] http://mirror.invalid/debian bookworm main\n\
             deb [signed-by=/k.gpg] http://mirror.invalid/debian bookworm-updates main\n\
             deb [signed-by=/v.gpg] http://vendor.invalid/debian/12/prod bookworm main\n",
        );
        let repos = repos_from_spec(&spec("main"), dir.path()).unwrap();
        let ids: Vec<&str> = repos.iter().map(|r| r.lock_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "host:bookworm",
                "host:bookworm-updates",
                "http://vendor.invalid/debian/12/prod"
            ]
        );
        // Each maps back to its own repository.
        for r in &repos {
            assert_eq!(base_url(&r.lock_id, dir.path()).unwrap(), r.base);
        }
        // A vendor's entry listed first, whose components the profile does not ask for: it
        // serves nothing, and `host:bookworm` would map back to it, so Debian's entry is locked
        // by its URL.
        let dir = host(
            "sources.list",
            "deb [signed-by=/v.gpg] http://vendor.invalid/debian bookworm stable\n\
             deb [signed-by=/k.gpg] http://mirror.invalid/debian bookworm main\n",
        );
        let repos = repos_from_spec(&spec("main"), dir.path()).unwrap();
        let ids: Vec<&str> = repos.iter().map(|r| r.lock_id.as_str()).collect();
        assert_eq!(ids, ["http://mirror.invalid/debian"]);
        assert_eq!(
            base_url(&repos[0].lock_id, dir.path()).unwrap(),
            repos[0].base
        );
    }

    #[test]
    fn host_components_are_not_added_to_a_third_party_entry_of_the_same_suite() {
        let dir = host(
            "sources.list",
            "deb [signed-by=/d.gpg] http://other.invalid/linux/debian bookworm stable\n\
             deb [signed-by=/k.gpg] http://mirror.invalid/debian bookworm main\n",
        );
        let repos = repos_from_spec(&spec("main, non-free"), dir.path()).unwrap();
        let got: Vec<(&str, &[String])> = repos
            .iter()
            .map(|r| (r.base.as_str(), r.components.as_slice()))
            .collect();
        assert_eq!(
            got,
            [(
                "http://mirror.invalid/debian",
                &["main".to_string(), "non-free".to_string()][..]
            )]
        );
    }
}
