//! [`PythonRequest`]: what to resolve and where from, built once from the profile's `python:`
//! and the host's settings ([`HostSettings`], values the CLI's settings phase gathered).
//!
//! Index discovery, each setting from the first level that says it: the profile
//! (`python.index`, `python.extra-indexes`, `python.find-links`), then the variables
//! (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`, `PIP_INDEX_URL`; `UV_INDEX`, `UV_EXTRA_INDEX_URL`,
//! `PIP_EXTRA_INDEX_URL`; `PIP_FIND_LINKS`, `UV_FIND_LINKS`), then pip's and uv's
//! configuration files, then pip's own default, asked of the host's Python.
//! Indexes are searched extras first, then the main one; a project comes from the first index
//! that lists it (never mixed across indexes), find-links add to it.
//! Must never keep a credential in a URL: user parts go to [`PythonRequest::credentials`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use pep508_rs::PackageName;

use gpuimg_fetch::{Credential, FetchLimits, Trust, TrustSource};
use gpuimg_store::digest::Digest;

use super::budget::Budget;
use super::{auth, hostconf, pylock, requirements, PypiError};

/// Values from the host's environment and files, gathered by the settings phase. Empty
/// (`Default`) means a host that configures nothing and has no Python to ask.
#[derive(Debug, Clone, Default)]
pub struct HostSettings {
    /// Set index variables, highest precedence first: `(name, value)`.
    pub index_vars: Vec<(String, String)>,
    /// Set extra-index variables (`UV_INDEX` values may be `NAME=URL`), each a space-separated
    /// list.
    pub extra_index_vars: Vec<(String, String)>,
    /// Set find-links variables, each a space- or comma-separated list.
    pub find_links_vars: Vec<(String, String)>,
    /// `PIP_CERT`.
    pub pip_cert: Option<PathBuf>,
    /// pip's configuration files in its load order (later wins); none under
    /// `PIP_CONFIG_FILE=/dev/null`.
    pub pip_config_files: Vec<PathBuf>,
    /// uv's configuration files, highest precedence first; none under `UV_NO_CONFIG`.
    pub uv_config_files: Vec<PathBuf>,
    /// The netrc file (`NETRC`, else `~/.netrc`).
    pub netrc: Option<PathBuf>,
    /// The host's Python, asked for pip's default index (`python3` from `PATH`).
    pub python: Option<PathBuf>,
    /// `SSL_CERT_FILE` and `SSL_CERT_DIR`.
    pub trust: Trust,
    /// Set budget variables (`GPUIMG_PYTHON_METADATA_READS`, `GPUIMG_PYTHON_RESOLVE_SECONDS`,
    /// `GPUIMG_PYTHON_RANGE_SEGMENTS`, `GPUIMG_PYTHON_MAX_WHEEL_SIZE`): `(name, value)`.
    pub budget_vars: Vec<(String, String)>,
}

/// What the profile's `python:` asks for, as plain values (the plan converts the profile's
/// section): the input of [`PythonRequest::new`].
#[derive(Debug, Clone, Default)]
pub struct RequestSpec {
    /// PEP 508 requirement strings as written, each with where (`profile.yaml:12:7`).
    pub packages: Vec<(String, String)>,
    /// The requirements file or pylock (canonical, inside `context`).
    pub requirements: Option<PathBuf>,
    /// The build context: `-r`/`-c` includes of the requirements file must stay inside it.
    pub context: PathBuf,
    /// `python.index`: a URL.
    pub index: Option<String>,
    /// `python.extra-indexes`: (name, URL).
    pub extra_indexes: Vec<(String, String)>,
    /// `python.find-links`, in the order written.
    pub find_links: Vec<FindLinkSpec>,
    /// The profile's directory: a relative `file://` find-links URL is read below it.
    pub dir: PathBuf,
}

/// One `python.find-links` entry as the profile wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FindLinkSpec {
    /// A page listing wheels, or a `file://` URL.
    Url(String),
    /// A local directory of wheels (canonical).
    Dir(PathBuf),
}

/// One index, by its name in the lock (`host`, `index`, an extra's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    pub name: String,
    /// Without a user part; ends with `/`.
    pub url: url::Url,
    /// The setting that named it (`python.index`, `PIP_INDEX_URL`, ...), for messages.
    pub origin: String,
}

/// A find-links source: a directory of wheels or a page linking to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Links {
    Dir(PathBuf),
    Page(url::Url),
}

/// One requirement (direct or a constraint) with where it was written.
#[derive(Debug, Clone)]
pub struct Requirement {
    pub requirement: pep508_rs::Requirement,
    /// As written, e.g. `requests>=2`.
    pub text: String,
    /// `profile.yaml:12:7` or `requirements.txt:3`.
    pub origin: String,
}

/// Everything resolution and fetching need, built by [`PythonRequest::new`].
#[derive(Debug, Clone)]
pub struct PythonRequest {
    /// The direct requirements, in the order written.
    pub requirements: Vec<Requirement>,
    /// Constraints (`-c`): they narrow a package's versions when something requires it.
    pub constraints: Vec<Requirement>,
    /// Allowed sha256s per package (`--hash`).
    pub hashes: BTreeMap<PackageName, Vec<Digest>>,
    /// pip's hash-checking mode: every package needs a `--hash`.
    pub require_hashes: bool,
    /// Pre-releases are candidates for every package (`--pre`).
    pub pre: bool,
    /// Indexes in search order (extras first, then the main one).
    pub indexes: Vec<Index>,
    pub find_links: Vec<Links>,
    /// Credentials by host; never in a URL.
    pub credentials: Vec<Credential>,
    /// Certificate authorities: the system's, `SSL_CERT_*`, pip's `cert`.
    pub trust: Trust,
    pub limits: FetchLimits,
    /// What one resolution may cost, and the largest wheel taken (`budget.rs`).
    pub budget: Budget,
    /// Parallel downloads.
    pub jobs: usize,
}

impl PythonRequest {
    /// Add a direct requirement that does not come from the profile's `python:` (a stack pin
    /// made a package, `origin` saying so).
    pub fn add_requirement(&mut self, text: &str, origin: String) -> Result<(), PypiError> {
        let requirement = pep508_rs::Requirement::from_str(text).map_err(|e| {
            PypiError::bad(
                &origin,
                format!("`{text}` is not a PEP 508 requirement: {e}"),
            )
        })?;
        self.requirements.push(Requirement {
            requirement,
            text: text.to_string(),
            origin,
        });
        Ok(())
    }

    /// Add a constraint that does not come from the profile's requirements file (the catalog's
    /// hold of NVIDIA's CUDA wheels on a pinned CUDA minor, `origin` saying so): it narrows a
    /// package only when something requires it.
    pub fn add_constraint(&mut self, text: &str, origin: String) -> Result<(), PypiError> {
        let requirement = pep508_rs::Requirement::from_str(text).map_err(|e| {
            PypiError::bad(
                &origin,
                format!("`{text}` is not a PEP 508 requirement: {e}"),
            )
        })?;
        self.constraints.push(Requirement {
            requirement,
            text: text.to_string(),
            origin,
        });
        Ok(())
    }

    /// The request of a profile's `python:` section, its indexes found as the module doc says.
    pub fn new(py: &RequestSpec, host: &HostSettings) -> Result<PythonRequest, PypiError> {
        let mut requirements = Vec::new();
        for (text, origin) in &py.packages {
            let requirement = pep508_rs::Requirement::from_str(text).map_err(|e| {
                PypiError::bad(
                    origin,
                    format!("python.packages: `{text}` is not a PEP 508 requirement: {e}"),
                )
            })?;
            requirements.push(Requirement {
                requirement,
                text: text.clone(),
                origin: origin.clone(),
            });
        }
        let mut constraints = Vec::new();
        let mut hashes: BTreeMap<PackageName, Vec<Digest>> = BTreeMap::new();
        let (mut require_hashes, mut pre) = (false, false);
        if let Some(path) = &py.requirements {
            let parsed = if pylock::is_pylock(path) {
                pylock::read(path)?
            } else {
                requirements::read(path, &py.context)?
            };
            require_hashes = parsed.require_hashes;
            pre = parsed.pre;
            for (list, lines) in [
                (&mut requirements, parsed.requirements),
                (&mut constraints, parsed.constraints),
            ] {
                for l in lines {
                    if !l.hashes.is_empty() {
                        hashes
                            .entry(l.requirement.name.clone())
                            .or_default()
                            .extend(l.hashes.iter().copied());
                    }
                    list.push(Requirement {
                        requirement: l.requirement,
                        text: l.text,
                        origin: l.origin,
                    });
                }
            }
        }
        let credentials = std::cell::RefCell::new(Vec::new());
        let files = hostconf::read_files(&host.pip_config_files, &host.uv_config_files);
        let add = |name: &str, url: &str, origin: String| -> Result<Index, PypiError> {
            let (url, cred) = index_url(url, &origin)?;
            credentials.borrow_mut().extend(cred);
            Ok(Index {
                name: name.to_string(),
                url,
                origin,
            })
        };
        // The main index.
        let main = if let Some(i) = &py.index {
            Some(add("index", i, "python.index".into())?)
        } else if let Some((var, v)) = host.index_vars.first() {
            Some(add("host", v, var.clone())?)
        } else if let Some((v, said)) = &files.index {
            Some(add("host", v, said.clone())?)
        } else {
            None
        };
        // Extras.
        let mut extras = Vec::new();
        if !py.extra_indexes.is_empty() {
            for (name, u) in &py.extra_indexes {
                extras.push(add(name, u, "python.extra-indexes".into())?);
            }
        } else if !host.extra_index_vars.is_empty() {
            for (var, list) in &host.extra_index_vars {
                for v in list.split_whitespace() {
                    // `UV_INDEX` entries may be `NAME=URL`; the lock names them all `host`.
                    let v = match v.split_once('=') {
                        Some((n, u)) if !n.contains('/') => u,
                        _ => v,
                    };
                    extras.push(add("host", v, var.clone())?);
                }
            }
        } else {
            for (v, said) in &files.extra_indexes {
                extras.push(add("host", v, said.clone())?);
            }
        }
        // Find-links.
        let mut find_links = Vec::new();
        let link = |v: &str, origin: &str, base: &Path| -> Result<Links, PypiError> {
            if v.contains("://") && !v.starts_with("file://") {
                let (url, cred) = index_url(v, origin)?;
                credentials.borrow_mut().extend(cred);
                Ok(Links::Page(url))
            } else {
                let path = v.strip_prefix("file://").unwrap_or(v);
                Ok(Links::Dir(base.join(path)))
            }
        };
        if !py.find_links.is_empty() {
            for f in &py.find_links {
                find_links.push(match f {
                    FindLinkSpec::Dir(d) => Links::Dir(d.clone()),
                    FindLinkSpec::Url(u) => link(u, "python.find-links", &py.dir)?,
                });
            }
        } else if !host.find_links_vars.is_empty() {
            for (var, list) in &host.find_links_vars {
                for v in list.split([' ', ',', '\n', '\t']).filter(|s| !s.is_empty()) {
                    find_links.push(link(v, var, Path::new("."))?);
                }
            }
        } else {
            for (v, said) in &files.find_links {
                find_links.push(link(v, said, Path::new("."))?);
            }
        }
        let main = match main {
            Some(m) => m,
            None => match &host.python {
                Some(python) => match hostconf::pip_default_index(python) {
                    Ok(u) => add("host", &u, "pip's default index".into())?,
                    Err(why) => return Err(PypiError::NoIndex { why }),
                },
                None => {
                    return Err(PypiError::NoIndex {
                        why: "no `python3` on this host".into(),
                    })
                }
            },
        };
        let mut indexes = extras;
        indexes.push(main);
        let mut credentials = credentials.into_inner();
        // Credentials: the URL's user part, else the netrc entry of the host.
        if let Some(netrc) = &host.netrc {
            let urls: Vec<&url::Url> = indexes
                .iter()
                .map(|i| &i.url)
                .chain(find_links.iter().filter_map(|l| match l {
                    Links::Page(u) => Some(u),
                    Links::Dir(_) => None,
                }))
                .collect();
            for u in urls {
                let (Some(host_name), Some(a)) = (u.host_str(), auth::authority(u)) else {
                    continue;
                };
                if credentials.iter().any(|c| c.authority == a) {
                    continue;
                }
                credentials.extend(auth::from_netrc(netrc, host_name, a));
            }
        }
        let mut trust = host.trust.clone();
        let cert = match (&host.pip_cert, &files.cert) {
            (Some(p), _) => Some((p.clone(), "PIP_CERT".to_string())),
            (None, Some((p, said))) => Some((p.clone(), format!("pip's cert ({said})"))),
            _ => None,
        };
        if let Some((path, setting)) = cert {
            trust.files.push(TrustSource { setting, path });
        }
        let budget = Budget::from_vars(&host.budget_vars)?;
        Ok(PythonRequest {
            requirements,
            constraints,
            hashes,
            require_hashes,
            pre,
            indexes,
            find_links,
            credentials,
            trust,
            limits: FetchLimits::default(),
            budget,
            jobs: 8,
        })
    }

    /// A request for these requirement strings from these indexes, nothing else (tests,
    /// benchmarks, library use). `indexes` are `(name, url)` in search order.
    pub fn from_parts(
        packages: &[&str],
        indexes: &[(&str, &str)],
    ) -> Result<PythonRequest, PypiError> {
        let mut requirements = Vec::new();
        for (n, p) in packages.iter().enumerate() {
            crate::requirement::check(p)
                .map_err(|m| PypiError::bad(format!("requirement {}", n + 1), m.to_string()))?;
            let requirement = pep508_rs::Requirement::from_str(p).map_err(|e| {
                PypiError::bad(format!("requirement {}", n + 1), format!("`{p}`: {e}"))
            })?;
            requirements.push(Requirement {
                requirement,
                text: p.to_string(),
                origin: format!("requirement {}", n + 1),
            });
        }
        let mut list = Vec::new();
        let mut credentials = Vec::new();
        for (name, u) in indexes {
            let (url, cred) = index_url(u, name)?;
            credentials.extend(cred);
            list.push(Index {
                name: name.to_string(),
                url,
                origin: name.to_string(),
            });
        }
        Ok(PythonRequest {
            requirements,
            constraints: Vec::new(),
            hashes: BTreeMap::new(),
            require_hashes: false,
            pre: false,
            indexes: list,
            find_links: Vec::new(),
            credentials,
            trust: Trust::default(),
            limits: FetchLimits::default(),
            budget: Budget::default(),
            jobs: 8,
        })
    }

    /// The indexes a lock's `index` name stands for, in search order.
    pub fn indexes_named(&self, name: &str) -> Vec<&Index> {
        self.indexes.iter().filter(|i| i.name == name).collect()
    }
}

/// An index URL checked and made canonical (ending in `/`), its user part split off.
fn index_url(text: &str, origin: &str) -> Result<(url::Url, Option<Credential>), PypiError> {
    let u =
        crate::requirement::index_url(text).map_err(|m| PypiError::bad(origin, m.to_string()))?;
    let (mut u, cred) = auth::split_userinfo(u);
    if !u.path().ends_with('/') {
        let p = format!("{}/", u.path());
        u.set_path(&p);
    }
    Ok((u, cred))
}
