//! Work on the GPU through the driver API: device list, the PTX functional check, bandwidth.
//!
//! Each function returns data or a one-line error naming the failing call and CUDA error.
//! Resources are released by guards on every path. Pass/fail is decided in `checks`, not here.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::time::Instant;

use super::crosscheck::normalize_pci_bus_id;
use super::cuda_api::{self as api, CuDevice, CuDevicePtr, Cuda, Handle};
use super::data::{Bandwidth, CudaDeviceResult};
use super::dl::c_buf_to_string;
use super::nvml::Nvml;
use super::ptx;

const KERNEL_ELEMENTS: u32 = 1 << 20;
const BLOCK: u32 = 256;
const H2D_BYTES: usize = 256 << 20;
const D2D_BYTES: usize = 1 << 30;
const WARMUP: usize = 2;
const REPEATS: usize = 10;

/// `cuDriverGetVersion` as `major.minor` (works before `cuInit`).
pub fn driver_version(cu: &Cuda) -> Result<String, String> {
    let mut v: c_int = 0;
    // SAFETY: valid out-pointer.
    cu.check(
        unsafe { (cu.driver_get_version)(&mut v) },
        "cuDriverGetVersion",
    )?;
    Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// `cuInit` and the devices it shows, with UUIDs in NVML's spelling.
pub fn init_and_list(cu: &Cuda) -> Result<Vec<CudaDeviceResult>, String> {
    // SAFETY: plain driver API calls with valid out-pointers.
    unsafe {
        cu.check((cu.init)(0), "cuInit")?;
        let mut n: c_int = 0;
        cu.check((cu.device_get_count)(&mut n), "cuDeviceGetCount")?;
        let mut out = Vec::new();
        for ordinal in 0..n {
            let mut dev: CuDevice = 0;
            cu.check((cu.device_get)(&mut dev, ordinal), "cuDeviceGet")?;
            let mut name = [0u8; 256];
            cu.check(
                (cu.device_get_name)(name.as_mut_ptr().cast::<c_char>(), 256, dev),
                "cuDeviceGetName",
            )?;
            let mut uuid = [0u8; 16];
            cu.check((cu.device_get_uuid)(&mut uuid, dev), "cuDeviceGetUuid")?;
            let (mut major, mut minor) = (0, 0);
            cu.check(
                (cu.device_get_attribute)(&mut major, api::ATTR_CC_MAJOR, dev),
                "cuDeviceGetAttribute",
            )?;
            cu.check(
                (cu.device_get_attribute)(&mut minor, api::ATTR_CC_MINOR, dev),
                "cuDeviceGetAttribute",
            )?;
            // Memory and bus id only feed the NVML cross-check: a failure leaves them unknown.
            let mut bytes: usize = 0;
            let memory_total_mib = ((cu.device_total_mem)(&mut bytes, dev) == 0)
                .then_some(bytes as u64 / (1024 * 1024));
            let mut bus = [0u8; 64];
            let pci_bus_id = ((cu.device_get_pci_bus_id)(bus.as_mut_ptr().cast(), 64, dev) == 0)
                .then(|| normalize_pci_bus_id(&c_buf_to_string(&bus)))
                .flatten();
            out.push(CudaDeviceResult {
                ordinal: ordinal as u32,
                uuid: format_uuid(&uuid),
                name: c_buf_to_string(&name),
                compute_capability: format!("{major}.{minor}"),
                memory_total_mib,
                pci_bus_id,
                ..CudaDeviceResult::default()
            });
        }
        Ok(out)
    }
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as NVML and nvidia-smi print it (a MIG device's
/// bytes get the `MIG-` prefix later, once NVML shows them to be a MIG device's).
pub fn format_uuid(b: &[u8; 16]) -> String {
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The primary context of one device, current on this thread while the guard lives.
struct Context<'a> {
    cu: &'a Cuda,
    dev: CuDevice,
}

impl<'a> Context<'a> {
    fn enter(cu: &'a Cuda, ordinal: u32) -> Result<Context<'a>, String> {
        let mut dev: CuDevice = 0;
        let mut ctx: Handle = std::ptr::null_mut();
        // SAFETY: valid out-pointers; the context is released in Drop.
        unsafe {
            cu.check((cu.device_get)(&mut dev, ordinal as c_int), "cuDeviceGet")?;
            cu.check(
                (cu.primary_ctx_retain)(&mut ctx, dev),
                "cuDevicePrimaryCtxRetain",
            )?;
            let guard = Context { cu, dev };
            cu.check((cu.ctx_set_current)(ctx), "cuCtxSetCurrent")?;
            Ok(guard)
        }
    }
}

impl Drop for Context<'_> {
    fn drop(&mut self) {
        // SAFETY: releases the reference taken in `enter`.
        unsafe {
            (self.cu.ctx_set_current)(std::ptr::null_mut());
            (self.cu.primary_ctx_release)(self.dev);
        }
    }
}

/// Device memory freed on drop.
struct DeviceBuf<'a> {
    cu: &'a Cuda,
    ptr: CuDevicePtr,
}

impl<'a> DeviceBuf<'a> {
    fn new(cu: &'a Cuda, bytes: usize) -> Result<DeviceBuf<'a>, String> {
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: valid out-pointer.
        cu.check(unsafe { (cu.mem_alloc)(&mut ptr, bytes) }, "cuMemAlloc")?;
        Ok(DeviceBuf { cu, ptr })
    }
}

impl Drop for DeviceBuf<'_> {
    fn drop(&mut self) {
        // SAFETY: frees the allocation made in `new`.
        unsafe { (self.cu.mem_free)(self.ptr) };
    }
}

/// Page-locked host memory freed on drop.
struct HostBuf<'a> {
    cu: &'a Cuda,
    ptr: *mut c_void,
}

impl<'a> HostBuf<'a> {
    fn new(cu: &'a Cuda, bytes: usize) -> Result<HostBuf<'a>, String> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        cu.check(
            unsafe { (cu.mem_alloc_host)(&mut ptr, bytes) },
            "cuMemAllocHost",
        )?;
        // SAFETY: `bytes` were just allocated; touch them so page faults are not timed.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0x5a, bytes) };
        Ok(HostBuf { cu, ptr })
    }
}

impl Drop for HostBuf<'_> {
    fn drop(&mut self) {
        // SAFETY: frees the allocation made in `new`.
        unsafe { (self.cu.mem_free_host)(self.ptr) };
    }
}

/// JIT the embedded PTX, run it over `KERNEL_ELEMENTS` elements, verify every one.
/// Returns the number of verified elements and the wall time in milliseconds.
pub fn functional(cu: &Cuda, ordinal: u32) -> (Result<u64, String>, f64) {
    let start = Instant::now();
    let r = functional_inner(cu, ordinal);
    (r, start.elapsed().as_secs_f64() * 1000.0)
}

fn functional_inner(cu: &Cuda, ordinal: u32) -> Result<u64, String> {
    let _ctx = Context::enter(cu, ordinal)?;
    let n = KERNEL_ELEMENTS;
    let seed = 0x00C0_FFEE ^ ordinal;
    let inputs: Vec<u32> = (0..n).map(|i| ptx::input(i, seed)).collect();
    let bytes = n as usize * 4;
    let d_in = DeviceBuf::new(cu, bytes)?;
    let d_out = DeviceBuf::new(cu, bytes)?;
    let mut log = vec![0u8; 4096];
    let image = format!("{}\0", ptx::PTX);
    let entry = format!("{}\0", ptx::ENTRY);
    // SAFETY: buffers are sized as passed; kernel params match the PTX entry's signature.
    unsafe {
        cu.check(
            (cu.memcpy_htod)(d_in.ptr, inputs.as_ptr().cast(), bytes),
            "cuMemcpyHtoD",
        )?;
        let mut opts = [
            api::JIT_ERROR_LOG_BUFFER,
            api::JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut vals = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
        let mut module: Handle = std::ptr::null_mut();
        let rc = (cu.module_load_data_ex)(
            &mut module,
            image.as_ptr().cast(),
            2,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
        );
        if rc != 0 {
            let detail = c_buf_to_string(&log);
            return Err(format!(
                "cuModuleLoadDataEx (PTX JIT): {}{}",
                cu.error_name(rc),
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", detail.trim())
                }
            ));
        }
        let result = launch_and_fetch(cu, module, &entry, &d_in, &d_out, n, seed);
        (cu.module_unload)(module);
        let outputs = result?;
        match ptx::first_mismatch(&inputs, &outputs, seed) {
            None => Ok(u64::from(n)),
            Some((i, want, got)) => {
                Err(format!("Element {i} is {got:#010x}, expected {want:#010x}"))
            }
        }
    }
}

/// # Safety
/// `module` must be a loaded module holding [`ptx::ENTRY`]; buffers hold `n` u32 each.
unsafe fn launch_and_fetch(
    cu: &Cuda,
    module: Handle,
    entry: &str,
    d_in: &DeviceBuf<'_>,
    d_out: &DeviceBuf<'_>,
    n: u32,
    seed: u32,
) -> Result<Vec<u32>, String> {
    let mut func: Handle = std::ptr::null_mut();
    cu.check(
        (cu.module_get_function)(&mut func, module, entry.as_ptr().cast()),
        "cuModuleGetFunction",
    )?;
    let (mut p_out, mut p_in, mut p_n, mut p_seed) = (d_out.ptr, d_in.ptr, n, seed);
    let mut params: [*mut c_void; 4] = [
        (&mut p_out as *mut u64).cast(),
        (&mut p_in as *mut u64).cast(),
        (&mut p_n as *mut u32).cast(),
        (&mut p_seed as *mut u32).cast(),
    ];
    let grid = n.div_ceil(BLOCK);
    cu.check(
        (cu.launch_kernel)(
            func,
            grid as c_uint,
            1,
            1,
            BLOCK,
            1,
            1,
            0,
            std::ptr::null_mut(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        ),
        "cuLaunchKernel",
    )?;
    cu.check((cu.ctx_synchronize)(), "cuCtxSynchronize (kernel)")?;
    let mut outputs = vec![0u32; n as usize];
    cu.check(
        (cu.memcpy_dtoh)(outputs.as_mut_ptr().cast(), d_out.ptr, n as usize * 4),
        "cuMemcpyDtoH",
    )?;
    Ok(outputs)
}

/// Copy bandwidths (median of `REPEATS` after `WARMUP`), and the PCIe link seen under load.
pub fn bandwidth(
    cu: &Cuda,
    ordinal: u32,
    nvml: Option<(&Nvml, &str)>,
    memory_mib: u64,
) -> Result<Bandwidth, String> {
    let _ctx = Context::enter(cu, ordinal)?;
    let d2d_bytes = D2D_BYTES
        .min((memory_mib as usize * (1 << 20)) / 8)
        .max(1 << 20);
    let a = DeviceBuf::new(cu, d2d_bytes)?;
    let b = DeviceBuf::new(cu, d2d_bytes)?;
    let host = HostBuf::new(cu, H2D_BYTES)?;
    let timer = Timer::new(cu)?;
    // SAFETY: all buffers are at least as large as the copies issued on them.
    unsafe {
        let s = timer.stream;
        let d2d = timer.median(|| (cu.memcpy_dtod_async)(b.ptr, a.ptr, d2d_bytes, s))?;
        let h2d = timer.median(|| (cu.memcpy_htod_async)(a.ptr, host.ptr, H2D_BYTES, s))?;
        // Link under load: queue copies, read the link while they run, then drain.
        for _ in 0..8 {
            cu.check(
                (cu.memcpy_htod_async)(a.ptr, host.ptr, H2D_BYTES, s),
                "cuMemcpyHtoDAsync",
            )?;
        }
        let link = nvml
            .map(|(n, uuid)| n.current_link(uuid))
            .unwrap_or((None, None));
        cu.check((cu.stream_synchronize)(s), "cuStreamSynchronize")?;
        let d2h = timer.median(|| (cu.memcpy_dtoh_async)(host.ptr, a.ptr, H2D_BYTES, s))?;
        Ok(Bandwidth {
            host_to_device_gbps: gbps(H2D_BYTES, h2d),
            device_to_host_gbps: gbps(H2D_BYTES, d2h),
            device_to_device_gbps: 2.0 * gbps(d2d_bytes, d2d),
            link_gen_under_load: link.0,
            link_width_under_load: link.1,
        })
    }
}

fn gbps(bytes: usize, ms: f64) -> f64 {
    if ms <= 0.0 {
        return 0.0;
    }
    bytes as f64 / (ms / 1000.0) / 1e9
}

/// A stream and two events for timing copies.
struct Timer<'a> {
    cu: &'a Cuda,
    stream: Handle,
    start: Handle,
    stop: Handle,
}

impl<'a> Timer<'a> {
    fn new(cu: &'a Cuda) -> Result<Timer<'a>, String> {
        let mut t = Timer {
            cu,
            stream: std::ptr::null_mut(),
            start: std::ptr::null_mut(),
            stop: std::ptr::null_mut(),
        };
        // SAFETY: valid out-pointers; destroyed in Drop (null handles are skipped).
        unsafe {
            cu.check((cu.stream_create)(&mut t.stream, 0), "cuStreamCreate")?;
            cu.check((cu.event_create)(&mut t.start, 0), "cuEventCreate")?;
            cu.check((cu.event_create)(&mut t.stop, 0), "cuEventCreate")?;
        }
        Ok(t)
    }

    /// Median milliseconds of `op` over `REPEATS` timed runs after `WARMUP` untimed ones.
    ///
    /// # Safety
    /// `op` must enqueue one valid operation on `self.stream`.
    unsafe fn median(&self, op: impl Fn() -> api::CuResult) -> Result<f64, String> {
        let cu = self.cu;
        for _ in 0..WARMUP {
            cu.check(op(), "copy (warm-up)")?;
        }
        cu.check((cu.stream_synchronize)(self.stream), "cuStreamSynchronize")?;
        let mut times = Vec::with_capacity(REPEATS);
        for _ in 0..REPEATS {
            cu.check((cu.event_record)(self.start, self.stream), "cuEventRecord")?;
            cu.check(op(), "copy")?;
            cu.check((cu.event_record)(self.stop, self.stream), "cuEventRecord")?;
            cu.check((cu.event_synchronize)(self.stop), "cuEventSynchronize")?;
            let mut ms: f32 = 0.0;
            cu.check(
                (cu.event_elapsed)(&mut ms, self.start, self.stop),
                "cuEventElapsedTime",
            )?;
            times.push(f64::from(ms));
        }
        times.sort_by(|a, b| a.total_cmp(b));
        Ok(times[REPEATS / 2])
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        // SAFETY: destroys handles created in `new`.
        unsafe {
            if !self.start.is_null() {
                (self.cu.event_destroy)(self.start);
            }
            if !self.stop.is_null() {
                (self.cu.event_destroy)(self.stop);
            }
            if !self.stream.is_null() {
                (self.cu.stream_destroy)(self.stream);
            }
        }
    }
}
