//! One check's result and the verdict over all checks.
//!
//! Plain data rendered by `report`; the JSON field names are a contract scripts read: they do
//! not change (fields and status values are only ever added). A check that could not be
//! measured says so with the `not-measured` status and a typed `because`, never with a cause
//! it did not observe.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Pass,
    Fail,
    Warn,
    /// Nothing to check (no expectation, not applicable).
    Skip,
    /// There was something to check, but a probe it depends on gave no answer; `because` on the
    /// check says which. Neutral for the verdict: the probe's own check carries the failure.
    NotMeasured,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Warn => "warn",
            Status::Skip => "skip",
            Status::NotMeasured => "not-measured",
        }
    }
}

/// Why a check was not measured: the probe outcome it depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Because {
    /// `libcuda.so.1` could not be loaded, so `cuInit` was never called.
    CudaNotLoaded,
    /// `cuInit` did not answer within its time limit.
    CuinitTimedOut,
    /// `cuInit` (or listing its devices) returned an error.
    CuinitFailed,
    /// The `cuInit` probe thread died.
    CuinitCrashed,
    /// `cuDriverGetVersion` gave no answer.
    CudaVersionUnavailable,
    /// `libnvidia-ml.so.1` could not be loaded.
    NvmlNotLoaded,
    /// NVML did not answer within its time limit.
    NvmlTimedOut,
    /// `nvmlInit` or the device list returned an error.
    NvmlFailed,
    /// The NVML probe thread died.
    NvmlCrashed,
    /// An earlier CUDA probe (a kernel or copy on another GPU) timed out; later work was skipped.
    EarlierProbeTimedOut,
    /// Loading the image's CUDA libraries did not finish within its time limit.
    LibrariesTimedOut,
}

impl Because {
    /// The human reason, as printed after "not measured: ".
    pub fn as_text(self) -> &'static str {
        match self {
            Because::CudaNotLoaded => "`libcuda.so.1` not loaded, cuInit never ran",
            Because::CuinitTimedOut => "cuInit timed out",
            Because::CuinitFailed => "cuInit failed",
            Because::CuinitCrashed => "the cuInit probe crashed",
            Because::CudaVersionUnavailable => "cuDriverGetVersion gave no answer",
            Because::NvmlNotLoaded => "`libnvidia-ml.so.1` not loaded",
            Because::NvmlTimedOut => "NVML timed out",
            Because::NvmlFailed => "NVML failed",
            Because::NvmlCrashed => "the NVML probe crashed",
            Because::EarlierProbeTimedOut => "an earlier CUDA probe timed out",
            Because::LibrariesTimedOut => "loading the image's CUDA libraries timed out",
        }
    }
}

/// One check: what was expected, what was measured, and why it passed or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub expected: Option<String>,
    pub measured: Option<String>,
    pub detail: Option<String>,
    /// Set exactly when `status` is `not-measured`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because: Option<Because>,
    /// Where the measured value was read (the host checks: a file of the node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<String>,
}

impl Check {
    pub fn new(name: impl Into<String>, status: Status) -> Check {
        Check {
            name: name.into(),
            status,
            expected: None,
            measured: None,
            detail: None,
            because: None,
            read_from: None,
        }
    }

    /// A check that had something to check but depends on a probe that gave no answer.
    pub fn not_measured(name: impl Into<String>, because: Because) -> Check {
        let mut c = Check::new(name, Status::NotMeasured);
        c.because = Some(because);
        c.detail(format!("Not measured: {}", because.as_text()))
    }

    pub fn expected(mut self, v: impl Into<String>) -> Check {
        self.expected = Some(v.into());
        self
    }

    pub fn measured(mut self, v: impl Into<String>) -> Check {
        self.measured = Some(v.into());
        self
    }

    pub fn detail(mut self, v: impl Into<String>) -> Check {
        self.detail = Some(v.into());
        self
    }

    pub fn read_from(mut self, v: impl Into<String>) -> Check {
        self.read_from = Some(v.into());
        self
    }
}

/// The overall answer, and the exit code it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    Fail,
    NoGpu,
    Error,
}

impl Verdict {
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Pass => 0,
            Verdict::Fail => 1,
            Verdict::NoGpu => 4,
            Verdict::Error => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::NoGpu => "no-gpu",
            Verdict::Error => "error",
        }
    }
}
