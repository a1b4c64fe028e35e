//! What the image carries that the self-test checks (expectation format 2): each CUDA library
//! with its locked version and the call that reads its version, and the device code coverage.
//!
//! Plain data plus the two rules both sides share: how many version fields a call reports
//! (`VersionCall::fields`) and which GPUs a device-code target runs on (`DeviceTarget::runs_on`).
//! Must never load a library or talk to a GPU.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::settings::SelftestLevel;

/// The library's own call that reports its version, as the self-test makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum VersionCall {
    /// `cudaRuntimeGetVersion(int*)`: major·1000 + minor·10.
    #[serde(rename = "cudaRuntimeGetVersion")]
    CudaRuntimeGetVersion,
    /// `nvrtcVersion(int* major, int* minor)`.
    #[serde(rename = "nvrtcVersion")]
    NvrtcVersion,
    /// `nvJitLinkVersion(unsigned* major, unsigned* minor)`.
    #[serde(rename = "nvJitLinkVersion")]
    NvJitLinkVersion,
    /// `cublasLtGetVersion()`: major·10000 + minor·100 + patch.
    #[serde(rename = "cublasLtGetVersion")]
    CublasLtGetVersion,
    /// `cublasGetProperty(MAJOR_VERSION | MINOR_VERSION | PATCH_LEVEL, int*)`.
    #[serde(rename = "cublasGetProperty")]
    CublasGetProperty,
    /// `cusparseGetProperty(…)`, as cuBLAS's.
    #[serde(rename = "cusparseGetProperty")]
    CusparseGetProperty,
    /// `cudnnGetVersion()`: major·10000 + minor·100 + patch from 9 on (major·1000 + … before).
    #[serde(rename = "cudnnGetVersion")]
    CudnnGetVersion,
    /// `ncclGetVersion(int*)`: major·10000 + minor·100 + patch from 2.9 on (·1000 before).
    #[serde(rename = "ncclGetVersion")]
    NcclGetVersion,
    /// `cufftGetVersion(int*)`: major·1000 + minor·100 + patch.
    #[serde(rename = "cufftGetVersion")]
    CufftGetVersion,
    /// `curandGetVersion(int*)`: major·1000 + minor·100 + patch.
    #[serde(rename = "curandGetVersion")]
    CurandGetVersion,
    /// `cusolverGetVersion(int*)`: major·1000 + minor·100 + patch.
    #[serde(rename = "cusolverGetVersion")]
    CusolverGetVersion,
}

impl VersionCall {
    /// The C symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            VersionCall::CudaRuntimeGetVersion => "cudaRuntimeGetVersion",
            VersionCall::NvrtcVersion => "nvrtcVersion",
            VersionCall::NvJitLinkVersion => "nvJitLinkVersion",
            VersionCall::CublasLtGetVersion => "cublasLtGetVersion",
            VersionCall::CublasGetProperty => "cublasGetProperty",
            VersionCall::CusparseGetProperty => "cusparseGetProperty",
            VersionCall::CudnnGetVersion => "cudnnGetVersion",
            VersionCall::NcclGetVersion => "ncclGetVersion",
            VersionCall::CufftGetVersion => "cufftGetVersion",
            VersionCall::CurandGetVersion => "curandGetVersion",
            VersionCall::CusolverGetVersion => "cusolverGetVersion",
        }
    }

    /// How many leading fields of the locked version the call reports: 2 (major.minor) for the
    /// runtime, NVRTC and nvJitLink, 3 (major.minor.patch) for the others.
    pub fn fields(self) -> usize {
        match self {
            VersionCall::CudaRuntimeGetVersion
            | VersionCall::NvrtcVersion
            | VersionCall::NvJitLinkVersion => 2,
            _ => 3,
        }
    }
}

/// One CUDA library the image carries, with its locked version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LibraryExpectation {
    /// The catalog's key (`cudart`, `nvrtc`, `cublaslt`, …).
    pub name: String,
    /// The file the self-test loads (`libcudart.so.12`).
    pub soname: String,
    /// Its absolute directory in the image.
    pub dir: String,
    /// The locked version (`12.4.127`, the wheel's).
    pub version: String,
    /// What brought it (`wheel nvidia-cuda-runtime-cu12`).
    pub provider: String,
    /// The CUDA major version it belongs to: the driver must support at least that major
    /// (minor-version compatibility within it).
    pub cuda_major: u32,
    pub call: VersionCall,
    /// `quick`: checked at every start; `full`: only at `--level full` (libraries too large
    /// to load within the quick level's budget on a cold page cache).
    #[serde(default)]
    pub level: SelftestLevel,
    /// Libraries of the same directory it loads itself at run time (NVRTC's builtins), loaded
    /// by the self-test after it, so a dependency they miss is caught at start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub companions: Vec<String>,
}

impl LibraryExpectation {
    /// The leading fields of the locked version the library's call reports (`12.4.127` with
    /// `cudaRuntimeGetVersion` → `[12, 4]`); `None` when the version has fewer numeric fields.
    pub fn expected_fields(&self) -> Option<Vec<u64>> {
        let n = self.call.fields();
        let fields: Vec<u64> = self
            .version
            .split('.')
            .take(n)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        (fields.len() == n).then_some(fields)
    }

    /// The path the self-test loads.
    pub fn path(&self) -> String {
        format!("{}/{}", self.dir.trim_end_matches('/'), self.soname)
    }
}

/// The device code the image's GPU programs carry, and where that list comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceCode {
    /// `sm_80` (a cubin), `sm_90a` (arch-specific cubin), `compute_90` (PTX).
    pub targets: Vec<DeviceTarget>,
    /// Where the list comes from (`catalog: pytorch 2.11.0 cu130 [wheel-inspection]`).
    pub source: String,
    /// Bytes of PTX the device code carries, when the build measured them (the self-test
    /// names them when a GPU has no cubin and runs the PTX, JIT-compiled at the first start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptx_bytes: Option<u64>,
}

impl DeviceCode {
    /// Whether a GPU of compute capability `major.minor` can run this code.
    pub fn covers(&self, major: u32, minor: u32) -> bool {
        self.targets.iter().any(|t| t.runs_on(major, minor))
    }

    /// The PTX target a GPU of compute capability `major.minor` runs when no cubin of this
    /// code covers it (the highest PTX at or below it); `None` when a cubin does, or nothing.
    pub fn ptx_only(&self, major: u32, minor: u32) -> Option<DeviceTarget> {
        let binary = self
            .targets
            .iter()
            .any(|t| t.kind != TargetKind::Ptx && t.runs_on(major, minor));
        if binary {
            return None;
        }
        self.targets
            .iter()
            .filter(|t| t.kind == TargetKind::Ptx && t.runs_on(major, minor))
            .max()
            .copied()
    }

    pub fn describe(&self) -> String {
        let t: Vec<String> = self.targets.iter().map(|t| t.to_string()).collect();
        format!("{} ({})", t.join(" "), self.source)
    }
}

/// What kind of device code a target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TargetKind {
    /// `sm_XY`: runs on the same major, minor ≥ Y.
    Cubin,
    /// `sm_XYa`: runs only on exactly X.Y.
    ArchSpecific,
    /// `sm_XYf`: family-specific, runs on the same major, minor ≥ Y.
    FamilySpecific,
    /// `compute_XY`: PTX, JIT-compiled by the driver for any X.Y or newer.
    Ptx,
}

/// One device-code target (`sm_90`, `sm_90a`, `compute_90`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeviceTarget {
    pub kind: TargetKind,
    pub major: u32,
    pub minor: u32,
}

impl DeviceTarget {
    /// The rule the driver applies: a cubin runs on its major at its minor or newer; an
    /// arch-specific cubin only on exactly its capability; PTX on its capability or newer.
    pub fn runs_on(&self, major: u32, minor: u32) -> bool {
        match self.kind {
            TargetKind::Cubin | TargetKind::FamilySpecific => {
                major == self.major && minor >= self.minor
            }
            TargetKind::ArchSpecific => major == self.major && minor == self.minor,
            TargetKind::Ptx => (major, minor) >= (self.major, self.minor),
        }
    }
}

/// Why a device-code target was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid device code target `{0}` (expected sm_XY, sm_XYa, sm_XYf or compute_XY)")]
pub struct InvalidTarget(pub String);

impl FromStr for DeviceTarget {
    type Err = InvalidTarget;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidTarget(s.to_string());
        let (ptx, rest) = match (s.strip_prefix("sm_"), s.strip_prefix("compute_")) {
            (Some(r), _) => (false, r),
            (_, Some(r)) => (true, r),
            _ => return Err(bad()),
        };
        let (digits, kind) = match (ptx, rest.strip_suffix('a'), rest.strip_suffix('f')) {
            (true, _, _) => (rest, TargetKind::Ptx),
            (false, Some(d), _) => (d, TargetKind::ArchSpecific),
            (false, None, Some(d)) => (d, TargetKind::FamilySpecific),
            (false, None, None) => (rest, TargetKind::Cubin),
        };
        if !(2..=4).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let (major, minor) = digits.split_at(digits.len() - 1);
        let major: u32 = major.parse().map_err(|_| bad())?;
        let minor: u32 = minor.parse().map_err(|_| bad())?;
        Ok(DeviceTarget { kind, major, minor })
    }
}

impl fmt::Display for DeviceTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (prefix, suffix) = match self.kind {
            TargetKind::Cubin => ("sm", ""),
            TargetKind::ArchSpecific => ("sm", "a"),
            TargetKind::FamilySpecific => ("sm", "f"),
            TargetKind::Ptx => ("compute", ""),
        };
        write!(f, "{prefix}_{}{}{suffix}", self.major, self.minor)
    }
}

impl Serialize for DeviceTarget {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceTarget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DeviceTarget {
        s.parse().unwrap()
    }

    #[test]
    fn targets_parse_and_print_back() {
        for s in [
            "sm_80",
            "sm_90a",
            "sm_100f",
            "compute_90",
            "sm_120",
            "compute_75",
        ] {
            assert_eq!(t(s).to_string(), s);
        }
        assert_eq!(
            t("sm_100"),
            DeviceTarget {
                kind: TargetKind::Cubin,
                major: 10,
                minor: 0
            }
        );
        for bad in [
            "sm90",
            "sm_",
            "sm_9",
            "compute_90a",
            "sm_9x",
            "lto_90",
            "sm_12345",
        ] {
            assert!(bad.parse::<DeviceTarget>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_drivers_rule_for_choosing_device_code() {
        // A cubin: same major, minor at least its own.
        assert!(t("sm_80").runs_on(8, 6));
        assert!(!t("sm_86").runs_on(8, 0));
        assert!(!t("sm_80").runs_on(9, 0));
        // Arch-specific: exactly that GPU.
        assert!(t("sm_90a").runs_on(9, 0));
        assert!(!t("sm_90a").runs_on(10, 0));
        // PTX: that capability or newer, across majors.
        assert!(t("compute_80").runs_on(9, 0));
        assert!(t("compute_90").runs_on(12, 0));
        assert!(!t("compute_100").runs_on(9, 0));
        let code = DeviceCode {
            targets: vec![t("sm_80"), t("sm_86")],
            source: "test".into(),
            ptx_bytes: None,
        };
        assert!(!code.covers(9, 0));
        assert!(code.covers(8, 9));
        assert_eq!(code.describe(), "sm_80 sm_86 (test)");
        let code = DeviceCode {
            targets: vec![t("sm_80"), t("compute_80"), t("compute_90")],
            source: "test".into(),
            ptx_bytes: None,
        };
        assert_eq!(code.ptx_only(8, 6), None, "the sm_80 cubin runs");
        assert_eq!(code.ptx_only(9, 0), Some(t("compute_90")));
        assert_eq!(code.ptx_only(12, 0), Some(t("compute_90")));
        assert_eq!(code.ptx_only(7, 5), None, "nothing runs");
    }

    #[test]
    fn a_call_reports_the_leading_fields_of_the_locked_version() {
        let lib = |version: &str, call| LibraryExpectation {
            name: "x".into(),
            soname: "libx.so.1".into(),
            dir: "/d/".into(),
            version: version.into(),
            provider: "wheel x".into(),
            cuda_major: 12,
            call,
            level: SelftestLevel::Quick,
            companions: vec![],
        };
        let cudart = lib("13.2.86", VersionCall::CudaRuntimeGetVersion);
        assert_eq!(cudart.expected_fields(), Some(vec![13, 2]));
        assert_eq!(cudart.path(), "/d/libx.so.1");
        let cublas = lib("13.4.1.3", VersionCall::CublasLtGetVersion);
        assert_eq!(cublas.expected_fields(), Some(vec![13, 4, 1]));
        assert_eq!(
            lib("2.28", VersionCall::NcclGetVersion).expected_fields(),
            None
        );
        assert_eq!(
            lib("9.x.1", VersionCall::CudnnGetVersion).expected_fields(),
            None
        );
    }
}
