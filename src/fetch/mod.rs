//! Stage `fetch`: download artifacts by URL into a content-addressed cache, sha256-verified.
//!
//! Owns HTTP (retries with backoff, parallel jobs), the cache layout and `--offline`.
//! Must never trust a byte it has not hashed: a cached blob is re-verified when read unless its
//! file identity is unchanged since it was hashed, and a corrupted entry is fetched again (or
//! reported, offline). Knows nothing about apt.

mod cache;
mod error;
mod http;
mod resolver;

pub use cache::Cache;
pub use error::FetchError;
pub use http::{Artifact, Fetcher};
