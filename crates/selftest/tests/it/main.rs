//! The self-test's one integration-test binary (no GPU needed): its checks against recorded
//! probe results, one module per area. `fixture` is the recorded H200 host they share; `host`
//! runs the host checks on node trees made by `node_tree` (shared with the root crate's tests,
//! included by path with the `cmd` helpers it uses). Tests that start the built
//! `gpuimg-selftest` or build an image with it live in the root crate's tests (they need
//! `gpuimg` and its sandbox).

#[path = "../../../../tests/it/common/cmd.rs"]
#[allow(dead_code)]
mod cmd;
#[path = "../../../../tests/it/common/node_tree.rs"]
#[allow(dead_code)]
mod node_tree;

mod checks;
mod crosscheck;
mod fixture;
mod host;
mod libraries;
mod platform;
mod require;
