//! `gpuimg completions SHELL`: print a completion script for bash, zsh, fish, elvish or
//! PowerShell on stdout, generated from the same clap definitions as `--help`.

use clap_complete::Shell;

use crate::cli::{print_result, CliError, Settings};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `cli` is the whole command line, so every command and option is completed.
pub fn exec(args: Args, mut cli: clap::Command, settings: &Settings) -> Result<u8, CliError> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "gpuimg", &mut script);
    print_result(settings, &String::from_utf8_lossy(&script));
    Ok(0)
}
