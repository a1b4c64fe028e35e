//! Runs the probes, each on a worker thread with a time limit, and gathers `Measurements`.
//!
//! A probe that does not answer in time is recorded in `timed_out` (and, for `nvmlInit` and
//! `cuInit`, as a typed `InitOutcome`) and the rest of the CUDA work is skipped (a hung driver
//! would hang it too); the process never waits past a limit.
//! NVML and `cuInit` run in parallel: together they are most of the quick level's time. The
//! image's CUDA libraries are loaded on a third thread meanwhile (only on a host with a driver).

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::carried::LIBRARIES_STAGE;
use super::crosscheck::respell_mig_uuids;
use super::cuda_api::Cuda;
use super::cuda_work;
use super::data::{CudaDeviceResult, InitOutcome, LibraryProbe, Measurements};
use super::libraries;
use super::nvml::{Nvml, NvmlReport};
use super::platform;
use super::procfs;
use gpuimg_expect::{LibraryExpectation, SelftestLevel};

const NVML_LIMIT: Duration = Duration::from_secs(10);
const VERSION_LIMIT: Duration = Duration::from_secs(5);
const CUDA_INIT_LIMIT: Duration = Duration::from_secs(20);
const KERNEL_LIMIT: Duration = Duration::from_secs(15);
const BANDWIDTH_LIMIT: Duration = Duration::from_secs(30);
const LIBRARIES_LIMIT: Duration = Duration::from_secs(30);

/// Why a probe gave no answer.
enum Stalled {
    TimedOut,
    Crashed,
}

/// Run `f` on its own thread; give up after `limit`.
fn with_limit<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Stalled> {
    let (tx, rx) = mpsc::channel();
    let spawned = thread::Builder::new()
        .name("gpuimg-probe".into())
        .spawn(move || {
            let _ = tx.send(f());
        });
    if spawned.is_err() {
        return Err(Stalled::Crashed);
    }
    rx.recv_timeout(limit).map_err(|e| match e {
        mpsc::RecvTimeoutError::Timeout => Stalled::TimedOut,
        mpsc::RecvTimeoutError::Disconnected => Stalled::Crashed,
    })
}

fn note(m: &mut Measurements, stage: &str, s: Stalled) {
    match s {
        Stalled::TimedOut => m.timed_out.push(stage.to_string()),
        Stalled::Crashed => m.timed_out.push(format!("{stage} (probe crashed)")),
    }
}

/// Probe the host at `level`, and load the image's libraries `libs` of that level.
pub fn collect(level: SelftestLevel, libs: &[LibraryExpectation]) -> Measurements {
    let (os, machine) = platform::uname().unzip();
    let mut m = Measurements {
        kernel: procfs::kernel_release(),
        os,
        machine,
        module: procfs::nvidia_module(),
        ..Measurements::default()
    };
    let (nvml, cuda) = (Nvml::load(), Cuda::load());
    m.nvml_load_error = nvml.as_ref().err().cloned();
    m.cuda_load_error = cuda.as_ref().err().cloned();
    let nvml: Option<&'static Nvml> = nvml.ok().map(|n| &*Box::leak(Box::new(n)));
    let cuda: Option<&'static Cuda> = cuda.ok().map(|c| &*Box::leak(Box::new(c)));
    m.nvml_loaded = nvml.is_some();
    m.cuda_loaded = cuda.is_some();
    let wanted: Vec<LibraryExpectation> = libs
        .iter()
        .filter(|l| level == SelftestLevel::Full || l.level == SelftestLevel::Quick)
        .cloned()
        .collect();
    let libraries =
        (!wanted.is_empty() && (nvml.is_some() || cuda.is_some())).then(|| spawn_libraries(wanted));
    let mut m = collect_driver(m, level, nvml, cuda);
    if let Some(rx) = libraries {
        match rx.recv_timeout(LIBRARIES_LIMIT) {
            Ok(found) => m.libraries = found,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                note(&mut m, LIBRARIES_STAGE, Stalled::TimedOut)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                note(&mut m, LIBRARIES_STAGE, Stalled::Crashed)
            }
        }
    }
    m
}

/// Load `libs` on a thread of their own; their probes arrive on the receiver.
fn spawn_libraries(libs: Vec<LibraryExpectation>) -> mpsc::Receiver<Vec<LibraryProbe>> {
    let (tx, rx) = mpsc::channel();
    let _ = thread::Builder::new()
        .name("gpuimg-libraries".into())
        .spawn(move || {
            let _ = tx.send(libraries::probe_all(&libs));
        });
    rx
}

/// The driver's side: NVML, `cuInit`, the functional kernel and (full) the bandwidth.
fn collect_driver(
    mut m: Measurements,
    level: SelftestLevel,
    nvml: Option<&'static Nvml>,
    cuda: Option<&'static Cuda>,
) -> Measurements {
    // NVML on one thread while cuInit runs on another.
    let (ntx, nrx) = mpsc::channel::<NvmlReport>();
    if let Some(n) = nvml {
        let _ = thread::Builder::new()
            .name("gpuimg-nvml".into())
            .spawn(move || {
                let _ = ntx.send(n.probe());
            });
    } else {
        drop(ntx);
    }
    let cuda_ready = cuda.is_some_and(|cu| init_cuda(&mut m, cu));
    if nvml.is_some() {
        match nrx.recv_timeout(NVML_LIMIT) {
            Ok(r) => {
                m.nvml_init = if r.error.is_some() {
                    InitOutcome::Failed
                } else {
                    InitOutcome::Ok
                };
                m.driver_version = r.driver_version;
                m.nvml_error = r.error;
                m.gpus = r.gpus;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                m.nvml_init = InitOutcome::TimedOut;
                note(&mut m, "nvml", Stalled::TimedOut);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                m.nvml_init = InitOutcome::Crashed;
                note(&mut m, "nvml", Stalled::Crashed);
            }
        }
    }
    respell_mig_uuids(&mut m);
    let Some(cu) = cuda.filter(|_| cuda_ready) else {
        return m;
    };
    for i in 0..m.cuda_devices.len() {
        let ordinal = m.cuda_devices[i].ordinal;
        match with_limit(KERNEL_LIMIT, move || cuda_work::functional(cu, ordinal)) {
            Ok((r, ms)) => {
                match r {
                    Ok(n) => m.cuda_devices[i].kernel_verified = Some(n),
                    Err(e) => m.cuda_devices[i].kernel_error = Some(e),
                }
                m.cuda_devices[i].kernel_ms = Some(ms);
            }
            Err(s) => {
                m.cuda_devices[i].kernel_error = Some(stalled_text(&s, KERNEL_LIMIT));
                note(&mut m, &format!("cuda: kernel on GPU {ordinal}"), s);
                return m;
            }
        }
    }
    if level == SelftestLevel::Full {
        for i in 0..m.cuda_devices.len() {
            let dev: CudaDeviceResult = m.cuda_devices[i].clone();
            let memory_mib = dev
                .memory_total_mib
                .or_else(|| {
                    m.gpus
                        .iter()
                        .find(|g| g.uuid == dev.uuid)
                        .map(|g| g.memory_total_mib)
                })
                .unwrap_or(8192);
            let uuid = dev.uuid.clone();
            let r = with_limit(BANDWIDTH_LIMIT, move || {
                cuda_work::bandwidth(
                    cu,
                    dev.ordinal,
                    nvml.map(|n| (n, uuid.as_str())),
                    memory_mib,
                )
            });
            match r {
                Ok(Ok(bw)) => m.cuda_devices[i].bandwidth = Some(bw),
                Ok(Err(e)) => m.cuda_devices[i].bandwidth_error = Some(e),
                Err(s) => {
                    m.cuda_devices[i].bandwidth_error = Some(stalled_text(&s, BANDWIDTH_LIMIT));
                    note(
                        &mut m,
                        &format!("cuda: bandwidth on GPU {}", dev.ordinal),
                        s,
                    );
                    return m;
                }
            }
        }
    }
    m
}

/// `cuDriverGetVersion`, then `cuInit` and the device list, each with its own limit; records
/// how `cuInit` ended. True when the devices are ready for work.
fn init_cuda(m: &mut Measurements, cu: &'static Cuda) -> bool {
    // cuDriverGetVersion needs no cuInit, so the version is known even when cuInit hangs.
    match with_limit(VERSION_LIMIT, move || cuda_work::driver_version(cu)) {
        Ok(v) => m.cuda_driver_version = v.ok(),
        Err(s) => {
            // A library that hangs here would hang cuInit too: cuInit is not called.
            note(m, "cuda: cuDriverGetVersion", s);
            return false;
        }
    }
    match with_limit(CUDA_INIT_LIMIT, move || cuda_work::init_and_list(cu)) {
        Err(s) => {
            m.cuda_init = match s {
                Stalled::TimedOut => InitOutcome::TimedOut,
                Stalled::Crashed => InitOutcome::Crashed,
            };
            note(m, "cuda: cuInit", s);
            false
        }
        Ok(Err(e)) => {
            m.cuda_init = InitOutcome::Failed;
            m.cuda_error = Some(e);
            false
        }
        Ok(Ok(devices)) => {
            m.cuda_init = InitOutcome::Ok;
            m.cuda_devices = devices;
            true
        }
    }
}

/// The failure text of a probe that gave no answer.
fn stalled_text(s: &Stalled, limit: Duration) -> String {
    match s {
        Stalled::TimedOut => format!("Did not finish within {} s", limit.as_secs()),
        Stalled::Crashed => "The probe crashed".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stuck_probe_is_abandoned_and_a_crash_is_reported() {
        let (release, wait) = mpsc::channel::<()>();
        let r = with_limit(Duration::from_millis(20), move || wait.recv().is_ok());
        assert!(matches!(r, Err(Stalled::TimedOut)));
        drop(release);
        let r = with_limit(Duration::from_secs(5), || -> u32 {
            panic!("probe crashed")
        });
        assert!(matches!(r, Err(Stalled::Crashed)));
        assert!(matches!(with_limit(Duration::from_secs(5), || 7), Ok(7)));
    }
}
