//! A node's kernel × NVIDIA driver × module flavour, resolved against what the repositories
//! offer (`kind: host`): the flavour the profile pins, or the one its GPUs take (`any`: open
//! where every GPU is driven by it, else proprietary), the newest driver source of that flavour
//! whose version the GPUs accept and whose user space and GSP firmware the repositories offer
//! at exactly that version, and the newest kernel ABI the pin admits with its headers offered
//! that the source builds for (its `dkms.conf`, and the rules of `node_rules`: the branch's
//! minimum kernel, the catalog's known build failures). With `any`, a flavour whose source a
//! known failure keeps off a newer kernel than another flavour's gives way to that one.
//! A "no" lists, per candidate, the facts that rule it out with their sources: the catalog's
//! for the GPUs, `apt` for what the repositories offer, `profile` for the pins.
//! Pure: the offer is plain data the caller read from the signed indexes; no I/O here. Must
//! never pick a driver whose user space differs from its module source in version.

use gpuimg_expect::version::{Constraint, Version};

use super::explain::Explanation;
use super::fact::{Conflict, Fact};
use super::node_rules::{self, Kernel, Subject};
use crate::catalog::{Catalog, Gpu, ModuleFlavour, System};
use crate::profile::KernelModule;

/// The module source package of each flavour, as Debian names it.
pub const OPEN_SOURCE: &str = "nvidia-open-kernel-dkms";
pub const PROPRIETARY_SOURCE: &str = "nvidia-kernel-dkms";
/// The user space that must match the module's version, and the firmware both flavours need.
pub const USER_SPACE: &str = "nvidia-driver";
pub const GSP_FIRMWARE: &str = "firmware-nvidia-gsp";
/// NVIDIA's fabric manager, per branch (`nvidia-fabricmanager-535`): NVSwitch systems need it.
pub const FABRIC_MANAGER: &str = "nvidia-fabricmanager";

/// The module source package of `flavour`.
pub fn source_package(flavour: ModuleFlavour) -> &'static str {
    match flavour {
        ModuleFlavour::Open => OPEN_SOURCE,
        ModuleFlavour::Proprietary => PROPRIETARY_SOURCE,
    }
}

/// One package version the repositories offer. The caller gives them sorted by Debian version,
/// newest first, for each name (Debian's ordering is `gpuimg-apt`'s, not this stage's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOffer {
    pub name: String,
    /// The Debian version (`535.261.03-1`).
    pub version: String,
    /// Its upstream release (`535.261.03`), where it has one.
    pub upstream: Option<Version>,
    /// The packages it depends on (every alternative), by name.
    pub depends: Vec<String>,
}

/// The kernel the profile asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelPin {
    /// An exact ABI (`6.1.0-41-cloud-amd64`).
    Abi(String),
    /// The newest ABI of `flavour` (`cloud-amd64`) whose upstream version matches.
    Version {
        constraint: Constraint,
        text: String,
        flavour: String,
    },
}

/// What a node's resolution is asked.
#[derive(Debug, Clone)]
pub struct NodeRequest<'a> {
    /// The rules' records: driver branches and known build failures.
    pub catalog: &'a Catalog,
    pub gpus: Vec<&'a Gpu>,
    /// `host.driver`: an exact version or a branch (`535`).
    pub driver: Option<(Constraint, String)>,
    pub kernel: KernelPin,
    pub module: KernelModule,
    pub offered: &'a [NodeOffer],
    /// `host.system`: the GPU system, where its form factor matters (NVSwitch).
    pub system: Option<&'a System>,
}

/// The resolved node: what gets installed and built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeResolution {
    /// The kernel ABI (`6.1.0-41-cloud-amd64`) and its `linux-image-<abi>` package version.
    pub kernel_abi: String,
    pub kernel_version: String,
    pub flavour: ModuleFlavour,
    /// The module source package and its Debian version; the driver is its upstream version.
    pub source: String,
    pub source_version: String,
    pub driver: Version,
    /// Why a newer kernel, or with `any` the preferred flavour, was passed over (empty: the
    /// newest kernel the pin admits, and the preferred flavour).
    pub passed_over: Vec<Fact>,
    /// NVIDIA's fabric manager (package, Debian version) at exactly the driver's version, for
    /// an NVSwitch system.
    pub fabric_manager: Option<(String, String)>,
}

const APT: &str = "apt";
const PROFILE: &str = "profile";

/// The driver a node gets: its flavour, module source and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDriver {
    pub flavour: ModuleFlavour,
    pub source: String,
    pub source_version: String,
    pub driver: Version,
}

/// The kernels a module source builds for, as its `dkms.conf` states them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exclusive {
    /// `BUILD_EXCLUSIVE_KERNEL`: a regular expression the kernel release must match.
    pub kernel: Option<String>,
    /// `BUILD_EXCLUSIVE_CONFIG`: `!CONFIG_PREEMPT_RT` refuses real-time kernels.
    pub config: Vec<String>,
    /// Where it was read (`nvidia-open-kernel-dkms 535.261.03-1's dkms.conf`), cited.
    pub source: String,
}

/// The node: the first driver candidate (flavours in the order [`flavours`] gives, each
/// flavour's versions newest first, every driver rule holding) that builds for a kernel the
/// pin admits, with the newest such kernel; with `any`, the first whose newest kernel no
/// known failure or branch minimum passed over, else the first. `exclusive_of` reads a
/// candidate source's `dkms.conf` (the caller's I/O; its error ends the resolution). A "no"
/// lists every candidate's reason.
pub fn pick<E>(
    req: &NodeRequest<'_>,
    mut exclusive_of: impl FnMut(&NodeDriver) -> Result<Exclusive, E>,
) -> Result<Result<NodeResolution, Explanation>, E> {
    let (drivers, driver_fails) = driver_candidates(req);
    if drivers.is_empty() {
        return Ok(Err(Explanation::new(
            format!("no NVIDIA driver in the repositories fits {}", what(req)),
            driver_fails,
        )));
    }
    let mut kernel_fails: Vec<(String, Conflict)> = Vec::new();
    let mut first: Option<NodeResolution> = None;
    let mut passed: Vec<Fact> = Vec::new();
    for d in drivers {
        let exclusive = exclusive_of(&d)?;
        match kernel_choice(req, &d, &exclusive) {
            Ok(k) => {
                let clean = k.passed_over.is_empty();
                let fabric_manager = fabric_manager(req, &d.driver);
                let mut res = NodeResolution {
                    kernel_abi: k.abi,
                    kernel_version: k.version,
                    flavour: d.flavour,
                    source: d.source,
                    source_version: d.source_version,
                    driver: d.driver,
                    passed_over: k.passed_over,
                    fabric_manager,
                };
                if clean || req.module != KernelModule::Any {
                    if let Some(f) = &first {
                        // `any` passed the preferred candidate over: say so, then why.
                        let mut facts = vec![Fact::new(
                            format!(
                                "`kernel_module: any`: the {} module builds for `{}`, newer than `{}`, the newest the {} module {} builds for",
                                res.flavour.as_str(),
                                res.kernel_abi,
                                f.kernel_abi,
                                f.flavour.as_str(),
                                f.driver
                            ),
                            &[PROFILE.to_string()],
                        )];
                        facts.append(&mut passed);
                        facts.append(&mut res.passed_over);
                        res.passed_over = facts;
                    }
                    return Ok(Ok(res));
                }
                if first.is_none() {
                    passed = res.passed_over.clone();
                    first = Some(res);
                }
            }
            Err(no) => {
                kernel_fails.push((
                    format!(
                        "{} {} on {}",
                        d.source,
                        d.source_version,
                        kernel_text(&req.kernel)
                    ),
                    no.conflict,
                ));
                if !no.module_side {
                    break;
                }
            }
        }
    }
    if let Some(f) = first {
        return Ok(Ok(f));
    }
    Ok(Err(Explanation::new(
        format!(
            "no kernel in the repositories fits {}",
            kernel_text(&req.kernel)
        ),
        kernel_fails,
    )))
}

/// Every driver candidate, in the order tried (flavours as [`flavours`] gives them, each
/// flavour's source versions newest first) whose driver rules hold; and why each other one
/// is out.
fn driver_candidates(req: &NodeRequest<'_>) -> (Vec<NodeDriver>, Vec<(String, Conflict)>) {
    let mut fails: Vec<(String, Conflict)> = Vec::new();
    let mut out = Vec::new();
    for flavour in flavours(req) {
        let source = source_package(flavour);
        let versions = offered_versions(req.offered, source);
        if versions.is_empty() {
            fails.push((
                format!("the {} module", flavour.as_str()),
                Conflict::new(
                    vec![Fact::new(
                        format!("the repositories offer no `{source}`"),
                        &[APT.to_string()],
                    )],
                    format!("no {} module can be built", flavour.as_str()),
                ),
            ));
            continue;
        }
        for deb in versions {
            match check_driver(req, flavour, &deb) {
                Ok(v) => out.push(NodeDriver {
                    flavour,
                    source: source.to_string(),
                    source_version: deb,
                    driver: v,
                }),
                Err(c) => fails.push((format!("{source} {deb}"), c)),
            }
        }
    }
    (out, fails)
}

/// The flavours to try, in order: the pinned one, else open where every GPU is driven by it
/// (recommended from Turing on, required for Grace Hopper and Blackwell), then proprietary.
fn flavours(req: &NodeRequest<'_>) -> Vec<ModuleFlavour> {
    match req.module {
        KernelModule::Open => vec![ModuleFlavour::Open],
        KernelModule::Proprietary => vec![ModuleFlavour::Proprietary],
        KernelModule::Any => {
            let all_open = req
                .gpus
                .iter()
                .all(|g| g.modules.contains(&ModuleFlavour::Open));
            if all_open {
                vec![ModuleFlavour::Open, ModuleFlavour::Proprietary]
            } else {
                vec![ModuleFlavour::Proprietary, ModuleFlavour::Open]
            }
        }
    }
}

/// Debian versions of `name` offered, newest first (the caller's order), once each.
fn offered_versions(offered: &[NodeOffer], name: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for o in offered.iter().filter(|o| o.name == name) {
        if !v.contains(&o.version) {
            v.push(o.version.clone());
        }
    }
    v
}

fn upstream_of<'o>(offered: &'o [NodeOffer], name: &str, deb: &str) -> Option<&'o Version> {
    offered
        .iter()
        .find(|o| o.name == name && o.version == deb)
        .and_then(|o| o.upstream.as_ref())
}

/// The driver of `flavour`'s source at Debian version `deb`: its upstream version, if every
/// rule holds.
fn check_driver(
    req: &NodeRequest<'_>,
    flavour: ModuleFlavour,
    deb: &str,
) -> Result<Version, Conflict> {
    let source = source_package(flavour);
    let Some(v) = upstream_of(req.offered, source, deb).cloned() else {
        return Err(Conflict::new(
            vec![Fact::new(
                format!("`{source}` {deb} names no driver version"),
                &[APT.to_string()],
            )],
            "its driver version is unknown",
        ));
    };
    let f = flavour.as_str();
    if let Some((c, text)) = &req.driver {
        if !c.matches(&v) {
            return Err(Conflict::new(
                vec![
                    Fact::new(format!("`host.driver` is `{text}`"), &[PROFILE.to_string()]),
                    Fact::new(
                        format!("`{source}` {deb} is driver {v}"),
                        &[APT.to_string()],
                    ),
                ],
                format!("driver {v} is not the one pinned"),
            ));
        }
    }
    let subject = Subject {
        driver: &v,
        flavour,
        gpus: &req.gpus,
        kernel: None,
    };
    if let Some(no) = node_rules::verdicts(req.catalog, &subject)
        .iter()
        .find(|x| !x.holds)
    {
        return Err(no.conflict());
    }
    // An NVSwitch system needs NVIDIA's fabric manager at exactly the driver's version.
    if let Some(sys) = req.system.filter(|s| s.nvswitch) {
        if fabric_manager(req, &v).is_none() {
            let name = fabric_manager_package(&v);
            let has = offered_versions(req.offered, &name);
            return Err(Conflict::new(
                vec![
                    Fact::new(
                        format!(
                            "{} connects its GPUs through NVSwitch, which NVIDIA's fabric manager must set up at exactly the driver's version",
                            sys.name
                        ),
                        &sys.source,
                    ),
                    Fact::new(
                        format!(
                            "the repositories offer `{name}` {}, not {v} (Debian has none: add NVIDIA's repository that carries it)",
                            if has.is_empty() { "none".to_string() } else { has.join(", ") }
                        ),
                        &[APT.to_string()],
                    ),
                ],
                format!("driver {v} cannot set up {}'s NVSwitch fabric", sys.name),
            ));
        }
    }
    // The whole driver is one version: user space and firmware exactly the module's.
    for needed in [USER_SPACE, GSP_FIRMWARE] {
        let has = offered_versions(req.offered, needed);
        if !has.iter().any(|h| h == deb) {
            let offered = if has.is_empty() {
                "none".to_string()
            } else {
                has.join(", ")
            };
            return Err(Conflict::new(
                vec![Fact::new(
                    format!(
                        "the repositories offer `{needed}` {offered}, not the module source's {deb}"
                    ),
                    &[APT.to_string()],
                )],
                format!("driver {v}'s {f} module would not match its user space"),
            ));
        }
    }
    Ok(v)
}

/// NVIDIA's name of the fabric manager of `driver`'s branch (`nvidia-fabricmanager-535`).
pub fn fabric_manager_package(driver: &Version) -> String {
    format!("{FABRIC_MANAGER}-{}", driver.major())
}

/// The fabric manager a node of `req`'s system needs with `driver`: the offered package of the
/// driver's branch whose upstream version is exactly the driver's; `None` where the system
/// needs none or none is offered.
fn fabric_manager(req: &NodeRequest<'_>, driver: &Version) -> Option<(String, String)> {
    req.system.filter(|s| s.nvswitch)?;
    let name = fabric_manager_package(driver);
    req.offered
        .iter()
        .find(|o| o.name == name && o.upstream.as_ref() == Some(driver))
        .map(|o| (o.name.clone(), o.version.clone()))
}

/// A kernel chosen for a driver: its ABI, its `linux-image-<abi>` version, and why newer
/// kernels the pin admits were passed over.
struct KernelPick {
    abi: String,
    version: String,
    passed_over: Vec<Fact>,
}

/// No kernel for a driver; `module_side`: a rule of the module source ruled a kernel out
/// (another source may build for it), rather than the repositories or the pin.
struct KernelNo {
    conflict: Conflict,
    module_side: bool,
}

/// One admitted kernel ruled out for a driver, and the fact that rules it out.
struct Excluded {
    upstream: Option<Version>,
    abi: String,
    reason: Fact,
    /// The reason names the kernel itself (else the kernels it covers are listed before it).
    names_kernel: bool,
}

/// The kernel for `driver`: the exact ABI, or the newest ABI of the flavour whose version the
/// pin admits; its image and headers both offered; admitted by the module source's
/// `dkms.conf` and by the kernel rules of `node_rules`.
fn kernel_choice(
    req: &NodeRequest<'_>,
    driver: &NodeDriver,
    exclusive: &Exclusive,
) -> Result<KernelPick, KernelNo> {
    let pattern = match &exclusive.kernel {
        Some(p) => Some(regex::Regex::new(p).map_err(|e| KernelNo {
            conflict: Conflict::new(
                vec![Fact::new(
                    format!(
                        "`BUILD_EXCLUSIVE_KERNEL` is `{p}`, which does not read as a pattern ({e})"
                    ),
                    std::slice::from_ref(&exclusive.source),
                )],
                "the kernels the module builds for are unknown",
            ),
            module_side: true,
        })?),
        None => None,
    };
    let refuses_rt = exclusive
        .config
        .iter()
        .any(|c| c == "!CONFIG_PREEMPT_RT" || c == "!CONFIG_PREEMPT_RT_FULL");
    let mut excluded: Vec<Excluded> = Vec::new();
    let images: Vec<(String, &NodeOffer)> = req
        .offered
        .iter()
        .filter_map(|o| {
            let abi = o.name.strip_prefix("linux-image-")?;
            // An ABI starts with its version (`6.1.0-41-cloud-amd64`); meta packages
            // (`linux-image-cloud-amd64`, `linux-image-6.12-cloud-amd64`: they depend on the
            // image they name) and unsigned/debug variants are not kernels to install.
            let first = abi.chars().next()?;
            let meta = o.depends.iter().any(|d| d.starts_with("linux-image-"));
            (first.is_ascii_digit()
                && !meta
                && !abi.ends_with("-unsigned")
                && !abi.ends_with("-dbg"))
            .then(|| (abi.to_string(), o))
        })
        .collect();
    let has_headers = |abi: &str| {
        req.offered
            .iter()
            .any(|o| o.name == format!("linux-headers-{abi}"))
    };
    let mut fits: Vec<(Version, String, String)> = Vec::new();
    let mut without_headers = Vec::new();
    for (abi, offer) in &images {
        let admitted = match &req.kernel {
            KernelPin::Abi(want) => abi == want,
            KernelPin::Version {
                constraint,
                flavour,
                ..
            } => {
                abi.ends_with(&format!("-{flavour}"))
                    && offer
                        .upstream
                        .as_ref()
                        .is_some_and(|v| constraint.matches(v))
            }
        };
        if !admitted {
            continue;
        }
        let mut exclude = |reason: Fact, names_kernel: bool| {
            excluded.push(Excluded {
                upstream: offer.upstream.clone(),
                abi: abi.clone(),
                reason,
                names_kernel,
            })
        };
        if refuses_rt && abi.contains("-rt-") {
            exclude(Fact::new(
                format!("`{abi}` is a real-time kernel, and the module source states `BUILD_EXCLUSIVE_CONFIG=\"{}\"`", exclusive.config.join(" ")),
                std::slice::from_ref(&exclusive.source),
            ), true);
            continue;
        }
        if let Some(p) = pattern.as_ref().filter(|p| !p.is_match(abi)) {
            exclude(
                Fact::new(
                    format!(
                        "the module source builds for kernels matching `{}` only, not `{abi}`",
                        p.as_str()
                    ),
                    std::slice::from_ref(&exclusive.source),
                ),
                true,
            );
            continue;
        }
        if !has_headers(abi) {
            without_headers.push(abi.clone());
            continue;
        }
        let subject = Subject {
            driver: &driver.driver,
            flavour: driver.flavour,
            gpus: &req.gpus,
            kernel: Some(Kernel {
                release: abi,
                upstream: offer.upstream.as_ref(),
            }),
        };
        let no: Vec<Fact> = node_rules::verdicts(req.catalog, &subject)
            .into_iter()
            .filter(|x| x.rule.of_kernel() && !x.holds)
            .flat_map(|x| x.facts)
            .collect();
        if !no.is_empty() {
            for f in no {
                exclude(f, false);
            }
            continue;
        }
        if let Some(v) = &offer.upstream {
            fits.push((v.clone(), abi.clone(), offer.version.clone()));
        }
    }
    // The newest upstream kernel; among the same, the caller's order (newest Debian first).
    fits.sort_by(|a, b| b.0.cmp(&a.0));
    if let Some((v, abi, deb)) = fits.into_iter().next() {
        let newer = excluded
            .iter()
            .filter(|e| e.upstream.as_ref().is_some_and(|u| *u > v));
        return Ok(KernelPick {
            abi,
            version: deb,
            passed_over: excluded_facts(newer),
        });
    }
    let mut facts = vec![Fact::new(
        format!("the profile asks for {}", kernel_text(&req.kernel)),
        &[PROFILE.to_string()],
    )];
    let module_side = !excluded.is_empty();
    if module_side {
        facts.extend(excluded_facts(excluded.iter()));
    } else if without_headers.is_empty() {
        facts.push(Fact::new(
            "the repositories offer no such `linux-image-…`",
            &[APT.to_string()],
        ));
    } else {
        facts.push(Fact::new(
            format!(
                "the repositories offer no `linux-headers-…` for {}",
                without_headers.join(", ")
            ),
            &[APT.to_string()],
        ));
    }
    Err(KernelNo {
        conflict: Conflict::new(facts, "no module can be built for it"),
        module_side,
    })
}

/// The facts that rule `excluded` kernels out, once each; a rule that does not name the
/// kernels it rules out follows the list of them.
fn excluded_facts<'e>(excluded: impl Iterator<Item = &'e Excluded>) -> Vec<Fact> {
    let mut groups: Vec<(&Fact, Vec<String>, bool)> = Vec::new();
    for e in excluded {
        let name = match &e.upstream {
            Some(v) => format!("`{}` (Linux {v})", e.abi),
            None => format!("`{}`", e.abi),
        };
        match groups.iter_mut().find(|g| *g.0 == e.reason) {
            Some(g) => g.1.push(name),
            None => groups.push((&e.reason, vec![name], e.names_kernel)),
        }
    }
    let mut out = Vec::new();
    for (reason, kernels, names_kernel) in groups {
        if !names_kernel {
            out.push(Fact::new(
                format!("the repositories offer {}", kernels.join(", ")),
                &[APT.to_string()],
            ));
        }
        out.push(reason.clone());
    }
    out
}

fn kernel_text(k: &KernelPin) -> String {
    match k {
        KernelPin::Abi(a) => format!("the kernel ABI `{a}`"),
        KernelPin::Version { text, flavour, .. } => format!("a `{flavour}` kernel `{text}`"),
    }
}

fn what(req: &NodeRequest<'_>) -> String {
    let gpus: Vec<&str> = req.gpus.iter().map(|g| g.name.as_str()).collect();
    let mut parts = Vec::new();
    if !gpus.is_empty() {
        parts.push(format!("GPUs {}", gpus.join(", ")));
    }
    if let Some((_, t)) = &req.driver {
        parts.push(format!("driver `{t}`"));
    }
    match req.module {
        KernelModule::Any => {}
        m => parts.push(format!("the {} module", module_name(m))),
    }
    if parts.is_empty() {
        "the profile".into()
    } else {
        parts.join(" with ")
    }
}

fn module_name(m: KernelModule) -> &'static str {
    match m {
        KernelModule::Open => "open",
        KernelModule::Proprietary => "proprietary",
        KernelModule::Any => "any",
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
