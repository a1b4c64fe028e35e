//! The rules a node's NVIDIA driver × module flavour × GPUs × kernel must meet, in one place:
//! the node resolver (`node.rs`) holds every candidate to them, and `gpuimg catalog
//! check-host` holds a running host's driver and kernel to the same ones. Each rule that
//! applies gives a [`Verdict`]: whether it holds, and the facts it rests on with their catalog
//! sources. Pure: reads the catalog and the subject only. Must never choose between
//! candidates (the resolver's) nor read a host (the check's caller).

use gpuimg_expect::version::Version;

use super::fact::{Conflict, Fact};
use super::node::source_package;
use crate::catalog::{Catalog, Gpu, ModuleFlavour};

/// What is checked: a driver version of a module flavour, the GPUs it must drive, and the
/// kernel it is built for (none: the rules of the driver alone).
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    pub driver: &'a Version,
    pub flavour: ModuleFlavour,
    pub gpus: &'a [&'a Gpu],
    pub kernel: Option<Kernel<'a>>,
}

/// A kernel: its release (`6.1.0-55-cloud-amd64`) and, where known, its upstream version
/// (the `linux-image-<abi>` package's `6.1.192-1` is 6.1.192).
#[derive(Debug, Clone, Copy)]
pub struct Kernel<'a> {
    pub release: &'a str,
    pub upstream: Option<&'a Version>,
}

impl Kernel<'_> {
    /// The version to compare with a minimum: the upstream one, else the release's leading
    /// numbers (`6.8.0` of `6.8.0-60-generic`: right in its major and minor).
    fn series(&self) -> Option<Version> {
        if let Some(v) = self.upstream {
            return Some(v.clone());
        }
        let lead: String = self
            .release
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        lead.trim_end_matches('.').parse().ok()
    }
}

/// Which rule a verdict is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The GPU is one the catalog knows (a host's GPU by its model name: `catalog check-host`).
    GpuInCatalog,
    /// The GPU is driven by the module flavour (`gpus.yaml`: `modules`).
    GpuModule,
    /// The driver is at least the GPU's first (`min_driver`).
    GpuMinDriver,
    /// The driver's branch is not past the GPU's last (`last_branch`).
    GpuLastBranch,
    /// The open module lists the GPU from this release on (`open_min_driver`).
    GpuOpenMinDriver,
    /// The kernel is at least the driver branch's minimum (`drivers.yaml`: `min_kernel`).
    BranchMinKernel,
    /// No known build failure covers the module source × kernel (`module-builds.yaml`).
    KnownBuildFailure,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::GpuInCatalog => "gpu-in-catalog",
            Rule::GpuModule => "gpu-module",
            Rule::GpuMinDriver => "gpu-min-driver",
            Rule::GpuLastBranch => "gpu-last-branch",
            Rule::GpuOpenMinDriver => "gpu-open-min-driver",
            Rule::BranchMinKernel => "branch-min-kernel",
            Rule::KnownBuildFailure => "known-build-failure",
        }
    }

    /// Whether the rule is about the kernel (checked only where a kernel is given).
    pub fn of_kernel(self) -> bool {
        matches!(self, Rule::BranchMinKernel | Rule::KnownBuildFailure)
    }
}

/// One rule applied: whether it holds, the facts it rests on, and what follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub rule: Rule,
    pub holds: bool,
    pub facts: Vec<Fact>,
    pub conclusion: String,
}

impl Verdict {
    pub fn conflict(&self) -> Conflict {
        Conflict::new(self.facts.clone(), self.conclusion.clone())
    }
}

/// Every rule that applies to `s`, in a fixed order: each GPU's (flavour, first driver, last
/// branch, open module's first release), then the kernel's (the branch's minimum, known build
/// failures).
pub fn verdicts(catalog: &Catalog, s: &Subject<'_>) -> Vec<Verdict> {
    let mut out = Vec::new();
    for g in s.gpus {
        gpu_rules(s, g, &mut out);
    }
    if let Some(k) = s.kernel {
        min_kernel(catalog, s, k, &mut out);
        build_failures(catalog, s, k, &mut out);
    }
    out
}

fn verdict(rule: Rule, holds: bool, facts: Vec<Fact>, yes: String, no: String) -> Verdict {
    Verdict {
        rule,
        holds,
        facts,
        conclusion: if holds { yes } else { no },
    }
}

fn gpu_rules(s: &Subject<'_>, g: &Gpu, out: &mut Vec<Verdict>) {
    let (v, f) = (s.driver, s.flavour.as_str());
    let only: Vec<&str> = g.modules.iter().map(|m| m.as_str()).collect();
    let drives = g.modules.contains(&s.flavour);
    let text = if drives {
        format!("{} is driven by the {} module", g.name, only.join(" or "))
    } else {
        format!(
            "{} is driven by the {} module only",
            g.name,
            only.join(" or ")
        )
    };
    out.push(verdict(
        Rule::GpuModule,
        drives,
        vec![Fact::new(text, &g.source)],
        format!("the {f} module drives {}", g.name),
        format!("the {f} module cannot drive {}", g.name),
    ));
    match g.min_driver.as_ref().and_then(|m| m.known()) {
        Some(min) => out.push(verdict(
            Rule::GpuMinDriver,
            v >= min,
            vec![Fact::new(
                format!("{} needs driver {min} or newer", g.name),
                &g.source,
            )],
            format!("driver {v} is new enough for {}", g.name),
            format!("driver {v} cannot drive {}", g.name),
        )),
        None => out.push(verdict(
            Rule::GpuMinDriver,
            true,
            vec![Fact::new(
                format!("no source gives {}'s first driver", g.name),
                &g.source,
            )
            .unverified_if(true)],
            format!("driver {v} is not held to a first driver of {}", g.name),
            String::new(),
        )),
    }
    if let Some(last) = g.last_branch {
        out.push(verdict(
            Rule::GpuLastBranch,
            v.major() <= last,
            vec![Fact::new(
                format!("{}'s last driver branch is {last}", g.name),
                &g.source,
            )],
            format!("driver {v} still drives {}", g.name),
            format!("driver {v} no longer drives {}", g.name),
        ));
    }
    if s.flavour == ModuleFlavour::Open {
        if let Some(min) = &g.open_min_driver {
            out.push(verdict(
                Rule::GpuOpenMinDriver,
                v >= min,
                vec![Fact::new(
                    format!("the open module drives {} from {min} on", g.name),
                    &g.source,
                )],
                format!("the open module {v} drives {}", g.name),
                format!("the open module {v} cannot drive {}", g.name),
            ));
        }
    }
}

fn min_kernel(catalog: &Catalog, s: &Subject<'_>, k: Kernel<'_>, out: &mut Vec<Verdict>) {
    let v = s.driver;
    let Some(b) = catalog.branch_of(v) else {
        return;
    };
    let unverified = b.unverified.iter().any(|u| u == "kernel");
    match (&b.min_kernel, k.series()) {
        (Some(min), Some(have)) => out.push(verdict(
            Rule::BranchMinKernel,
            have >= *min,
            vec![Fact::new(
                format!("R{} needs Linux {min} or newer", b.branch),
                &b.source,
            )
            .unverified_if(unverified)],
            format!("Linux {have} ({}) is new enough for driver {v}", k.release),
            format!("driver {v} cannot run on Linux {have} ({})", k.release),
        )),
        (None, _) => out.push(verdict(
            Rule::BranchMinKernel,
            true,
            vec![Fact::new(
                format!("the minimum Linux kernel of R{} is not published", b.branch),
                &b.source,
            )
            .unverified_if(true)],
            format!("`{}` is not held to a minimum of R{}", k.release, b.branch),
            String::new(),
        )),
        (Some(min), None) => out.push(verdict(
            Rule::BranchMinKernel,
            true,
            vec![
                Fact::new(
                    format!("R{} needs Linux {min} or newer", b.branch),
                    &b.source,
                ),
                Fact::new(
                    format!("`{}` names no Linux version", k.release),
                    &["kernel".to_string()],
                )
                .unverified_if(true),
            ],
            format!("`{}` is not held to R{}'s minimum", k.release, b.branch),
            String::new(),
        )),
    }
}

fn build_failures(catalog: &Catalog, s: &Subject<'_>, k: Kernel<'_>, out: &mut Vec<Verdict>) {
    let (v, package) = (s.driver, source_package(s.flavour));
    for r in catalog
        .module_build_failures
        .iter()
        .filter(|r| r.package == package && r.drivers.iter().any(|c| c.matches(v)))
    {
        let kernels: Vec<String> = r.kernels.iter().map(|c| format!("`{c}`")).collect();
        let covers = format!(
            "`{package}` {v} does not compile against Linux {} ({}): {}",
            kernels.join(" or "),
            r.id,
            r.fails
        );
        match k.upstream {
            Some(up) => {
                let hit = r.kernels.iter().any(|c| c.matches(up));
                let facts =
                    vec![Fact::new(covers, &r.source).unverified_if(!r.unverified.is_empty())];
                out.push(verdict(
                    Rule::KnownBuildFailure,
                    !hit,
                    facts,
                    format!("Linux {up} (`{}`) is outside it", k.release),
                    format!(
                        "the {} module {v} cannot be built for `{}` (Linux {up})",
                        s.flavour.as_str(),
                        k.release
                    ),
                ));
            }
            None => out.push(verdict(
                Rule::KnownBuildFailure,
                true,
                vec![
                    Fact::new(covers, &r.source),
                    Fact::new(
                        format!("`{}` names no upstream Linux version", k.release),
                        &["kernel".to_string()],
                    )
                    .unverified_if(true),
                ],
                format!("`{}` is not held to `{}`", k.release, r.id),
                String::new(),
            )),
        }
    }
}
