//! The CUDA driver API entry points gpuimg uses (`libcuda.so.1`, loaded at run time).
//!
//! Signatures only, plus error naming; the work itself is in `cuda_work.rs`.
//! Never links against the toolkit: every symbol is looked up with `dlopen`/`dlsym`.

use std::ffi::{c_char, c_float, c_int, c_uint, c_void, CStr};

use libloading::Library;

use super::dl::{self, LoadError};

const LIB: &str = "libcuda.so.1";

pub type CuResult = c_int;
pub type CuDevice = c_int;
pub type CuDevicePtr = u64;
pub type Handle = *mut c_void;

pub const ATTR_CC_MAJOR: c_int = 75;
pub const ATTR_CC_MINOR: c_int = 76;
pub const JIT_ERROR_LOG_BUFFER: c_int = 5;
pub const JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

/// The loaded driver API.
pub struct Cuda {
    _lib: Library,
    pub init: unsafe extern "C" fn(c_uint) -> CuResult,
    pub driver_get_version: unsafe extern "C" fn(*mut c_int) -> CuResult,
    pub get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    pub device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    pub device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    pub device_get_name: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    pub device_get_uuid: unsafe extern "C" fn(*mut [u8; 16], CuDevice) -> CuResult,
    pub device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult,
    pub device_total_mem: unsafe extern "C" fn(*mut usize, CuDevice) -> CuResult,
    pub device_get_pci_bus_id: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    pub primary_ctx_retain: unsafe extern "C" fn(*mut Handle, CuDevice) -> CuResult,
    pub primary_ctx_release: unsafe extern "C" fn(CuDevice) -> CuResult,
    pub ctx_set_current: unsafe extern "C" fn(Handle) -> CuResult,
    pub ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    pub module_load_data_ex: unsafe extern "C" fn(
        *mut Handle,
        *const c_void,
        c_uint,
        *mut c_int,
        *mut *mut c_void,
    ) -> CuResult,
    pub module_get_function: unsafe extern "C" fn(*mut Handle, Handle, *const c_char) -> CuResult,
    pub module_unload: unsafe extern "C" fn(Handle) -> CuResult,
    #[allow(clippy::type_complexity)]
    pub launch_kernel: unsafe extern "C" fn(
        Handle,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        Handle,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CuResult,
    pub mem_alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult,
    pub mem_free: unsafe extern "C" fn(CuDevicePtr) -> CuResult,
    pub mem_alloc_host: unsafe extern "C" fn(*mut *mut c_void, usize) -> CuResult,
    pub mem_free_host: unsafe extern "C" fn(*mut c_void) -> CuResult,
    pub memcpy_htod: unsafe extern "C" fn(CuDevicePtr, *const c_void, usize) -> CuResult,
    pub memcpy_dtoh: unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize) -> CuResult,
    pub memcpy_htod_async:
        unsafe extern "C" fn(CuDevicePtr, *const c_void, usize, Handle) -> CuResult,
    pub memcpy_dtoh_async:
        unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize, Handle) -> CuResult,
    pub memcpy_dtod_async:
        unsafe extern "C" fn(CuDevicePtr, CuDevicePtr, usize, Handle) -> CuResult,
    pub stream_create: unsafe extern "C" fn(*mut Handle, c_uint) -> CuResult,
    pub stream_synchronize: unsafe extern "C" fn(Handle) -> CuResult,
    pub stream_destroy: unsafe extern "C" fn(Handle) -> CuResult,
    pub event_create: unsafe extern "C" fn(*mut Handle, c_uint) -> CuResult,
    pub event_record: unsafe extern "C" fn(Handle, Handle) -> CuResult,
    pub event_synchronize: unsafe extern "C" fn(Handle) -> CuResult,
    pub event_elapsed: unsafe extern "C" fn(*mut c_float, Handle, Handle) -> CuResult,
    pub event_destroy: unsafe extern "C" fn(Handle) -> CuResult,
}

impl Cuda {
    /// Load `libcuda.so.1` and its entry points.
    pub fn load() -> Result<Cuda, LoadError> {
        let lib = dl::open(LIB)?;
        // SAFETY: each type below is the cuda.h signature of the named (versioned) symbol.
        unsafe {
            Ok(Cuda {
                init: dl::sym(&lib, LIB, "cuInit")?,
                driver_get_version: dl::sym(&lib, LIB, "cuDriverGetVersion")?,
                get_error_name: dl::sym(&lib, LIB, "cuGetErrorName")?,
                device_get_count: dl::sym(&lib, LIB, "cuDeviceGetCount")?,
                device_get: dl::sym(&lib, LIB, "cuDeviceGet")?,
                device_get_name: dl::sym(&lib, LIB, "cuDeviceGetName")?,
                device_get_uuid: match dl::optional(&lib, "cuDeviceGetUuid_v2") {
                    Some(f) => f,
                    None => dl::sym(&lib, LIB, "cuDeviceGetUuid")?,
                },
                device_get_attribute: dl::sym(&lib, LIB, "cuDeviceGetAttribute")?,
                device_total_mem: dl::sym(&lib, LIB, "cuDeviceTotalMem_v2")?,
                device_get_pci_bus_id: dl::sym(&lib, LIB, "cuDeviceGetPCIBusId")?,
                primary_ctx_retain: dl::sym(&lib, LIB, "cuDevicePrimaryCtxRetain")?,
                primary_ctx_release: dl::sym(&lib, LIB, "cuDevicePrimaryCtxRelease_v2")?,
                ctx_set_current: dl::sym(&lib, LIB, "cuCtxSetCurrent")?,
                ctx_synchronize: dl::sym(&lib, LIB, "cuCtxSynchronize")?,
                module_load_data_ex: dl::sym(&lib, LIB, "cuModuleLoadDataEx")?,
                module_get_function: dl::sym(&lib, LIB, "cuModuleGetFunction")?,
                module_unload: dl::sym(&lib, LIB, "cuModuleUnload")?,
                launch_kernel: dl::sym(&lib, LIB, "cuLaunchKernel")?,
                mem_alloc: dl::sym(&lib, LIB, "cuMemAlloc_v2")?,
                mem_free: dl::sym(&lib, LIB, "cuMemFree_v2")?,
                mem_alloc_host: dl::sym(&lib, LIB, "cuMemAllocHost_v2")?,
                mem_free_host: dl::sym(&lib, LIB, "cuMemFreeHost")?,
                memcpy_htod: dl::sym(&lib, LIB, "cuMemcpyHtoD_v2")?,
                memcpy_dtoh: dl::sym(&lib, LIB, "cuMemcpyDtoH_v2")?,
                memcpy_htod_async: dl::sym(&lib, LIB, "cuMemcpyHtoDAsync_v2")?,
                memcpy_dtoh_async: dl::sym(&lib, LIB, "cuMemcpyDtoHAsync_v2")?,
                memcpy_dtod_async: dl::sym(&lib, LIB, "cuMemcpyDtoDAsync_v2")?,
                stream_create: dl::sym(&lib, LIB, "cuStreamCreate")?,
                stream_synchronize: dl::sym(&lib, LIB, "cuStreamSynchronize")?,
                stream_destroy: dl::sym(&lib, LIB, "cuStreamDestroy_v2")?,
                event_create: dl::sym(&lib, LIB, "cuEventCreate")?,
                event_record: dl::sym(&lib, LIB, "cuEventRecord")?,
                event_synchronize: dl::sym(&lib, LIB, "cuEventSynchronize")?,
                event_elapsed: match dl::optional(&lib, "cuEventElapsedTime_v2") {
                    Some(f) => f,
                    None => dl::sym(&lib, LIB, "cuEventElapsedTime")?,
                },
                event_destroy: dl::sym(&lib, LIB, "cuEventDestroy_v2")?,
                _lib: lib,
            })
        }
    }

    /// `CUDA_ERROR_…` name of a result code.
    pub fn error_name(&self, code: CuResult) -> String {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: valid out-pointer; the driver returns a static string.
        let ok = unsafe { (self.get_error_name)(code, &mut p) } == 0;
        if ok && !p.is_null() {
            // SAFETY: non-NULL, NUL-terminated, static.
            let name = unsafe { CStr::from_ptr(p) }.to_string_lossy();
            format!("{name} ({code})")
        } else {
            format!("CUDA error {code}")
        }
    }

    /// `Ok(())` for CUDA_SUCCESS, the named error otherwise, prefixed with `what`.
    pub fn check(&self, code: CuResult, what: &str) -> Result<(), String> {
        if code == 0 {
            Ok(())
        } else {
            Err(format!("{what}: {}", self.error_name(code)))
        }
    }
}
