//! `Pick`: a partial choice of one catalog record per stack component, as the search builds it.

use crate::catalog::{
    CudaRelease, CudnnBuild, CudnnRelease, JaxRelease, JaxVariant, NcclRelease, PythonRelease,
    PytorchRelease, PytorchVariant, TensorflowRelease,
};
use gpuimg_expect::version::Version;

#[derive(Debug, Clone, Copy)]
pub(super) struct CudnnPick<'c> {
    /// The version installed (a framework's exact pin, or the record's version).
    pub version: &'c Version,
    pub record: &'c CudnnRelease,
    /// The build that fits the chosen CUDA and GPUs (set by the cuDNN check).
    pub build: Option<&'c CudnnBuild>,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Pick<'c> {
    pub pytorch: Option<(&'c PytorchRelease, &'c PytorchVariant)>,
    pub tensorflow: Option<&'c TensorflowRelease>,
    pub jax: Option<(&'c JaxRelease, &'c JaxVariant)>,
    pub cuda: Option<&'c CudaRelease>,
    pub cudnn: Option<CudnnPick<'c>>,
    pub nccl: Option<&'c NcclRelease>,
    pub python: Option<&'c PythonRelease>,
}

/// `sm_75, sm_80, sm_120` from compute capabilities.
pub(super) fn sm_list(ccs: &[Version]) -> String {
    ccs.iter().map(sm).collect::<Vec<_>>().join(", ")
}

pub(super) fn sm(cc: &Version) -> String {
    format!("sm_{}{}", cc.field(0), cc.field(1))
}

/// Binary compatibility: SASS for X.y runs on X.z with z >= y; PTX for P is JIT-compiled for cc >= P.
pub(super) fn code_runs_on(sms: &[Version], ptx: Option<&Version>, cc: &Version) -> bool {
    sms.iter()
        .any(|s| s.field(0) == cc.field(0) && s.field(1) <= cc.field(1))
        || ptx.is_some_and(|p| p <= cc)
}
