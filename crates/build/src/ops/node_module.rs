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

use std::io::Read as _;

use super::OpsError;
use crate::lock::LockedPackage;
use crate::resolve::node::NodeResolution;
use crate::sources::dkms_conf::DkmsConf;
use gpuimg_store::cache::{Cache, Key};
use gpuimg_store::digest::Digest;

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
    #[error(
        "The cache's modules of an earlier build hold {0}; run `gpuimg cache verify --repair`"
    )]
    Cached(String),
    #[error("Signing the modules failed: {0}")]
    Signing(String),
    #[error("The module cache failed: {0}")]
    Cache(std::io::Error),
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
/// `modules/` and `build.log` go there), at `epoch`, with `jobs` compilers at once; or take an
/// earlier build's modules from `cache` when everything that goes in is the same: the build
/// root's packages (`installed`, each by its sha256), the kernel, the source's `make`, the
/// epoch and this gpuimg (its sandbox and its script). Either way they are checked against the
/// kernel again. Returns the modules and whether they came from the cache.
pub fn build(
    cache: &Cache,
    installed: &[LockedPackage],
    root: &Path,
    node: &NodeResolution,
    work: &Path,
    epoch: u64,
    jobs: usize,
) -> Result<(BuiltModules, bool), ModuleError> {
    let (source, conf) = source_of(root, node)?;
    let abi = &node.kernel_abi;
    let key = inputs_key(installed, &conf, abi, epoch);
    let mut built = None;
    let found = cache
        .derived(MODULES_KIND, &key, |file| {
            let b = build_source(root, &source, &conf, abi, work, epoch, jobs)
                .map_err(std::io::Error::other)?;
            let digest = pack(&b.dir, file)?;
            built = Some(b);
            Ok(digest)
        })
        .map_err(|e| match e.downcast::<ModuleError>() {
            Ok(m) => m,
            Err(e) => ModuleError::Cache(e),
        })?;
    if let Some(b) = built {
        return Ok((b, false));
    }
    // An earlier build's modules: unpacked, then held to the kernel as a fresh build is.
    let out = work.join("modules");
    unpack(&found.path, &out)?;
    let log = work.join("build.log");
    fs_err::write(
        &log,
        format!(
            "gpuimg: the modules of an earlier build with the same inputs ({})\n",
            key.hex()
        ),
    )
    .map_err(|source| ModuleError::Read {
        path: log.display().to_string(),
        source,
    })?;
    let symvers = root.join(format!("usr/src/linux-headers-{abi}/Module.symvers"));
    let facts = check(&out, &symvers, abi)?;
    Ok((
        BuiltModules {
            dir: out,
            facts,
            log,
            installed_as: conf.modules.clone(),
        },
        true,
    ))
}

/// The derivation of built modules in the cache; bump it when what a build's bytes depend on
/// changes beyond what [`inputs_key`] covers.
const MODULES_KIND: &str = "nvidia-module-v2";

/// Everything a module build's bytes depend on: this gpuimg (the sandbox, the script), the
/// build root's packages by their sha256, the kernel, the source's `make` and the epoch. The
/// number of jobs is not among them: it never changes the bytes.
fn inputs_key(installed: &[LockedPackage], conf: &DkmsConf, abi: &str, epoch: u64) -> Digest {
    let mut packages: Vec<_> = installed
        .iter()
        .map(|p| (&p.name, &p.architecture, &p.version, p.sha256))
        .collect();
    packages.sort();
    let mut k = Key::new(MODULES_KIND).tool_version();
    k.str(abi)
        .u64(epoch)
        .str(conf.make.as_deref().unwrap_or(""));
    k.count(packages.len());
    for (name, arch, version, sha) in packages {
        k.str(name).str(arch).str(version).digest(&sha);
    }
    k.finish()
}

/// Write the `.ko` files of `dir` as a tar to `file`; returns the tar's sha256.
fn pack(dir: &Path, file: &mut std::fs::File) -> std::io::Result<[u8; 32]> {
    let mut names: Vec<PathBuf> = fs_err::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "ko"))
        .collect();
    names.sort();
    let hashing = gpuimg_store::digest::HashingWriter::new(file);
    let mut tar = tar::Builder::new(hashing);
    for p in &names {
        let name = p.file_name().map(PathBuf::from).unwrap_or_default();
        let mut h = tar::Header::new_gnu();
        let data = fs_err::read(p)?;
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, &name, &data[..])?;
    }
    let (_, digest, _) = tar.into_inner()?.finish();
    Ok(*digest.as_bytes())
}

/// Unpack a cached build's tar into the new directory `out`: plain files named like a module
/// (`[A-Za-z0-9_-]+.ko`) only, within the output bound; anything else refuses the entry.
fn unpack(tar_path: &Path, out: &Path) -> Result<(), ModuleError> {
    let bad = |what: String| ModuleError::Cached(what);
    let io = |source: std::io::Error| ModuleError::Read {
        path: tar_path.display().to_string(),
        source,
    };
    fs_err::create_dir(out).map_err(io)?;
    let mut tar = tar::Archive::new(fs_err::File::open(tar_path).map_err(io)?);
    let mut total = 0u64;
    for entry in tar.entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        let name = entry.path().map_err(io)?.to_string_lossy().into_owned();
        let stem = name.strip_suffix(".ko").unwrap_or("");
        let plain = !stem.is_empty()
            && stem
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !plain || entry.header().entry_type() != tar::EntryType::Regular {
            return Err(bad(format!("an entry `{name}` that is not a built module")));
        }
        total = total.saturating_add(entry.size());
        if total > OUTPUT_BYTES {
            return Err(bad(format!("more than {OUTPUT_BYTES} bytes")));
        }
        let mut f = fs_err::File::create(out.join(&name)).map_err(io)?;
        std::io::copy(&mut (&mut entry).take(OUTPUT_BYTES), &mut f).map_err(io)?;
    }
    Ok(())
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
    // dkms strips the modules its `STRIP[i]` does not keep (`strip --strip-debug`).
    let plain = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    let strip: Vec<String> = conf
        .stripped
        .iter()
        .filter(|n| plain(n))
        .map(|n| format!("/out/{n}.ko"))
        .collect();
    let strip = if strip.is_empty() {
        String::new()
    } else {
        format!(
            " && for m in {}; do if [ -f $m ]; then strip --strip-debug $m; fi; done",
            strip.join(" ")
        )
    };
    let script = format!("{make} && find . -name '*.ko' -exec cp {{}} /out/ \\;{strip}");
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
