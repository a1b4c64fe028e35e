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
//! image's interpreter) are one layer per wheel component after the base's layers
//! (`wheel_components`); `libraries` holds the one-provider rule, `installed` what the
//! locked wheels make of the image's CUDA metadata.
//! Must never do I/O beyond reading its embedded table: it reasons over facts the caller read.

pub mod annotations;
pub mod components;
pub mod expectation;
pub mod installed;
pub mod keys;
mod late;
pub mod libraries;
mod sbom;
mod shared;
pub mod source_specs;
pub mod split;
mod strip_rules;
mod unused;
pub mod wheel_components;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

pub use expectation::{
    expect_device_code, expectation, image_expectation, wheel_library_expectations,
};

use crate::lock::{LockedPackage, LockedWheel};
pub use crate::passes::TreePass;
use crate::profile::{Base, Profile, StripClass};
use crate::resolve::Resolution;
use components::{Assignment, LayerOverrides, PackageMeta};
use gpuimg_elf::SharedObject;
use gpuimg_oci::layer::LayerOptions;
use gpuimg_pypi::ImagePython;
use gpuimg_store::digest::Digest;
use gpuimg_wheel::{HostPython, WheelLibrary};
pub use late::Late;
pub use shared::shared_jobs;

/// The component that holds what no apt package owns (dpkg database, ld.so.cache, …).
pub const METADATA: &str = "metadata";

/// The component of the Python wheels.
pub const PYTHON_PACKAGES: &str = "python-packages";

pub use crate::sbom::PackageFacts;
pub use gpuimg_oci::image::annotations::ANN_SELFTEST_SHA256;

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
    /// The device code of the framework among the wheels (`installed::device_code`): the
    /// annotations, `arch>=` and the expectation's coverage check; `None`: not checked.
    pub device_code: Option<crate::catalog::DeviceCode>,
    /// The headers of each wheel's `METADATA` that name its supplier and licence, by wheel
    /// name (for the SBOM; `sources::wheel_facts`). Complete, or empty when the wheel jobs
    /// produce them ([`Plan::late`]).
    pub wheel_headers: BTreeMap<String, Vec<(String, String)>>,
}

/// The pinned wheels (the lock's, or resolved now, sorted by name), the image's interpreter
/// they are installed for, and the host interpreter that compiles their `.pyc` (with
/// `python.compile: true`).
#[derive(Debug, Clone)]
pub struct PythonInstall {
    pub wheels: Vec<LockedWheel>,
    pub python: ImagePython,
    pub compiler: Option<HostPython>,
    /// The shared libraries each wheel installs, by wheel name (a wheel without any has an
    /// empty list; one missing is not known yet, see [`PythonInstall::libraries_complete`]).
    pub libraries: BTreeMap<String, Vec<WheelLibrary>>,
}

impl PythonInstall {
    /// Whether `libraries` has every wheel. Without, the wheel jobs produce the libraries'
    /// facts as they write their layers, and what the loader and the one-provider rule make
    /// of them is derived then ([`Late::complete`]).
    pub fn libraries_complete(&self) -> bool {
        self.wheels
            .iter()
            .all(|w| self.libraries.contains_key(&w.name))
    }
}

/// Where the loader finds the wheels' shared libraries, for the apt install's metadata
/// (`/etc/ld.so.conf.d/` and `ld.so.cache`), and what the one-provider rule is checked with
/// once the apt packages' libraries are known.
#[derive(Debug, Clone, Default)]
pub struct Loader {
    /// The `/etc/ld.so.conf.d/` file (image path, no leading `/`) and its text; `None` when no
    /// wheel has a library the loader should find.
    pub conf: Option<(String, String)>,
    /// The wheels' libraries the loader may find (image path, ELF facts), for `ld.so.cache`.
    pub found: Vec<(String, SharedObject)>,
    /// Every wheel library, for the check against the apt packages' libraries.
    pub wheel_libraries: Vec<libraries::Library>,
    /// The profile's `libraries:` picks.
    pub picks: BTreeMap<String, String>,
    /// `compat: forward` (cuda-compat's libcuda allowed under its own directory).
    pub forward: bool,
    /// A node's image (`kind: host`): the driver's libraries are what it installs, required
    /// (`plan::libraries::NODE_LIBRARIES`), not refused.
    pub node: bool,
    /// Every shared object the wheels install for the image's machine (libraries and
    /// extension modules), by image path, for the check that their needs are met.
    pub objects: BTreeMap<String, SharedObject>,
    /// The wheels' directories `conf` lists (no leading `/`).
    pub dirs: Vec<String>,
    /// The wheels' libraries the self-test loads by name (image paths, no leading `/`): roots
    /// of `elf::reach` besides the extension modules and `data/dlopen.yaml`'s.
    pub roots: Vec<String>,
    /// With `strip: [unused-libraries]`, the wheels' libraries the ELF closure does not
    /// reach (`unused.rs`); they are left out of `found` too.
    pub unused: BTreeSet<String>,
}

/// Where the wheels' library directories are listed for the loader.
pub const LOADER_CONF: &str = "etc/ld.so.conf.d/gpuimg-python.conf";

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

/// A build as data: one job per layer, in the image's order, each with its inputs, tree
/// passes, cache key and the facts it needs; the image config; and how the facts the jobs
/// produce complete what could not be known before them ([`Late`]). The driver runs it and
/// never sees the profile.
#[derive(Debug, Clone)]
pub struct Plan {
    pub layers: Vec<LayerJob>,
    /// The one apt install that the `Debs` and `AptMetadata` layers are cut from.
    pub apt: Option<AptInstall>,
    /// The wheels of the `Wheels` layers.
    pub python: Option<PythonInstall>,
    pub image: ImagePlan,
    /// What the strip classes know from the catalog (every layer's; see `strip::Rules`).
    pub strip_rules: crate::strip::Rules,
    /// The compute capabilities `strip: [device-code]` prunes the wheel layers' device code
    /// for (empty: no pruning).
    pub device_code_gpus: Vec<gpuimg_expect::version::Version>,
    /// What the wheels' libraries and METADATA decide, when the plan had them all: the
    /// loader's view and the SBOM. `None`: the wheel jobs produce those facts, and
    /// [`Late::complete`] derives this from them.
    pub derived: Option<Derived>,
    /// How to derive [`Derived`] from the facts the wheel jobs produce.
    pub late: Late,
}

/// What the wheels' libraries and METADATA decide.
#[derive(Debug, Clone)]
pub struct Derived {
    /// The wheels' libraries for `ld.so.cache`, and the one-provider rule's inputs.
    pub loader: Loader,
    /// The `metadata` layer's cache key (with an apt base).
    pub metadata_key: Option<Digest>,
    /// The SPDX document of the image (`crate::sbom`), in its own last layer when the
    /// image has packages, and for `--sbom FILE`.
    pub sbom: Vec<u8>,
    /// The SBOM layer's key.
    pub sbom_key: Digest,
}

/// A fact a job needs before it can run, beyond its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// [`Derived`]: every wheel's libraries and METADATA headers, from the wheel jobs.
    Derived,
}

/// One layer's job: what it is made from, how its tree is changed, how it is keyed, and what
/// it needs.
#[derive(Debug, Clone)]
pub struct LayerJob {
    pub component: String,
    pub inputs: Inputs,
    /// The profile's strip classes (what the key and the strip rules of the layer depend on).
    pub strip: Vec<StripClass>,
    /// The passes over the assembled tree, in order (`crate::passes`); the apt layers' are
    /// the one install's ([`AptInstall::passes`]).
    pub passes: Vec<TreePass>,
    /// The cache key, when known before reading the inputs: a hit reuses the layer without
    /// assembling anything. `None`: keyed by the assembled tree's entries (`layer`), or, for
    /// the `metadata` and `sbom` layers of a plan whose [`Plan::derived`] is not known yet,
    /// by [`Derived`].
    pub key: Option<Digest>,
    /// What must be known before the job runs.
    pub needs: Vec<Need>,
    /// What the job produces towards a need of other jobs: a wheel job of a plan that lacks
    /// some wheels' libraries or METADATA produces them for [`Need::Derived`].
    pub produces: Vec<Need>,
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
    /// These of the plan's Python wheels (names), installed for the image's interpreter; the
    /// job produces their libraries' facts and METADATA headers when the plan lacks them.
    Wheels { names: Vec<String> },
    /// The profile's `files:`.
    Files(Vec<crate::sources::files::FileSpec>),
    /// The `gpuimg-selftest` binary at its fixed path.
    Selftest { binary: PathBuf },
    /// `/etc/gpuimg/expect.json`.
    Expect { json: String },
    /// The SBOM at `crate::sbom::SBOM_PATH` ([`Derived::sbom`]).
    Sbom,
}

/// The apt install shared by the apt layers.
#[derive(Debug, Clone)]
pub struct AptInstall {
    /// The repositories and packages asked for.
    pub spec: gpuimg_apt::PackagesSpec,
    /// The platform's architecture the packages are for.
    pub architecture: crate::sources::Architecture,
    pub packages: Vec<LockedPackage>,
    pub assignment: Assignment,
    /// Applied to the whole install before it is split (the same classes as each apt layer).
    pub strip: Vec<StripClass>,
    /// The passes over the whole install, before it is split.
    pub passes: Vec<TreePass>,
}

/// The image config: the profile's, and what the plan adds.
#[derive(Debug, Clone)]
pub struct ImagePlan {
    pub name: gpuimg_oci::reference::RepoName,
    pub platform: crate::profile::Platform,
    pub config: crate::profile::ConfigSpec,
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
    #[error(transparent)]
    Library(Box<libraries::LibraryError>),
    #[error(transparent)]
    StripTable(crate::catalog::StripTableError),
    #[error("`strip: [device-code]` prunes device code to the profile's GPUs, and it names none: list them in `host.gpus` (e.g. `gpus: [H200]`)")]
    DeviceCodeWithoutGpus,
    #[error(
        "`layers.{0}` takes wheels, but `{0}` is a layer of apt packages: choose another name"
    )]
    LayerKinds(String),
    #[error("Failed to write the SBOM: {0}")]
    Sbom(#[source] serde_json::Error),
}

impl PlanError {
    /// 2 for what the profile asks that cannot be (bad input), 3 for a plan that breaks its
    /// own rules or tables that do not hold (a bug in gpuimg).
    pub fn exit_code(&self) -> u8 {
        match self {
            PlanError::Library(_) | PlanError::LayerKinds(_) | PlanError::DeviceCodeWithoutGpus => {
                2
            }
            _ => 3,
        }
    }
}

impl From<libraries::LibraryError> for PlanError {
    fn from(e: libraries::LibraryError) -> Self {
        PlanError::Library(Box::new(e))
    }
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
    let device_code_gpus = strip_rules::device_code_gpus(profile, resolution)?;
    // What the image's device code covers once pruned (the framework's record, else only
    // the GPUs pruned for).
    let device_code = match (&facts.device_code, device_code_gpus.is_empty()) {
        (d, true) => d.clone(),
        (Some(d), false) => Some(d.pruned(&device_code_gpus)),
        (None, false) => Some(crate::catalog::DeviceCode::pruned_only(&device_code_gpus)),
    };
    let mut layers = Vec::new();
    let mut apt = None;
    let python = facts.python.clone().filter(|p| !p.wheels.is_empty());
    let mut strip_rules = strip_rules::strip_rules()?;
    strip_rules
        .remove
        .extend(strip_rules::gpu_files_removed(&device_code_gpus)?);
    let selftest = wants_selftest(profile, resolution);
    // Whether the wheels' libraries and METADATA are all known now; else the wheel jobs
    // produce them, and what depends on them waits (`Need::Derived`).
    let complete = python.as_ref().is_none_or(|p| {
        p.libraries_complete()
            && p.wheels
                .iter()
                .all(|w| facts.wheel_headers.contains_key(&w.name))
    });
    if !complete
        && profile
            .strip
            .iter()
            .any(|c| matches!(c, StripClass::UnusedLibraries | StripClass::DeviceCode))
    {
        return Err(PlanError::Facts(
            "`unused-libraries` and `device-code` need every wheel's libraries before planning",
        ));
    }
    let late_needs = if complete {
        Vec::new()
    } else {
        vec![Need::Derived]
    };
    let mut set_key = None;
    match &profile.base {
        Base::None => {}
        Base::Rootfs {
            path,
            allow_special_files,
        } => layers.push(LayerJob {
            component: "base".into(),
            inputs: Inputs::Rootfs {
                path: path.clone(),
                allow_special: *allow_special_files,
            },
            strip: profile.strip.clone(),
            passes: vec![TreePass::Strip(profile.strip.clone())],
            key: facts
                .rootfs_identity
                .map(|id| keys::tarball_key(id, *allow_special_files, profile, lopts)),
            needs: Vec::new(),
            produces: Vec::new(),
        }),
        Base::Apt(spec) => {
            let f = facts
                .apt
                .as_ref()
                .ok_or(PlanError::Facts("an apt base needs its package set"))?;
            if f.metas.len() != f.packages.len() {
                return Err(PlanError::Facts("one set of control fields per package"));
            }
            let (apt_layers, install) = plan_apt(profile, spec, f, &late_needs, lopts);
            set_key = Some(keys::set_key(&f.packages, profile, lopts));
            layers.extend(apt_layers);
            apt = Some(install);
        }
    }
    let wheel_layers = python.as_ref().map(|p| (p, layers.len()));
    if !profile.files.is_empty() {
        layers.push(LayerJob {
            component: "files".into(),
            inputs: Inputs::Files(source_specs::files(&profile.files)),
            strip: Vec::new(),
            passes: Vec::new(),
            key: None,
            needs: Vec::new(),
            produces: Vec::new(),
        });
    }
    let mut image = ImagePlan {
        name: profile.name.clone(),
        platform: profile.platform.clone(),
        config: profile.config.clone(),
        env: resolution.map(Resolution::image_env).unwrap_or_default(),
        annotations: resolution
            .map(annotations::stack_annotations)
            .unwrap_or_default(),
        entrypoint: None,
    };
    // What the locked wheels and packages install decides the CUDA metadata, not the request
    // alone.
    let cuda_debs = facts.apt.as_ref().map_or(Vec::new(), |a| {
        installed::cuda_debs(
            &a.packages,
            source_specs::architecture(&profile.platform)
                .debian()
                .as_str(),
        )
    });
    let wheels = python.as_ref().map_or(&[][..], |p| p.wheels.as_slice());
    if let Some(r) = resolution
        .filter(|r| !r.is_empty())
        .filter(|_| python.is_some() || !cuda_debs.is_empty())
    {
        installed::apply(
            r,
            wheels,
            &cuda_debs,
            device_code.as_ref(),
            &mut image.env,
            &mut image.annotations,
        );
    }
    // Every apt package of a CUDA library component, by the table alone (as wheels are).
    if let Some(f) = &facts.apt {
        for (p, m) in f.packages.iter().zip(&f.metas) {
            if installed::LIBRARY_COMPONENTS.contains(&components::component_of(m)) {
                image.annotations.insert(
                    format!(
                        "{}{}",
                        gpuimg_oci::image::annotations::ANN_CUDA_LIBRARY_PREFIX,
                        p.name
                    ),
                    p.version.clone(),
                );
            }
        }
    }
    if selftest {
        let bin = facts
            .selftest
            .as_ref()
            .ok_or(PlanError::Facts("the self-test needs its binary"))?;
        image
            .annotations
            .insert(ANN_SELFTEST_SHA256.into(), bin.sha256.to_string());
        image.entrypoint = Some(gpuimg_expect::wrap_entrypoint(
            profile.config.entrypoint.as_deref().unwrap_or(&[]),
        ));
        layers.push(LayerJob {
            component: "selftest".into(),
            inputs: Inputs::Selftest {
                binary: bin.path.clone(),
            },
            strip: Vec::new(),
            passes: Vec::new(),
            key: None,
            needs: Vec::new(),
            produces: Vec::new(),
        });
        let mut libraries = expectation::deb_library_expectations(&cuda_debs);
        if let Some(p) = &python {
            libraries.extend(wheel_library_expectations(
                &p.python.site_dir,
                p.wheels
                    .iter()
                    .map(|w| (w.name.as_str(), w.version.as_str())),
            )?);
        }
        let expect = image_expectation(
            profile,
            resolution,
            libraries,
            device_code.as_ref().map(expect_device_code),
        );
        layers.push(LayerJob {
            component: "expect".into(),
            inputs: Inputs::Expect {
                json: expect.to_json(),
            },
            strip: Vec::new(),
            passes: Vec::new(),
            key: None,
            needs: Vec::new(),
            produces: Vec::new(),
        });
    }
    let late = Late {
        profile: profile.clone(),
        selftest,
        rules: strip_rules.clone(),
        set_key,
        facts: Facts {
            python: None,
            ..facts.clone()
        },
        python: python.clone(),
        image: image.clone(),
        lopts,
    };
    let derived = if complete {
        let libraries = python
            .as_ref()
            .map(|p| p.libraries.clone())
            .unwrap_or_default();
        Some(late.complete(&libraries, &facts.wheel_headers)?)
    } else {
        None
    };
    if let Some(d) = &derived {
        strip_rules.unused = d.loader.unused.clone();
    }
    if let Some((p, at)) = wheel_layers {
        let mut jobs = plan_wheels(profile, p, &strip_rules.unused, &device_code_gpus, lopts)?;
        if derived.is_none() {
            for j in &mut jobs {
                j.produces = vec![Need::Derived];
            }
        }
        layers.splice(at..at, jobs);
    }
    if let Some(d) = &derived {
        if let Some(l) = layers
            .iter_mut()
            .find(|l| matches!(l.inputs, Inputs::AptMetadata))
        {
            l.key = d.metadata_key;
        }
    }
    // Last, so that a change of any package or GPU fact leaves every other layer as it is.
    if late.has_sbom_layer() {
        layers.push(LayerJob {
            component: "sbom".into(),
            key: derived.as_ref().map(|d| d.sbom_key),
            inputs: Inputs::Sbom,
            strip: Vec::new(),
            passes: Vec::new(),
            needs: late_needs,
            produces: Vec::new(),
        });
    }
    Ok(Plan {
        layers,
        apt,
        python,
        image,
        strip_rules,
        device_code_gpus,
        derived,
        late,
    })
}

/// One layer per component that received packages, in the components' order, then
/// `metadata`. `os` is always there: it holds the merged-/usr links (`/bin`, `/lib`, …)
/// even when no package went to it.
fn plan_apt(
    profile: &Profile,
    spec: &crate::profile::AptSpec,
    f: &AptFacts,
    needs: &[Need],
    lopts: LayerOptions,
) -> (Vec<LayerJob>, AptInstall) {
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
        layers.push(LayerJob {
            component: component.clone(),
            inputs: Inputs::Debs {
                packages: names.iter().map(|n| n.to_string()).collect(),
            },
            strip: profile.strip.clone(),
            // Stripped with the whole install.
            passes: Vec::new(),
            key: Some(keys::component_key(
                component,
                &keys::debs_key(&subset, profile, lopts),
            )),
            // The one install writes `ld.so.cache` with the wheels' libraries.
            needs: needs.to_vec(),
            produces: Vec::new(),
        });
    }
    layers.push(LayerJob {
        component: METADATA.into(),
        inputs: Inputs::AptMetadata,
        strip: profile.strip.clone(),
        passes: Vec::new(),
        // `Derived::metadata_key`.
        key: None,
        needs: needs.to_vec(),
        produces: Vec::new(),
    });
    let mut spec = source_specs::apt_packages(spec, &profile.dir);
    // A node's root boots (users, enabled units, an empty machine-id).
    spec.system = profile.kind == crate::profile::ProfileKind::Host;
    let install = AptInstall {
        spec,
        architecture: source_specs::architecture(&profile.platform),
        packages: f.packages.clone(),
        assignment,
        strip: profile.strip.clone(),
        passes: vec![TreePass::Strip(profile.strip.clone())],
    };
    (layers, install)
}

/// One layer per wheel component that received wheels, in the components' order (the table's
/// `data/wheel-components.yaml`, then the profile's new names), each keyed by its own wheels.
fn plan_wheels(
    profile: &Profile,
    p: &PythonInstall,
    unused: &BTreeSet<String>,
    device_code_gpus: &[gpuimg_expect::version::Version],
    lopts: LayerOptions,
) -> Result<Vec<LayerJob>, PlanError> {
    let overrides: Vec<(String, Vec<String>)> = profile
        .layers
        .iter()
        .filter(|l| !l.wheel.is_empty())
        .map(|l| {
            let names = l.wheel.iter().map(|w| w.value.clone()).collect();
            (l.name.value.clone(), names)
        })
        .collect();
    // The apt-only components (`os`, `python`, `packages`) take no wheels; the CUDA and
    // framework components exist for both kinds.
    let wheel_table = wheel_components::table_order();
    for (name, _) in &overrides {
        if components::table_order().contains(name) && !wheel_table.contains(&name.as_str()) {
            return Err(PlanError::LayerKinds(name.clone()));
        }
    }
    let (order, by_wheel) =
        wheel_components::assign(p.wheels.iter().map(|w| w.name.as_str()), &overrides);
    let mut layers = Vec::new();
    for component in order {
        let names: Vec<String> = by_wheel
            .iter()
            .filter(|(_, c)| **c == component)
            .map(|(w, _)| w.clone())
            .collect();
        if names.is_empty() {
            continue;
        }
        let key = keys::wheels_key(p, &component, &names, profile, unused, lopts);
        layers.push(LayerJob {
            component,
            inputs: Inputs::Wheels { names },
            strip: profile.strip.clone(),
            passes: TreePass::for_wheels(&profile.strip, device_code_gpus),
            key: Some(key),
            needs: Vec::new(),
            produces: Vec::new(),
        });
    }
    Ok(layers)
}

#[cfg(test)]
mod tests;
