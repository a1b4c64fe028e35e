//! `gpuimg resolve`: not written yet.

use crate::cli::{CliError, Global};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile.
    pub profile: std::path::PathBuf,
}

pub fn exec(_args: Args, _global: Global) -> Result<u8, CliError> {
    Err(CliError::msg(3, "`resolve` is not implemented yet"))
}
