//! gpuimg: minimal, reproducible OCI images for GPU machines.
//!
//! The root crate of the workspace: the build's orchestration and the `gpuimg` CLI on top of the
//! crates in `crates/` (ARCHITECTURE.md's crate table says which may depend on which, its
//! module table which module here may use which; `tests/tidy.rs` holds the code to both).
//! The pipeline runs one way, one module per stage:
//! `profile → resolve(catalog) → lock → plan → sources(fetch) → assemble → strip → layer →
//! image → export`, settled and sequenced by `ops` and executed by `driver` (`assemble` is the
//! crate `gpuimg-assemble`; `layer`, `image`, `export` and `registry` are `gpuimg-oci`).
//! Only the two command lines know about terminals and argument parsing: `cli` for `gpuimg`,
//! the crate `gpuimg-selftest` for `gpuimg-selftest`, with `gpuimg-entry` (parse, panic guard)
//! shared by both.
//! Exit codes come from the error types (`OpsError::exit_code`, `selftest`'s verdict).

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

pub mod cli;
