//! What depends on the wheels' libraries and METADATA, derived from them: the loader's view
//! of the libraries (`/etc/ld.so.conf.d/`, what `ld.so.cache` indexes, the one-provider rule's
//! inputs, the unused ones), the `metadata` layer's key and the SBOM. At planning when the
//! cache has every wheel's facts; else from the facts the wheel jobs produce
//! ([`Late::complete`], called by the driver's loop). Pure, like the rest of `plan`.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    expectation, keys, libraries, sbom, unused, Derived, Facts, ImagePlan, Loader, PlanError,
    PythonInstall, LOADER_CONF, METADATA,
};
use crate::profile::{CompatMode, Profile, StripClass};
use gpuimg_elf::SharedObject;
use gpuimg_oci::layer::LayerOptions;
use gpuimg_store::digest::Digest;
use gpuimg_wheel::WheelLibrary;

/// What a plan needs to derive [`Derived`] once the wheels' libraries and METADATA headers
/// are known (at planning, from the cache's records; else from the wheel jobs).
#[derive(Debug, Clone)]
pub struct Late {
    pub(super) profile: Profile,
    pub(super) selftest: bool,
    /// The strip rules before the unused libraries are known.
    pub(super) rules: crate::strip::Rules,
    /// The apt package set's key (an apt base).
    pub(super) set_key: Option<Digest>,
    /// The facts planned from, without the wheels.
    pub(super) facts: Facts,
    pub(super) python: Option<PythonInstall>,
    pub(super) image: ImagePlan,
    pub(super) lopts: LayerOptions,
}

impl Late {
    /// The wheels' METADATA headers known at planning, by wheel name.
    pub fn headers(&self) -> &BTreeMap<String, Vec<(String, String)>> {
        &self.facts.wheel_headers
    }

    /// Whether the image carries the SBOM in a layer of its own (it has packages).
    pub(super) fn has_sbom_layer(&self) -> bool {
        self.facts
            .apt
            .as_ref()
            .is_some_and(|a| !a.packages.is_empty())
            || self.python.as_ref().is_some_and(|p| !p.wheels.is_empty())
    }

    /// The loader's view of the wheels' `libraries`, the `metadata` layer's key and the SBOM
    /// with the wheels' METADATA `headers` (both by wheel name). Refuses what the loader
    /// refuses (a driver library among the wheels, two providers of one library).
    pub fn complete(
        &self,
        libraries: &BTreeMap<String, Vec<WheelLibrary>>,
        headers: &BTreeMap<String, Vec<(String, String)>>,
    ) -> Result<Derived, PlanError> {
        let python = self.python.as_ref().map(|p| PythonInstall {
            libraries: libraries.clone(),
            ..p.clone()
        });
        let loader = loader(&self.profile, python.as_ref(), self.selftest, &self.rules)?;
        // Without apt packages the wheels are all the image's libraries there are to check;
        // with them, the install checks both together.
        if self.set_key.is_none() {
            libraries::check_providers(&loader.wheel_libraries, &loader.picks)?;
        }
        let metadata_key = self
            .set_key
            .map(|set| keys::component_key(METADATA, &keys::metadata_key(&set, &loader)));
        let facts = Facts {
            wheel_headers: headers.clone(),
            ..self.facts.clone()
        };
        let inventory = sbom::inventory(
            &self.profile,
            &facts,
            python.as_ref(),
            &self.image,
            self.lopts.epoch,
        );
        let sbom = crate::sbom::document(&inventory).map_err(PlanError::Sbom)?;
        let sbom_key = keys::sbom_key(&sbom, self.lopts);
        Ok(Derived {
            loader,
            metadata_key,
            sbom,
            sbom_key,
        })
    }
}

/// The wheels' libraries as the loader will see them: no driver library among them (refused
/// here, naming the wheel), the directories for `/etc/ld.so.conf.d/` and the copies
/// `ld.so.cache` indexes (none private, none a `libraries:` pick passes over).
pub(super) fn loader(
    profile: &Profile,
    python: Option<&PythonInstall>,
    selftest: bool,
    rules: &crate::strip::Rules,
) -> Result<Loader, PlanError> {
    let forward = profile.compat == CompatMode::Forward;
    let mut all = Vec::new();
    let mut facts = BTreeMap::new();
    let mut objects = BTreeMap::new();
    if let Some(p) = python {
        for (wheel, libs) in &p.libraries {
            let provider = libraries::Provider::Wheel(wheel.clone());
            let mine = |e: &&SharedObject| e.is_64 && e.machine == machine(&p.python.machine);
            for l in libs {
                if let Some(elf) = l.elf.as_ref().filter(mine) {
                    objects.insert(l.path.clone(), elf.clone());
                }
            }
            for l in libs.iter().filter(|l| !l.module) {
                libraries::check_driver_files([(l.path.as_str(), &provider)], forward)?;
                // Only shared objects for the image's machine are the loader's business.
                let Some(elf) = l
                    .elf
                    .as_ref()
                    .filter(|e| e.is_64 && e.machine == machine(&p.python.machine))
                else {
                    continue;
                };
                facts.insert(l.path.clone(), elf.clone());
                all.push(libraries::Library {
                    path: l.path.clone(),
                    soname: l.soname().to_string(),
                    provider: provider.clone(),
                });
            }
        }
    }
    let picks = profile.libraries.clone();
    let found: Vec<&libraries::Library> = all
        .iter()
        .filter(|l| !libraries::is_private(&l.path, &l.provider))
        .filter(|l| picks.get(&l.soname).is_none_or(|p| p == l.provider.name()))
        .collect();
    let dirs = libraries::loader_directories(&all, &found);
    let conf = (!dirs.is_empty()).then(|| {
        let mut text = String::from(
            "# The Python wheels' library directories (written by gpuimg), so that programs find\n# their libraries without LD_LIBRARY_PATH.\n",
        );
        for d in &dirs {
            text.push('/');
            text.push_str(d);
            text.push('\n');
        }
        (LOADER_CONF.to_string(), text)
    });
    // The CUDA libraries the self-test loads at boot are used, where the image carries it (its
    // expectation lists them, for `inspect --unused` to read).
    let roots = match python {
        Some(p) if selftest => unused::selftest_roots(&expectation::wheel_library_expectations(
            &p.python.site_dir,
            p.wheels
                .iter()
                .map(|w| (w.name.as_str(), w.version.as_str())),
        )?),
        _ => Vec::new(),
    };
    let unused = match python {
        Some(_) if profile.strip.contains(&StripClass::UnusedLibraries) => {
            unused::unused_libraries(&objects, &dirs, &roots)
        }
        _ => BTreeSet::new(),
    };
    // What the profile's strip classes remove is not in the cache (and so not protected from
    // them).
    let no_protect = std::collections::HashSet::new();
    let found = found
        .iter()
        .filter(|l| !unused.contains(&l.path))
        .filter(|l| !crate::strip::would_remove(&l.path, &profile.strip, rules, &no_protect))
        .filter(|l| {
            dirs.iter().any(|d| {
                l.path
                    .strip_prefix(d.as_str())
                    .is_some_and(|r| r.starts_with('/') && !r[1..].contains('/'))
            })
        })
        .filter_map(|l| Some((l.path.clone(), facts.get(&l.path)?.clone())))
        .collect();
    Ok(Loader {
        conf,
        found,
        wheel_libraries: all,
        picks,
        forward,
        node: profile.kind == crate::profile::ProfileKind::Host,
        objects,
        dirs,
        roots,
        unused,
    })
}

/// The ELF machine number of a platform machine name (`x86_64` → 62).
fn machine(name: &str) -> u16 {
    gpuimg_elf::machine::of_name(name)
}
