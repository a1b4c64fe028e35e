//! `gpuimg-selftest`: not written yet (issue 5).
fn main() {}
