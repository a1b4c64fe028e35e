//! `gpuimg inspect`: not written yet.

use crate::cli::{CliError, Global};

#[derive(Debug, clap::Args)]
pub struct Args {
    pub path: std::path::PathBuf,
}

pub fn exec(_args: Args, _global: Global) -> Result<u8, CliError> {
    Err(CliError::msg(3, "`inspect` is not implemented yet"))
}
