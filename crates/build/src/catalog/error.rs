//! Errors from loading the catalog: a file that cannot be read or parsed, or facts that do not hold together.

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("Failed to read catalog `{path}`")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}:{column}: {message}")]
    Parse {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("The catalog is invalid: {}", problems.join("; "))]
    Invalid { problems: Vec<String> },
}
