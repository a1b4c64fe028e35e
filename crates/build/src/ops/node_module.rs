//! The NVIDIA module built for exactly the resolved kernel: the module source of the build root
//! (`node_root`) compiled by its own `dkms.conf` `make` in `gpuimg-sandbox` (the build root
//! read-only, a scratch copy of the source at the fixed path `/build`, one bounded output, no
//! network, a time limit, the log kept), with the clock and the build's user and host fixed so
//! that two builds give the same bytes; then every built module held to that kernel by
//! `gpuimg-kmod` (each undefined symbol exported by the kernel's `Module.symvers` or another
//! built module with the same CRC, each `vermagic` naming the kernel). Must never run anything
//! outside the sandbox.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::OpsError;
use crate::resolve::node::NodeResolution;
use crate::sources::dkms_conf::DkmsConf;

/// What a module build gave: the modules (as built, in the output directory) and their facts.
#[derive(Debug, Clone)]
pub struct BuiltModules {
    /// The host directory holding the built `.ko` files.
    pub dir: PathBuf,
    pub facts: Vec<gpuimg_kmod::Facts>,
    /// The build's log on the host.
    pub log: PathBuf,
    /// Each built module's name and the name dkms installs it under (`dkms.conf`'s
    /// `BUILT_MODULE_NAME` → `DEST_MODULE_NAME`: `nvidia` → `nvidia-current`).
    pub installed_as: Vec<(String, String)>,
}

/// How long a module build may take, and what it may write.
pub const TIME_LIMIT: Duration = Duration::from_secs(60 * 60);
const SCRATCH_BYTES: u64 = 4 << 30;
const OUTPUT_BYTES: u64 = 1 << 30;
const LOG_BYTES: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    #[error("The build root has no module source at `{0}` (its dkms.conf names it)")]
    NoSource(String),
    #[error("The module build failed: {0}")]
    Sandbox(#[from] gpuimg_sandbox::SandboxError),
    #[error("Failed to read `{path}`: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("The kernel release `{0}` has characters a kernel release never has; refusing to build for it")]
    BadRelease(String),
    #[error("The module build made no `.ko` file")]
    NothingBuilt,
    #[error("A built module is unreadable: {0}")]
    Module(#[from] gpuimg_kmod::ReadError),
    #[error("The kernel's `Module.symvers` is unreadable: {0}")]
    Symvers(#[from] gpuimg_kmod::SymversError),
    #[error("The built modules do not fit the kernel `{kernel}`: {source}")]
    Check {
        kernel: String,
        #[source]
        source: gpuimg_kmod::CheckError,
    },
}

impl From<ModuleError> for OpsError {
    fn from(e: ModuleError) -> Self {
        OpsError::Module(Box::new(e))
    }
}

/// Build `node`'s module from the build root `root` into `work` (an empty host directory:
/// `modules/` and `build.log` go there), at `epoch`, with `jobs` compilers at once.
pub fn build(
    root: &Path,
    node: &NodeResolution,
    work: &Path,
    epoch: u64,
    jobs: usize,
) -> Result<BuiltModules, ModuleError> {
    let (source, conf) = source_of(root, node)?;
    build_source(root, &source, &conf, &node.kernel_abi, work, epoch, jobs)
}

/// Build the dkms source at `source` (a directory of the build root `root`, described by
/// `conf`) for the kernel `abi`, then check what it built against that kernel.
pub fn build_source(
    root: &Path,
    source: &Path,
    conf: &DkmsConf,
    abi: &str,
    work: &Path,
    epoch: u64,
    jobs: usize,
) -> Result<BuiltModules, ModuleError> {
    if !source.is_dir() {
        return Err(ModuleError::NoSource(source.display().to_string()));
    }
    plain_release(abi)?;
    // The sandbox mounts over directories the root has already (it never writes the root).
    for d in ["build", "out", "tmp"] {
        let p = root.join(d);
        fs_err::create_dir_all(&p).map_err(|source| ModuleError::Read {
            path: p.display().to_string(),
            source,
        })?;
    }
    let out = work.join("modules");
    let log = work.join("build.log");
    // dkms's `MAKE[0]` with its variables given (`${kernelver}`, `${parallel_jobs}`), then every
    // built module copied to the output.
    let make = conf
        .make
        .clone()
        .unwrap_or_else(|| "make modules KERNEL_UNAME=${kernelver}".into())
        .replace("${parallel_jobs+-j$parallel_jobs}", &format!("-j{jobs}"))
        .replace("${kernelver}", abi)
        .replace("$kernelver", abi);
    let script = format!("{make} && find . -name '*.ko' -exec cp {{}} /out/ \\;");
    let env = |k: &str, v: &str| (OsString::from(k), OsString::from(v));
    let spec = gpuimg_sandbox::Spec {
        root: root.to_path_buf(),
        binds: vec![],
        scratch: vec![
            gpuimg_sandbox::Scratch {
                inside: "/build".into(),
                max_bytes: SCRATCH_BYTES,
                seed: Some(source.to_path_buf()),
            },
            gpuimg_sandbox::Scratch {
                inside: "/tmp".into(),
                max_bytes: 256 << 20,
                seed: None,
            },
        ],
        output: gpuimg_sandbox::Output {
            host: out.clone(),
            inside: "/out".into(),
            max_bytes: OUTPUT_BYTES,
        },
        workdir: "/build".into(),
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        env: vec![
            env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            env("HOME", "/build"),
            env("LC_ALL", "C"),
            env("TZ", "UTC"),
            env("SOURCE_DATE_EPOCH", &epoch.to_string()),
            env("KBUILD_BUILD_TIMESTAMP", &format!("@{epoch}")),
            env("KBUILD_BUILD_USER", "gpuimg"),
            env("KBUILD_BUILD_HOST", "gpuimg"),
        ],
        time_limit: TIME_LIMIT,
        log: gpuimg_sandbox::Log {
            path: log.clone(),
            max_bytes: LOG_BYTES,
            tail_lines: 20,
        },
    };
    gpuimg_sandbox::run(&spec)?;
    let symvers = root.join(format!("usr/src/linux-headers-{abi}/Module.symvers"));
    let facts = check(&out, &symvers, abi)?;
    Ok(BuiltModules {
        dir: out,
        facts,
        log,
        installed_as: conf.modules.clone(),
    })
}

/// `abi` as a kernel release is written (`6.1.0-41-cloud-amd64`, `6.12.41+deb13-cloud-amd64`):
/// it goes into the sandbox's command line, so nothing else is let through.
pub fn plain_release(abi: &str) -> Result<(), ModuleError> {
    let ok = !abi.is_empty()
        && abi
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'));
    if ok {
        Ok(())
    } else {
        Err(ModuleError::BadRelease(abi.to_string()))
    }
}

/// The module source of the driver's version in `root` (`usr/src/<PACKAGE_NAME>-<version>`, as
/// dkms lays it out) and its `dkms.conf`.
fn source_of(root: &Path, node: &NodeResolution) -> Result<(PathBuf, DkmsConf), ModuleError> {
    let src = root.join("usr/src");
    let version = node.driver.to_string();
    for e in fs_err::read_dir(&src)
        .map_err(|source| ModuleError::Read {
            path: src.display().to_string(),
            source,
        })?
        .flatten()
    {
        let conf_path = e.path().join("dkms.conf");
        let Ok(text) = std::fs::read_to_string(&conf_path) else {
            continue;
        };
        let conf = crate::sources::dkms_conf::parse(&text);
        let named = conf.package_name.as_ref().map(|n| format!("{n}-{version}"));
        if conf.package_version.as_deref() == Some(version.as_str())
            && named.is_some_and(|n| e.file_name().to_string_lossy() == n)
        {
            return Ok((e.path(), conf));
        }
    }
    Err(ModuleError::NoSource(format!(
        "{}/<PACKAGE_NAME>-{version}",
        src.display()
    )))
}

/// Hold the `.ko` files in `dir` to the kernel `abi` whose `Module.symvers` is at `symvers`.
pub fn check(
    dir: &Path,
    symvers: &Path,
    abi: &str,
) -> Result<Vec<gpuimg_kmod::Facts>, ModuleError> {
    let read = |p: &Path| {
        fs_err::read(p).map_err(|source| ModuleError::Read {
            path: p.display().to_string(),
            source,
        })
    };
    let mut files: Vec<PathBuf> = fs_err::read_dir(dir)
        .map_err(|source| ModuleError::Read {
            path: dir.display().to_string(),
            source,
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "ko"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(ModuleError::NothingBuilt);
    }
    let mut modules = Vec::new();
    for f in &files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        modules.push(gpuimg_kmod::Module::read(&name, &read(f)?)?);
    }
    let symvers = gpuimg_kmod::Symvers::parse(&read(symvers)?)?;
    let kernel = gpuimg_kmod::Kernel {
        release: abi,
        vermagic: None,
        symvers: &symvers,
    };
    gpuimg_kmod::check(&modules, &kernel).map_err(|source| ModuleError::Check {
        kernel: abi.to_string(),
        source,
    })
}
