//! Error rendering: one line on stderr, `error: message: cause: cause`, plus an optional hint.

use std::error::Error;

/// An error on its way out of the CLI, with the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
    pub hint: Option<String>,
}

impl CliError {
    /// Bad input or an I/O failure (exit code 2), from any error with its source chain.
    pub fn bad_input(e: &dyn Error) -> Self {
        CliError {
            code: 2,
            message: chain(e),
            hint: None,
        }
    }

    /// A command's failure: its exit code and hint from the error itself.
    pub fn from_ops(e: gpuimg_build::ops::OpsError) -> Self {
        CliError {
            code: e.exit_code(),
            message: chain(&e),
            hint: e.hint(),
        }
    }

    pub fn with_code(mut self, code: u8) -> Self {
        self.code = code;
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn msg(code: u8, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
            hint: None,
        }
    }

    /// `error: message` on one line; a hint, when there is one, after a blank line.
    pub fn render(&self) {
        // Bounded: what the message quotes of the input is capped and escaped here, once.
        eprintln!(
            "error: {}",
            gpuimg_entry::error_line::bounded(&self.message)
        );
        if let Some(h) = &self.hint {
            eprintln!("\nhint: {}", gpuimg_entry::error_line::bounded(h));
        }
    }
}

pub use gpuimg_entry::error_line::chain;

impl<E: Error> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError::bad_input(&e)
    }
}
