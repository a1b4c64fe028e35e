//! NVML probes (`libnvidia-ml.so.1`, loaded at run time): driver version and per-GPU health.
//!
//! Owns the few NVML signatures gpuimg uses and turns their answers into `data` structs.
//! Never decides pass/fail (that is `checks`); unsupported queries become `None`.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

use libloading::Library;

use super::crosscheck::normalize_pci_bus_id;
use super::data::{EccHealth, GpuInfo, MigDevice, PcieLink};
use super::dl::{self, c_buf_to_string, LoadError};

const LIB: &str = "libnvidia-ml.so.1";

type Ret = c_int;
type Device = *mut c_void;

/// NVML's memory-info struct (v1).
#[repr(C)]
#[derive(Default)]
struct Memory {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `nvmlPciInfo_t` as `nvmlDeviceGetPciInfo_v3` fills it.
#[repr(C)]
struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

/// The loaded NVML entry points.
pub struct Nvml {
    _lib: Library,
    init: unsafe extern "C" fn() -> Ret,
    error_string: unsafe extern "C" fn(Ret) -> *const c_char,
    driver_version: unsafe extern "C" fn(*mut c_char, c_uint) -> Ret,
    count: unsafe extern "C" fn(*mut c_uint) -> Ret,
    by_index: unsafe extern "C" fn(c_uint, *mut Device) -> Ret,
    by_uuid: unsafe extern "C" fn(*const c_char, *mut Device) -> Ret,
    name: unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Ret,
    uuid: unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Ret,
    cc: unsafe extern "C" fn(Device, *mut c_int, *mut c_int) -> Ret,
    brand: unsafe extern "C" fn(Device, *mut c_int) -> Ret,
    memory: unsafe extern "C" fn(Device, *mut Memory) -> Ret,
    max_gen: unsafe extern "C" fn(Device, *mut c_uint) -> Ret,
    max_width: unsafe extern "C" fn(Device, *mut c_uint) -> Ret,
    cur_gen: unsafe extern "C" fn(Device, *mut c_uint) -> Ret,
    cur_width: unsafe extern "C" fn(Device, *mut c_uint) -> Ret,
    ecc_mode: unsafe extern "C" fn(Device, *mut c_int, *mut c_int) -> Ret,
    ecc_total: unsafe extern "C" fn(Device, c_int, c_int, *mut c_ulonglong) -> Ret,
    temperature: unsafe extern "C" fn(Device, c_int, *mut c_uint) -> Ret,
    power: unsafe extern "C" fn(Device, *mut c_uint) -> Ret,
    power_limit: unsafe extern "C" fn(Device, *mut c_uint) -> Ret,
    retired_pending: Option<unsafe extern "C" fn(Device, *mut c_int) -> Ret>,
    remapped_rows: Option<
        unsafe extern "C" fn(Device, *mut c_uint, *mut c_uint, *mut c_uint, *mut c_uint) -> Ret,
    >,
    throttle: Option<unsafe extern "C" fn(Device, *mut c_ulonglong) -> Ret>,
    mig_mode: Option<unsafe extern "C" fn(Device, *mut c_uint, *mut c_uint) -> Ret>,
    pci_info: Option<unsafe extern "C" fn(Device, *mut PciInfo) -> Ret>,
    max_mig: Option<unsafe extern "C" fn(Device, *mut c_uint) -> Ret>,
    mig_by_index: Option<unsafe extern "C" fn(Device, c_uint, *mut Device) -> Ret>,
    mig_parent: Option<unsafe extern "C" fn(Device, *mut Device) -> Ret>,
}

/// What the NVML probe found.
#[derive(Debug, Clone, Default)]
pub struct NvmlReport {
    pub driver_version: Option<String>,
    pub error: Option<String>,
    pub gpus: Vec<GpuInfo>,
}

/// libnvidia-container's brand names, indexed by `nvmlBrandType_t`.
const BRANDS: [&str; 17] = [
    "unknown",
    "quadro",
    "tesla",
    "nvs",
    "grid",
    "geforce",
    "titan",
    "vapps",
    "vpc",
    "vcs",
    "vws",
    "cloudgaming",
    "quadrortx",
    "nvidiartx",
    "nvidia",
    "geforcertx",
    "titanrtx",
];

/// Clock event (throttle) reason bits, as nvml.h names them.
const THROTTLE: [(u64, &str); 9] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// Names of the throttle bits set in `mask`.
pub fn throttle_names(mask: u64) -> Vec<String> {
    THROTTLE
        .iter()
        .filter(|(bit, _)| mask & bit != 0)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// NVML return codes the report names.
pub fn error_name(code: Ret) -> String {
    match code {
        1 => "NVML_ERROR_UNINITIALIZED".into(),
        3 => "NVML_ERROR_NOT_SUPPORTED".into(),
        4 => "NVML_ERROR_NO_PERMISSION".into(),
        9 => "NVML_ERROR_DRIVER_NOT_LOADED".into(),
        12 => "NVML_ERROR_LIBRARY_NOT_FOUND".into(),
        15 => "NVML_ERROR_GPU_IS_LOST".into(),
        16 => "NVML_ERROR_RESET_REQUIRED".into(),
        18 => "NVML_ERROR_LIB_RM_VERSION_MISMATCH".into(),
        n => format!("NVML_ERROR_{n}"),
    }
}

impl Nvml {
    /// Load `libnvidia-ml.so.1` and its entry points.
    pub fn load() -> Result<Nvml, LoadError> {
        let lib = dl::open(LIB)?;
        // SAFETY: each type below is the nvml.h signature of the named symbol.
        unsafe {
            Ok(Nvml {
                init: dl::sym(&lib, LIB, "nvmlInit_v2")?,
                error_string: dl::sym(&lib, LIB, "nvmlErrorString")?,
                driver_version: dl::sym(&lib, LIB, "nvmlSystemGetDriverVersion")?,
                count: dl::sym(&lib, LIB, "nvmlDeviceGetCount_v2")?,
                by_index: dl::sym(&lib, LIB, "nvmlDeviceGetHandleByIndex_v2")?,
                by_uuid: dl::sym(&lib, LIB, "nvmlDeviceGetHandleByUUID")?,
                name: dl::sym(&lib, LIB, "nvmlDeviceGetName")?,
                uuid: dl::sym(&lib, LIB, "nvmlDeviceGetUUID")?,
                cc: dl::sym(&lib, LIB, "nvmlDeviceGetCudaComputeCapability")?,
                brand: dl::sym(&lib, LIB, "nvmlDeviceGetBrand")?,
                memory: dl::sym(&lib, LIB, "nvmlDeviceGetMemoryInfo")?,
                max_gen: dl::sym(&lib, LIB, "nvmlDeviceGetMaxPcieLinkGeneration")?,
                max_width: dl::sym(&lib, LIB, "nvmlDeviceGetMaxPcieLinkWidth")?,
                cur_gen: dl::sym(&lib, LIB, "nvmlDeviceGetCurrPcieLinkGeneration")?,
                cur_width: dl::sym(&lib, LIB, "nvmlDeviceGetCurrPcieLinkWidth")?,
                ecc_mode: dl::sym(&lib, LIB, "nvmlDeviceGetEccMode")?,
                ecc_total: dl::sym(&lib, LIB, "nvmlDeviceGetTotalEccErrors")?,
                temperature: dl::sym(&lib, LIB, "nvmlDeviceGetTemperature")?,
                power: dl::sym(&lib, LIB, "nvmlDeviceGetPowerUsage")?,
                power_limit: dl::sym(&lib, LIB, "nvmlDeviceGetEnforcedPowerLimit")?,
                retired_pending: dl::optional(&lib, "nvmlDeviceGetRetiredPagesPendingStatus"),
                remapped_rows: dl::optional(&lib, "nvmlDeviceGetRemappedRows"),
                throttle: dl::optional(&lib, "nvmlDeviceGetCurrentClocksEventReasons")
                    .or_else(|| dl::optional(&lib, "nvmlDeviceGetCurrentClocksThrottleReasons")),
                mig_mode: dl::optional(&lib, "nvmlDeviceGetMigMode"),
                pci_info: dl::optional(&lib, "nvmlDeviceGetPciInfo_v3"),
                max_mig: dl::optional(&lib, "nvmlDeviceGetMaxMigDeviceCount"),
                mig_by_index: dl::optional(&lib, "nvmlDeviceGetMigDeviceHandleByIndex"),
                mig_parent: dl::optional(&lib, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle"),
                _lib: lib,
            })
        }
    }

    fn describe(&self, code: Ret) -> String {
        // SAFETY: nvmlErrorString returns a static string or NULL.
        let text = unsafe { (self.error_string)(code) };
        let mut s = error_name(code);
        if !text.is_null() {
            // SAFETY: non-NULL, NUL-terminated, static.
            let t = unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy();
            s = format!("{s} ({t})");
        }
        s
    }

    /// Initialise NVML and read everything the checks use.
    pub fn probe(&self) -> NvmlReport {
        let mut r = NvmlReport::default();
        // SAFETY: plain NVML calls with valid out-pointers and buffer lengths throughout.
        unsafe {
            let rc = (self.init)();
            if rc != 0 {
                r.error = Some(self.describe(rc));
                return r;
            }
            let mut buf = [0u8; 96];
            if (self.driver_version)(buf.as_mut_ptr().cast(), buf.len() as c_uint) == 0 {
                r.driver_version = Some(c_buf_to_string(&buf));
            }
            let mut n: c_uint = 0;
            let rc = (self.count)(&mut n);
            if rc != 0 {
                r.error = Some(self.describe(rc));
                return r;
            }
            for i in 0..n {
                let mut dev: Device = std::ptr::null_mut();
                if (self.by_index)(i, &mut dev) != 0 {
                    continue;
                }
                r.gpus.push(self.gpu(i, dev));
            }
        }
        r
    }

    /// The current PCIe link of the GPU with `uuid` (for the under-load check).
    pub fn current_link(&self, uuid: &str) -> (Option<u32>, Option<u32>) {
        let Ok(c) = std::ffi::CString::new(uuid) else {
            return (None, None);
        };
        let mut dev: Device = std::ptr::null_mut();
        // SAFETY: valid C string and out-pointer; NVML was initialised by `probe`.
        unsafe {
            if (self.by_uuid)(c.as_ptr(), &mut dev) != 0 {
                return (None, None);
            }
            (u32_of(self.cur_gen, dev), u32_of(self.cur_width, dev))
        }
    }

    /// # Safety
    /// `dev` must be a handle NVML returned.
    unsafe fn gpu(&self, index: u32, dev: Device) -> GpuInfo {
        let mut g = GpuInfo {
            index,
            ..GpuInfo::default()
        };
        let mut buf = [0u8; 96];
        if (self.name)(dev, buf.as_mut_ptr().cast(), buf.len() as c_uint) == 0 {
            g.name = c_buf_to_string(&buf);
        }
        let mut buf = [0u8; 96];
        if (self.uuid)(dev, buf.as_mut_ptr().cast(), buf.len() as c_uint) == 0 {
            g.uuid = c_buf_to_string(&buf);
        }
        let (mut major, mut minor) = (0, 0);
        if (self.cc)(dev, &mut major, &mut minor) == 0 {
            g.compute_capability = format!("{major}.{minor}");
        }
        let mut brand: c_int = 0;
        if (self.brand)(dev, &mut brand) == 0 {
            g.brand = usize::try_from(brand)
                .ok()
                .and_then(|b| BRANDS.get(b))
                .unwrap_or(&"unknown")
                .to_string();
        }
        g.memory_total_mib = self.memory_mib(dev).unwrap_or(0);
        if let Some(f) = self.pci_info {
            let mut p: PciInfo = std::mem::zeroed();
            if f(dev, &mut p) == 0 {
                let bytes: Vec<u8> = p.bus_id.iter().map(|c| *c as u8).collect();
                g.pci_bus_id = normalize_pci_bus_id(&c_buf_to_string(&bytes));
            }
        }
        g.pcie = PcieLink {
            max_gen: u32_of(self.max_gen, dev),
            max_width: u32_of(self.max_width, dev),
            current_gen: u32_of(self.cur_gen, dev),
            current_width: u32_of(self.cur_width, dev),
        };
        g.ecc = self.ecc(dev);
        if let Some(f) = self.throttle {
            let mut mask: c_ulonglong = 0;
            if f(dev, &mut mask) == 0 {
                g.throttle_mask = Some(mask);
                g.throttle_reasons = throttle_names(mask);
            }
        }
        let mut t: c_uint = 0;
        if (self.temperature)(dev, 0, &mut t) == 0 {
            g.temperature_c = Some(t);
        }
        g.power_w = u32_of(self.power, dev).map(|mw| f64::from(mw) / 1000.0);
        g.power_limit_w = u32_of(self.power_limit, dev).map(|mw| f64::from(mw) / 1000.0);
        if let Some(f) = self.mig_mode {
            let (mut cur, mut pending) = (0, 0);
            if f(dev, &mut cur, &mut pending) == 0 {
                g.mig_enabled = Some(cur == 1);
            }
        }
        if g.mig_enabled == Some(true) {
            g.mig_devices = self.mig_devices(dev);
        }
        g
    }

    /// # Safety
    /// `dev` must be a handle NVML returned.
    unsafe fn memory_mib(&self, dev: Device) -> Option<u64> {
        let mut mem = Memory::default();
        ((self.memory)(dev, &mut mem) == 0).then_some(mem.total / (1024 * 1024))
    }

    /// The MIG devices under the GPU `dev` (MIG mode on), each confirmed to belong to it.
    ///
    /// # Safety
    /// `dev` must be a (non-MIG) handle NVML returned.
    unsafe fn mig_devices(&self, dev: Device) -> Vec<MigDevice> {
        let (Some(max), Some(by_index)) = (self.max_mig, self.mig_by_index) else {
            return Vec::new();
        };
        let mut n: c_uint = 0;
        if max(dev, &mut n) != 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        for index in 0..n {
            let mut mig: Device = std::ptr::null_mut();
            // Empty slots answer NVML_ERROR_NOT_FOUND.
            if by_index(dev, index, &mut mig) != 0 {
                continue;
            }
            if let Some(parent_of) = self.mig_parent {
                let mut parent: Device = std::ptr::null_mut();
                if parent_of(mig, &mut parent) != 0 || parent != dev {
                    continue;
                }
            }
            let mut m = MigDevice {
                index,
                ..MigDevice::default()
            };
            let mut buf = [0u8; 96];
            if (self.uuid)(mig, buf.as_mut_ptr().cast(), buf.len() as c_uint) == 0 {
                m.uuid = c_buf_to_string(&buf);
            }
            let mut buf = [0u8; 96];
            if (self.name)(mig, buf.as_mut_ptr().cast(), buf.len() as c_uint) == 0 {
                m.name = c_buf_to_string(&buf);
            }
            m.memory_total_mib = self.memory_mib(mig).unwrap_or(0);
            out.push(m);
        }
        out
    }

    /// # Safety
    /// `dev` must be a handle NVML returned.
    unsafe fn ecc(&self, dev: Device) -> EccHealth {
        let mut e = EccHealth::default();
        let (mut cur, mut pending) = (0, 0);
        if (self.ecc_mode)(dev, &mut cur, &mut pending) == 0 {
            e.enabled = Some(cur == 1);
        }
        let count = |err_type: c_int, counter: c_int| {
            let mut n: c_ulonglong = 0;
            ((self.ecc_total)(dev, err_type, counter, &mut n) == 0).then_some(n)
        };
        e.volatile_uncorrected = count(1, 0);
        e.aggregate_uncorrected = count(1, 1);
        e.volatile_corrected = count(0, 0);
        if let Some(f) = self.retired_pending {
            let mut p: c_int = 0;
            if f(dev, &mut p) == 0 {
                e.retired_pages_pending = Some(p == 1);
            }
        }
        if let Some(f) = self.remapped_rows {
            let (mut corr, mut unc, mut pend, mut fail) = (0, 0, 0, 0);
            if f(dev, &mut corr, &mut unc, &mut pend, &mut fail) == 0 {
                e.remapped_rows_correctable = Some(corr);
                e.remapped_rows_uncorrectable = Some(unc);
                e.remap_pending = Some(pend != 0);
                e.remap_failure = Some(fail != 0);
            }
        }
        e
    }
}

/// # Safety
/// `f` must be an NVML getter of one `unsigned int`, `dev` a valid handle.
unsafe fn u32_of(f: unsafe extern "C" fn(Device, *mut c_uint) -> Ret, dev: Device) -> Option<u32> {
    let mut v: c_uint = 0;
    (f(dev, &mut v) == 0).then_some(v)
}
