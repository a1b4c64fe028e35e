//! `Request`: the profile's `host`, `stack` and `compat` keys, parsed and looked up.
//!
//! Constraints are parsed here, with the profile position for errors; GPU names are looked up
//! in the catalog (unknown names suggest the closest). `catalog why` and tests build a
//! `Request` directly. No compatibility reasoning happens here.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, Gpu};
use crate::profile::{CompatMode, KernelModule, Located, Profile};
use gpuimg_expect::version::{Constraint, Version};
use gpuimg_expect::ImagePlatform;

use super::ResolveError;

/// A `stack` component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Component {
    Cuda,
    Cudnn,
    Nccl,
    Python,
    Pytorch,
    Tensorflow,
    Jax,
}

impl Component {
    pub const ALL: [Component; 7] = [
        Component::Cuda,
        Component::Cudnn,
        Component::Nccl,
        Component::Python,
        Component::Pytorch,
        Component::Tensorflow,
        Component::Jax,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Component::Cuda => "cuda",
            Component::Cudnn => "cudnn",
            Component::Nccl => "nccl",
            Component::Python => "python",
            Component::Pytorch => "pytorch",
            Component::Tensorflow => "tensorflow",
            Component::Jax => "jax",
        }
    }

    pub fn is_framework(self) -> bool {
        matches!(
            self,
            Component::Pytorch | Component::Tensorflow | Component::Jax
        )
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for Component {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Component::ALL
            .into_iter()
            .find(|c| c.as_str() == s || (s == "torch" && *c == Component::Pytorch))
            .ok_or_else(|| format!("`{s}` is not a stack component"))
    }
}

/// A GPU the image must run on: a catalog GPU, or a bare compute capability.
#[derive(Debug, Clone)]
pub enum GpuTarget {
    Named(Box<Gpu>),
    Cc(Version),
}

impl GpuTarget {
    pub fn cc(&self) -> &Version {
        match self {
            GpuTarget::Named(g) => &g.cc,
            GpuTarget::Cc(v) => v,
        }
    }

    pub fn label(&self) -> String {
        match self {
            GpuTarget::Named(g) => g.name.clone(),
            GpuTarget::Cc(v) => format!("compute capability {v}"),
        }
    }

    pub fn gpu(&self) -> Option<&Gpu> {
        match self {
            GpuTarget::Named(g) => Some(g),
            GpuTarget::Cc(_) => None,
        }
    }
}

/// What to resolve.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub gpus: Vec<GpuTarget>,
    pub driver: Option<Constraint>,
    pub kernel: Option<Constraint>,
    pub kernel_module: KernelModule,
    /// Only the components the profile names (or a later fact pins: see `origins`).
    pub stack: BTreeMap<Component, Constraint>,
    /// Where a `stack` constraint comes from, when not from the profile: a fact the
    /// packages state (the framework variant the index installs, the base's Python).
    pub origins: BTreeMap<Component, Origin>,
    /// What the package index installs for a framework (`torch==X`), when it was asked
    /// before the resolution: a candidate variant it does not install is ruled out, citing it.
    pub installs: BTreeMap<Component, Installs>,
    pub compat: CompatMode,
    /// The image's platform (the profile's `platform`, `linux/amd64` by default), checked
    /// against each GPU's CPU; `None` (`catalog why`) checks none.
    pub platform: Option<ImagePlatform>,
    /// The host facts are a node's (`host.from`): no hint proposes changing them.
    pub host_from_node: bool,
}

/// What the package index installs for a framework's exact pin (`torch==2.14.1`), per catalog
/// release: the variant (`cu126`), or `None` when it serves no wheel of that release for the
/// image's Python. A release it was not asked about is not constrained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installs {
    pub by_version: BTreeMap<Version, Option<String>>,
    /// The package (`torch`) and whom it is installed for (`Python 3.11, x86_64`), as the
    /// facts read.
    pub package: String,
    pub target: String,
    /// The source to cite (`index`).
    pub source: String,
}

/// A stack constraint the profile does not state: what states it, and the source to cite
/// (`index`, `base`), so that a "no" never blames the profile for it and no hint asks the
/// profile to change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The statement, as a fact reads (`the index installs torch 2.14.1 cu130, built for CUDA 13.0`).
    pub text: String,
    pub source: String,
}

impl Request {
    /// Pin `comp` to `c` because of `origin` (not the profile).
    pub fn pin(&mut self, comp: Component, c: Constraint, origin: Origin) {
        self.stack.insert(comp, c);
        self.origins.insert(comp, origin);
    }

    /// True when the profile states `comp`'s constraint (a hint may change it).
    pub fn profile_states(&self, comp: Component) -> bool {
        self.stack.contains_key(&comp) && !self.origins.contains_key(&comp)
    }

    /// The fact that `comp` is constrained to `c`, citing where the constraint comes from.
    pub(super) fn stack_fact(&self, comp: Component, c: &Constraint) -> super::Fact {
        match self.origins.get(&comp) {
            Some(o) => super::Fact::new(o.text.clone(), std::slice::from_ref(&o.source)),
            None => super::Fact::profile(format!("stack.{comp} is `{c}`")),
        }
    }

    /// `comp`'s constraint as the summary of a "no" names it.
    pub(super) fn stack_label(&self, comp: Component, c: &Constraint) -> String {
        match self.origins.get(&comp) {
            Some(o) => format!("{comp} `{c}` ({})", o.source),
            None => format!("{comp} `{c}`"),
        }
    }
}

impl Request {
    pub fn from_profile(profile: &Profile, catalog: &Catalog) -> Result<Request, ResolveError> {
        let file = &profile.file;
        let parse = |key: &str, l: &Located<String>| -> Result<Constraint, ResolveError> {
            let c: Constraint = l
                .value
                .parse()
                .map_err(|source| ResolveError::BadConstraint {
                    file: file.clone(),
                    line: l.line,
                    column: l.column,
                    key: key.to_string(),
                    source: Box::new(source),
                })?;
            if c.to_set().is_empty() {
                return Err(ResolveError::ConflictingPins {
                    file: file.clone(),
                    line: l.line,
                    column: l.column,
                    key: key.to_string(),
                    value: l.value.clone(),
                });
            }
            Ok(c)
        };
        let mut gpus = Vec::new();
        for g in &profile.host.gpus {
            gpus.push(
                lookup_gpu(catalog, &g.value).ok_or_else(|| ResolveError::UnknownGpu {
                    file: file.clone(),
                    line: g.line,
                    column: g.column,
                    name: g.value.clone(),
                    suggestion: catalog.closest_gpu(&g.value).map(str::to_string),
                })?,
            );
        }
        let s = &profile.stack;
        let mut stack = BTreeMap::new();
        for (comp, v) in [
            (Component::Cuda, &s.cuda),
            (Component::Cudnn, &s.cudnn),
            (Component::Nccl, &s.nccl),
            (Component::Python, &s.python),
            (Component::Pytorch, &s.pytorch),
            (Component::Tensorflow, &s.tensorflow),
            (Component::Jax, &s.jax),
        ] {
            if let Some(l) = v {
                let key = format!("stack.{comp}");
                let c = parse(&key, l)?;
                // A version the catalog has never heard of is bad input, not a "no".
                if let Some(known) = known_versions(catalog, comp) {
                    if !known.iter().any(|v| c.matches(v)) {
                        return Err(ResolveError::UnknownVersion {
                            file: file.clone(),
                            line: l.line,
                            column: l.column,
                            message: format!(
                                "`{key}: {}` matches no {comp} release the catalog knows (known: {}); pick one of those, or add the release with a catalog overlay (`--catalog FILE`)",
                                l.value,
                                summarise(&known)
                            ),
                        });
                    }
                }
                stack.insert(comp, c);
            }
        }
        Ok(Request {
            gpus,
            driver: profile
                .host
                .driver
                .as_ref()
                .map(|l| parse("host.driver", l))
                .transpose()?,
            kernel: profile
                .host
                .kernel
                .as_ref()
                .map(|l| parse("host.kernel", l))
                .transpose()?,
            kernel_module: profile.host.kernel_module,
            stack,
            origins: BTreeMap::new(),
            installs: BTreeMap::new(),
            compat: profile.compat,
            platform: Some(ImagePlatform {
                os: profile.platform.os.clone(),
                architecture: profile.platform.architecture.clone(),
            }),
            host_from_node: profile.host.from.is_some(),
        })
    }
}

/// The releases the catalog lists for `comp`, where every candidate of the search is one of
/// them (cuDNN and NCCL are also reached through a framework's pins: not checked here).
fn known_versions(
    catalog: &Catalog,
    comp: Component,
) -> Option<Vec<gpuimg_expect::version::Version>> {
    let v: Vec<_> = match comp {
        Component::Cuda => catalog.cuda.iter().map(|r| r.version.clone()).collect(),
        Component::Python => catalog.python.iter().map(|r| r.version.clone()).collect(),
        Component::Pytorch => catalog.pytorch.iter().map(|r| r.version.clone()).collect(),
        Component::Tensorflow => catalog
            .tensorflow
            .iter()
            .map(|r| r.version.clone())
            .collect(),
        Component::Jax => catalog.jax.iter().map(|r| r.version.clone()).collect(),
        _ => return None,
    };
    (!v.is_empty()).then_some(v)
}

/// The known releases by major.minor, oldest first (`11.8, 12.0, …, 13.5`), at most 24 named.
fn summarise(versions: &[gpuimg_expect::version::Version]) -> String {
    let mut minors: Vec<gpuimg_expect::version::Version> =
        versions.iter().map(|v| v.truncate(2)).collect();
    minors.sort();
    minors.dedup();
    let shown: Vec<String> = minors.iter().map(|v| v.to_string()).collect();
    if shown.len() <= 24 {
        shown.join(", ")
    } else {
        format!(
            "{}, …, {}",
            shown[..4].join(", "),
            shown[shown.len() - 19..].join(", ")
        )
    }
}

/// A catalog GPU by name or alias, or a compute capability like `9.0`.
pub fn lookup_gpu(catalog: &Catalog, name: &str) -> Option<GpuTarget> {
    if let Some(g) = catalog.gpu(name) {
        return Some(GpuTarget::Named(Box::new(g.clone())));
    }
    let v: Version = name.parse().ok()?;
    catalog.cc_support(&v)?;
    Some(GpuTarget::Cc(v))
}

/// The sources of a GPU record that bear on its compute capability (not its bandwidth).
pub(super) fn cc_sources(g: &Gpu) -> Vec<String> {
    const BANDWIDTH_ONLY: &[&str] = &["nv-datasheets", "gpuimg-h200-measured"];
    g.source
        .iter()
        .filter(|s| !BANDWIDTH_ONLY.contains(&s.as_str()))
        .cloned()
        .collect()
}
