//! The integration tests, one binary (as cargo and ripgrep have): one module per area, the
//! support they share in `common` (with the binary's global allocator, `common::heap`), and
//! the fuzz targets in `fuzz` (each run in a process of its own). The self-test's own checks
//! are tested in its crate (`crates/selftest/tests/it`), as are the apt client's, the Python
//! index client's and the wheel installer's (`crates/apt/tests/it`, `crates/pypi/tests/it`,
//! `crates/wheel/tests/it`). Run one area with
//! `cargo test --test it <module>::`.

#[global_allocator]
static ALLOC: common::heap::Heap = common::heap::Heap;

mod apt_bench;
mod apt_confinement;
mod apt_driver_libraries;
mod apt_fixture;
mod apt_image;
mod apt_layers;
mod apt_resolution_cache;
mod apt_stack_providers;
mod arm64_wheels;
mod atomic_output;
mod bad_input;
mod build_image;
mod cache_layout;
mod cache_trust;
mod catalog_check_host;
mod catalog_embedded;
mod cli_snapshots;
mod common;
mod common_sandbox;
mod cuda_runtime_image;
mod device_code;
mod docker_archive;
mod duplicate_files;
mod elf_closure;
mod exit_codes;
#[cfg(debug_assertions)] // on gpuimg_fetch's manual clock, which only a debug build's Clock holds
mod fetch_bounds;
mod fetch_many;
mod fuzz;
mod golden_digest;
mod inspect_archive;
mod inspect_files;
mod inspect_index;
mod layer_reuse;
mod lock_v2;
mod node_build;
mod node_module;
mod node_resolve;
mod output_paths;
mod output_replace;
mod platforms_index;
mod profile_inputs;
mod pypi_index;
mod pypi_profile;
mod python_build;
mod python_image;
mod python_layers;
mod python_loader;
mod python_stack;
mod registry_fixture;
mod registry_index;
mod registry_push;
mod reproducible;
mod resolve_cases;
mod resolve_cli;
mod resolve_image_env;
mod resolve_property;
mod sandbox;
mod sbom;
mod selftest_arm64;
mod selftest_cli;
mod selftest_host;
mod selftest_image;
mod settings_env;
mod size_report;
mod strip_classes;
mod tidy;
mod tree_shape;
