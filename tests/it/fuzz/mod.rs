//! Fuzz targets for every parser that reads untrusted bytes (RELIABILITY.md), on the stable
//! toolchain.
//!
//! Each target (`targets/`) mutates real seed inputs (tests/fuzz/corpus/) with
//! structured choices decoded by `arbitrary` from seeded random bytes, feeds the parser, and
//! checks the shared oracles (harness.rs: no panic, no hang, bounded memory) and its own
//! properties. `cargo test --test it fuzz::` runs each briefly with a fixed seed, each in a process
//! of its own (`harness::run`);
//! `scripts/fuzz.sh N` runs each for N seconds. See ARCHITECTURE.md, "Fuzzing".

mod harness;
mod mutate;
mod tar_model;
mod zip_edit;
mod targets {
    pub mod deb;
    pub mod deflate;
    pub mod elf;
    pub mod kmod;
    pub mod packages;
    pub mod profile;
    pub mod pypi;
    pub mod pypi_pages;
    pub mod release;
    pub mod require;
    pub mod tarball;
    pub mod wheel;
}

#[test]
fn fuzz_profile() {
    harness::run(&targets::profile::TARGET);
}

#[test]
fn fuzz_tarball() {
    harness::run(&targets::tarball::TARGET);
}

#[test]
fn fuzz_deb() {
    harness::run(&targets::deb::TARGET);
}

#[test]
fn fuzz_release() {
    harness::run(&targets::release::TARGET);
}

#[test]
fn fuzz_packages() {
    harness::run(&targets::packages::TARGET);
}

#[test]
fn fuzz_require() {
    harness::run(&targets::require::TARGET);
}

#[test]
fn fuzz_pypi() {
    harness::run(&targets::pypi::TARGET);
}

#[test]
fn fuzz_pypi_pages() {
    harness::run(&targets::pypi_pages::TARGET);
}

#[test]
fn fuzz_wheel() {
    harness::run(&targets::wheel::TARGET);
}

#[test]
fn fuzz_deflate() {
    harness::run(&targets::deflate::TARGET);
}

#[test]
fn fuzz_kmod() {
    harness::run(&targets::kmod::TARGET);
}

#[test]
fn fuzz_elf() {
    harness::run(&targets::elf::TARGET);
}
