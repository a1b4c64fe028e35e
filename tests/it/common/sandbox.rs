//! The one way a test runs the built binaries: a `Sandbox` is a fresh temporary directory,
//! and the commands it makes see only that directory's configuration, cache and home.
//!
//! `Sandbox::gpuimg` sets `XDG_CONFIG_HOME` (`<sandbox>/config`), `GPUIMG_CACHE`
//! (`<sandbox>/cache`), `HOME` (`<sandbox>/home`) and `XDG_CACHE_HOME` (`<sandbox>/xdg-cache`),
//! removes `SOURCE_DATE_EPOCH` (gpuimg's default, 0, applies) and the debugging switches
//! (`GPUIMG_DEBUG_PANIC`, `GPUIMG_RESOLVER`), hides the host's Python index settings (the
//! `PIP_*`/`UV_*` index, find-links, cert and config variables and `NETRC` removed, pip's and
//! uv's configuration files turned off with `PIP_CONFIG_FILE=/dev/null` and `UV_NO_CONFIG=1`),
//! hides the host's registry credentials (`REGISTRY_AUTH_FILE`, `DOCKER_CONFIG` and
//! `XDG_RUNTIME_DIR` removed, so only `<sandbox>/home/.docker/config.json` could be read),
//! and runs in the sandbox directory. A test that
//! wants another epoch or switch sets it on the returned command; a test that shares a cache
//! between builds, or uses several, says so with `gpuimg_with_cache`. tests/tidy.rs checks that
//! no test starts a binary any other way.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The binaries a sandbox can start.
#[derive(Clone, Copy, Debug)]
pub enum Bin {
    Gpuimg,
    Selftest,
}

impl Bin {
    /// The path Cargo built the binary at. `gpuimg-selftest` is the crate `gpuimg-selftest`'s
    /// binary: Cargo builds it beside `gpuimg` when it tests the workspace (`cargo test` at the
    /// root takes every crate), which is also where `gpuimg build` looks for it.
    pub fn path(self) -> &'static Path {
        static SELFTEST: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        let gpuimg = Path::new(env!("CARGO_BIN_EXE_gpuimg"));
        match self {
            Bin::Gpuimg => gpuimg,
            Bin::Selftest => SELFTEST.get_or_init(|| {
                let p = gpuimg.with_file_name("gpuimg-selftest");
                assert!(
                    p.is_file(),
                    "{} is missing: test the whole workspace (`cargo test --workspace`), or build it first (`cargo build -p gpuimg-selftest`)",
                    p.display()
                );
                p
            }),
        }
    }
}

/// A fresh temporary directory whose path is a valid image reference (podman derives an image
/// name from the path, and names must be lowercase); removed when dropped. It dereferences to
/// its path, so `sandbox.join("p.yaml")` names a file inside it.
pub struct Sandbox {
    dir: tempfile::TempDir,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    pub fn new() -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = tempfile::Builder::new()
            .prefix(&format!("gpuimgtest-{}-{n}", std::process::id()))
            .rand_bytes(0)
            .tempdir()
            .unwrap_or_else(|e| panic!("failed to create a sandbox directory: {e}"));
        Sandbox { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Keep the directory after the sandbox is dropped (to look at it after a failure, or
    /// to compare several); returns its path.
    pub fn keep(self) -> PathBuf {
        self.dir.keep()
    }

    /// The cache `gpuimg` uses: `<sandbox>/cache`.
    pub fn cache(&self) -> PathBuf {
        self.path().join("cache")
    }

    /// `$XDG_CONFIG_HOME` of the commands: `<sandbox>/config` (gpuimg reads
    /// `gpuimg/catalog.d` below it).
    pub fn config(&self) -> PathBuf {
        self.path().join("config")
    }

    /// `bin`, isolated in this sandbox with `cache` as `GPUIMG_CACHE`.
    pub fn command_with_cache(&self, bin: Bin, cache: &Path) -> Command {
        isolated(bin, self.path(), cache)
    }

    /// `bin`, isolated in this sandbox with its own cache.
    pub fn command(&self, bin: Bin) -> Command {
        self.command_with_cache(bin, &self.cache())
    }

    /// `gpuimg`, isolated in this sandbox with its own cache.
    pub fn gpuimg(&self) -> Command {
        self.command(Bin::Gpuimg)
    }

    /// `gpuimg` with `cache` instead of the sandbox's own: for tests that share one cache
    /// between sandboxes or keep several in one.
    pub fn gpuimg_with_cache(&self, cache: &Path) -> Command {
        self.command_with_cache(Bin::Gpuimg, cache)
    }

    /// `gpuimg-selftest`, isolated in this sandbox.
    pub fn selftest(&self) -> Command {
        self.command(Bin::Selftest)
    }
}

impl Deref for Sandbox {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.path()
    }
}

impl AsRef<Path> for Sandbox {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

/// `bin` isolated in `dir`, a directory the test owns, exactly as a sandbox isolates its
/// commands in its own (config, cache, home below `dir`; the working directory is `dir`).
pub fn isolated_in(dir: &Path, bin: Bin) -> Command {
    isolated(bin, dir, &dir.join("cache"))
}

fn isolated(bin: Bin, dir: &Path, cache: &Path) -> Command {
    let mut c = Command::new(bin.path());
    c.current_dir(dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("GPUIMG_CACHE", cache)
        .env("HOME", dir.join("home"))
        .env("XDG_CACHE_HOME", dir.join("xdg-cache"))
        .env_remove("SOURCE_DATE_EPOCH")
        .env_remove("GPUIMG_DEBUG_PANIC")
        .env_remove("GPUIMG_RESOLVER");
    for v in PYTHON_INDEX_VARS {
        c.env_remove(v);
    }
    c.env("PIP_CONFIG_FILE", "/dev/null")
        .env("UV_NO_CONFIG", "1");
    for v in REGISTRY_AUTH_VARS {
        c.env_remove(v);
    }
    c
}

/// `c` (a sandboxed command) seeing the host's own Python index configuration again: its
/// pip configuration files and the `PYTHON_INDEX_VARS` set here, for tests that install from
/// the real index.
pub fn with_host_index(mut c: Command) -> Command {
    c.env_remove("PIP_CONFIG_FILE").env_remove("UV_NO_CONFIG");
    for v in PYTHON_INDEX_VARS.iter().chain(&["PIP_CONFIG_FILE"]) {
        if let Some(x) = std::env::var_os(v) {
            c.env(v, x);
        }
    }
    c
}

/// The host's Python index settings a sandbox hides.
pub const PYTHON_INDEX_VARS: &[&str] = &[
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_CERT",
    "UV_DEFAULT_INDEX",
    "UV_INDEX_URL",
    "UV_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "UV_CONFIG_FILE",
    "NETRC",
];

/// The host's registry credential locations a sandbox hides (a test that wants an auth file
/// sets `REGISTRY_AUTH_FILE` or `DOCKER_CONFIG` on the command, or writes
/// `<sandbox>/home/.docker/config.json`).
pub const REGISTRY_AUTH_VARS: &[&str] = &["REGISTRY_AUTH_FILE", "DOCKER_CONFIG", "XDG_RUNTIME_DIR"];
