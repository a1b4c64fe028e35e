//! One wheel component's tree: its pinned files are fetched (from the cache when there, else
//! from the index each pin names, `sources::pypi::fetch`) and installed for the image's
//! interpreter (`sources::wheel::install`) in a scratch directory of its own. Only when that
//! component's layer is not cached.

use std::path::Path;

use super::{BuildError, BuildOptions};
use crate::assemble::Tree;
use crate::cache::Cache;
use crate::observe::Observer;
use crate::plan::PythonInstall;
use crate::sources::pypi::{self, PythonRequest};
use crate::sources::python::PinnedWheel;
use crate::sources::wheel;

/// The pins of the locked wheels named `names`.
pub fn pins(install: &PythonInstall, names: &[String]) -> Vec<PinnedWheel> {
    install
        .wheels
        .iter()
        .filter(|w| names.contains(&w.name))
        .map(PinnedWheel::from)
        .collect()
}

/// Fetch and install the plan's wheels `names` (the layer `component`'s) under `scratch`.
#[allow(clippy::too_many_arguments)]
pub fn install(
    install: &PythonInstall,
    names: &[String],
    component: &str,
    request: Option<&PythonRequest>,
    opts: &BuildOptions,
    cache: &Cache,
    scratch: &Path,
    obs: &mut dyn Observer,
) -> Result<Tree, BuildError> {
    let request = request.ok_or(BuildError::Internal(
        "a python-packages layer was planned without its request",
    ))?;
    let fetched = pypi::fetch(&pins(install, names), request, cache, obs, opts.offline)?;
    let staging = staging(scratch, component);
    Ok(wheel::install(
        &fetched,
        &install.python,
        install.compiler.as_ref(),
        &staging,
        obs,
    )?)
}

fn staging(scratch: &Path, component: &str) -> std::path::PathBuf {
    scratch.join(format!("python-{component}"))
}

/// Remove the component's installed files once its layer is written: gigabytes of scratch
/// files left until the build ends would be written back to disk for nothing (the scratch
/// directory goes at the end in any case, so a failure here is no error).
pub fn discard(scratch: &Path, component: &str) {
    let _ = std::fs::remove_dir_all(staging(scratch, component));
}
