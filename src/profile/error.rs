//! Errors from loading a profile: every one names the file, and a line and column when known.

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("Failed to read profile `{path}`: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}:{line}:{column}: Environment variable `{name}` is not set (referenced as `${{{name}}}`)")]
    UnsetVariable {
        file: String,
        line: usize,
        column: usize,
        name: String,
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
