//! Reads what the host checks need of a node under a root (`in_root`): the running kernel's
//! release, the expected module files (their `.modinfo` and signature through `gpuimg-kmod`,
//! the reader the build checked them with), the loaded module's version and flavour, the real
//! file behind `libcuda.so.1`, the GSP firmware's files and the signing certificate.
//!
//! Only reads, each file bounded; never loads a module or a library, never writes. What cannot
//! be read is recorded in `NodeFacts` with why, never a panic or an early return.

use gpuimg_expect::NodeExpectation;

use super::in_root::{InRootError, Root};
use super::node_facts::{CertificateFacts, Found, Library, ModuleFile, NodeFacts, SignedBy};

const OSRELEASE: &str = "/proc/sys/kernel/osrelease";
const SYS_VERSION: &str = "/sys/module/nvidia/version";
const PROC_VERSION: &str = "/proc/driver/nvidia/version";
/// Where a node keeps its signing certificate (DER), as dkms keeps its own.
pub const CERTIFICATE: &str = "/var/lib/dkms/mok.pub";
/// Where the loader finds `libcuda.so.1` on the distributions a node may run (Debian's
/// multiarch directories first).
const LIBCUDA: [&str; 4] = [
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/libcuda.so.1",
];
const MAX_CERTIFICATE_BYTES: u64 = 1 << 20;

/// The node path of a module file for the kernel `release`.
pub fn module_path(release: &str, name: &str) -> String {
    format!("/lib/modules/{release}/updates/dkms/{name}.ko")
}

fn found<T>(root: &Root, path: &str, r: Result<T, InRootError>) -> Found<T> {
    match r {
        Ok(v) => Found::value(root.show(path), v),
        Err(e) => {
            let missing = matches!(e, InRootError::Missing(_));
            Found::error(root.show(path), e.to_string(), missing)
        }
    }
}

/// Read what the host checks of `node` need, under `root`.
pub fn read(root: &Root, node: &NodeExpectation) -> NodeFacts {
    let kernel = found(root, OSRELEASE, root.read_text(OSRELEASE));
    let modules_for = kernel
        .value
        .clone()
        .filter(|k| !k.is_empty() && !k.contains('/'))
        .unwrap_or_else(|| node.kernel_abi.clone());
    let modules: Vec<(String, Found<ModuleFile>)> = node
        .modules
        .iter()
        .map(|name| {
            let path = module_path(&modules_for, name);
            (name.clone(), module_file(root, &path))
        })
        .collect();
    let loaded_version = found(root, SYS_VERSION, root.read_text(SYS_VERSION));
    let loaded = match root.read_text(PROC_VERSION) {
        Ok(text) => match gpuimg_expect::host_text::parse_module_version(&text) {
            Some(m) => Found::value(root.show(PROC_VERSION), m),
            None => Found::error(root.show(PROC_VERSION), "no `NVRM version:` line", false),
        },
        Err(e) => found(root, PROC_VERSION, Err(e)),
    };
    let firmware_version = loaded_version
        .value
        .clone()
        .or_else(|| loaded.value.as_ref().map(|m| m.version.clone()))
        .or_else(|| {
            modules
                .first()
                .and_then(|(_, f)| f.value.as_ref()?.version.clone())
        })
        .filter(|v| !v.is_empty() && !v.contains('/'))
        .unwrap_or_else(|| node.driver.clone());
    let dir = format!("/lib/firmware/nvidia/{firmware_version}");
    let firmware = found(
        root,
        &dir,
        root.list(&dir).map(|names| {
            names
                .into_iter()
                .filter(|(n, _)| n.starts_with("gsp_") && n.ends_with(".bin"))
                .map(|(n, size)| (n, size.unwrap_or(0)))
                .collect()
        }),
    );
    let certificate = node.signer.as_ref().map(|_| certificate(root));
    NodeFacts {
        kernel,
        modules_for,
        modules,
        loaded_version,
        loaded,
        library: library(root),
        firmware_version,
        firmware,
        certificate,
    }
}

fn module_file(root: &Root, path: &str) -> Found<ModuleFile> {
    let bytes = match root.read(path, gpuimg_kmod::MAX_MODULE_BYTES as u64) {
        Ok(b) => b,
        Err(e) => return found(root, path, Err(e)),
    };
    match gpuimg_kmod::Module::read(&root.show(path), &bytes) {
        Ok(m) => Found::value(
            root.show(path),
            ModuleFile {
                vermagic: m.vermagic().map(|v| v.trim_end().to_string()),
                version: m.modinfo.get("version").map(str::to_string),
                license: m.modinfo.get("license").map(str::to_string),
                signed_by: m.signature.map(|s| SignedBy {
                    signer: s.signer,
                    key_id: s.key_id,
                    by_key_id: s.id == gpuimg_kmod::SignatureId::SubjectKeyId,
                }),
            },
        ),
        Err(e) => Found::error(root.show(path), e.to_string(), false),
    }
}

fn library(root: &Root) -> Found<Library> {
    for link in LIBCUDA {
        // Absent here: the next directory. Present but leading nowhere (a broken alternative):
        // that is the finding.
        let (dir, name) = link.rsplit_once('/').unwrap_or(("/", link));
        let present = root.resolve(dir).is_ok_and(|d| {
            std::fs::symlink_metadata(root.host_path(&format!("{d}/{name}"))).is_ok()
        });
        if !present {
            continue;
        }
        let real = match root.resolve(link) {
            Ok(r) => r,
            Err(e) => return found(root, link, Err(e)),
        };
        let name = real.rsplit('/').next().unwrap_or_default();
        let version = name
            .strip_prefix("libcuda.so.")
            .filter(|v| v.contains('.') && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
            .map(str::to_string);
        return Found::value(
            format!("{} -> {}", root.show(link), root.show(&real)),
            Library { real, version },
        );
    }
    Found::error(
        LIBCUDA.map(|l| root.show(l)).join(", "),
        "no `libcuda.so.1` in the driver's library directories",
        true,
    )
}

fn certificate(root: &Root) -> Found<CertificateFacts> {
    let bytes = match root.read(CERTIFICATE, MAX_CERTIFICATE_BYTES) {
        Ok(b) => b,
        Err(e) => return found(root, CERTIFICATE, Err(e)),
    };
    match gpuimg_kmod::Certificate::parse(&bytes) {
        Ok(c) => Found::value(
            root.show(CERTIFICATE),
            CertificateFacts {
                issuer: c.issuer,
                serial: c.serial,
                subject_key_id: c.subject_key_id,
            },
        ),
        Err(e) => Found::error(root.show(CERTIFICATE), e.to_string(), false),
    }
}
