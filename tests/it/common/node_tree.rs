//! A node's file tree as the self-test's host checks read it (`gpuimg-selftest --host --root`),
//! made by the test: a fake `/proc` and `/sys` (the running kernel's release, the loaded NVIDIA
//! module's version lines), the NVIDIA modules at dkms's place as real relocatable objects
//! compiled by `gcc` with the `.modinfo` the test chooses and, when signed, a PKCS#7 signature
//! appended by `openssl cms` as the kernel's `sign-file` appends it (a throwaway key), the
//! driver's `libcuda.so.<version>` behind Debian's `nvidia` alternative links, the GSP firmware,
//! the signing certificate at `/var/lib/dkms/mok.pub` and the node's expectation.
//! Shared by the self-test crate's tests (included by path) and the CLI tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::cmd::{require, run_ok};

/// What the tree holds; `Node::default()` is a node built for and booted into one kernel,
/// proprietary 535.309.01, not loaded yet, unsigned.
#[derive(Debug, Clone)]
pub struct Node {
    /// The running kernel (`/proc/sys/kernel/osrelease`); `None` leaves it out.
    pub running: Option<String>,
    /// The kernel whose module directory holds the modules.
    pub built_for: String,
    /// The modules' `vermagic` release, when not `built_for`'s.
    pub vermagic: Option<String>,
    /// The modules' `version`.
    pub module_version: String,
    /// The open flavour (`license=Dual MIT/GPL`) rather than the proprietary (`NVIDIA`).
    pub open: bool,
    /// A loaded module: its version and whether `/proc` calls it the open one.
    pub loaded: Option<(String, bool)>,
    /// The version in the name of the real file behind `libcuda.so.1`; `None` leaves it out,
    /// `broken` leaves out only the file the links lead to.
    pub library: Option<String>,
    /// The GSP firmware's directory (a driver version); `None` leaves it out.
    pub firmware: Option<String>,
    /// Sign the modules (with a key of `Keys`) and carry the certificate.
    pub signed: bool,
    /// Leave the module files out (a host whose module lives elsewhere).
    pub no_module_files: bool,
}

pub const ABI: &str = "6.1.0-28-cloud-amd64";
pub const DRIVER: &str = "535.309.01";
pub const MODULES: [&str; 2] = ["nvidia-current", "nvidia-current-uvm"];

impl Default for Node {
    fn default() -> Self {
        Node {
            running: Some(ABI.into()),
            built_for: ABI.into(),
            vermagic: None,
            module_version: DRIVER.into(),
            open: false,
            loaded: None,
            library: Some(DRIVER.into()),
            firmware: Some(DRIVER.into()),
            signed: false,
            no_module_files: false,
        }
    }
}

/// A throwaway signing key and its certificate (PEM, and DER as a node carries it).
pub struct Keys {
    _dir: tempfile::TempDir,
    pub key: PathBuf,
    pub cert: PathBuf,
    pub der: Vec<u8>,
    /// The certificate's serial, lower-case hex as its DER integer holds it.
    pub serial: String,
}

impl Keys {
    pub fn new(common_name: &str) -> Keys {
        require("openssl");
        let dir = tempfile::tempdir().unwrap();
        let (key, cert, der) = (
            dir.path().join("key.pem"),
            dir.path().join("cert.pem"),
            dir.path().join("cert.der"),
        );
        run_ok(
            Command::new("openssl")
                .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
                .args([
                    "ec_paramgen_curve:prime256v1",
                    "-nodes",
                    "-days",
                    "1",
                    "-subj",
                ])
                .arg(format!("/CN={common_name}/"))
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&cert),
        );
        run_ok(
            Command::new("openssl")
                .args(["x509", "-outform", "DER", "-in"])
                .arg(&cert)
                .arg("-out")
                .arg(&der),
        );
        let der = std::fs::read(&der).unwrap();
        // As the build records it: the DER integer's bytes (the reader the checks use).
        let serial = gpuimg_kmod::Certificate::parse(&der).unwrap().serial;
        Keys {
            _dir: dir,
            key,
            cert,
            der,
            serial,
        }
    }
}

/// A relocatable object with `.modinfo` = `fields` (`key=value` each), compiled into `out`.
pub fn module(fields: &[String], out: &Path) {
    require("gcc");
    let src = out.with_extension("c");
    let modinfo: String = fields
        .iter()
        .map(|f| format!("\"{f}\\0\""))
        .collect::<Vec<_>>()
        .join(" ");
    std::fs::write(
        &src,
        format!(
            "int nv_probe(int x) {{ return x + 1; }}\n\
             static const char modinfo[] __attribute__((section(\".modinfo\"), used, aligned(1))) = {modinfo};\n"
        ),
    )
    .unwrap();
    run_ok(
        Command::new("gcc")
            .args(["-c", "-O2", "-fno-asynchronous-unwind-tables", "-o"])
            .arg(out)
            .arg(&src),
    );
    std::fs::remove_file(&src).unwrap();
}

/// Append a signature of `file` made with `keys`, as `sign-file` does (PKCS#7 by issuer and
/// serial, detached, no certificates, no attributes; `struct module_signature`; the magic).
pub fn sign(file: &Path, keys: &Keys) {
    let sig = file.with_extension("p7s");
    run_ok(
        Command::new("openssl")
            .args([
                "cms",
                "-sign",
                "-binary",
                "-noattr",
                "-nocerts",
                "-nosmimecap",
            ])
            .args(["-md", "sha256", "-outform", "DER", "-in"])
            .arg(file)
            .arg("-signer")
            .arg(&keys.cert)
            .arg("-inkey")
            .arg(&keys.key)
            .arg("-out")
            .arg(&sig),
    );
    let der = std::fs::read(&sig).unwrap();
    std::fs::remove_file(&sig).unwrap();
    let mut bytes = std::fs::read(file).unwrap();
    bytes.extend_from_slice(&der);
    bytes.extend_from_slice(&[0, 0, 2, 0, 0, 0, 0, 0]);
    bytes.extend_from_slice(&(der.len() as u32).to_be_bytes());
    bytes.extend_from_slice(b"~Module signature appended~\n");
    std::fs::write(file, bytes).unwrap();
}

fn write(root: &Path, path: &str, bytes: &[u8]) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

fn link(root: &Path, path: &str, target: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, p).unwrap();
}

/// The `/proc/driver/nvidia/version` text of a loaded module.
pub fn proc_version(version: &str, open: bool) -> String {
    if open {
        format!("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  (pbuilder@debian)  Sat Oct 18 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n")
    } else {
        format!("NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Sat Oct 18 03:02:13 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n")
    }
}

/// Make the tree `node` describes under `root` (merged `/usr`: `/lib` is `usr/lib`), its
/// modules signed with `keys` when `node.signed`.
pub fn make(root: &Path, node: &Node, keys: Option<&Keys>) {
    link(root, "lib", "usr/lib");
    if let Some(r) = &node.running {
        write(
            root,
            "proc/sys/kernel/osrelease",
            format!("{r}\n").as_bytes(),
        );
    }
    if let Some((v, open)) = &node.loaded {
        write(
            root,
            "sys/module/nvidia/version",
            format!("{v}\n").as_bytes(),
        );
        write(
            root,
            "proc/driver/nvidia/version",
            proc_version(v, *open).as_bytes(),
        );
    }
    if !node.no_module_files {
        let dir = root.join(format!("usr/lib/modules/{}/updates/dkms", node.built_for));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, name) in MODULES.iter().enumerate() {
            // The core module's licence tells the flavour; uvm is "Dual MIT/GPL" in both.
            let license = if node.open || i > 0 {
                "Dual MIT/GPL"
            } else {
                "NVIDIA"
            };
            let internal = if i == 0 { "nvidia" } else { "nvidia_uvm" };
            let file = dir.join(format!("{name}.ko"));
            module(
                &[
                    format!("version={}", node.module_version),
                    format!("license={license}"),
                    "depends=".into(),
                    format!("name={internal}"),
                    format!(
                        "vermagic={} SMP preempt mod_unload modversions ",
                        node.vermagic.as_deref().unwrap_or(&node.built_for)
                    ),
                ],
                &file,
            );
            if node.signed {
                sign(&file, keys.expect("signed modules need keys"));
            }
        }
    }
    if let Some(v) = &node.library {
        let dir = "usr/lib/x86_64-linux-gnu/nvidia/current";
        // `broken`: the alternative's links lead to a file that is not there.
        if v != "broken" {
            write(root, &format!("{dir}/libcuda.so.{v}"), b"\x7fELF");
        }
        link(
            root,
            &format!("{dir}/libcuda.so.1"),
            &format!("libcuda.so.{v}"),
        );
        link(
            root,
            "etc/alternatives/libcuda.so.1",
            &format!("/{dir}/libcuda.so.1"),
        );
        link(
            root,
            "usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "/etc/alternatives/libcuda.so.1",
        );
    }
    if let Some(v) = &node.firmware {
        for f in ["gsp_ga10x.bin", "gsp_tu10x.bin"] {
            write(root, &format!("usr/lib/firmware/nvidia/{v}/{f}"), b"gsp");
        }
    }
    if let (true, Some(k)) = (node.signed, keys) {
        write(root, "var/lib/dkms/mok.pub", &k.der);
    }
}

/// The `node` section of the expectation a node built as `Node::default()` carries (signed by
/// `signer`'s certificate when given), as JSON.
pub fn expectation(signer: Option<&Keys>, common_name: &str) -> String {
    let signer = signer.map_or(String::new(), |k| {
        format!(
            ", \"signer\": {{\"issuer\": \"{common_name}\", \"serial\": \"{}\"}}",
            k.serial
        )
    });
    format!(
        "{{\"format\": 2, \"node\": {{\"kernel_abi\": \"{ABI}\", \"driver\": \"{DRIVER}\", \"flavour\": \"proprietary\", \"modules\": [\"{}\", \"{}\"]{signer}}}}}\n",
        MODULES[0], MODULES[1]
    )
}
