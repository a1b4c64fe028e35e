//! Why a dependent check could not be measured: the typed `nvmlInit` / `cuInit` outcome.
//!
//! Pure functions of `Measurements`. A check that needs NVML or CUDA asks here first and, when
//! the answer is `Some`, reports `not-measured` with that cause instead of guessing one.

use super::check::Because;
use super::data::{InitOutcome, Measurements};

/// Why nothing that needs an initialised CUDA (devices, kernels, copies) was measured, or
/// `None` when `cuInit` succeeded.
pub fn cuda(m: &Measurements) -> Option<Because> {
    match m.cuda_init {
        InitOutcome::Ok => None,
        InitOutcome::NotCalled if !m.cuda_loaded => Some(Because::CudaNotLoaded),
        // Loaded but never called: an earlier CUDA probe (cuDriverGetVersion) stalled.
        InitOutcome::NotCalled => Some(Because::EarlierProbeTimedOut),
        InitOutcome::Failed => Some(Because::CuinitFailed),
        InitOutcome::TimedOut => Some(Because::CuinitTimedOut),
        InitOutcome::Crashed => Some(Because::CuinitCrashed),
    }
}

/// Why NVML's view of the GPUs is missing, or `None` when NVML answered.
pub fn nvml(m: &Measurements) -> Option<Because> {
    match m.nvml_init {
        InitOutcome::Ok => None,
        InitOutcome::NotCalled => Some(Because::NvmlNotLoaded),
        InitOutcome::Failed => Some(Because::NvmlFailed),
        InitOutcome::TimedOut => Some(Because::NvmlTimedOut),
        InitOutcome::Crashed => Some(Because::NvmlCrashed),
    }
}

/// Why the driver's CUDA version is unknown, or `None` when `cuDriverGetVersion` answered.
pub fn cuda_version(m: &Measurements) -> Option<Because> {
    if m.cuda_driver_version.is_some() {
        return None;
    }
    Some(if m.cuda_loaded {
        Because::CudaVersionUnavailable
    } else {
        Because::CudaNotLoaded
    })
}
