//! `gpuimg-pypi`'s one integration-test binary: what runs against the crate's public API alone,
//! one module per area. The tests of resolution through a profile, against the loopback index
//! fixtures (`pypi_index`), and of images with wheels live in the root crate's tests (they need
//! `gpuimg`'s profile, its sandbox and its fixtures).

mod bench;
