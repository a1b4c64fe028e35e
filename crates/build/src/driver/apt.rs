//! The plan's one apt install, cut into its component trees: every package of the set is
//! unpacked once into a scratch root (`sources::gpuimg_apt::install`), the root is assembled into
//! one tree, stripped (keeping dpkg's lists true, `passes`), and split by the plan's package → component assignment
//! (`plan::split`) into one tree per component plus `metadata`, which holds what no package
//! owns (the dpkg database, ld.so.cache, passwd/group, the CA bundle).
//!
//! Which component a path goes to: a file to its (last) package's, a directory to the
//! earliest component of the packages that ship it (so a component's layer never depends on
//! which other components exist), the merged-/usr links to `os`. The package components not
//! cached are written while the install runs (`stream.rs`) and checked against these trees.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use super::stream::Streams;
use super::{BuildError, BuildOptions};
use crate::passes::{self, Applied, PassContext, TreePass};
use crate::plan::components::{self, Assignment};
use crate::plan::libraries::{self, Library, Provider};
use crate::plan::{source_specs, split, AptInstall, Loader, METADATA};
use crate::profile::Platform;
use crate::sources::apt_tree::InstalledRoot;
use crate::sources::Source;
use crate::strip::Rules;
use gpuimg_apt::AptOptions;
use gpuimg_assemble::{EntryKind, Tree};
use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::Trust;
use gpuimg_oci::layer::LayerBlob;
use gpuimg_store::cache::Cache;
use gpuimg_store::staging::Staged;

/// The apt options a build or lock uses.
pub fn apt_options(cache_root: &Path, offline: bool, trust: &Trust) -> AptOptions {
    let mut o = AptOptions::new(cache_root);
    o.offline = offline;
    o.trust = trust.clone();
    o
}

fn owners(
    installed: &gpuimg_apt::Installed,
    assignment: &Assignment,
    platform: &Platform,
    tree: &Tree,
) -> HashMap<String, String> {
    let rank = |c: &str| assignment.order().iter().position(|o| o == c);
    let mut out = HashMap::new();
    for (path, pkgs) in &installed.owners {
        let mut comps = pkgs.iter().filter_map(|p| assignment.component(p));
        let is_dir = tree
            .get(path)
            .is_some_and(|e| matches!(e.kind, EntryKind::Dir));
        let chosen = if is_dir {
            comps.min_by_key(|c| rank(c))
        } else {
            comps.next_back()
        };
        if let Some(c) = chosen {
            out.insert(path.clone(), c.to_string());
        }
    }
    for link in gpuimg_apt::merged_usr_links(source_specs::architecture(platform).debian().as_str())
    {
        out.insert(link.to_string(), components::OS.to_string());
    }
    out
}

/// The loader's view of the wheels' libraries for an install: known, or to be waited for.
pub enum AptLoader<'a> {
    Known(&'a Loader),
    Later(&'a std::sync::Arc<super::gate::Gate>),
}

/// What the wheels add for the loader, in the sources' terms.
fn extra(loader: &Loader) -> gpuimg_apt::LoaderExtra {
    gpuimg_apt::LoaderExtra {
        conf: loader.conf.clone(),
        libraries: loader.found.clone(),
    }
}

/// `opts` with what the wheels add for the loader (the plan's [`crate::plan::Loader`]), or the
/// wait for it.
fn loader_options(mut opts: AptOptions, loader: &AptLoader<'_>) -> AptOptions {
    match loader {
        AptLoader::Known(l) => opts.loader = extra(l),
        AptLoader::Later(g) => {
            let g = (*g).clone();
            opts.loader_later = Some(gpuimg_apt::LoaderLater(std::sync::Arc::new(move || {
                g.wait().map(|l| extra(&l))
            })));
        }
    }
    opts
}

/// The image's libraries, apt packages' and wheels' together: no driver library among the
/// packages' files, and one provider per SONAME (see `plan::libraries`).
fn check_libraries(installed: &gpuimg_apt::Installed, loader: &Loader) -> Result<(), BuildError> {
    let owner = |path: &str| {
        installed
            .owners
            .get(path)
            .and_then(|p| p.last())
            .map(|p| Provider::Deb(p.clone()))
    };
    let files: Vec<(&str, Provider)> = installed
        .owners
        .iter()
        .filter_map(|(path, pkgs)| Some((path.as_str(), Provider::Deb(pkgs.last()?.clone()))))
        .collect();
    if loader.node {
        libraries::check_node_libraries(&installed.libraries)?;
    } else {
        libraries::check_driver_files(files.iter().map(|(p, o)| (*p, o)), loader.forward)?;
    }
    let mut all: Vec<Library> = installed
        .libraries
        .iter()
        .filter_map(|(soname, path)| {
            Some(Library {
                path: path.clone(),
                soname: soname.clone(),
                provider: owner(path)?,
            })
        })
        .collect();
    all.extend(loader.wheel_libraries.iter().cloned());
    libraries::check_providers(&all, &loader.picks)?;
    Ok(())
}

/// Warn about each library name a wheel's shared object that something loads needs and
/// nothing in the image provides (torch's `libstdc++.so.6` on a base without `libstdc++6`):
/// `elf::reach` (the reach `inspect --unused` and `unused-libraries` compute) over the wheels'
/// objects, their directories in `ld.so.cache` and the apt packages' SONAMEs; a library
/// nothing loads is not judged (a plugin for InfiniBand needs `libibverbs`), and the driver's
/// libraries count as provided (the container runtime injects them).
fn check_needs(installed: &gpuimg_apt::Installed, loader: &Loader, obs: &mut dyn Observer) {
    if loader.objects.is_empty() {
        return;
    }
    // What `unused-libraries` removes is not judged.
    let mut objects = loader.objects.clone();
    objects.retain(|p, _| !loader.unused.contains(p));
    let view = gpuimg_elf::closure::LoaderView {
        objects,
        conf_dirs: loader.dirs.clone(),
        known_sonames: installed.libraries.iter().map(|(s, _)| s.clone()).collect(),
        ..Default::default()
    };
    let reach = gpuimg_elf::reach::reach(&view, loader.roots.iter().cloned());
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let missing = (reach.missing.iter()).filter(|(_, name)| !libraries::is_driver_library(name));
    for (object, name) in missing {
        by_name.entry(name).or_default().push(object);
    }
    for (name, objects) in by_name {
        let more = match objects.len() {
            1 => String::new(),
            n => format!(" and {} other file(s)", n - 1),
        };
        obs.warn(&format!(
            "`{name}`, needed by `/{}`{more}, is provided by nothing in the image: loading it fails until a package in `base.apt.packages` (or a wheel) brings it{}",
            objects[0],
            missing_hint(name)
        ));
    }
}

/// `: add `libstdc++6` (...)` where the SONAME table knows the Debian package that ships it.
fn missing_hint(name: &str) -> String {
    gpuimg_apt::soname_hint(name)
        .map(|h| format!(": add {h}"))
        .unwrap_or_default()
}

/// What the install gave the plan's apt layers.
pub struct AptLayers {
    /// Components written while unpacking (see `stream.rs`), finished.
    pub written: BTreeMap<String, LayerBlob>,
    /// The other components' trees (`metadata`; a component that received nothing is absent).
    pub trees: BTreeMap<String, Tree>,
    /// What the tree passes removed, per component: an owner's entries to its package's component,
    /// what no package owns to `metadata`.
    pub applied: BTreeMap<String, Applied>,
}

/// Install the plan's package set once and split it. The components in `stream` are written
/// while unpacking (their layers come back finished); the others come back as trees. The
/// packages of `cached` components may be replayed from their sketches (`gpuimg_apt`):
/// their trees are then incomplete and must not be written, while every other component's
/// tree and `metadata` are exactly what a full install gives.
#[allow(clippy::too_many_arguments)]
pub fn install_and_split(
    install: &AptInstall,
    loader: AptLoader<'_>,
    rules: &Rules,
    platform: &Platform,
    opts: &BuildOptions,
    scratch: &Staged,
    cached: &BTreeSet<String>,
    stream: &BTreeSet<String>,
    cache: &Cache,
    obs: &mut dyn Observer,
) -> Result<AptLayers, BuildError> {
    let root = scratch
        .new_subdir("apt-root")
        .map_err(gpuimg_assemble::AssembleError::Io)?;
    let front = BTreeMap::from([(
        components::OS.to_string(),
        gpuimg_apt::merged_usr_links(install.architecture.debian().as_str())
            .into_iter()
            .map(str::to_string)
            .collect(),
    )]);
    let mut streams = Streams::new(
        cache,
        &root,
        opts.layer_options(),
        &install.strip,
        rules,
        &install.assignment,
        front,
        stream,
    );
    let mut failed: Option<BuildError> = None;
    let installed = gpuimg_apt::install_replaying(
        &install.spec,
        &install.architecture.debian(),
        &loader_options(
            AptOptions {
                source_date_epoch: opts.epoch,
                ..apt_options(&opts.cache_root, opts.offline, &opts.trust)
            },
            &loader,
        ),
        Some(&install.packages),
        &|package: &str| {
            install
                .assignment
                .component(package)
                .is_some_and(|c| cached.contains(c))
        },
        &mut |p| {
            streams.package(p).map_err(|e| {
                failed = Some(e);
                std::io::Error::other("stopped")
            })
        },
        &root,
        obs,
    );
    let installed = match (installed, failed) {
        (Err(gpuimg_apt::AptError::Consumer { .. }), Some(e)) => return Err(e),
        (r, _) => r?,
    };
    // Known by now: the install waited for it before writing `ld.so.cache`.
    let waited;
    let loader = match loader {
        AptLoader::Known(l) => l,
        AptLoader::Later(g) => {
            waited = g.wait().ok_or(BuildError::Internal(
                "the apt install ended before the wheels' libraries were known",
            ))?;
            &*waited
        }
    };
    check_libraries(&installed, loader)?;
    check_needs(&installed, loader, obs);
    let mut tree = InstalledRoot {
        root: &root,
        installed: &installed,
    }
    .tree(scratch.path(), obs)?;
    for w in tree.warnings() {
        obs.warn(&w);
    }
    // The libraries `ld.so.cache` indexes stay, so the cache stays true.
    let protect: HashSet<String> = installed.libraries.iter().map(|(_, p)| p.clone()).collect();
    let removed = passes::apply(
        &mut tree,
        &[TreePass::Strip(install.strip.clone())],
        &PassContext {
            rules,
            protect: &protect,
            cache,
            what: "the apt packages",
        },
        obs,
    )?;
    let mut applied: BTreeMap<String, Applied> = BTreeMap::new();
    for ((class, owner), r) in removed.stripped.by_class {
        let component = owner
            .package()
            .and_then(|p| install.assignment.component(p))
            .unwrap_or(METADATA);
        applied
            .entry(component.to_string())
            .or_default()
            .stripped
            .by_class
            .insert((class, owner), r);
    }
    let owner = owners(&installed, &install.assignment, platform, &tree);
    let parts = split::split(tree, &owner, install.assignment.order(), METADATA)?;
    let mut trees: BTreeMap<String, Tree> = parts.into_iter().collect();
    // The unpack order: packages sorted by name, then architecture.
    let index: HashMap<&str, usize> = installed
        .packages
        .iter()
        .enumerate()
        .rev()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();
    let rank = |path: &str| {
        installed
            .owners
            .get(path)
            .and_then(|pkgs| pkgs.last())
            .and_then(|p| index.get(p.as_str()).copied())
    };
    let mut written = BTreeMap::new();
    for c in stream {
        let t = trees
            .remove(c)
            .unwrap_or_else(|| Tree::new(format!("`the apt packages` layer `{c}`")));
        let blob = streams.finish(c, &t, &rank, obs)?;
        super::machines::remember(cache, c, &blob, &t)?;
        written.insert(c.clone(), blob);
    }
    Ok(AptLayers {
        written,
        trees,
        applied,
    })
}
