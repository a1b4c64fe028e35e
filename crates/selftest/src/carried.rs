//! Checks of what the image carries (expectation format 2): each CUDA library loads, reports
//! its locked version and suits the host's driver; each GPU is covered by the device code.
//!
//! Pure functions of the expectation and the measurements, like `checks`. A library fails
//! naming itself (key, soname, provider); the coverage check names the image's targets and
//! their source, so "no kernel image is available" is caught at start, and a GPU that runs
//! only PTX passes saying so (its size, and that the first start JIT-compiles it).

use super::check::{Because, Check, Status};
use super::data::Measurements;
use gpuimg_expect::{leading_fields, DeviceTarget, Expectation, LibraryExpectation, SelftestLevel};

/// The `probe-timeout` stage name of the library probe.
pub const LIBRARIES_STAGE: &str = "libraries";

/// One check per library of the expectation, in its order.
pub fn libraries(e: &Expectation, m: &Measurements, level: SelftestLevel) -> Vec<Check> {
    e.libraries
        .iter()
        .map(|lib| library(lib, m, level))
        .collect()
}

fn dotted(fields: &[u64]) -> String {
    fields
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

fn library(lib: &LibraryExpectation, m: &Measurements, level: SelftestLevel) -> Check {
    let name = format!("library[{}]", lib.name);
    let want = lib.expected_fields().unwrap_or_default();
    let expected = format!("{} (locked {})", dotted(&want), lib.version);
    if lib.level == SelftestLevel::Full && level == SelftestLevel::Quick {
        return Check::new(name, Status::Skip)
            .expected(expected)
            .detail("Loaded at --level full only (too large for the quick level's budget)");
    }
    let who = format!("{} ({}, {})", lib.soname, lib.name, lib.provider);
    let path = lib.path();
    let Some(p) = m
        .libraries
        .iter()
        .find(|p| p.name == lib.name && p.path == path)
    else {
        if m.timed_out.iter().any(|s| s == LIBRARIES_STAGE) {
            let mut c = Check::not_measured(name, Because::LibrariesTimedOut);
            c.expected = Some(expected);
            return c;
        }
        return Check::new(name, Status::Fail)
            .expected(expected)
            .detail(format!("{who} was not loaded"));
    };
    let c = Check::new(name, Status::Pass).expected(expected);
    let (Some(got), None) = (&p.reported, &p.error) else {
        let why = p.error.clone().unwrap_or_else(|| "no answer".into());
        return c
            .fail()
            .measured(why)
            .detail(format!("{who} does not load from {}", lib.dir));
    };
    let measured = format!(
        "{} ({} {})",
        dotted(got),
        lib.call.symbol(),
        p.raw.as_deref().unwrap_or("?")
    );
    let c = c.measured(measured);
    if *got != want {
        return c.fail().detail(format!(
            "{who} reports {}, the image's lock says {}",
            dotted(got),
            lib.version
        ));
    }
    driver_suits(c, lib, got, m)
}

/// Whether the host's driver runs a library of CUDA major `lib.cuda_major` (minor-version
/// compatibility holds within a major); for the runtime, NVRTC and nvJitLink, a warning when
/// they are newer than the driver within the major (their PTX cannot be JIT-compiled there).
fn driver_suits(c: Check, lib: &LibraryExpectation, got: &[u64], m: &Measurements) -> Check {
    let Some(drv) = m
        .cuda_driver_version
        .as_deref()
        .and_then(leading_fields)
        .filter(|f| !f.is_empty())
    else {
        return c;
    };
    let drv_major = drv[0];
    let drv_minor = drv.get(1).copied().unwrap_or(0);
    let drv_text = format!("{drv_major}.{drv_minor}");
    if drv_major < u64::from(lib.cuda_major) {
        return c.fail().detail(format!(
            "{} ({}) is a CUDA {} library; the driver supports CUDA {drv_text} (cudaErrorInsufficientDriver): it needs a driver for CUDA {}.x",
            lib.soname, lib.name, lib.cuda_major, lib.cuda_major
        ));
    }
    let reports_cuda = lib.call.fields() == 2;
    if reports_cuda && got.len() == 2 && got[0] == drv_major && got[1] > drv_minor {
        return Check {
            status: Status::Warn,
            ..c
        }
        .detail(format!(
            "CUDA {} runs on this CUDA {drv_text} driver by minor-version compatibility; PTX it produces cannot be JIT-compiled here (CUDA_ERROR_UNSUPPORTED_PTX_VERSION): compile to cubins",
            dotted(got)
        ));
    }
    c
}

/// One check per GPU: its compute capability is covered by the image's device code.
pub fn device_code(e: &Expectation, m: &Measurements) -> Vec<Check> {
    let Some(code) = &e.device_code else {
        return Vec::new();
    };
    let mut ccs: Vec<(u32, String)> = m
        .gpus
        .iter()
        .map(|g| (g.index, g.compute_capability.clone()))
        .collect();
    if ccs.is_empty() {
        ccs = m
            .cuda_devices
            .iter()
            .map(|d| (d.ordinal, d.compute_capability.clone()))
            .collect();
    }
    ccs.into_iter()
        .map(|(i, cc)| {
            let c = Check::new(format!("device-code[{i}]"), Status::Pass)
                .expected(code.describe())
                .measured(format!("cc {cc}"));
            let parsed = leading_fields(&cc).filter(|f| f.len() >= 2);
            match parsed {
                None => Check {
                    status: Status::Skip,
                    ..c
                }
                .detail("Compute capability not reported"),
                Some(f) => {
                    let (major, minor) = (f[0] as u32, f[1] as u32);
                    if let Some(ptx) = code.ptx_only(major, minor) {
                        c.detail(ptx_only(ptx, code.ptx_bytes, &cc))
                    } else if code.covers(major, minor) {
                        c
                    } else if code.source.contains("pruned for") {
                        c.fail().detail(format!(
                            "This image's device code was pruned for other GPUs ({}): it holds nothing a GPU of cc {cc} can run; build the image for this GPU (host.gpus) or without strip: [device-code]",
                            code.describe()
                        ))
                    } else {
                        c.fail().detail(format!(
                            "The image's device code ({}) has no cubin for cc {cc} and no PTX at or below it: kernels would fail with \"no kernel image is available for execution on the device\"",
                            code.describe()
                        ))
                    }
                }
            }
        })
        .collect()
}

/// The detail of a GPU that has no cubin and runs the image's PTX `ptx`.
fn ptx_only(ptx: DeviceTarget, bytes: Option<u64>, cc: &str) -> String {
    let size = match bytes {
        // One decimal of a megabyte (10^6 bytes), in integers.
        Some(b) => format!("{}.{} MB of PTX", b / 1_000_000, (b % 1_000_000) / 100_000),
        None => "its size is not recorded".to_string(),
    };
    format!(
        "Covered by PTX only ({ptx}, {size}): no cubin for cc {cc}, so the first start JIT-compiles it (the README gives seconds per MB); the driver caches the result afterwards (CUDA_CACHE_PATH, up to CUDA_CACHE_MAXSIZE)"
    )
}

trait Fail {
    fn fail(self) -> Self;
}

impl Fail for Check {
    fn fail(mut self) -> Self {
        self.status = Status::Fail;
        self
    }
}
