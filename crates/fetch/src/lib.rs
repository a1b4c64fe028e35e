//! `gpuimg-fetch`: download artifacts by URL into a content-addressed cache, sha256-verified
//! (its entry: [`Fetcher`]), with the build's progress `observe`r and `host_program` (every
//! program gpuimg starts on the build host is started through it).
//!
//! Owns HTTP (retries with backoff, parallel jobs), where in the cache each download lands,
//! and `--offline` (the cache's layout itself is `gpuimg_store::cache`'s).
//! Must never trust a byte it has not hashed: a cached blob is re-verified when read unless its
//! file identity is unchanged since it was hashed, and a corrupted entry is fetched again (or
//! reported, offline). Knows nothing about apt.
//!
//! Every download is bounded ([`FetchLimits`], defaults in the constants below): an artifact
//! must be exactly the size the signed chain gives, a root (`InRelease`, `Release`,
//! `Release.gpg`) at most [`MAX_ROOT_BYTES`] (4 MiB); an attempt is aborted when fewer than
//! [`MIN_RATE`] (4 KiB/s) × [`WINDOW`] (30 s) bytes arrived over the last window, or when the
//! headers take longer than a window; all attempts of one download share a deadline of
//! [`DEADLINE_BASE`] (120 s) + its size at [`DEADLINE_RATE`] (16 KiB/s); [`ATTEMPTS`] (4)
//! attempts at most, [`BACKOFF`] (250 ms, doubling) apart. The time they are measured in is
//! read from one [`Clock`] (a test's manual clock in debug builds; nothing else in release).
//!
//! HTTPS trusts what the host's tools trust ([`Trust`], `tls.rs`): the system store plus the
//! bundles and directories the settings phase names (`SSL_CERT_FILE`, `SSL_CERT_DIR`).

pub mod host_program;
pub mod observe;

mod cache;
mod clock;
mod dns;
mod error;
mod http;
mod limits;
mod many;
mod tls;

pub use cache::Cache;
pub use clock::{Clock, ManualClock};
pub use error::FetchError;
pub use http::{Artifact, ByteRange, Credential, Fetched, Fetcher, Get, Page};
pub use limits::{
    FetchLimits, Meter, Slow, ATTEMPTS, BACKOFF, DEADLINE_BASE, DEADLINE_RATE, MAX_ROOT_BYTES,
    MIN_RATE, WINDOW,
};
pub use tls::{Trust, TrustSource, SYSTEM_BUNDLES};
