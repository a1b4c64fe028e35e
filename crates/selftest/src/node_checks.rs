//! The host checks (`gpuimg-selftest --host`): pure functions from a node's expectation and what
//! was read of it (`NodeFacts`) to check results, each naming what was expected, what was found
//! and where it was read.
//!
//! In order: the running kernel is the built ABI; each module file's `vermagic` names the
//! running kernel; the module's version (the loaded one, else the file's) and the user-space
//! library's are the expected driver; the GSP firmware for that version is there; the module's
//! flavour is the expected one; and, when the node is signed, the certificate and each module's
//! signature name the expected signer. No I/O here. A module file that is absent while a module
//! is loaded is a warning (the loaded module came from elsewhere: the check cannot apply), never
//! a guessed pass; absent with nothing loaded, it fails.

use gpuimg_expect::{KernelModule, NodeExpectation, NodeSigner};

use super::check::{Check, Status};
use super::data::ModuleFlavour;
use super::node_facts::{Found, ModuleFile, NodeFacts, SignedBy};

/// `license` of the open flavour's core module, and of the proprietary one's.
const OPEN_LICENSE: &str = "Dual MIT/GPL";
const PROPRIETARY_LICENSE: &str = "NVIDIA";

/// Every host check, in a stable order.
pub fn evaluate(node: &NodeExpectation, f: &NodeFacts) -> Vec<Check> {
    let mut out = vec![running_kernel(node, f)];
    for (name, file) in &f.modules {
        out.push(vermagic(f, name, file));
    }
    out.push(module_version(node, f));
    out.push(library_version(node, f));
    out.push(firmware(f));
    out.push(flavour(node, f));
    match &node.signer {
        None => out.push(
            Check::new("module-signer", Status::Skip)
                .detail("The node's modules are not signed (the expectation names no signer)"),
        ),
        Some(signer) => {
            out.push(certificate(signer, f));
            for (name, file) in &f.modules {
                out.push(module_signer(signer, f, name, file));
            }
        }
    }
    out
}

fn set(mut c: Check, status: Status) -> Check {
    c.status = status;
    c
}

fn running_kernel(node: &NodeExpectation, f: &NodeFacts) -> Check {
    let c = Check::new("running-kernel", Status::Pass)
        .expected(node.kernel_abi.clone())
        .read_from(f.kernel.from.clone());
    match (&f.kernel.value, &f.kernel.error) {
        (Some(k), _) if *k == node.kernel_abi => c.measured(k.clone()),
        (Some(k), _) => set(c.measured(k.clone()), Status::Fail).detail(format!(
            "The node runs another kernel than the one it was built for: the modules under /lib/modules/{} do not load into {k}",
            node.kernel_abi
        )),
        (None, e) => set(c, Status::Fail).detail(e.clone().unwrap_or_default()),
    }
}

/// The check of a module file that could not be read: a warning when a module is loaded
/// anyway (it came from elsewhere), else a failure.
fn unreadable(c: Check, f: &NodeFacts, file: &Found<ModuleFile>, what: &str) -> Check {
    let why = file.error.clone().unwrap_or_default();
    match f.loaded_version() {
        Some((v, _)) if file.missing => set(c, Status::Warn).detail(format!(
            "{why}; an NVIDIA module ({v}) is loaded from elsewhere (not a node gpuimg built?), so its {what} could not be checked"
        )),
        _ if file.missing => set(c, Status::Fail).detail(format!(
            "{why}, and no NVIDIA module is loaded: `modprobe nvidia` has nothing to load"
        )),
        _ => set(c, Status::Fail).detail(why),
    }
}

fn vermagic(f: &NodeFacts, name: &str, file: &Found<ModuleFile>) -> Check {
    let release = &f.modules_for;
    let c = Check::new(format!("module-vermagic[{name}]"), Status::Pass)
        .expected(format!("{release} …"))
        .read_from(file.from.clone());
    let Some(m) = &file.value else {
        return unreadable(c, f, file, "vermagic");
    };
    match &m.vermagic {
        None => set(c, Status::Fail).detail("No `vermagic` in its .modinfo"),
        Some(v) if v.split_whitespace().next() == Some(release.as_str()) => c.measured(v.clone()),
        Some(v) => set(c.measured(v.clone()), Status::Fail).detail(format!(
            "Built for another kernel: {release} refuses to load it (\"disagrees about version of symbol\" or \"Exec format error\")"
        )),
    }
}

fn module_version(node: &NodeExpectation, f: &NodeFacts) -> Check {
    let c = Check::new("module-version", Status::Pass).expected(node.driver.clone());
    let status = |v: &str| {
        if v == node.driver {
            Status::Pass
        } else {
            Status::Fail
        }
    };
    if let Some((v, from)) = f.loaded_version() {
        let c = c
            .measured(format!("{v} (loaded)"))
            .read_from(from.to_string());
        return match status(v) {
            Status::Pass => c,
            s => set(c, s).detail("The loaded NVIDIA module is another driver's than the node's"),
        };
    }
    let Some((name, file)) = f.modules.first() else {
        return set(c, Status::Fail).detail("No module expected");
    };
    let c = c.read_from(file.from.clone());
    match file.value.as_ref().map(|m| m.version.as_deref()) {
        Some(Some(v)) => {
            let c = c.measured(format!("{v} (not loaded; {name}.ko's modinfo)"));
            match status(v) {
                Status::Pass => c,
                s => set(c, s).detail("The module file is another driver's than the node's"),
            }
        }
        Some(None) => set(c, Status::Fail)
            .measured("not loaded")
            .detail(format!("{name}.ko has no `version` in its .modinfo")),
        None => set(c, Status::Fail).measured("not loaded").detail(format!(
            "No NVIDIA module is loaded, and {name}.ko: {}",
            file.error.clone().unwrap_or_default()
        )),
    }
}

fn library_version(node: &NodeExpectation, f: &NodeFacts) -> Check {
    let c = Check::new("library-version", Status::Pass)
        .expected(node.driver.clone())
        .read_from(f.library.from.clone());
    let Some(lib) = &f.library.value else {
        return set(c, Status::Fail).detail(f.library.error.clone().unwrap_or_default());
    };
    let Some(v) = &lib.version else {
        return set(c.measured(lib.real.clone()), Status::Fail).detail(
            "The real file behind `libcuda.so.1` carries no version in its name (`libcuda.so.<version>`)",
        );
    };
    let c = c.measured(v.clone());
    if *v == node.driver {
        return c;
    }
    set(c, Status::Fail).detail(
        "The driver's user space is another version than the node's: NVML and cuInit refuse a module of another version (RM_VERSION_MISMATCH, SYSTEM_DRIVER_MISMATCH)",
    )
}

fn firmware(f: &NodeFacts) -> Check {
    let c = Check::new("gsp-firmware", Status::Pass)
        .expected(format!("gsp_*.bin for {}", f.firmware_version))
        .read_from(f.firmware.from.clone());
    let files: Vec<String> = f
        .firmware
        .value
        .iter()
        .flatten()
        .filter(|(_, size)| *size > 0)
        .map(|(n, _)| n.clone())
        .collect();
    if !files.is_empty() {
        return c.measured(files.join(", "));
    }
    let why = f
        .firmware
        .error
        .clone()
        .unwrap_or_else(|| "no non-empty gsp_*.bin there".into());
    set(c.measured("none"), Status::Fail).detail(format!(
        "{why}: the driver loads its GSP firmware from here on Turing and newer GPUs"
    ))
}

fn flavour_name(f: ModuleFlavour) -> &'static str {
    match f {
        ModuleFlavour::Open => "open",
        ModuleFlavour::Proprietary => "proprietary",
    }
}

fn flavour(node: &NodeExpectation, f: &NodeFacts) -> Check {
    let want = match node.flavour {
        KernelModule::Open => ModuleFlavour::Open,
        _ => ModuleFlavour::Proprietary,
    };
    let c = Check::new("module-flavour", Status::Pass).expected(flavour_name(want));
    let judge = |c: Check, got: ModuleFlavour, how: String| {
        let c = c.measured(format!("{} ({how})", flavour_name(got)));
        if got == want {
            c
        } else {
            set(c, Status::Fail).detail(format!(
                "The node was built with the {} module",
                flavour_name(want)
            ))
        }
    };
    if let Some(m) = &f.loaded.value {
        return judge(
            c.read_from(f.loaded.from.clone()),
            m.flavour,
            "loaded".into(),
        );
    }
    let Some((name, file)) = f.modules.first() else {
        return set(c, Status::Fail).detail("No module expected");
    };
    let c = c.read_from(file.from.clone());
    let Some(m) = &file.value else {
        return set(c, Status::Fail).detail(format!(
            "No NVIDIA module is loaded, and {name}.ko: {}",
            file.error.clone().unwrap_or_default()
        ));
    };
    let how = |l: &str| format!("not loaded; {name}.ko's license `{l}`");
    match m.license.as_deref() {
        Some(l @ OPEN_LICENSE) => judge(c, ModuleFlavour::Open, how(l)),
        Some(l @ PROPRIETARY_LICENSE) => judge(c, ModuleFlavour::Proprietary, how(l)),
        Some(l) => set(c.measured(format!("license `{l}`")), Status::Fail).detail(format!(
            "{name}.ko's license is neither `{OPEN_LICENSE}` (open) nor `{PROPRIETARY_LICENSE}` (proprietary)"
        )),
        None => set(c, Status::Fail).detail(format!("{name}.ko has no `license` in its .modinfo")),
    }
}

/// Whether a signature naming `by` was made with the certificate `want`.
fn signed_by(want: &NodeSigner, by: &SignedBy) -> bool {
    if by.by_key_id {
        want.subject_key_id.as_deref() == Some(by.key_id.as_str())
    } else {
        by.key_id == want.serial && by.signer == want.issuer
    }
}

fn describe(by: &SignedBy) -> String {
    match (&by.signer, by.by_key_id) {
        (_, true) => format!("key id {}", by.key_id),
        (Some(s), false) => format!("{s} (serial {})", by.key_id),
        (None, false) => format!("an issuer without a common name (serial {})", by.key_id),
    }
}

fn certificate(want: &NodeSigner, f: &NodeFacts) -> Check {
    let c = Check::new("signing-certificate", Status::Pass).expected(want.describe());
    let Some(cert) = &f.certificate else {
        return set(c, Status::Fail).detail("Not read");
    };
    let c = c.read_from(cert.from.clone());
    let Some(got) = &cert.value else {
        return set(c, Status::Fail).detail(format!(
            "{}: the certificate a node enrolls (`mokutil --import`)",
            cert.error.clone().unwrap_or_default()
        ));
    };
    let c = c.measured(format!(
        "{} (serial {})",
        got.issuer
            .as_deref()
            .unwrap_or("an issuer without a common name"),
        got.serial
    ));
    if got.issuer == want.issuer && got.serial == want.serial {
        return c;
    }
    set(c, Status::Fail).detail("Another certificate than the one the modules were signed with")
}

fn module_signer(want: &NodeSigner, f: &NodeFacts, name: &str, file: &Found<ModuleFile>) -> Check {
    let c = Check::new(format!("module-signer[{name}]"), Status::Pass)
        .expected(want.describe())
        .read_from(file.from.clone());
    let Some(m) = &file.value else {
        return unreadable(c, f, file, "signature");
    };
    match &m.signed_by {
        None => set(c.measured("unsigned"), Status::Fail).detail(
            "A kernel that enforces module signatures (Secure Boot) refuses an unsigned module",
        ),
        Some(by) if signed_by(want, by) => c.measured(describe(by)),
        Some(by) => set(c.measured(describe(by)), Status::Fail)
            .detail("Signed with another key than the node's certificate"),
    }
}
