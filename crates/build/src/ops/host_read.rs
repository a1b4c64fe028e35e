//! What `gpuimg catalog check-host` reads of a running host, under a root (`/`: this host;
//! a fixture tree in tests): the kernel's release and version string
//! (`/proc/sys/kernel/osrelease`, `/proc/sys/kernel/version`, and Ubuntu's
//! `/proc/version_signature`), the loaded NVIDIA module (`/proc/driver/nvidia/version`,
//! `/sys/module/nvidia/version`) and its GPUs (`/proc/driver/nvidia/gpus/*/information`).
//! Parsing is `gpuimg_expect::host_text`'s. Must never write, load a module or start a
//! program: it reads these files, each bounded, and nothing else.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::catalog::ModuleFlavour;
use crate::lock::upstream_release;
use crate::resolve::host_check::{HostGpu, RunningHost};
use gpuimg_expect::host_text;
use gpuimg_expect::version::Version;

/// Bytes read of each file (procfs texts are a few hundred).
const MAX_TEXT: u64 = 64 * 1024;

/// Why a host could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HostReadError {
    #[error("Failed to read `{path}`: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}` does not say {what}: `{text}`")]
    Unreadable {
        path: String,
        what: &'static str,
        text: String,
    },
    #[error("the loaded NVIDIA module is {proc} in `{proc_path}` but {sys} in `{sys_path}`")]
    Disagree {
        proc: String,
        proc_path: String,
        sys: String,
        sys_path: String,
    },
}

/// The host under `root`, or none where no NVIDIA driver is loaded (no
/// `/proc/driver/nvidia/version`: nothing to check).
pub fn read(root: &Path) -> Result<Option<RunningHost>, HostReadError> {
    let nvrm_path = root.join("proc/driver/nvidia/version");
    let Some(nvrm) = optional(&nvrm_path)? else {
        return Ok(None);
    };
    let module = host_text::parse_module_version(&nvrm)
        .ok_or_else(|| unreadable(&nvrm_path, "the module's version", &nvrm))?;
    let driver: Version = module
        .version
        .parse()
        .map_err(|_| unreadable(&nvrm_path, "the module's version", &nvrm))?;
    let sys_path = root.join("sys/module/nvidia/version");
    if let Some(sys) = optional(&sys_path)? {
        if sys.trim() != module.version {
            return Err(HostReadError::Disagree {
                proc: module.version,
                proc_path: shown(&nvrm_path),
                sys: sys.trim().to_string(),
                sys_path: shown(&sys_path),
            });
        }
    }
    let release_path = root.join("proc/sys/kernel/osrelease");
    let kernel_release = required(&release_path)?.trim().to_string();
    if kernel_release.is_empty() {
        return Err(unreadable(&release_path, "the kernel's release", ""));
    }
    let kernel_version = required(&root.join("proc/sys/kernel/version"))?
        .trim()
        .to_string();
    let signature = optional(&root.join("proc/version_signature"))?;
    let stated = host_text::kernel_upstream(&kernel_version, signature.as_deref());
    let kernel_upstream = stated.as_ref().and_then(|(v, _)| upstream_release(v));
    let kernel_upstream_from = stated.map(|(v, from)| format!("`{v}` in {from}"));
    Ok(Some(RunningHost {
        kernel_release,
        kernel_version,
        kernel_upstream,
        kernel_upstream_from,
        driver,
        flavour: match module.flavour {
            host_text::ModuleFlavour::Open => ModuleFlavour::Open,
            host_text::ModuleFlavour::Proprietary => ModuleFlavour::Proprietary,
        },
        gpus: gpus(&root.join("proc/driver/nvidia/gpus"))?,
    }))
}

/// Each GPU directory's `information`, by bus location (sorted).
fn gpus(dir: &Path) -> Result<Vec<HostGpu>, HostReadError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(source) => {
            return Err(HostReadError::Read {
                path: shown(dir),
                source,
            })
        }
    };
    let mut buses: Vec<(String, PathBuf)> = Vec::new();
    for e in entries {
        let e = e.map_err(|source| HostReadError::Read {
            path: shown(dir),
            source,
        })?;
        buses.push((e.file_name().to_string_lossy().into_owned(), e.path()));
    }
    buses.sort();
    let mut out = Vec::new();
    for (bus, path) in buses {
        let info_path = path.join("information");
        let info = required(&info_path)?;
        let model = host_text::gpu_model(&info)
            .ok_or_else(|| unreadable(&info_path, "the GPU's `Model:`", &info))?;
        out.push(HostGpu { bus, model });
    }
    Ok(out)
}

fn required(path: &Path) -> Result<String, HostReadError> {
    optional(path)?.ok_or_else(|| HostReadError::Read {
        path: shown(path),
        source: std::io::ErrorKind::NotFound.into(),
    })
}

/// The file's text (its first [`MAX_TEXT`] bytes), or none where it does not exist.
fn optional(path: &Path) -> Result<Option<String>, HostReadError> {
    let err = |source| HostReadError::Read {
        path: shown(path),
        source,
    };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_TEXT).read_to_end(&mut bytes).map_err(err)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

fn unreadable(path: &Path, what: &'static str, text: &str) -> HostReadError {
    HostReadError::Unreadable {
        path: shown(path),
        what,
        text: text
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect(),
    }
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}
