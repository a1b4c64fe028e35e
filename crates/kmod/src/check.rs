//! The check ([`check`]): a set of built modules held to one kernel, as the kernel's module
//! loader would hold them, before anything is loaded. For each module: its `vermagic` starts
//! with the kernel's release (and is the kernel's whole `vermagic`, where the caller knows it);
//! every global symbol it leaves undefined is exported by the kernel (`Module.symvers`) or by
//! another module of the set; where the module recorded a CRC for a symbol, the exporter's CRC
//! is the same; a module built without CRCs is refused by a kernel that has them; a symbol
//! exported GPL-only is used only by a module under a GPL-compatible licence; a symbol exported
//! in a namespace only by a module that imports it (licence and taint followed symbol by symbol,
//! in the order the loader resolves them); `depends=` names only modules the kernel or
//! the set has; no two modules of the set share a name or export the same symbol.
//!
//! A module of the set replaces the kernel's module of the same name: its exports are the set's,
//! not `Module.symvers`'s. Weak undefined symbols may stay unresolved; the names `modpost`
//! itself ignores (`__this_module`, `_GLOBAL_OFFSET_TABLE_`, `.TOC.`, `__gnu_lto*`) are not
//! looked up. Must never pass a module on a fact it could not read: every refusal is collected
//! and named (module, symbol, both CRCs or both vermagics), none is a warning.

use std::collections::{BTreeMap, BTreeSet};

use crate::module::{module_name, Module};
use crate::signature::Signature;
use crate::symvers::Symvers;

/// The kernel the modules are checked against.
#[derive(Debug, Clone, Copy)]
pub struct Kernel<'a> {
    /// Its release (`uname -r`; Debian's ABI: `6.1.0-28-cloud-amd64`).
    pub release: &'a str,
    /// Its whole `vermagic` (`6.1.0-28-cloud-amd64 SMP preempt mod_unload modversions`), where
    /// the caller knows it; otherwise only the release, its first word, is compared.
    pub vermagic: Option<&'a str>,
    /// Its exported symbols.
    pub symvers: &'a Symvers,
}

/// What a checked module says of itself, for the caller's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub name: String,
    /// The caller's name for the file.
    pub file: String,
    /// `modinfo`'s `version`.
    pub version: Option<String>,
    pub vermagic: String,
    pub srcversion: Option<String>,
    pub license: Option<String>,
    pub depends: Vec<String>,
    /// Its appended signature's signer (the issuer's common name), if signed.
    pub signed_by: Option<String>,
    pub signature: Option<Signature>,
}

/// One reason a module would not load into the kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{module}: no vermagic in its .modinfo")]
    NoVermagic { module: String },
    #[error("{module}: vermagic `{found}`, but the kernel's is `{expected}`")]
    Vermagic {
        module: String,
        found: String,
        expected: String,
    },
    #[error("{module}: two modules of the set are named so")]
    DuplicateModule { module: String },
    #[error("{module}: exports `{symbol}`, which {other} exports too")]
    DuplicateExport {
        module: String,
        symbol: String,
        other: String,
    },
    #[error("{module}: depends on module `{needs}`, which neither the kernel nor the set has")]
    Depends { module: String, needs: String },
    #[error(
        "{module}: built without symbol CRCs (CONFIG_MODVERSIONS), for a kernel that has them"
    )]
    NoVersions { module: String },
    #[error("{module}: needs `{symbol}`, which neither the kernel nor another module of the set exports")]
    Unresolved { module: String, symbol: String },
    #[error("{module}: `{symbol}` was built against CRC 0x{module_crc:08x}, but {exporter} exports it with CRC 0x{exporter_crc:08x}")]
    Crc {
        module: String,
        symbol: String,
        module_crc: u32,
        exporter_crc: u32,
        exporter: String,
    },
    #[error(
        "{module}: uses `{symbol}`, exported GPL-only by {exporter}, under licence `{license}`"
    )]
    GplOnly {
        module: String,
        symbol: String,
        license: String,
        exporter: String,
    },
    #[error("{module}: uses GPL-only exports, then `{symbol}` from {owner}, whose licence is not GPL-compatible")]
    ProprietaryOwner {
        module: String,
        symbol: String,
        owner: String,
    },
    #[error(
        "{module}: uses `{symbol}` from namespace `{namespace}` ({exporter}) without importing it"
    )]
    Namespace {
        module: String,
        symbol: String,
        namespace: String,
        exporter: String,
    },
}

/// Refusals listed in an error at most; the rest are counted.
const SHOWN: usize = 20;

/// Why a set of modules does not fit the kernel.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("the modules do not fit kernel {release}: {}", list(.refusals))]
    Refused {
        release: String,
        refusals: Vec<Refusal>,
    },
}

fn list(refusals: &[Refusal]) -> String {
    let mut s: Vec<String> = refusals.iter().take(SHOWN).map(|r| r.to_string()).collect();
    if refusals.len() > SHOWN {
        s.push(format!("and {} more", refusals.len() - SHOWN));
    }
    s.join("; ")
}

/// The licences the kernel counts as GPL-compatible (`license_is_gpl_compatible`).
fn gpl_compatible(license: Option<&str>) -> bool {
    matches!(
        license,
        Some(
            "GPL"
                | "GPL v2"
                | "GPL and additional rights"
                | "Dual BSD/GPL"
                | "Dual MIT/GPL"
                | "Dual MPL/GPL"
        )
    )
}

/// Undefined names `modpost` does not resolve.
fn ignored(symbol: &str) -> bool {
    matches!(symbol, "__this_module" | "_GLOBAL_OFFSET_TABLE_" | ".TOC.")
        || symbol.starts_with("__gnu_lto")
}

/// Who exports a symbol, as a refusal names it.
#[derive(Clone, Copy)]
enum Who<'a> {
    Vmlinux,
    /// A module of the kernel, by its path in `Module.symvers`.
    KernelModule(&'a str),
    /// A module of the set, by name.
    SetModule(&'a str),
}

impl std::fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Who::Vmlinux => f.write_str("vmlinux"),
            Who::KernelModule(path) => write!(
                f,
                "the kernel's module {}",
                module_name(path.rsplit('/').next().unwrap_or(path))
            ),
            Who::SetModule(name) => write!(f, "module {name} of the set"),
        }
    }
}

/// Who exports a symbol, as the check sees it.
struct Exporter<'a> {
    crc: Option<u32>,
    gpl_only: bool,
    namespace: Option<&'a str>,
    who: Who<'a>,
    /// A module of the set under a licence that is not GPL-compatible; never one of the
    /// kernel's own, whose licences the kernel tree keeps GPL-compatible.
    proprietary: bool,
}

/// Checks `modules` against `kernel`: their facts, in the order given, or every refusal.
pub fn check(modules: &[Module], kernel: &Kernel) -> Result<Vec<Facts>, CheckError> {
    let mut refusals = Vec::new();
    let mut names = BTreeSet::new();
    for m in modules {
        if !names.insert(m.name.as_str()) {
            refusals.push(Refusal::DuplicateModule {
                module: m.name.clone(),
            });
        }
    }
    let mut kernel_modules = BTreeSet::new();
    let mut exporters: BTreeMap<&str, Exporter> = BTreeMap::new();
    for e in kernel.symvers.entries() {
        let who = match e.module_name() {
            Some(n) if names.contains(n.as_str()) => continue,
            Some(n) => {
                kernel_modules.insert(n);
                Who::KernelModule(&e.module)
            }
            None => Who::Vmlinux,
        };
        exporters.insert(
            &e.symbol,
            Exporter {
                crc: e.crc,
                gpl_only: e.gpl_only,
                namespace: e.namespace.as_deref(),
                who,
                proprietary: false,
            },
        );
    }
    let kernel_has_crcs = kernel.symvers.entries().any(|e| e.crc.is_some());
    for m in modules {
        for x in &m.exports {
            let who = Who::SetModule(&m.name);
            let proprietary = !gpl_compatible(m.modinfo.get("license"));
            if let Some(other) = exporters.get(x.symbol.as_str()) {
                refusals.push(Refusal::DuplicateExport {
                    module: m.name.clone(),
                    symbol: x.symbol.clone(),
                    other: other.who.to_string(),
                });
                continue;
            }
            exporters.insert(
                &x.symbol,
                Exporter {
                    crc: x.crc,
                    gpl_only: x.gpl_only,
                    namespace: x.namespace.as_deref(),
                    who,
                    proprietary,
                },
            );
        }
    }
    let mut facts = Vec::with_capacity(modules.len());
    for m in modules {
        refusals.extend(check_one(m, kernel, &exporters, kernel_has_crcs, |n| {
            names.contains(n) || kernel_modules.contains(n)
        }));
        facts.push(Facts {
            name: m.name.clone(),
            file: m.file.clone(),
            version: m.modinfo.get("version").map(str::to_string),
            vermagic: m.vermagic().unwrap_or_default().to_string(),
            srcversion: m.modinfo.get("srcversion").map(str::to_string),
            license: m.modinfo.get("license").map(str::to_string),
            depends: m.modinfo.depends(),
            signed_by: m.signature.as_ref().and_then(|s| s.signer.clone()),
            signature: m.signature.clone(),
        });
    }
    if refusals.is_empty() {
        Ok(facts)
    } else {
        Err(CheckError::Refused {
            release: kernel.release.to_string(),
            refusals,
        })
    }
}

/// The refusals of one module.
fn check_one(
    m: &Module,
    kernel: &Kernel,
    exporters: &BTreeMap<&str, Exporter>,
    kernel_has_crcs: bool,
    has_module: impl Fn(&str) -> bool,
) -> Vec<Refusal> {
    let module = || m.name.clone();
    let mut out = Vec::new();
    match m.vermagic() {
        None => out.push(Refusal::NoVermagic { module: module() }),
        Some(found) => {
            let release_fits = found.split_whitespace().next() == Some(kernel.release);
            let whole_fits = kernel
                .vermagic
                .is_none_or(|v| v.split_whitespace().eq(found.split_whitespace()));
            if !release_fits || !whole_fits {
                out.push(Refusal::Vermagic {
                    module: module(),
                    found: found.trim_end().to_string(),
                    expected: kernel
                        .vermagic
                        .map(str::trim_end)
                        .unwrap_or(kernel.release)
                        .to_string(),
                });
            }
        }
    }
    for needs in m.modinfo.depends() {
        if !has_module(&module_name(&needs)) {
            out.push(Refusal::Depends {
                module: module(),
                needs,
            });
        }
    }
    let needs_any = m.undefined.iter().any(|u| !ignored(&u.symbol));
    if m.versions.is_none() && kernel_has_crcs && needs_any {
        out.push(Refusal::NoVersions { module: module() });
    }
    let license = m.modinfo.get("license");
    let imports: BTreeSet<&str> = m.modinfo.all("import_ns").collect();
    // The loader's licence rule, symbol by symbol in symbol-table order: a module not under a
    // GPL-compatible licence (or tainted by using a proprietary module's symbol) finds no
    // GPL-only export; one that used a GPL-only export may not then use a proprietary module's.
    let mut tainted_by: Option<String> = None;
    let mut uses_gpl_only = false;
    for u in m.undefined.iter().filter(|u| !ignored(&u.symbol)) {
        let symbol = || u.symbol.clone();
        let Some(e) = exporters.get(u.symbol.as_str()) else {
            if !u.weak {
                out.push(Refusal::Unresolved {
                    module: module(),
                    symbol: symbol(),
                });
            }
            continue;
        };
        if e.gpl_only && (!gpl_compatible(license) || tainted_by.is_some()) {
            let license = license.unwrap_or("(none)");
            out.push(Refusal::GplOnly {
                module: module(),
                symbol: symbol(),
                license: match &tainted_by {
                    Some(owner) => format!("{license}, proprietary since it used {owner}"),
                    None => license.to_string(),
                },
                exporter: e.who.to_string(),
            });
            continue;
        }
        uses_gpl_only |= e.gpl_only;
        if e.proprietary {
            if uses_gpl_only {
                out.push(Refusal::ProprietaryOwner {
                    module: module(),
                    symbol: symbol(),
                    owner: e.who.to_string(),
                });
                continue;
            }
            if gpl_compatible(license) && tainted_by.is_none() {
                tainted_by = Some(e.who.to_string());
            }
        }
        if let Some(ns) = e.namespace.filter(|ns| !imports.contains(ns)) {
            out.push(Refusal::Namespace {
                module: module(),
                symbol: symbol(),
                namespace: ns.to_string(),
                exporter: e.who.to_string(),
            });
        }
    }
    // Every CRC it recorded, for a symbol it needs or one the loader checks by itself
    // (`module_layout` on older kernels).
    for (symbol, crc) in m.versions.iter().flatten() {
        let Some(e) = exporters.get(symbol.as_str()) else {
            continue;
        };
        if let Some(theirs) = e.crc.filter(|c| c != crc) {
            out.push(Refusal::Crc {
                module: module(),
                symbol: symbol.clone(),
                module_crc: *crc,
                exporter_crc: theirs,
                exporter: e.who.to_string(),
            });
        }
    }
    out
}
