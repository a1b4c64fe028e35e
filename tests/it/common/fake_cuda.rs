//! Shared objects built with `gcc` for the self-test's loading paths, on a machine without a
//! GPU: a fake `libcuda.so.1` (every driver API function the self-test resolves, or all but
//! one), and a small CUDA library that answers its version call, cut short or whole.
//!
//! The fake driver shows one device of compute capability 9.0 and refuses its context
//! (`CUDA_ERROR_FAKE`, 999), so the self-test runs its checks and never touches memory the fake
//! did not give it. Tests point the self-test at the directory with `LD_LIBRARY_PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::cmd::{require, run_ok};

/// The functions with a body that answers; every other one returns 999.
const ANSWERING: &str = r#"
#include <stddef.h>
#include <string.h>
int cuInit(unsigned flags) { return 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuGetErrorName(int e, const char **s) { *s = "CUDA_ERROR_FAKE"; return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
int cuDeviceGetName(char *b, int len, int d) { strncpy(b, "Fake GPU", len); return 0; }
int cuDeviceGetUuid(unsigned char *u, int d) { memset(u, 1, 16); return 0; }
int cuDeviceGetAttribute(int *v, int attr, int d) { *v = attr == 75 ? 9 : 0; return 0; }
int cuDeviceTotalMem_v2(size_t *b, int d) { *b = (size_t)1 << 30; return 0; }
int cuDeviceGetPCIBusId(char *b, int len, int d) { strncpy(b, "0000:01:00.0", len); return 0; }
"#;

/// The driver API functions the self-test resolves that the fake refuses.
const REFUSING: [&str; 25] = [
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuModuleLoadDataEx",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuLaunchKernel",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemAllocHost_v2",
    "cuMemFreeHost",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamDestroy_v2",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventElapsedTime",
    "cuEventDestroy_v2",
];

/// Compile C `source` into the shared object `dir/name`.
pub fn shared_object(dir: &Path, name: &str, source: &str) -> PathBuf {
    require("gcc");
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let out = dir.join(name);
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-O0", "-o"])
            .arg(&out)
            .arg(&c),
    );
    out
}

/// A fake `libcuda.so.1` in `dir`, lacking the function `without` when given.
pub fn libcuda(dir: &Path, without: Option<&str>) -> PathBuf {
    let mut source = String::new();
    for line in ANSWERING.lines() {
        let lacking = without.is_some_and(|w| line.starts_with(&format!("int {w}(")));
        if !lacking {
            source.push_str(line);
            source.push('\n');
        }
    }
    for f in REFUSING.iter().filter(|f| Some(**f) != without) {
        source.push_str(&format!("int {f}(void) {{ return 999; }}\n"));
    }
    shared_object(dir, "libcuda.so.1", &source)
}

/// A CUDA runtime `dir/name` whose `cudaRuntimeGetVersion` says 13.0, with 128 KiB of
/// read-only data between its code and its dynamic section (so a copy cut in half ends
/// before the segment the loader reads first).
pub fn cudart(dir: &Path, name: &str) -> PathBuf {
    shared_object(
        dir,
        name,
        "__attribute__((used)) static const char pad[1 << 17] = {1};\n\
         int cudaRuntimeGetVersion(int *v) { *v = 13000; return 0; }\n",
    )
}

/// Cut the file at `path` to half its size, as a broken layer or a partial copy leaves it.
pub fn cut_in_half(path: &Path) -> u64 {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let half = f.metadata().unwrap().len() / 2;
    f.set_len(half).unwrap();
    half
}
