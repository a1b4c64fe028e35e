//! The self-test's one integration-test binary (no GPU needed): its checks against recorded
//! probe results, one module per area. `fixture` is the recorded H200 host they share; tests
//! that start the built `gpuimg-selftest` or build an image with it live in the root crate's
//! tests (they need `gpuimg` and its sandbox).

mod checks;
mod crosscheck;
mod fixture;
mod libraries;
mod platform;
mod require;
