//! One file per command: clap arguments and a short `exec`; arguments several commands share.

use std::path::PathBuf;

use crate::catalog::{Catalog, CatalogError};
use crate::cli::Settings;

pub mod build;
pub mod cache;
pub mod catalog;
pub mod completions;
pub mod device_code;
pub mod inspect;
pub mod lock;
pub mod resolve;
mod size_table;
pub mod verify_host;

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
