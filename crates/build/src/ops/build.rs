//! `gpuimg build`: settle the profile, gather the facts the plan needs (the apt package set
//! and each package's control fields, a tarball's identity, the image's Python and the wheel
//! set, the self-test binary), plan, and hand the plan to the driver.

use std::path::{Path, PathBuf};

use super::known::{self, Reach};
use super::python_packages::{self as python, PythonHost};
use super::settle::{self, Settle, Settled};
use super::OpsError;
use crate::catalog::Catalog;
use crate::driver::{self, apt_options, BuildError, BuildOptions, BuildOutcome};
use crate::lock::LockedPackage;
use crate::plan::components::PackageMeta;
use crate::plan::{self, source_specs, AptFacts, Facts, SelftestBinary};
use crate::profile::{AptSpec, Base, Profile};
use gpuimg_assemble::{identity, AssembleError};
use gpuimg_fetch::observe::Observer;
use gpuimg_pypi::PythonRequest;
use gpuimg_store::cache::{Bucket, Cache, Key};
use gpuimg_store::digest::{hash_reader, Digest};

/// What to build and how.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    /// Resolve, or build exactly what the lock records.
    pub from: Settle,
    /// The `gpuimg-selftest` binary to bake in (default: the profile's `selftest.binary`, else
    /// beside the running `gpuimg`).
    pub selftest_binary: Option<PathBuf>,
    pub options: BuildOptions,
    /// The host's Python index settings and `PATH` (for `python:`).
    pub python: PythonHost,
    /// `--platform`: build this one of the profile's platforms (an image, not an index).
    pub platform: Option<crate::profile::Platform>,
}

/// Build the image of `profile`: one platform's image, or for several platforms one image
/// each (each settled, planned and made for its platform, in the profile's order) under one
/// image index.
pub fn build(
    profile: &Profile,
    catalog: &Catalog,
    req: &BuildRequest,
    obs: &mut dyn Observer,
) -> Result<BuildOutcome, OpsError> {
    if profile.kind == crate::profile::ProfileKind::Host {
        return super::node_image::build(profile, catalog, req, obs);
    }
    let chosen = super::platforms::chosen(profile, req.platform.as_ref())?;
    if chosen.len() > 1 {
        let has = super::platforms::names(&chosen);
        if req.selftest_binary.is_some() {
            return Err(OpsError::SelftestFlagOfIndex { has });
        }
        if req.options.sbom.is_some() {
            return Err(OpsError::SbomFileOfIndex { has });
        }
    }
    driver::check_output(&req.options, chosen.len())?;
    let mut made = Vec::with_capacity(chosen.len());
    for p in &chosen {
        if chosen.len() > 1 {
            obs.message(&format!("{:>12} {p}", "platform"));
        }
        made.push(make(&profile.for_platform(p), catalog, req, obs)?);
    }
    Ok(driver::deliver(made, &req.options, obs)?)
}

/// One platform's image, made and checked (not yet written).
pub(super) fn make(
    profile: &Profile,
    catalog: &Catalog,
    req: &BuildRequest,
    obs: &mut dyn Observer,
) -> Result<driver::Made, OpsError> {
    let reach = Reach {
        cache_root: &req.options.cache_root,
        offline: req.options.offline,
        trust: &req.options.trust,
        python: &req.python,
    };
    let settled = settle::settle(profile, catalog, req.from, reach, obs)?;
    if let Some(r) = &settled.resolution {
        for w in &r.warnings {
            obs.warn(w);
        }
    }
    if profile
        .strip
        .contains(&crate::profile::StripClass::DeviceCode)
        && super::stack::provider(profile, crate::resolve::Component::Nccl)
            == crate::profile::ProviderKind::Apt
    {
        obs.warn(
            "`strip: [device-code]` prunes the libraries of the wheel layers; NCCL comes from apt here (`providers.nccl: apt`), and its library is left with the device code of every GPU",
        );
    }
    let (facts, request, resolution) = gather(profile, catalog, &settled, req, obs)?;
    let plan = plan::plan(
        profile,
        resolution.as_ref(),
        &facts,
        req.options.layer_options(),
    )?;
    if let Some(a) = &plan.apt {
        for p in a.assignment.unused_overrides() {
            obs.warn(&format!(
                "`layers:` names `{p}`, which this build does not install; it has no effect"
            ));
        }
    }
    let wheels: Vec<&str> = plan
        .python
        .iter()
        .flat_map(|p| p.wheels.iter().map(|w| w.name.as_str()))
        .collect();
    for l in &profile.layers {
        for w in l
            .wheel
            .iter()
            .filter(|w| !wheels.contains(&w.value.as_str()))
        {
            obs.warn(&format!(
                "`layers.{}` names the wheel `{}`, which this build does not install; it has no effect",
                l.name.value, w.value
            ));
        }
    }
    Ok(driver::make(&plan, &req.options, request.as_ref(), obs)?)
}

fn gather(
    profile: &Profile,
    catalog: &Catalog,
    settled: &Settled,
    req: &BuildRequest,
    obs: &mut dyn Observer,
) -> Result<
    (
        Facts,
        Option<PythonRequest>,
        Option<crate::resolve::Resolution>,
    ),
    OpsError,
> {
    let mut facts = Facts::default();
    match &profile.base {
        Base::None => {}
        Base::Rootfs { path, .. } => {
            let meta =
                fs_err::metadata(path).map_err(|e| BuildError::Assemble(AssembleError::Io(e)))?;
            facts.rootfs_identity = (!meta.is_dir()).then(|| identity(&meta));
        }
        Base::Apt(spec) => {
            super::stack::check_base_packages(profile, spec)?;
            let roots = match &settled.resolution {
                Some(r) => super::stack::apt_roots(profile, r, catalog)?,
                None => Vec::new(),
            };
            let spec = super::stack::apt_spec(spec, &roots);
            let prefer = super::stack::apt_preferences(profile, &roots);
            // The base's own set, resolved for its Python, is the image's when the stack adds
            // no apt roots.
            let fixed = settled.debs.clone().or_else(|| {
                let own = settled.known.as_ref().and_then(|k| k.base_debs.clone());
                own.filter(|_| roots.is_empty())
            });
            let apt = apt_facts(&spec, &prefer, profile, fixed, req, obs)?;
            super::stack::check_apt_agreement(profile, &roots, &apt.packages)?;
            facts.apt = Some(apt);
        }
    }
    let mut request = None;
    // The wheels are the lock's, or were resolved with the resolution (`known::wheels`).
    let resolution = settled.resolution.clone();
    let stack_python = resolution
        .as_ref()
        .and_then(|r| r.version(crate::resolve::Component::Python))
        .is_some();
    if profile.python.is_some() || stack_python {
        let debs = facts.apt.as_ref().map(|a| a.packages.as_slice());
        let packages = known::base_packages(profile, debs)?;
        known::check_stack_python(resolution.as_ref(), packages.as_deref())?;
        if let Some((install, r)) = python::install(
            profile,
            resolution.as_ref(),
            catalog,
            packages.as_deref(),
            settled.wheels.as_deref(),
            &req.python,
            &req.options.cache_root,
            req.options.offline,
            obs,
        )? {
            facts.device_code = plan::installed::device_code(&install.wheels, catalog);
            facts.wheel_headers = Cache::open(&req.options.cache_root)
                .map(|c| crate::sources::wheel_facts::recorded_headers(&c, &install.wheels))
                .unwrap_or_default();
            facts.python = Some(install);
            request = Some(r);
        }
    }
    if profile.python.is_none() {
        if let Some(r) = &resolution {
            let pinned: Vec<String> = [
                crate::resolve::Component::Cuda,
                crate::resolve::Component::Cudnn,
                crate::resolve::Component::Nccl,
                crate::resolve::Component::Pytorch,
            ]
            .into_iter()
            .filter(|c| {
                r.version(*c).is_some()
                    && super::stack::provider(profile, *c) != crate::profile::ProviderKind::Apt
            })
            .map(|c| format!("`stack.{c}`"))
            .collect();
            if !pinned.is_empty() {
                obs.warn(&format!(
                    "{} pinned, but without `python:` the image carries none of it (only its environment variables); add `python: {{packages: []}}` and `python3` to the base to install the pinned stack from the package index, or take the CUDA libraries from the base's apt repositories with `providers: {{cuda: apt}}`",
                    pinned.join(", ")
                ));
            }
        }
    }
    if plan::wants_selftest(profile, resolution.as_ref()) {
        facts.selftest = Some(selftest_binary(profile, req)?);
    }
    Ok((facts, request, resolution))
}

/// The package set (from the lock, or resolved now) and each package's control fields: from
/// the record of an earlier build of the same set, else read from the packages themselves.
fn apt_facts(
    spec: &AptSpec,
    prefer: &[gpuimg_apt::Preference],
    profile: &Profile,
    fixed: Option<Vec<LockedPackage>>,
    req: &BuildRequest,
    obs: &mut dyn Observer,
) -> Result<AptFacts, OpsError> {
    let mut aopts = apt_options(
        &req.options.cache_root,
        req.options.offline,
        &req.options.trust,
    );
    aopts.prefer = prefer.to_vec();
    let mut packages = match fixed {
        Some(d) => d,
        None => gpuimg_apt::resolve(
            &source_specs::apt_packages(spec, &profile.dir),
            &source_specs::architecture(&profile.platform).debian(),
            &aopts,
            obs,
        )
        .map_err(|e| super::apt_error_at(profile, e))?,
    };
    packages.sort_by(|a, b| (&a.name, &a.architecture).cmp(&(&b.name, &b.architecture)));
    let cache = Cache::open(&req.options.cache_root).map_err(|source| BuildError::Cache {
        path: req.options.cache_root.display().to_string(),
        source,
    })?;
    let key = metas_key(&packages);
    if let Some(metas) = recorded_metas(&cache, &key, packages.len()) {
        return Ok(AptFacts { packages, metas });
    }
    let metas: Vec<PackageMeta> = gpuimg_apt::describe(&packages, &aopts, obs)?
        .into_iter()
        .map(|i| PackageMeta {
            name: i.name,
            essential: i.essential,
            priority: i.priority,
            section: i.section,
            maintainer: i.maintainer,
        })
        .collect();
    // Only saves reading the packages next time: failing to record is no error.
    let _ = cache.put_record(Bucket::Controls, &key, &metas);
    Ok(AptFacts { packages, metas })
}

/// The key of a package set's control fields: the packages' bytes (sha256) decide them.
fn metas_key(packages: &[LockedPackage]) -> Digest {
    let mut k = Key::new("apt-control-fields-v3").tool_version();
    k.count(packages.len());
    for p in packages {
        k.str(&p.name).digest(&p.sha256);
    }
    k.finish()
}

/// A recorded set of control fields, used only while its stamp vouches for it (the full check
/// is reading the packages again); anything else, unreadable or of the wrong length is a miss.
fn recorded_metas(cache: &Cache, key: &Digest, n: usize) -> Option<Vec<PackageMeta>> {
    let rec = cache.read_record(Bucket::Controls, key).ok()??;
    if !rec.trusted {
        return None;
    }
    let metas: Vec<PackageMeta> = serde_json::from_slice(&rec.bytes).ok()?;
    (metas.len() == n).then_some(metas)
}

/// The self-test for the profile's platform: `--selftest-binary` (one platform built), else
/// the profile's `selftest.binary` (its one path, or the platform's entry), else beside the
/// running `gpuimg`: `gpuimg-selftest` for gpuimg's own architecture, `gpuimg-selftest-<arch>`
/// (e.g. `gpuimg-selftest-arm64`) for another.
fn binary_path(profile: &Profile, req: &BuildRequest) -> PathBuf {
    if let Some(p) = &req.selftest_binary {
        return p.clone();
    }
    let platform = profile.platform.to_string();
    if let Some(p) = profile
        .selftest
        .binary
        .as_ref()
        .and_then(|b| b.value.for_platform(&platform))
    {
        return crate::profile::resolve_path(&profile.dir, p);
    }
    let name = if profile.platform.architecture == super::platforms::own_architecture() {
        "gpuimg-selftest".to_string()
    } else {
        format!("gpuimg-selftest-{}", profile.platform.architecture)
    };
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(&name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

fn selftest_binary(profile: &Profile, req: &BuildRequest) -> Result<SelftestBinary, OpsError> {
    let path = binary_path(profile, req);
    let read_err = |source| OpsError::SelftestRead {
        path: path.display().to_string(),
        source,
    };
    if !Path::new(&path).is_file() {
        return Err(OpsError::SelftestMissing {
            path: path.display().to_string(),
            platform: profile.platform.to_string(),
            how: match profile.platform.architecture.as_str() {
                "arm64" => format!(": gpuimg's sources build it (`scripts/build-selftest-arm64.sh`, with Debian's rustc-web); name it with `selftest.binary: {{{}: target/arm64/gpuimg-selftest}}`, or set `selftest: {{enabled: false}}`", profile.platform),
                _ => String::new(),
            },
        });
    }
    let mut file = fs_err::File::open(&path).map_err(read_err)?;
    // The image must be able to start it: its machine is the platform's (issue 34, item 1).
    let mut head = [0u8; 20];
    let got = std::io::Read::read(&mut file, &mut head).map_err(read_err)?;
    let machine = gpuimg_elf::machine::of_header(&head[..got]);
    let wanted = gpuimg_elf::machine::of_architecture(&profile.platform.architecture);
    if machine != wanted || machine.is_none() {
        return Err(OpsError::SelftestMachine {
            path: path.display().to_string(),
            machine: machine.map_or("not an ELF file".into(), |m| {
                format!("an ELF file for {}", gpuimg_elf::machine::name(m))
            }),
            platform: profile.platform.to_string(),
            how: match profile.platform.architecture.as_str() {
                "arm64" => " (gpuimg's sources build it: `scripts/build-selftest-arm64.sh`)".into(),
                _ => String::new(),
            },
        });
    }
    std::io::Seek::rewind(&mut file).map_err(read_err)?;
    let (sha256, _) = hash_reader(std::io::BufReader::new(file)).map_err(read_err)?;
    Ok(SelftestBinary { path, sha256 })
}
