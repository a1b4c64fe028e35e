//! Stage `sbom`: the image's software bill of materials as an SPDX 2.3 JSON document — one
//! package per Debian package and per wheel (name, version, supplier, declared licence,
//! download location, the archive's sha256), the image as the root package that contains
//! them, and the GPU facts the build computed (stack, CUDA libraries, compute capabilities,
//! driver floor, `NVIDIA_REQUIRE_CUDA`, the self-test's digest) as annotations on it.
//!
//! Pure: takes what the plan knows and returns bytes (canonical JSON). Files are not listed
//! (`filesAnalyzed: false`): see docs/outputs.md, "SBOM", for why. Deterministic: the creation time is
//! `SOURCE_DATE_EPOCH`, the namespace is derived from the document's own digest.

mod spdx;

pub use spdx::{document, Inventory, PackageFacts, PackageKind, SbomPackage};

/// Where the document lies in the image.
pub const SBOM_PATH: &str = "/usr/share/gpuimg/sbom.spdx.json";
