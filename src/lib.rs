//! gpuimg: minimal, reproducible OCI images for GPU machines — the `gpuimg` command line.
//!
//! The root package of the workspace: argument parsing, progress and reports on the terminal,
//! errors rendered once and the exit code picked, on top of `gpuimg-build` (the build's
//! orchestration) and the crates below it (ARCHITECTURE.md's crate table says which may depend
//! on which). Only the two command lines know about terminals and argument parsing: `cli` for
//! `gpuimg`, the crate `gpuimg-selftest` for `gpuimg-selftest`, with `gpuimg-entry` (parse,
//! panic guard) shared by both.

pub mod cli;
