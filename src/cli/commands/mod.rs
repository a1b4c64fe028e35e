//! One file per command: clap arguments and a short `exec`; arguments several commands share.

use std::path::PathBuf;

use crate::cli::{CliError, Settings};
use gpuimg_build::catalog::{Catalog, CatalogError};
use gpuimg_fetch::TrustSource;
use gpuimg_oci::registry;

pub mod build;
pub mod cache;
mod cache_prune;
pub mod catalog;
mod catalog_check_host;
pub mod completions;
pub mod device_code;
pub mod inspect;
pub mod lock;
pub mod push;
pub mod resolve;
mod size_table;
pub mod verify_host;

/// `--platform OS/ARCH[/VARIANT]`: one of the profile's platforms (build, lock, resolve).
pub fn parse_platform(s: &str) -> Result<gpuimg_oci::image::Platform, String> {
    gpuimg_oci::image::Platform::parse(s).ok_or_else(|| {
        format!("`{s}` is not a platform; expected `os/arch[/variant]`, e.g. `linux/arm64`")
    })
}

/// `--catalog FILE`, flattened into every command that reads the catalog.
#[derive(Debug, Clone, clap::Args)]
pub struct CatalogArgs {
    /// A catalog overlay adding or replacing records, read after
    /// `$XDG_CONFIG_HOME/gpuimg/catalog.d` (repeatable; later files win).
    #[arg(long = "catalog", value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

impl CatalogArgs {
    /// The embedded catalog with the config directory's overlays and these files.
    pub fn load(&self, settings: &Settings) -> Result<Catalog, CatalogError> {
        settings.load_catalog(&self.files)
    }
}

/// How to reach a registry: `--ca FILE`, `--plain-http`, `--verify` and `--verbose`, flattened
/// into `build` and `push`.
#[derive(Debug, Clone, clap::Args)]
pub struct RegistryArgs {
    /// Trust this CA certificate (PEM) for the registry, besides the system store (repeatable).
    #[arg(long, value_name = "FILE")]
    pub ca: Vec<PathBuf>,
    /// Allow plain HTTP to a registry that is not on loopback (credentials travel unencrypted).
    #[arg(long)]
    pub plain_http: bool,
    /// Read back every blob the registry claims to hold already (its HEAD answered 200, or it
    /// mounted it) and check its digest before the tag is put.
    #[arg(long)]
    pub verify: bool,
    /// Tell which hosts received the registry credentials (the registry, a token realm).
    #[arg(long)]
    pub verbose: bool,
}

impl RegistryArgs {
    /// Refuse the flags when the output is not a registry.
    pub fn refuse_without_registry(&self) -> Result<(), CliError> {
        for (set, flag) in [
            (!self.ca.is_empty(), "--ca"),
            (self.plain_http, "--plain-http"),
            (self.verify, "--verify"),
            (self.verbose, "--verbose"),
        ] {
            if set {
                return Err(CliError::msg(
                    2,
                    format!(
                        "`{flag}` applies to a registry output (`-o registry:HOST/REPO:TAG`) only"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The connection settings: the host's trust plus `--ca`, the host's auth files.
    pub fn connection(&self, settings: &Settings) -> Result<registry::Connection, CliError> {
        let mut trust = settings.trust();
        for ca in &self.ca {
            if !ca.is_file() {
                return Err(CliError::msg(
                    2,
                    format!("`--ca` `{}` is not a readable file", ca.display()),
                ));
            }
            trust.files.push(TrustSource {
                setting: "--ca".into(),
                path: ca.clone(),
            });
        }
        Ok(registry::Connection {
            trust,
            plain_http: self.plain_http,
            auth: settings.registry_auth_files(),
            limits: registry::PushLimits::default(),
            verify: self.verify,
            verbose: self.verbose,
        })
    }
}
