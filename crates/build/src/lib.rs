//! gpuimg-build: the build of an image, from a profile to an image on disk or in a registry.
//!
//! The pipeline runs one way, one module per stage:
//! `profile → resolve(catalog) → lock → plan → sources(fetch) → assemble → strip → layer →
//! image → export`, settled and sequenced by `ops` and executed by `driver` (`assemble` is the
//! crate `gpuimg-assemble`; `layer`, `image`, `export` and `registry` are `gpuimg-oci`).
//! The one public entry per command is in `ops` (`ops::build::build`, `ops::lock::lock`,
//! `ops::verify`, …); `inspect` reads images back. Exit codes come from the error types
//! (`OpsError::exit_code`). Must never know about terminals or argument parsing (that is the
//! `gpuimg` CLI on top), and never plan twice: `plan` decides, `driver` only executes.

pub mod glob;
pub mod profile;

pub mod inspect;
pub mod ops;
pub mod passes;
pub mod plan;
pub mod sbom;
pub mod strip;

pub mod catalog;
pub mod driver;
pub mod lock;
pub mod resolve;
pub mod sources;
