//! The settings phase: the process environment is read here, once, and merged with the command
//! line into the explicit values the library takes. No library module reads the environment
//! (`tests/settings_env.rs` fails when one does); the only other readers are the self-test
//! binary's own edge (`selftest::process_env`: the self-test runs inside images with no
//! gpuimg CLI, and `verify-host` runs the same checks through it) and
//! `entry.rs`'s debug-build panic trigger (`GPUIMG_DEBUG_PANIC`).
//!
//! Precedence, highest first: a flag, then the environment, then the config directory, then
//! the built-in default.
//!
//! | Setting | Flag | Environment | Config / profile | Default |
//! |---|---|---|---|---|
//! | cache directory | `--cache DIR` | `GPUIMG_CACHE`, else `XDG_CACHE_HOME/gpuimg` | — | `~/.cache/gpuimg`, else `$TMPDIR/gpuimg-cache` |
//! | config directory | — | `XDG_CONFIG_HOME/gpuimg` | — | `~/.config/gpuimg` |
//! | catalog overlays | `--catalog FILE` (after, so they win) | — | `<config dir>/catalog.d/*.yaml` | the embedded catalog alone |
//! | layer dates | — | `SOURCE_DATE_EPOCH` (whole seconds) | — | 0 |
//! | path resolution in an image root | — | `GPUIMG_RESOLVER=userspace` (tests) | — | `openat2` where the kernel has it |
//! | `${VAR}` in a profile | — | the variable | — | an error naming it (or `${VAR:-default}`) |
//! | self-test level | `--level` | — | profile `selftest.level` | `quick` |
//! | image tag | `--tag` | — | the `:TAG` of `-o oci:DIR:TAG` | `latest` |
//! | trusted CAs for HTTPS | — | `SSL_CERT_FILE`, `SSL_CERT_DIR` (added to the system store) | — | the system store, else bundled roots |
//! | Python index | — | `UV_DEFAULT_INDEX`, `UV_INDEX_URL`, `PIP_INDEX_URL` (first set) | profile `python.index` (wins), then pip's and uv's files | pip's default, asked of `python3` |
//! | extra Python indexes | — | `UV_INDEX`, `UV_EXTRA_INDEX_URL`, `PIP_EXTRA_INDEX_URL` | profile `python.extra-indexes` (wins), then the files | none |
//! | find-links | — | `PIP_FIND_LINKS`, `UV_FIND_LINKS` | profile `python.find-links` (wins), then the files | none |
//! | pip's CA bundle | — | `PIP_CERT` | `cert` in pip's files | none |
//! | pip's files | — | `PIP_CONFIG_FILE` (`/dev/null`: none), `XDG_CONFIG_DIRS`, `XDG_CONFIG_HOME`, `HOME`, `VIRTUAL_ENV` | — | `/etc/xdg/pip/pip.conf`, `/etc/pip.conf`, `~/.pip/pip.conf`, `~/.config/pip/pip.conf` |
//! | uv's files | — | `UV_CONFIG_FILE`, `UV_NO_CONFIG` (none), `XDG_CONFIG_HOME`, `XDG_CONFIG_DIRS` | — | `~/.config/uv/uv.toml`, `/etc/uv/uv.toml` |
//! | index credentials | — | `NETRC` (else `~/.netrc`) | the URL's user part | none |
//! | registry credentials | — | `REGISTRY_AUTH_FILE`, `XDG_RUNTIME_DIR`, `XDG_CONFIG_HOME`, `DOCKER_CONFIG`, `HOME` | — | `$XDG_RUNTIME_DIR/containers/auth.json`, `~/.config/containers/auth.json`, `~/.docker/config.json` (first that knows the registry) |
//! | registry CAs | `--ca FILE` (added) | `SSL_CERT_FILE`, `SSL_CERT_DIR` | — | the system store |
//! | Python resolution budget | — | `GPUIMG_PYTHON_METADATA_READS`, `GPUIMG_PYTHON_RESOLVE_SECONDS`, `GPUIMG_PYTHON_RANGE_SEGMENTS` | — | 10,000 metadata reads, 900 s, 2,000,000 range segments |
//! | largest wheel taken | — | `GPUIMG_PYTHON_MAX_WHEEL_SIZE` (bytes, or `KiB`…`TiB`) | — | 8 GiB |
//! | `.pyc` compiler | — | `PATH` (`python3.X`, then `python3`) | profile `python.compile` | none |
//!
//! An empty variable counts as unset. A malformed `SOURCE_DATE_EPOCH` is bad input, exit 2,
//! for the commands that use it.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::cli::CliError;
use gpuimg_build::catalog::{Catalog, CatalogError};
use gpuimg_build::profile::{Profile, ProfileError};
use gpuimg_fetch::{Trust, TrustSource};
use gpuimg_pypi::{budget, HostSettings};

/// A snapshot of the process environment (names that are not UTF-8 are left out).
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, OsString>,
}

impl Env {
    /// Read the process environment: the only place gpuimg's CLI does.
    pub fn from_process() -> Env {
        Env {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
                .collect(),
        }
    }

    /// An environment holding exactly these variables (for tests).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Env {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), OsString::from(v)))
                .collect(),
        }
    }

    /// The value of `name`; an empty value counts as unset.
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .get(name)
            .map(OsString::as_os_str)
            .filter(|v| !v.is_empty())
    }

    /// The value of `name` as text, for a profile's `${VAR}` (set but empty stays empty; a
    /// value that is not UTF-8 counts as unset).
    pub fn text(&self, name: &str) -> Option<String> {
        self.vars
            .get(name)
            .and_then(|v| v.to_str())
            .map(String::from)
    }
}

/// Everything a command takes from outside its own arguments, read once in [`Settings::new`].
#[derive(Debug, Clone)]
pub struct Settings {
    /// `-q`: print nothing on success but `--json` output.
    pub quiet: bool,
    env: Env,
}

impl Settings {
    pub fn new(quiet: bool, env: Env) -> Settings {
        Settings { quiet, env }
    }

    /// The cache directory: `--cache`, else `GPUIMG_CACHE`, else the XDG cache directory.
    pub fn cache_root(&self, flag: Option<&Path>) -> PathBuf {
        if let Some(p) = flag {
            return p.to_path_buf();
        }
        if let Some(p) = self.env.get("GPUIMG_CACHE") {
            return PathBuf::from(p);
        }
        if let Some(p) = self.env.get("XDG_CACHE_HOME") {
            return PathBuf::from(p).join("gpuimg");
        }
        match self.env.vars.get("HOME") {
            Some(h) => PathBuf::from(h).join(".cache/gpuimg"),
            None => self.temp_dir().join("gpuimg-cache"),
        }
    }

    /// `$TMPDIR`, else `/tmp` (what `std::env::temp_dir` answers on Unix).
    fn temp_dir(&self) -> PathBuf {
        self.env
            .get("TMPDIR")
            .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
    }

    /// gpuimg's config directory: `$XDG_CONFIG_HOME/gpuimg`, else `~/.config/gpuimg`; `None`
    /// without either variable.
    pub fn config_dir(&self) -> Option<PathBuf> {
        let base = match self.env.get("XDG_CONFIG_HOME") {
            Some(d) => PathBuf::from(d),
            None => Path::new(self.env.get("HOME")?).join(".config"),
        };
        Some(base.join("gpuimg"))
    }

    /// The embedded catalog, the config directory's overlays, then `files` in order.
    pub fn load_catalog(&self, files: &[PathBuf]) -> Result<Catalog, CatalogError> {
        Catalog::load(self.config_dir().as_deref(), files)
    }

    /// `SOURCE_DATE_EPOCH`, default 0.
    pub fn source_date_epoch(&self) -> Result<u64, CliError> {
        let Some(s) = self.env.vars.get("SOURCE_DATE_EPOCH") else {
            return Ok(0);
        };
        // Not UTF-8 counts as unset, as it always has.
        let Some(s) = s.to_str().filter(|s| !s.is_empty()) else {
            return Ok(0);
        };
        s.trim().parse().map_err(|_| {
            CliError::msg(
                2,
                format!("SOURCE_DATE_EPOCH `{s}` is not a whole number of seconds"),
            )
        })
    }

    /// `GPUIMG_RESOLVER=userspace`: resolve paths in an image root in userspace even where
    /// `openat2` works (for tests). Any other value is the default, the best the kernel has.
    pub fn userspace_resolver(&self) -> bool {
        self.env
            .get("GPUIMG_RESOLVER")
            .is_some_and(|v| v == "userspace")
    }

    /// Load the profile at `path`, its `${VAR}` taken from this environment.
    pub fn load_profile(&self, path: &Path) -> Result<Profile, ProfileError> {
        gpuimg_build::profile::load(path, &|k| self.env.text(k))
    }

    /// `profile` with its `host:` taken from the node `host.from` names (a host profile,
    /// resolved; its `${VAR}` from this environment); unchanged without one.
    pub fn host_from(
        &self,
        profile: Profile,
        catalog: &gpuimg_build::catalog::Catalog,
        cache_root: &Path,
        offline: bool,
        obs: &mut dyn gpuimg_fetch::observe::Observer,
    ) -> Result<Profile, CliError> {
        gpuimg_build::ops::host_from::apply(
            profile,
            catalog,
            &|k| self.env.text(k),
            cache_root,
            offline,
            &self.trust(),
            obs,
        )
        .map_err(CliError::from_ops)
    }

    /// The certificate authorities downloads trust besides the system store:
    /// `SSL_CERT_FILE` (a bundle) and `SSL_CERT_DIR` (directories, `:`-separated).
    pub fn trust(&self) -> Trust {
        let mut t = Trust::default();
        if let Some(f) = self.env.get("SSL_CERT_FILE") {
            t.files.push(TrustSource {
                setting: "SSL_CERT_FILE".into(),
                path: PathBuf::from(f),
            });
        }
        if let Some(d) = self.env.get("SSL_CERT_DIR") {
            for p in std::env::split_paths(d).filter(|p| !p.as_os_str().is_empty()) {
                t.dirs.push(TrustSource {
                    setting: "SSL_CERT_DIR".into(),
                    path: p,
                });
            }
        }
        t
    }

    /// The auth files a push looks in, in order: `$REGISTRY_AUTH_FILE`, podman's
    /// (`$XDG_RUNTIME_DIR/containers/auth.json`, then `$XDG_CONFIG_HOME` or
    /// `~/.config/containers/auth.json`), then docker's (`$DOCKER_CONFIG/config.json`, else
    /// `~/.docker/config.json`).
    pub fn registry_auth_files(&self) -> gpuimg_oci::registry::AuthFiles {
        let mut files: Vec<(PathBuf, String)> = Vec::new();
        let home = self.env.get("HOME").map(PathBuf::from);
        if let Some(f) = self.env.get("REGISTRY_AUTH_FILE") {
            files.push((PathBuf::from(f), "REGISTRY_AUTH_FILE".into()));
        }
        if let Some(d) = self.env.get("XDG_RUNTIME_DIR") {
            files.push((
                Path::new(d).join("containers/auth.json"),
                "$XDG_RUNTIME_DIR/containers/auth.json".into(),
            ));
        }
        match (self.env.get("XDG_CONFIG_HOME"), &home) {
            (Some(d), _) => files.push((
                Path::new(d).join("containers/auth.json"),
                "$XDG_CONFIG_HOME/containers/auth.json".into(),
            )),
            (None, Some(h)) => files.push((
                h.join(".config/containers/auth.json"),
                "~/.config/containers/auth.json".into(),
            )),
            (None, None) => {}
        }
        match (self.env.get("DOCKER_CONFIG"), &home) {
            (Some(d), _) => files.push((
                Path::new(d).join("config.json"),
                "$DOCKER_CONFIG/config.json".into(),
            )),
            (None, Some(h)) => files.push((
                h.join(".docker/config.json"),
                "~/.docker/config.json".into(),
            )),
            (None, None) => {}
        }
        gpuimg_oci::registry::AuthFiles {
            files,
            helper_dirs: self.host_path(),
        }
    }

    /// What the host says about Python package indexes (see the table above).
    pub fn python_host(&self) -> HostSettings {
        let text = |k: &str| {
            self.env
                .get(k)
                .and_then(|v| v.to_str())
                .map(|v| (k.to_string(), v.to_string()))
        };
        let set = |names: &[&str]| names.iter().filter_map(|k| text(k)).collect::<Vec<_>>();
        let home = self.env.get("HOME").map(PathBuf::from);
        let config_home = self
            .env
            .get("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".config")));
        let config_dirs: Vec<PathBuf> = match self.env.get("XDG_CONFIG_DIRS") {
            Some(d) => std::env::split_paths(d).collect(),
            None => vec![PathBuf::from("/etc/xdg")],
        };
        // pip: global, user, site, then PIP_CONFIG_FILE (later wins); /dev/null means none.
        let pip_file = self.env.get("PIP_CONFIG_FILE").map(PathBuf::from);
        let pip_config_files = if pip_file.as_deref() == Some(Path::new("/dev/null")) {
            Vec::new()
        } else {
            let mut f: Vec<PathBuf> = config_dirs.iter().map(|d| d.join("pip/pip.conf")).collect();
            f.push(PathBuf::from("/etc/pip.conf"));
            if !pip_file.as_ref().is_some_and(|p| p.exists()) {
                f.extend(home.as_ref().map(|h| h.join(".pip/pip.conf")));
                f.extend(config_home.as_ref().map(|c| c.join("pip/pip.conf")));
            }
            f.extend(
                self.env
                    .get("VIRTUAL_ENV")
                    .map(|v| PathBuf::from(v).join("pip.conf")),
            );
            f.extend(pip_file);
            f
        };
        // uv: UV_CONFIG_FILE alone, else the user's then the system's (user wins).
        let uv_config_files = if self.env.get("UV_NO_CONFIG").is_some() {
            Vec::new()
        } else if let Some(f) = self.env.get("UV_CONFIG_FILE") {
            vec![PathBuf::from(f)]
        } else {
            let mut f: Vec<PathBuf> = config_home.iter().map(|c| c.join("uv/uv.toml")).collect();
            f.extend(config_dirs.iter().map(|d| d.join("uv/uv.toml")));
            f.push(PathBuf::from("/etc/uv/uv.toml"));
            f
        };
        HostSettings {
            index_vars: set(&["UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"]),
            extra_index_vars: set(&["UV_INDEX", "UV_EXTRA_INDEX_URL", "PIP_EXTRA_INDEX_URL"]),
            find_links_vars: set(&["PIP_FIND_LINKS", "UV_FIND_LINKS"]),
            pip_cert: self.env.get("PIP_CERT").map(PathBuf::from),
            pip_config_files,
            uv_config_files,
            netrc: self
                .env
                .get("NETRC")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".netrc"))),
            // Found now, in `PATH`'s absolute directories only; `None` when there is none.
            python: gpuimg_fetch::host_program::find_in("python3", &self.host_path()),
            trust: self.trust(),
            budget_vars: set(&[
                budget::READS_VAR,
                budget::SECONDS_VAR,
                budget::SEGMENTS_VAR,
                budget::MAX_WHEEL_VAR,
            ]),
        }
    }

    /// The directories of `PATH`, where `python.compile` looks for a host interpreter of the
    /// image's bytecode.
    pub fn host_path(&self) -> Vec<PathBuf> {
        self.env
            .get("PATH")
            .map(|p| {
                // Only absolute directories: `.`, `bin` or an empty entry would search the
                // working directory.
                gpuimg_fetch::host_program::search_dirs(Some(std::ffi::OsStr::new(p)))
            })
            .unwrap_or_default()
    }

    /// What `build` and `lock` need of the host for `python:`.
    pub fn python(&self) -> gpuimg_build::ops::python_packages::PythonHost {
        gpuimg_build::ops::python_packages::PythonHost {
            settings: self.python_host(),
            path: self.host_path(),
        }
    }

    /// The lookup a profile's `${VAR}` uses.
    pub fn profile_env(&self) -> impl Fn(&str) -> Option<String> + '_ {
        |k| self.env.text(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(pairs: &[(&str, &str)]) -> Settings {
        Settings::new(false, Env::from_pairs(pairs.iter().copied()))
    }

    #[test]
    fn cache_root_follows_the_precedence_table() {
        let all = [
            ("GPUIMG_CACHE", "/g"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
            ("TMPDIR", "/t"),
        ];
        let flag = Some(Path::new("/flag"));
        assert_eq!(s(&all).cache_root(flag), Path::new("/flag"));
        assert_eq!(s(&all).cache_root(None), Path::new("/g"));
        assert_eq!(s(&all[1..]).cache_root(None), Path::new("/x/gpuimg"));
        assert_eq!(s(&all[2..]).cache_root(None), Path::new("/h/.cache/gpuimg"));
        assert_eq!(s(&all[3..]).cache_root(None), Path::new("/t/gpuimg-cache"));
        assert_eq!(s(&[]).cache_root(None), Path::new("/tmp/gpuimg-cache"));
        // Empty counts as unset.
        let empty = [("GPUIMG_CACHE", ""), ("XDG_CACHE_HOME", ""), ("HOME", "/h")];
        assert_eq!(s(&empty).cache_root(None), Path::new("/h/.cache/gpuimg"));
    }

    #[test]
    fn config_dir_is_xdg_then_home() {
        let both = [("XDG_CONFIG_HOME", "/c"), ("HOME", "/h")];
        assert_eq!(s(&both).config_dir(), Some(PathBuf::from("/c/gpuimg")));
        assert_eq!(
            s(&both[1..]).config_dir(),
            Some(PathBuf::from("/h/.config/gpuimg"))
        );
        assert_eq!(
            s(&[("XDG_CONFIG_HOME", ""), ("HOME", "")]).config_dir(),
            None
        );
    }

    #[test]
    fn source_date_epoch_is_whole_seconds() {
        assert_eq!(s(&[]).source_date_epoch().ok(), Some(0));
        assert_eq!(
            s(&[("SOURCE_DATE_EPOCH", "")]).source_date_epoch().ok(),
            Some(0)
        );
        assert_eq!(
            s(&[("SOURCE_DATE_EPOCH", " 1700000000\n")])
                .source_date_epoch()
                .ok(),
            Some(1_700_000_000)
        );
        for bad in ["soon", "-1", "1.5", "0x10", "99999999999999999999"] {
            let e = s(&[("SOURCE_DATE_EPOCH", bad)])
                .source_date_epoch()
                .unwrap_err();
            assert_eq!(e.code, 2, "{bad}");
            assert!(e.message.contains(bad), "{}", e.message);
        }
    }

    #[test]
    fn only_userspace_forces_the_userspace_resolver() {
        assert!(!s(&[]).userspace_resolver());
        for other in ["", "kernel", "Userspace", "1"] {
            assert!(
                !s(&[("GPUIMG_RESOLVER", other)]).userspace_resolver(),
                "{other}"
            );
        }
        assert!(s(&[("GPUIMG_RESOLVER", "userspace")]).userspace_resolver());
    }

    #[test]
    fn python_indexes_and_trust_come_from_the_snapshot() {
        let st = s(&[
            ("PIP_INDEX_URL", "https://p/simple"),
            ("UV_INDEX_URL", "https://u/simple"),
            ("PIP_FIND_LINKS", "/w"),
            ("PIP_CONFIG_FILE", "/dev/null"),
            ("UV_NO_CONFIG", "1"),
            ("HOME", "/h"),
            ("SSL_CERT_FILE", "/ca.pem"),
            ("SSL_CERT_DIR", "/a:/b"),
        ]);
        let h = st.python_host();
        let vars: Vec<&str> = h.index_vars.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(vars, ["UV_INDEX_URL", "PIP_INDEX_URL"]);
        assert_eq!(h.find_links_vars.len(), 1);
        assert!(h.pip_config_files.is_empty() && h.uv_config_files.is_empty());
        assert_eq!(h.netrc, Some(PathBuf::from("/h/.netrc")));
        assert_eq!(h.trust.files.len(), 1);
        assert_eq!(h.trust.dirs.len(), 2);
        let none = s(&[("HOME", "/h")]).python_host();
        assert!(none.index_vars.is_empty());
        assert!(none
            .pip_config_files
            .contains(&PathBuf::from("/etc/pip.conf")));
        assert!(none
            .pip_config_files
            .contains(&PathBuf::from("/h/.config/pip/pip.conf")));
    }

    #[test]
    fn profile_variables_come_from_the_snapshot() {
        let st = s(&[("A", "1"), ("EMPTY", "")]);
        let env = st.profile_env();
        assert_eq!(env("A").as_deref(), Some("1"));
        assert_eq!(env("EMPTY").as_deref(), Some(""));
        assert_eq!(env("MISSING"), None);
    }
}
