//! Errors from resolving: bad input (exit 2) is kept apart from an answer of "no" (exit 1).

use super::Explanation;

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// No combination works: the explanation names each fact and its source.
    #[error("No compatible combination: {0}")]
    Incompatible(Box<Explanation>),
    #[error("{file}:{line}:{column}: `{key}`: {source}")]
    BadConstraint {
        file: String,
        line: u32,
        column: u32,
        key: String,
        #[source]
        source: Box<gpuimg_expect::version::ConstraintError>,
    },
    #[error("{file}:{line}:{column}: Unknown GPU `{name}`{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownGpu {
        file: String,
        line: u32,
        column: u32,
        name: String,
        suggestion: Option<String>,
    },
    /// A stack version the catalog has never heard of (bad input, not a "no").
    #[error("{file}:{line}:{column}: {message}")]
    UnknownVersion {
        file: String,
        line: u32,
        column: u32,
        message: String,
    },
    #[error("{file}:{line}:{column}: `{key}: {value}` can match no version at all")]
    ConflictingPins {
        file: String,
        line: u32,
        column: u32,
        key: String,
        value: String,
    },
}

impl ResolveError {
    /// True for an answer of "no" (exit 1); false for bad input (exit 2).
    pub fn is_incompatible(&self) -> bool {
        matches!(self, ResolveError::Incompatible(_))
    }
}
