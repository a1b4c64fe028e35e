//! The apt base as component layers: one install of the whole package set, split by the
//! fixed package → component table (`plan::components`) into `os`, `python`, `packages`, the
//! profile's own `layers:` and a `metadata` layer holding what every package touches.
//!
//! Keys: a component layer is keyed by its own packages (name, version, architecture,
//! sha256) and the settings, so two profiles that share a component's packages share its
//! digest, and adding a package rewrites only its component and `metadata` (keyed by the
//! whole set). The whole set's key maps to the list of component keys: an unchanged rebuild
//! neither unpacks nor compresses.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::apt_base::{apt_key, apt_options};
use super::{BuildError, BuildOptions, Observer};
use crate::assemble::{self, Input};
use crate::cache::{Bucket, Cache, Key};
use crate::digest::Digest;
use crate::layer::{self, LayerBlob, LayerOptions};
use crate::lock::LockedPackage;
use crate::plan::components::{self, LayerOverrides, PackageMeta};
use crate::plan::split;
use crate::profile::{AptSpec, Profile};
use crate::sources::apt;
use crate::strip;

/// The component that holds what no package owns.
pub const METADATA: &str = "metadata";

/// Records of whole apt bases: set key → the component keys, in layer order.
const BASES: Bucket = Bucket::Bases;

/// One component layer of the apt base.
pub struct AptLayer {
    pub component: String,
    pub blob: LayerBlob,
    pub cached: bool,
}

#[derive(Serialize, Deserialize)]
struct BaseRecord {
    components: Vec<(String, Digest)>,
}

/// The key of one component: its packages' key (`apt_key` over the subset), its name.
fn component_key(component: &str, subset: &Digest) -> Digest {
    let mut k = Key::new("apt-component-v1");
    k.str(component).digest(subset);
    k.finish()
}

/// The key of the whole base: its packages' key and the profile's `layers:` overrides (which
/// move packages between components).
fn set_key(packages: &[LockedPackage], profile: &Profile, lopts: LayerOptions) -> Digest {
    let mut k = Key::new("apt-set-v1");
    k.digest(&apt_key(packages, profile, lopts))
        .count(profile.layers.len());
    for l in &profile.layers {
        k.str(&l.name.value).count(l.deb.len());
        for d in &l.deb {
            k.str(&d.value);
        }
    }
    k.finish()
}

/// Every component layer of a recorded base, if all are still in the cache.
fn recorded(cache: &Cache, set: &Digest, obs: &mut dyn Observer) -> Option<Vec<AptLayer>> {
    let rec = cache.read_record(BASES, set).ok()??;
    let rec: BaseRecord = serde_json::from_slice(&rec.bytes).ok()?;
    let mut out = Vec::new();
    for (component, key) in rec.components {
        let blob = layer::lookup(cache, &key, obs)?;
        out.push(AptLayer {
            component,
            blob,
            cached: true,
        });
    }
    Some(out)
}

/// Which component each path of the install goes to: a file to its (last) package's, a
/// directory to the earliest component of the packages that ship it (so a component's layer
/// never depends on which other components exist), the merged-/usr links to `os`.
fn owners(
    installed: &apt::Installed,
    assignment: &components::Assignment,
    platform: &crate::profile::Platform,
    tree: &crate::assemble::Tree,
) -> HashMap<String, String> {
    let rank = |c: &str| assignment.order().iter().position(|o| o == c);
    let mut out = HashMap::new();
    for (path, pkgs) in &installed.owners {
        let mut comps = pkgs.iter().filter_map(|p| assignment.component(p));
        let is_dir = tree
            .get(path)
            .is_some_and(|e| matches!(e.kind, crate::assemble::EntryKind::Dir));
        let chosen = if is_dir {
            comps.min_by_key(|c| rank(c))
        } else {
            comps.next_back()
        };
        if let Some(c) = chosen {
            out.insert(path.clone(), c.to_string());
        }
    }
    for link in apt::merged_usr_links(platform.debian_arch()) {
        out.insert(link.to_string(), components::OS.to_string());
    }
    out
}

/// Build (or reuse) the component layers for `spec`, in layer order, and the package set.
#[allow(clippy::too_many_arguments)]
pub fn apt_layers(
    spec: &AptSpec,
    profile: &Profile,
    opts: &BuildOptions,
    lopts: LayerOptions,
    cache: &Cache,
    scratch: &Path,
    obs: &mut dyn Observer,
) -> Result<(Vec<AptLayer>, Vec<LockedPackage>), BuildError> {
    let aopts = apt_options(&opts.cache_root, opts.offline);
    let packages = match &opts.locked_packages {
        Some(p) => p.clone(),
        None => apt::resolve(spec, &profile.platform, &profile.dir, &aopts, obs)?,
    };
    let set = set_key(&packages, profile, lopts);
    if let Some(layers) = recorded(cache, &set, obs) {
        return Ok((layers, packages));
    }
    let root = scratch.join("apt-root");
    fs_err::create_dir_all(&root).map_err(assemble::AssembleError::Io)?;
    let installed = apt::install(
        spec,
        &profile.platform,
        &profile.dir,
        &aopts,
        Some(&packages),
        &root,
        obs,
    )?;
    for w in &installed.warnings {
        obs.warn(w);
    }
    let metas: Vec<PackageMeta> = installed
        .infos
        .iter()
        .map(|i| PackageMeta {
            name: i.name.clone(),
            essential: i.essential,
            priority: i.priority.clone(),
            section: i.section.clone(),
        })
        .collect();
    let assignment = components::assign(&metas, &LayerOverrides::from_profile(&profile.layers));
    for p in assignment.unused_overrides() {
        obs.warn(&format!(
            "`layers:` names `{p}`, which this build does not install; it has no effect"
        ));
    }
    let mut tree = assemble::assemble(
        &Input::Dir {
            path: &root,
            origin: "the apt packages",
            allow_special: false,
        },
        scratch,
    )?;
    for w in tree.warnings() {
        obs.warn(&w);
    }
    let n = strip::strip(&mut tree, &profile.strip);
    if n > 0 {
        obs.message(&format!("strip: removed {n} entries from the apt packages"));
    }
    let owner = owners(&installed, &assignment, &profile.platform, &tree);
    let parts = split::split(tree, &owner, assignment.order(), METADATA)?;
    let mut layers = Vec::new();
    let mut record = BaseRecord {
        components: Vec::new(),
    };
    for (component, tree) in parts {
        let key = if component == METADATA {
            component_key(METADATA, &set)
        } else {
            let names = assignment.packages(&component);
            let subset: Vec<LockedPackage> = packages
                .iter()
                .filter(|p| names.contains(&p.name.as_str()))
                .cloned()
                .collect();
            component_key(&component, &apt_key(&subset, profile, lopts))
        };
        let (blob, cached) = match layer::lookup(cache, &key, obs) {
            Some(b) => (b, true),
            None => {
                let (b, cached) = layer::write_layer(&component, &tree, lopts, cache, obs)?;
                layer::remember(cache, &key, &b)?;
                (b, cached)
            }
        };
        record.components.push((component.clone(), key));
        layers.push(AptLayer {
            component,
            blob,
            cached,
        });
    }
    cache
        .put_record(BASES, &set, &record)
        .map_err(|source| layer::LayerError::Write {
            component: "apt base record".into(),
            source,
        })?;
    Ok((layers, packages))
}
