//! `gpuimg catalog`: not written yet.

use crate::cli::{CliError, Global};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List records of one kind.
    List { kind: String },
}

pub fn exec(_cmd: Command, _global: Global) -> Result<u8, CliError> {
    Err(CliError::msg(3, "`catalog` is not implemented yet"))
}
