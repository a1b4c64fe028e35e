//! `gpuimg-expect`: the expectation file `/etc/gpuimg/expect.json`, shared by builder and
//! self-test.
//!
//! Owns the file's format (plain serde data, format version 2; format 1 still read; its one
//! entry is `Expectation`), the version-range comparator both sides use, and `version` (the
//! version numbers and constraints the whole builder parses at its edges), and `host_text`
//! (a host's own words about its kernel, NVIDIA module and GPUs, parsed).
//! Must stay free of heavy dependencies (it is linked into `gpuimg-selftest`: serde, serde_json
//! and thiserror only) and must never probe the host or talk to a GPU.

pub mod host_text;
pub mod version;

mod expectation;
mod libraries;
mod node;
mod range;
mod settings;

pub use expectation::{
    default_host_device_floor, wrap_entrypoint, BandwidthExpectation, ExpectError, Expectation,
    HostFacts, ImagePlatform, BINARY_PATH, DEFAULT_DEVICE_DEVICE_FRACTION, DEFAULT_PATH, FORMAT,
    OLDEST_FORMAT,
};
pub use libraries::{
    DeviceCode, DeviceTarget, InvalidTarget, LibraryExpectation, TargetKind, VersionCall,
};
pub use node::{NodeExpectation, NodeSigner};
pub use range::{compare_fields, leading_fields, RangeError, VersionRange};
pub use settings::{Choices, KernelModule, OnFailure, SelftestLevel};
