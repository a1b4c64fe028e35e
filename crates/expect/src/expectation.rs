//! The expectation data: what the image was resolved for, as the builder writes it.
//!
//! Built from plain inputs (`HostFacts` + the profile's `selftest` section) so the builder can
//! fill it from any resolver. Reading validates every range; nothing here touches a GPU.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::libraries::{DeviceCode, LibraryExpectation};
use super::node::NodeExpectation;
use super::range::{RangeError, VersionRange};
use super::settings::{Choices, KernelModule, OnFailure, SelftestLevel};

/// Where the builder puts the file inside the image.
pub const DEFAULT_PATH: &str = "/etc/gpuimg/expect.json";
/// Where the builder puts `gpuimg-selftest` inside the image.
pub const BINARY_PATH: &str = "/usr/local/bin/gpuimg-selftest";
/// The format version this build writes (format 2 adds `libraries`, `device_code`,
/// `platform` and a node image's `node`).
pub const FORMAT: u32 = 2;
/// The oldest format this build still reads.
pub const OLDEST_FORMAT: u32 = 1;
/// Device-to-device floor as a fraction of the catalog peak, unless the profile overrides it.
pub const DEFAULT_DEVICE_DEVICE_FRACTION: f64 = 0.8;

/// Host facts from the resolution, as plain data (the resolver fills it; tests write it by hand).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostFacts {
    /// Image name (shown in reports).
    pub image: Option<String>,
    /// The image's platform (the profile's `platform`), in OCI terms.
    pub platform: Option<ImagePlatform>,
    /// Driver constraint, e.g. `>=550.54.15`.
    pub driver_range: Option<String>,
    /// Kernel constraint, e.g. `>=5.15`.
    pub kernel_range: Option<String>,
    pub module: KernelModule,
    /// Oldest CUDA version the driver must support, e.g. `12.4`.
    pub cuda_driver_floor: Option<String>,
    /// Catalog GPU names (`H200`); empty with no compute capabilities means any GPU.
    pub gpus: Vec<String>,
    /// Compute capabilities (`9.0`).
    pub compute_capabilities: Vec<String>,
    /// Catalog peak device memory bandwidth per GPU name, GB/s.
    pub peak_bandwidth_gbps: BTreeMap<String, f64>,
    /// The image's `NVIDIA_REQUIRE_*`, `NVIDIA_DISABLE_REQUIRE` and `CUDA_VERSION` (name → value).
    pub nvidia_require: BTreeMap<String, String>,
    /// The CUDA libraries the image carries, with their locked versions (in load order).
    pub libraries: Vec<LibraryExpectation>,
    /// The device code the image's GPU programs carry, when known.
    pub device_code: Option<DeviceCode>,
}

/// Bandwidth floors for `--level full`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandwidthExpectation {
    /// Host↔device floor in GB/s; `None` picks one from the PCIe link (Gen5 x16: 48, Gen4 x16: 22).
    #[serde(default)]
    pub host_device_gbps: Option<f64>,
    /// Device-to-device floor as a fraction of `peak_device_gbps` for the GPU.
    #[serde(default = "default_fraction")]
    pub device_device_fraction: f64,
    /// Catalog peak memory bandwidth per GPU name, GB/s.
    #[serde(default)]
    pub peak_device_gbps: BTreeMap<String, f64>,
}

impl Default for BandwidthExpectation {
    fn default() -> Self {
        BandwidthExpectation {
            host_device_gbps: None,
            device_device_fraction: DEFAULT_DEVICE_DEVICE_FRACTION,
            peak_device_gbps: BTreeMap::new(),
        }
    }
}

/// The OS and architecture an image was built for, in OCI terms (`linux`, `amd64`/`arm64`):
/// the self-test compares them with the host's `uname` (`platform` check).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImagePlatform {
    pub os: String,
    pub architecture: String,
}

impl std::fmt::Display for ImagePlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)
    }
}

fn one() -> u32 {
    1
}

fn default_fraction() -> f64 {
    DEFAULT_DEVICE_DEVICE_FRACTION
}

/// The contents of `/etc/gpuimg/expect.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    pub format: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Format 2: the image's OS and architecture; absent (older images) means not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<ImagePlatform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default)]
    pub kernel_module: KernelModule,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver_floor: Option<String>,
    #[serde(default)]
    pub gpus: Vec<String>,
    #[serde(default)]
    pub compute_capabilities: Vec<String>,
    #[serde(default = "one")]
    pub min_gpus: u32,
    #[serde(default)]
    pub bandwidth: BandwidthExpectation,
    #[serde(default)]
    pub nvidia_require: BTreeMap<String, String>,
    #[serde(default)]
    pub on_failure: OnFailure,
    #[serde(default)]
    pub level: SelftestLevel,
    /// Format 2: each CUDA library of the image, loaded and asked its version at start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<LibraryExpectation>,
    /// Format 2: the GPU's compute capability must be covered by this device code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_code: Option<DeviceCode>,
    /// Format 2, a node image's only: what the node was built with, for the host checks
    /// (`gpuimg-selftest --host`); absent in every container image's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeExpectation>,
}

impl Default for Expectation {
    fn default() -> Self {
        Expectation {
            format: FORMAT,
            image: None,
            platform: None,
            kernel: None,
            driver: None,
            kernel_module: KernelModule::Any,
            cuda_driver_floor: None,
            gpus: Vec::new(),
            compute_capabilities: Vec::new(),
            min_gpus: 1,
            bandwidth: BandwidthExpectation::default(),
            nvidia_require: BTreeMap::new(),
            on_failure: OnFailure::Abort,
            level: SelftestLevel::Quick,
            libraries: Vec::new(),
            device_code: None,
            node: None,
        }
    }
}

/// Why an expectation could not be read or used.
#[derive(Debug, thiserror::Error)]
pub enum ExpectError {
    #[error("Failed to read `{path}`")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Invalid expectation `{path}`: {message}")]
    Parse { path: String, message: String },
    #[error("Unsupported expectation format {found} (this build reads formats {OLDEST_FORMAT} to {FORMAT})")]
    Format { found: u32 },
    #[error("`{field}` needs expectation format 2 (the file says format {found})")]
    NeedsFormat2 { field: &'static str, found: u32 },
    #[error("Invalid `{field}` range")]
    Range {
        field: &'static str,
        #[source]
        source: RangeError,
    },
    #[error("Invalid `{field}` value `{value}`")]
    Value { field: &'static str, value: String },
}

impl Expectation {
    /// The expectation for an image from its resolved host facts and the owner's choices.
    pub fn new(host: HostFacts, selftest: &Choices) -> Expectation {
        Expectation {
            format: FORMAT,
            image: host.image,
            platform: host.platform,
            kernel: host.kernel_range,
            driver: host.driver_range,
            kernel_module: host.module,
            cuda_driver_floor: host.cuda_driver_floor,
            gpus: host.gpus,
            compute_capabilities: host.compute_capabilities,
            min_gpus: selftest.min_gpus.unwrap_or(1),
            bandwidth: BandwidthExpectation {
                host_device_gbps: selftest.host_device_gbps,
                device_device_fraction: selftest
                    .device_device_fraction
                    .unwrap_or(DEFAULT_DEVICE_DEVICE_FRACTION),
                peak_device_gbps: host.peak_bandwidth_gbps,
            },
            nvidia_require: host.nvidia_require,
            on_failure: selftest.on_failure,
            level: selftest.level,
            libraries: host.libraries,
            device_code: host.device_code,
            node: None,
        }
    }

    /// Parse and validate the JSON text of an expectation file (`path` is for messages).
    pub fn from_json(text: &str, path: &str) -> Result<Expectation, ExpectError> {
        let e: Expectation = serde_json::from_str(text).map_err(|e| ExpectError::Parse {
            path: path.to_string(),
            message: e.to_string(),
        })?;
        e.validate()?;
        Ok(e)
    }

    /// Read and validate an expectation file.
    pub fn load(path: &Path) -> Result<Expectation, ExpectError> {
        let text = std::fs::read_to_string(path).map_err(|source| ExpectError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Expectation::from_json(&text, &path.display().to_string())
    }

    /// Canonical JSON (struct fields in declaration order, maps sorted), newline-terminated.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Refuse what the checks could not use: unknown format, bad ranges, nonsense floors.
    pub fn validate(&self) -> Result<(), ExpectError> {
        if !(OLDEST_FORMAT..=FORMAT).contains(&self.format) {
            return Err(ExpectError::Format { found: self.format });
        }
        if self.format < 2 {
            let field = if !self.libraries.is_empty() {
                Some("libraries")
            } else if self.device_code.is_some() {
                Some("device_code")
            } else if self.platform.is_some() {
                Some("platform")
            } else if self.node.is_some() {
                Some("node")
            } else {
                None
            };
            if let Some(field) = field {
                return Err(ExpectError::NeedsFormat2 {
                    field,
                    found: self.format,
                });
            }
        }
        if let Some(p) = &self.platform {
            let name = |s: &str| {
                !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            };
            for (field, value) in [
                ("platform.os", &p.os),
                ("platform.architecture", &p.architecture),
            ] {
                if !name(value) {
                    return Err(ExpectError::Value {
                        field,
                        value: value.clone(),
                    });
                }
            }
        }
        if let Some(node) = &self.node {
            node.validate()?;
        }
        for lib in &self.libraries {
            let bad = |field, value: &str| ExpectError::Value {
                field,
                value: value.to_string(),
            };
            for name in std::iter::once(&lib.soname).chain(&lib.companions) {
                if name.is_empty() || name.contains('/') || name.contains('\0') || name == ".." {
                    return Err(bad("libraries.soname", name));
                }
            }
            if !lib.dir.starts_with('/') || lib.dir.contains('\0') {
                return Err(bad("libraries.dir", &lib.dir));
            }
            if lib.expected_fields().is_none() {
                return Err(bad("libraries.version", &lib.version));
            }
        }
        for (field, value) in [
            ("kernel", &self.kernel),
            ("driver", &self.driver),
            ("cuda_driver_floor", &self.cuda_driver_floor),
        ] {
            if let Some(v) = value {
                VersionRange::parse(v).map_err(|source| ExpectError::Range { field, source })?;
            }
        }
        for cc in &self.compute_capabilities {
            if super::range::leading_fields(cc).is_none() {
                return Err(ExpectError::Value {
                    field: "compute_capabilities",
                    value: cc.clone(),
                });
            }
        }
        let b = &self.bandwidth;
        let frac = b.device_device_fraction;
        if !(frac.is_finite() && frac > 0.0 && frac <= 1.0) {
            return Err(ExpectError::Value {
                field: "bandwidth.device_device_fraction",
                value: frac.to_string(),
            });
        }
        let floors = b.host_device_gbps.iter().chain(b.peak_device_gbps.values());
        for v in floors {
            if !(v.is_finite() && *v > 0.0) {
                return Err(ExpectError::Value {
                    field: "bandwidth",
                    value: v.to_string(),
                });
            }
        }
        Ok(())
    }

    /// The kernel constraint, parsed (validated already by `load`).
    pub fn kernel_range(&self) -> Option<VersionRange> {
        parsed(&self.kernel)
    }

    /// The driver constraint, parsed (validated already by `load`).
    pub fn driver_range(&self) -> Option<VersionRange> {
        parsed(&self.driver)
    }
}

fn parsed(v: &Option<String>) -> Option<VersionRange> {
    v.as_deref().and_then(|s| VersionRange::parse(s).ok())
}

/// The image entrypoint with the self-test in front (`selftest.enabled`): the self-test execs
/// the original entrypoint, with the image's `Cmd` and run-time arguments after it.
pub fn wrap_entrypoint(entrypoint: &[String]) -> Vec<String> {
    let mut v = vec![BINARY_PATH.to_string(), "--".to_string()];
    v.extend(entrypoint.iter().cloned());
    v
}

/// Host↔device floor in GB/s for a PCIe link at its maximum (fleet practice: Azure HPC health
/// checks use 48 for H200 on Gen5 x16 and 24 for A100 on Gen4; gpuimg keeps 22 on Gen4 x16).
pub fn default_host_device_floor(max_gen: u32, max_width: u32) -> Option<f64> {
    match (max_gen, max_width) {
        (g, 16) if g >= 5 => Some(48.0),
        (4, 16) => Some(22.0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_defaults() {
        let host = HostFacts {
            driver_range: Some(">=550".into()),
            gpus: vec!["H200".into()],
            ..HostFacts::default()
        };
        let e = Expectation::new(host, &Choices::default());
        let back = Expectation::from_json(&e.to_json(), "x").unwrap();
        assert_eq!(back, e);
        assert_eq!(back.min_gpus, 1);
        let minimal = Expectation::from_json(r#"{"format": 1}"#, "x").unwrap();
        assert_eq!(minimal.bandwidth.device_device_fraction, 0.8);
        assert_eq!(minimal.min_gpus, 1);
    }

    #[test]
    fn the_platform_round_trips_and_its_absence_means_no_check() {
        let host = HostFacts {
            platform: Some(ImagePlatform {
                os: "linux".into(),
                architecture: "arm64".into(),
            }),
            ..HostFacts::default()
        };
        let e = Expectation::new(host, &Choices::default());
        let json = e.to_json();
        assert!(
            json.contains(
                "\"platform\": {\n    \"os\": \"linux\",\n    \"architecture\": \"arm64\"\n  }"
            ),
            "{json}"
        );
        let back = Expectation::from_json(&json, "x").unwrap();
        assert_eq!(
            back.platform.as_ref().map(|p| p.to_string()).as_deref(),
            Some("linux/arm64")
        );
        // An older image's file has no `platform`: it loads, and nothing is compared.
        let older = Expectation::from_json(r#"{"format": 2, "driver": ">=550"}"#, "x").unwrap();
        assert_eq!(older.platform, None);
        assert!(!Expectation::default().to_json().contains("platform"));
    }

    #[test]
    fn a_bad_or_misplaced_platform_is_refused() {
        for (text, want) in [
            (
                r#"{"format": 2, "platform": {"os": "linux", "architecture": "x86_64 "}}"#,
                "Invalid `platform.architecture` value `x86_64 `",
            ),
            (
                r#"{"format": 2, "platform": {"os": "", "architecture": "arm64"}}"#,
                "Invalid `platform.os` value ``",
            ),
            (
                r#"{"format": 1, "platform": {"os": "linux", "architecture": "arm64"}}"#,
                "`platform` needs expectation format 2 (the file says format 1)",
            ),
        ] {
            let e = Expectation::from_json(text, "e").unwrap_err();
            assert_eq!(e.to_string(), want);
        }
        let e = Expectation::from_json(r#"{"format": 2, "platform": {"os": "linux"}}"#, "e")
            .unwrap_err();
        assert!(e.to_string().contains("architecture"), "{e}");
    }

    #[test]
    fn wrapped_entrypoint_hands_off_after_double_dash() {
        let w = wrap_entrypoint(&["python3".to_string(), "-m".to_string(), "app".to_string()]);
        assert_eq!(
            w,
            [
                "/usr/local/bin/gpuimg-selftest",
                "--",
                "python3",
                "-m",
                "app"
            ]
        );
        assert_eq!(
            wrap_entrypoint(&[]),
            ["/usr/local/bin/gpuimg-selftest", "--"]
        );
    }

    #[test]
    fn invalid_files_name_the_problem() {
        let e = Expectation::from_json(r#"{"format": 1, "driver": ">=x"}"#, "e.json").unwrap_err();
        assert_eq!(e.to_string(), "Invalid `driver` range");
        let e = Expectation::from_json(r#"{"format": 3}"#, "e.json").unwrap_err();
        assert!(e.to_string().contains("format 3"), "{e}");
        let lib = r#"{"name": "cudart", "soname": "libcudart.so.12", "dir": "/x", "version": "12.4.127",
            "provider": "wheel nvidia-cuda-runtime-cu12", "cuda_major": 12, "call": "cudaRuntimeGetVersion"}"#;
        let e = Expectation::from_json(
            &format!(r#"{{"format": 1, "libraries": [{lib}]}}"#),
            "e.json",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "`libraries` needs expectation format 2 (the file says format 1)"
        );
        let two = Expectation::from_json(&format!(r#"{{"format": 2, "libraries": [{lib}]}}"#), "e")
            .unwrap();
        assert_eq!(two.libraries[0].level, SelftestLevel::Quick);
        for (field, bad) in [
            ("libraries.dir", lib.replace(r#""/x""#, r#""x""#)),
            ("libraries.soname", lib.replace("libcudart.so.12", "a/b")),
            ("libraries.version", lib.replace("12.4.127", "12")),
        ] {
            let e =
                Expectation::from_json(&format!(r#"{{"format": 2, "libraries": [{bad}]}}"#), "e")
                    .unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
        }
        let e = Expectation::from_json(
            r#"{"format": 2, "device_code": {"targets": ["sm9"], "source": "x"}}"#,
            "e",
        )
        .unwrap_err();
        assert!(e.to_string().contains("sm9"), "{e}");
        let e = Expectation::from_json(r#"{"format": 1, "drivr": "1"}"#, "e.json").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Invalid expectation `e.json`: unknown field `drivr`"),
            "{e}"
        );
    }
}
