//! Stage `plan`: what each layer of an image is made from, decided before any input is read.
//!
//! [`plan`] turns a profile, its settled resolution and the facts gathered about its inputs
//! ([`Facts`]: the apt package set with each package's control fields, a tarball's identity,
//! the self-test binary) into a [`Plan`]: the layers in order, each with its component name,
//! its inputs, the strip classes applied to it and, where it can be known up front, its cache
//! key; plus the image config additions. The build driver (`crate::driver`) only executes a
//! plan. `components` decides which component each apt package belongs to (a fixed table in
//! `data/components.yaml`, rules on the package's own control fields, the profile's
//! `layers:`); `split` cuts one assembled tree into one tree per component; `keys` computes
//! the keys; `expectation` the self-test's expectation. The Python wheels (pinned, for the
//! image's interpreter) are one `python-packages` layer after the base's layers.
//! Must never do I/O beyond reading its embedded table: it reasons over facts the caller read.

pub mod annotations;
pub mod components;
pub mod expectation;
pub mod keys;
pub mod split;

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use expectation::{expectation, image_expectation, wheel_library_expectations};

use crate::digest::Digest;
use crate::layer::LayerOptions;
use crate::lock::{LockedPackage, LockedWheel};
use crate::profile::{Base, FileEntry, Profile, StripClass};
use crate::resolve::Resolution;
use crate::sources::python::ImagePython;
use crate::sources::wheel::HostPython;
use components::{Assignment, LayerOverrides, PackageMeta};

/// The component that holds what no apt package owns (dpkg database, ld.so.cache, …).
pub const METADATA: &str = "metadata";

/// The component of the Python wheels.
pub const PYTHON_PACKAGES: &str = "python-packages";

pub use crate::image::annotations::ANN_SELFTEST_SHA256;

/// What the caller read about the inputs before planning.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// For an apt base: the exact package set (sorted by name) and each package's control
    /// fields, in the same order.
    pub apt: Option<AptFacts>,
    /// For a rootfs tarball: its file identity (a directory is keyed by its content).
    pub rootfs_identity: Option<[u64; 5]>,
    /// The self-test binary to bake in, when the image carries one.
    pub selftest: Option<SelftestBinary>,
    /// The Python wheels to install, when the profile has `python:`.
    pub python: Option<PythonInstall>,
    /// The device code the image's GPU programs carry (the catalog's SM list for the
    /// framework variant), for the expectation's coverage check; `None`: not checked.
    pub device_code: Option<crate::expect::DeviceCode>,
}

/// The pinned wheels (the lock's, or resolved now, sorted by name), the image's interpreter
/// they are installed for, and the host interpreter that compiles their `.pyc` (with
/// `python.compile: true`).
#[derive(Debug, Clone)]
pub struct PythonInstall {
    pub wheels: Vec<LockedWheel>,
    pub python: ImagePython,
    pub compiler: Option<HostPython>,
}

#[derive(Debug, Clone)]
pub struct AptFacts {
    pub packages: Vec<LockedPackage>,
    pub metas: Vec<PackageMeta>,
}

#[derive(Debug, Clone)]
pub struct SelftestBinary {
    pub path: PathBuf,
    pub sha256: Digest,
}

/// A build, layer by layer.
#[derive(Debug, Clone)]
pub struct Plan {
    pub layers: Vec<LayerPlan>,
    /// The one apt install that the `Debs` and `AptMetadata` layers are cut from.
    pub apt: Option<AptInstall>,
    /// The wheels of the `Wheels` layer.
    pub python: Option<PythonInstall>,
    pub image: ImagePlan,
}

/// One layer: what it is made from and how it is keyed.
#[derive(Debug, Clone)]
pub struct LayerPlan {
    pub component: String,
    pub inputs: Inputs,
    /// Strip classes applied to the assembled tree.
    pub strip: Vec<StripClass>,
    /// The cache key, when known before reading the inputs: a hit reuses the layer without
    /// assembling anything. `None`: keyed by the assembled tree's entries (`layer`).
    pub key: Option<Digest>,
}

#[derive(Debug, Clone)]
pub enum Inputs {
    /// `base.rootfs`: a tarball or a directory.
    Rootfs { path: PathBuf, allow_special: bool },
    /// The files of these apt packages (names), out of the plan's one install.
    Debs { packages: Vec<String> },
    /// What the apt install generated rather than unpacked: the dpkg database, ld.so.cache,
    /// passwd/group, the CA bundle, alternatives.
    AptMetadata,
    /// The plan's Python wheels, installed for the image's interpreter.
    Wheels,
    /// The profile's `files:`.
    Files(Vec<FileEntry>),
    /// The `gpuimg-selftest` binary at its fixed path.
    Selftest { binary: PathBuf },
    /// `/etc/gpuimg/expect.json`.
    Expect { json: String },
}

/// The apt install shared by the apt layers.
#[derive(Debug, Clone)]
pub struct AptInstall {
    pub packages: Vec<LockedPackage>,
    pub assignment: Assignment,
    /// Applied to the whole install before it is split (the same classes as each apt layer).
    pub strip: Vec<StripClass>,
}

/// What the plan adds to the image config.
#[derive(Debug, Clone, Default)]
pub struct ImagePlan {
    /// `CUDA_VERSION`, `NVIDIA_REQUIRE_*` and the like, from the resolution.
    pub env: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The self-test wrapper around the profile's entrypoint, when the image carries it.
    pub entrypoint: Option<Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("The facts given do not match the profile's base: {0}")]
    Facts(&'static str),
    #[error(transparent)]
    LibraryTable(#[from] crate::catalog::LibraryTableError),
}

/// Whether an image built from `profile` with `resolution` carries the self-test: it is
/// enabled and there is a stack to check.
pub fn wants_selftest(profile: &Profile, resolution: Option<&Resolution>) -> bool {
    profile.selftest.enabled && resolution.is_some_and(|r| !r.is_empty())
}

/// Plan the build of `profile`.
pub fn plan(
    profile: &Profile,
    resolution: Option<&Resolution>,
    facts: &Facts,
    lopts: LayerOptions,
) -> Result<Plan, PlanError> {
    let mut layers = Vec::new();
    let mut apt = None;
    match &profile.base {
        Base::None => {}
        Base::Rootfs {
            path,
            allow_special_files,
        } => layers.push(LayerPlan {
            component: "base".into(),
            inputs: Inputs::Rootfs {
                path: path.clone(),
                allow_special: *allow_special_files,
            },
            strip: profile.strip.clone(),
            key: facts
                .rootfs_identity
                .map(|id| keys::tarball_key(id, *allow_special_files, profile, lopts)),
        }),
        Base::Apt(_) => {
            let f = facts
                .apt
                .as_ref()
                .ok_or(PlanError::Facts("an apt base needs its package set"))?;
            if f.metas.len() != f.packages.len() {
                return Err(PlanError::Facts("one set of control fields per package"));
            }
            let (apt_layers, install) = plan_apt(profile, f, lopts);
            layers.extend(apt_layers);
            apt = Some(install);
        }
    }
    let python = facts.python.clone().filter(|p| !p.wheels.is_empty());
    if let Some(p) = &python {
        layers.push(LayerPlan {
            component: PYTHON_PACKAGES.into(),
            inputs: Inputs::Wheels,
            strip: Vec::new(),
            key: Some(keys::wheels_key(p, lopts)),
        });
    }
    if !profile.files.is_empty() {
        layers.push(LayerPlan {
            component: "files".into(),
            inputs: Inputs::Files(profile.files.clone()),
            strip: Vec::new(),
            key: None,
        });
    }
    let mut image = ImagePlan {
        env: resolution.map(Resolution::image_env).unwrap_or_default(),
        annotations: resolution
            .map(annotations::stack_annotations)
            .unwrap_or_default(),
        entrypoint: None,
    };
    if wants_selftest(profile, resolution) {
        let bin = facts
            .selftest
            .as_ref()
            .ok_or(PlanError::Facts("the self-test needs its binary"))?;
        image
            .annotations
            .insert(ANN_SELFTEST_SHA256.into(), bin.sha256.to_string());
        image.entrypoint = Some(crate::expect::wrap_entrypoint(
            profile.config.entrypoint.as_deref().unwrap_or(&[]),
        ));
        layers.push(LayerPlan {
            component: "selftest".into(),
            inputs: Inputs::Selftest {
                binary: bin.path.clone(),
            },
            strip: Vec::new(),
            key: None,
        });
        let libraries = match &python {
            Some(p) => wheel_library_expectations(
                &p.python.site_dir,
                p.wheels
                    .iter()
                    .map(|w| (w.name.as_str(), w.version.as_str())),
            )?,
            None => Vec::new(),
        };
        let expect = image_expectation(profile, resolution, libraries, facts.device_code.clone());
        layers.push(LayerPlan {
            component: "expect".into(),
            inputs: Inputs::Expect {
                json: expect.to_json(),
            },
            strip: Vec::new(),
            key: None,
        });
    }
    Ok(Plan {
        layers,
        apt,
        python,
        image,
    })
}

/// One layer per component that received packages, in the components' order, then
/// `metadata`. `os` is always there: it holds the merged-/usr links (`/bin`, `/lib`, …)
/// even when no package went to it.
fn plan_apt(profile: &Profile, f: &AptFacts, lopts: LayerOptions) -> (Vec<LayerPlan>, AptInstall) {
    let assignment = components::assign(&f.metas, &LayerOverrides::from_profile(&profile.layers));
    let mut layers = Vec::new();
    for component in assignment.order() {
        let names = assignment.packages(component);
        if (names.is_empty() && component != components::OS) || component == METADATA {
            continue;
        }
        let subset: Vec<&LockedPackage> = f
            .packages
            .iter()
            .filter(|p| names.contains(&p.name.as_str()))
            .collect();
        layers.push(LayerPlan {
            component: component.clone(),
            inputs: Inputs::Debs {
                packages: names.iter().map(|n| n.to_string()).collect(),
            },
            strip: profile.strip.clone(),
            key: Some(keys::component_key(
                component,
                &keys::debs_key(&subset, profile, lopts),
            )),
        });
    }
    layers.push(LayerPlan {
        component: METADATA.into(),
        inputs: Inputs::AptMetadata,
        strip: profile.strip.clone(),
        key: Some(keys::component_key(
            METADATA,
            &keys::set_key(&f.packages, profile, lopts),
        )),
    });
    let install = AptInstall {
        packages: f.packages.clone(),
        assignment,
        strip: profile.strip.clone(),
    };
    (layers, install)
}

#[cfg(test)]
mod tests;
