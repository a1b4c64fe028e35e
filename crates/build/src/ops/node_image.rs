//! `gpuimg build` of a host profile: the node image. Resolve the node (`node::resolve`),
//! install its build root (`node_root`), build and check the NVIDIA module (`node_module`;
//! `node_signing` where the profile signs), install `linux-image-<abi>` alone as data and
//! assemble, in the sandbox (the build root's own `depmod`), the kernel's module directory with
//! the built modules at dkms's place (`/usr/lib/modules/<abi>/updates/dkms/<dest>.ko`), their
//! dependency files and the kernel's image at `/usr/lib/modules/<abi>/vmlinuz` (where
//! bootable-container tools look): those are the image's `files` layer. Everything else is
//! installed by the container path from the profile's repositories into component layers
//! (`node_contents`: the kernel into `kernel`; the driver's user space, firmware, alternatives
//! and persistence daemon into `nvidia-driver`; systemd, udev, SSH, cloud-init into the usual
//! ones), the driver's libraries required there instead of refused (`Loader::node`), so that
//! a driver bump rewrites the driver's layers, `files` and `metadata` only. Labels name the
//! kernel ABI, the driver, the flavour, the module source and the signer. Must never run
//! anything outside the sandbox.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use super::build::BuildRequest;
use super::node_module::ModuleError;
use super::OpsError;
use crate::catalog::Catalog;
use crate::driver::{apt_options, BuildError, BuildOutcome};
use crate::plan::source_specs;
use crate::profile::{Base, Profile};
use gpuimg_fetch::observe::Observer;
use gpuimg_store::cache::Cache;
use gpuimg_store::staging::Staged;

/// The labels a node image carries.
pub const LABEL_KERNEL: &str = "org.gpuimg.node.kernel";
pub const LABEL_DRIVER: &str = "org.gpuimg.node.driver";
pub const LABEL_FLAVOUR: &str = "org.gpuimg.node.module-flavour";
pub const LABEL_SOURCE: &str = "org.gpuimg.node.module-source";
/// The certificate the modules are signed with (`host.signing`), or `unsigned`.
pub const LABEL_SIGNER: &str = "org.gpuimg.node.signer";
/// Where a signed node holds its signing certificate (DER), as dkms keeps its own.
pub const CERTIFICATE_PATH: &str = "var/lib/dkms/mok.pub";

/// Build the node of the host profile `profile` as `req` says.
pub fn build(
    profile: &Profile,
    catalog: &Catalog,
    req: &BuildRequest,
    obs: &mut dyn Observer,
) -> Result<BuildOutcome, OpsError> {
    if req.from == super::settle::Settle::Locked {
        return Err(OpsError::HostNotYet {
            command: "build --locked",
            profile: profile.file.clone(),
        });
    }
    let o = &req.options;
    let node =
        match super::node::resolve(profile, catalog, &o.cache_root, o.offline, &o.trust, obs)? {
            Ok(n) => n,
            Err(no) => return Err(OpsError::Incompatible(no.to_string())),
        };
    obs.message(&format!(
        "{:>12} {} ({} module {}) for {}",
        "node",
        node.driver,
        node.flavour.as_str(),
        node.source_version,
        node.kernel_abi
    ));
    let cache = Cache::open(&o.cache_root).map_err(|source| OpsError::CacheOpen {
        path: o.cache_root.display().to_string(),
        source,
    })?;
    let scratch =
        Staged::dir(&cache.tmp_dir(), "node", 0o700).map_err(|source| OpsError::CacheOpen {
            path: cache.tmp_dir().display().to_string(),
            source,
        })?;
    let dir = |name: &str| -> Result<std::path::PathBuf, OpsError> {
        let p = scratch.path().join(name);
        fs_err::create_dir(&p)
            .map_err(|e| BuildError::Assemble(gpuimg_assemble::AssembleError::Io(e)))?;
        Ok(p)
    };
    let root = dir("root")?;
    let installed = super::node_root::install(
        profile,
        &node,
        &root,
        &o.cache_root,
        o.offline,
        &o.trust,
        obs,
    )?;
    let work = dir("module")?;
    let jobs = o.jobs.max(1);
    obs.message(&format!(
        "{:>12} compiling in the sandbox, unless the cache has these inputs' modules",
        "module"
    ));
    let (mut built, cached) = super::node_module::build(
        &cache,
        &installed.packages,
        &root,
        &node,
        &work,
        o.epoch,
        jobs,
    )?;
    obs.message(&format!(
        "{:>12} {} {} and checked against {}",
        "module",
        built
            .facts
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        if cached {
            "from the cache (same inputs)"
        } else {
            "built"
        },
        node.kernel_abi
    ));
    // Signed with the user's key, where the profile gives one.
    let signer = match &profile.host.signing {
        None => None,
        Some(signing) => {
            let key = profile.dir.join(&signing.value.key.value);
            let cert = profile.dir.join(&signing.value.certificate.value);
            let signer = super::node_signing::signer(&cert)?;
            let signed = super::node_signing::sign(
                &root,
                &built,
                &node.kernel_abi,
                &key,
                &cert,
                &signer,
                &work,
            )?;
            obs.message(&format!("{:>12} signed by {}", "module", signer.label()));
            built = signed;
            Some(signer)
        }
    };
    // The kernel package alone, as data.
    let Base::Apt(spec) = &profile.base else {
        return Err(OpsError::Incompatible(
            "a host profile installs from apt repositories".into(),
        ));
    };
    let kspec = source_specs::apt_packages(spec, &profile.dir);
    let arch = source_specs::architecture(&profile.platform).debian();
    let aopts = apt_options(&o.cache_root, o.offline, &o.trust);
    let kernel_pkg = [super::node::offered_package(
        profile,
        &format!("linux-image-{}", node.kernel_abi),
        &node.kernel_version,
        &o.cache_root,
        o.offline,
        &o.trust,
        obs,
    )?];
    let kernel = dir("kernel")?;
    gpuimg_apt::install(&kspec, &arch, &aopts, Some(&kernel_pkg), &kernel, obs)
        .map_err(|e| super::apt_error_at(profile, e))?;
    // The node's tree, assembled in the sandbox: modules in place, `depmod` for them.
    let tree = scratch.path().join("tree");
    assemble(
        &root,
        &kernel,
        &built,
        &node.kernel_abi,
        &tree,
        &scratch.path().join("assemble.log"),
    )?;
    // What the node adds to the kernel's module directory (the NVIDIA modules, `depmod`'s
    // files, the kernel's image where bootable-container tools look) is the `files` layer; the
    // kernel package itself is installed again below, with the rest of the node, into its
    // component layer: a driver bump rewrites the driver's layers and this one only.
    let nvidia = scratch.path().join("nvidia");
    let rel = format!("usr/lib/modules/{}", node.kernel_abi);
    split_off_modules(&tree, &rel, &nvidia.join(&rel))?;
    let mut packages =
        super::node_contents::packages(profile, &node, &o.cache_root, o.offline, &o.trust, obs)?;
    packages.extend(spec.packages.iter().map(|p| p.value.clone()));
    let mut node_spec = (**spec).clone();
    node_spec.packages = packages
        .into_iter()
        .map(crate::profile::Located::synthetic)
        .collect();
    node_spec.essential = true;
    let mut image = profile.clone();
    image.base = Base::Apt(Box::new(node_spec));
    image.files = vec![crate::profile::FileEntry {
        src: nvidia.join(&rel),
        dst: rel.clone(),
        mode: None,
    }];
    // The node's expectation (`gpuimg-selftest --host` and `gpuimg verify-host` check a booted
    // node against it): the kernel ABI, the driver, the flavour, the modules and the signer.
    let expectation = gpuimg_expect::Expectation {
        image: Some(profile.name.to_string()),
        platform: Some(gpuimg_expect::ImagePlatform {
            os: profile.platform.os.clone(),
            architecture: profile.platform.architecture.clone(),
        }),
        kernel_module: match node.flavour {
            crate::catalog::ModuleFlavour::Open => gpuimg_expect::KernelModule::Open,
            crate::catalog::ModuleFlavour::Proprietary => gpuimg_expect::KernelModule::Proprietary,
        },
        gpus: profile.host.gpus.iter().map(|g| g.value.clone()).collect(),
        node: Some(gpuimg_expect::NodeExpectation {
            kernel_abi: node.kernel_abi.clone(),
            driver: node.driver.to_string(),
            flavour: match node.flavour {
                crate::catalog::ModuleFlavour::Open => gpuimg_expect::KernelModule::Open,
                crate::catalog::ModuleFlavour::Proprietary => {
                    gpuimg_expect::KernelModule::Proprietary
                }
            },
            modules: built
                .installed_as
                .iter()
                .map(|(_, to)| to.clone())
                .collect(),
            signer: signer.as_ref().map(|s| gpuimg_expect::NodeSigner {
                issuer: s.certificate.issuer.clone(),
                serial: s.certificate.serial.clone(),
                subject_key_id: s.certificate.subject_key_id.clone(),
            }),
        }),
        ..gpuimg_expect::Expectation::default()
    };
    let expect_file = scratch.path().join("expect.json");
    fs_err::write(&expect_file, expectation.to_json())
        .map_err(|e| BuildError::Assemble(gpuimg_assemble::AssembleError::Io(e)))?;
    image.files.push(crate::profile::FileEntry {
        src: expect_file,
        dst: gpuimg_expect::DEFAULT_PATH.trim_start_matches('/').into(),
        mode: Some(0o644),
    });
    // The certificate a node enrolls (`mokutil --import`), where dkms keeps its own.
    if let Some(s) = &signer {
        let der = scratch.path().join("mok.pub");
        fs_err::write(&der, &s.certificate.der)
            .map_err(|e| BuildError::Assemble(gpuimg_assemble::AssembleError::Io(e)))?;
        image.files.push(crate::profile::FileEntry {
            src: der,
            dst: CERTIFICATE_PATH.into(),
            mode: Some(0o644),
        });
    }
    image.host = Default::default();
    image.selftest.enabled = false;
    for (k, v) in [
        (LABEL_KERNEL, node.kernel_abi.clone()),
        (LABEL_DRIVER, node.driver.to_string()),
        (LABEL_FLAVOUR, node.flavour.as_str().to_string()),
        (
            LABEL_SOURCE,
            format!("{} {}", node.source, node.source_version),
        ),
        (
            LABEL_SIGNER,
            signer.as_ref().map_or("unsigned".into(), |s| s.label()),
        ),
    ] {
        image.config.labels.insert(k.to_string(), v);
    }
    let one = BuildRequest {
        platform: None,
        ..req.clone()
    };
    crate::driver::check_output(&one.options, 1)?;
    let made = super::build::make(&image, catalog, &one, obs)?;
    Ok(crate::driver::deliver(vec![made], &one.options, obs)?)
}

/// Move what the NVIDIA modules add to the kernel's module directory `tree/rel` (their
/// `updates/` tree and `depmod`'s `modules.*` files) to the same place under `to`. The tree
/// came out of the sandbox (the kernel package's own entries among it): every directory on the
/// way must be a real directory of the tree, never a link that would lead the move outside it.
fn split_off_modules(tree: &Path, rel: &str, to: &Path) -> Result<(), OpsError> {
    let io = |e: std::io::Error| {
        OpsError::from(BuildError::Assemble(gpuimg_assemble::AssembleError::Io(e)))
    };
    let mut from = tree.to_path_buf();
    for part in rel.split('/') {
        from.push(part);
        let meta = fs_err::symlink_metadata(&from).map_err(io)?;
        if !meta.is_dir() {
            return Err(io(std::io::Error::other(format!(
                "`{}` in the node's tree is not a directory (a link or a file)",
                from.display()
            ))));
        }
    }
    fs_err::create_dir_all(to).map_err(io)?;
    for e in fs_err::read_dir(&from).map_err(io)?.flatten() {
        let name = e.file_name();
        let n = name.to_string_lossy();
        if n == "updates" || n == "vmlinuz" || n.starts_with("modules.") {
            fs_err::rename(e.path(), to.join(&name)).map_err(io)?;
        }
    }
    Ok(())
}

/// Assemble the node tree at `tree` (which must not exist): the kernel package's files, its
/// image also at `usr/lib/modules/<abi>/vmlinuz`, the built modules under `updates/dkms/`, and
/// `depmod`'s files for them, made by the build root's `depmod` in the sandbox.
fn assemble(
    root: &Path,
    kernel: &Path,
    built: &super::node_module::BuiltModules,
    abi: &str,
    tree: &Path,
    log: &Path,
) -> Result<(), OpsError> {
    for d in ["tree", "modules", "out"] {
        let p = root.join(d);
        fs_err::create_dir_all(&p)
            .map_err(|e| BuildError::Assemble(gpuimg_assemble::AssembleError::Io(e)))?;
    }
    super::node_module::plain_release(abi).map_err(OpsError::from)?;
    // Each built module under the name dkms installs it as (names are `[A-Za-z0-9_-]` from
    // the build's own output, checked before they reach the script).
    let mut copies = String::new();
    for (from, to) in &built.installed_as {
        let ok = |n: &str| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if !ok(from) || !ok(to) || !built.dir.join(format!("{from}.ko")).is_file() {
            continue;
        }
        copies.push_str(&format!("cp /modules/{from}.ko $m/updates/dkms/{to}.ko; "));
    }
    let script = format!(
        "set -e; m=/tree/usr/lib/modules/{abi}; mkdir -p $m/updates/dkms; \
         cp /tree/boot/vmlinuz-{abi} $m/vmlinuz; {copies}\
         /usr/sbin/depmod -b /tree {abi}; cp -a /tree/. /out/"
    );
    let env = |k: &str, v: &str| (OsString::from(k), OsString::from(v));
    let spec = gpuimg_sandbox::Spec {
        root: root.to_path_buf(),
        binds: vec![gpuimg_sandbox::Bind {
            host: built.dir.clone(),
            inside: "/modules".into(),
        }],
        scratch: vec![gpuimg_sandbox::Scratch {
            inside: "/tree".into(),
            max_bytes: 4 << 30,
            seed: Some(kernel.to_path_buf()),
        }],
        output: gpuimg_sandbox::Output {
            host: tree.to_path_buf(),
            inside: "/out".into(),
            max_bytes: 4 << 30,
        },
        workdir: "/tree".into(),
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        env: vec![
            env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            env("LC_ALL", "C"),
        ],
        time_limit: Duration::from_secs(600),
        log: gpuimg_sandbox::Log {
            path: log.to_path_buf(),
            max_bytes: 16 << 20,
            tail_lines: 20,
        },
    };
    gpuimg_sandbox::run(&spec).map_err(|e| OpsError::from(ModuleError::from(e)))?;
    Ok(())
}
