//! gpuimg: minimal, reproducible OCI images for GPU machines.
//!
//! The pipeline runs one way, one module per stage (see ARCHITECTURE.md):
//! `profile → resolve(catalog) → lock → fetch(sources) → assemble → strip → layer → image → export`.
//! The CLI (`src/cli`) is the only place that knows about clap, terminals and exit codes.

pub mod canonical_json;
pub mod confined;
pub mod digest;
pub mod elf;
pub mod error_line;
pub mod file_identity;
pub mod profile;
pub mod reference;
pub mod staging;

pub mod assemble;
pub mod cache;
pub mod export;
pub mod image;
pub mod inspect;
pub mod layer;
pub mod observe;
pub mod ops;
pub mod plan;
pub mod strip;

pub mod catalog;
pub mod driver;
pub mod expect;
pub mod fetch;
pub mod lock;
pub mod resolve;
pub mod selftest;
pub mod sources;
pub mod version;

pub mod cli;
