//! The plan's Python wheels as one tree: the pinned files are fetched (from the cache when
//! there, else from the index each pin names, `sources::pypi::fetch`) and installed for the
//! image's interpreter (`sources::wheel::install`) in a scratch directory. Only when the
//! `python-packages` layer is not cached.

use std::path::Path;

use super::{BuildError, BuildOptions};
use crate::assemble::Tree;
use crate::cache::Cache;
use crate::observe::Observer;
use crate::plan::PythonInstall;
use crate::sources::pypi::{self, PythonRequest};
use crate::sources::python::PinnedWheel;
use crate::sources::wheel;

/// The pins of the locked wheels.
pub fn pins(install: &PythonInstall) -> Vec<PinnedWheel> {
    install.wheels.iter().map(PinnedWheel::from).collect()
}

/// Fetch and install the plan's wheels under `scratch`.
pub fn install(
    install: &PythonInstall,
    request: Option<&PythonRequest>,
    opts: &BuildOptions,
    cache: &Cache,
    scratch: &Path,
    obs: &mut dyn Observer,
) -> Result<Tree, BuildError> {
    let request = request.ok_or(BuildError::Internal(
        "a python-packages layer was planned without its request",
    ))?;
    let fetched = pypi::fetch(&pins(install), request, cache, obs, opts.offline)?;
    let staging = scratch.join("python");
    Ok(wheel::install(
        &fetched,
        &install.python,
        install.compiler.as_ref(),
        &staging,
        obs,
    )?)
}
