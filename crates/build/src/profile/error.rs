//! Errors from loading a profile: every one names the file, and a line and column when known.

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("Failed to read profile `{path}`: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Profile `{path}` is larger than {limit} bytes")]
    TooLarge { path: String, limit: usize },
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}:{line}:{column}: {key}: {message}")]
    Invalid {
        file: String,
        line: u32,
        column: u32,
        key: String,
        message: String,
    },
}

impl ProfileError {
    /// A value that fails a check, at its position.
    pub(super) fn invalid<T>(
        file: &str,
        at: &super::Located<T>,
        key: &str,
        message: impl Into<String>,
    ) -> Self {
        ProfileError::Invalid {
            file: file.to_string(),
            line: at.line,
            column: at.column,
            key: key.to_string(),
            message: one_line(&message.into()),
        }
    }
}

/// `s` with control characters escaped (`\n`), so that a value from the profile or the
/// environment can never break an error message over several lines.
pub(super) fn one_line(s: &str) -> String {
    if !s.contains(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
