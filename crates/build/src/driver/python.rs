//! One wheel component's tree: its fetched wheels (`schedule.rs` fetches every wheel of the
//! build at once, and hands each component its files as they arrive) installed for the
//! image's interpreter (`gpuimg_wheel::install`) in a scratch directory of its own. Only
//! when that component's layer is not cached.

use std::path::Path;

use super::{BuildError, BuildOptions};
use crate::plan::PythonInstall;
use crate::sources::wheel_tree::Wheels;
use crate::sources::Source;
use gpuimg_assemble::Tree;
use gpuimg_fetch::observe::Observer;
use gpuimg_oci::layer::Compression;
use gpuimg_pypi::{FetchedWheel, PinnedWheel};
use gpuimg_wheel::Taps;

/// Install the fetched wheels `fetched` (the layer `component`'s) under `scratch`; with
/// `tap`, each shared object left in its wheel gets a tap that takes its ELF facts as the
/// layer is written (`gpuimg_wheel::install_tapped`).
#[allow(clippy::too_many_arguments)]
pub fn install(
    install: &PythonInstall,
    fetched: &[FetchedWheel],
    component: &str,
    opts: &BuildOptions,
    scratch: &Path,
    tap: bool,
    obs: &mut dyn Observer,
) -> Result<(Tree, Taps), BuildError> {
    // A fresh name each build: the files go to a block group of their own, not to the one an
    // earlier build's copy of this component was just removed from (see `staging.rs`).
    let staging =
        gpuimg_store::staging::fresh_subdir(scratch, &stem(component)).map_err(|source| {
            BuildError::Cache {
                path: scratch.display().to_string(),
                source,
            }
        })?;
    let taps = std::sync::Mutex::new(Taps::new());
    // The whole resolution: a layer's wheels are checked against the edges of all of them.
    let set: Vec<PinnedWheel> = install.wheels.iter().map(PinnedWheel::from).collect();
    let tree = Wheels {
        fetched,
        set: &set,
        python: &install.python,
        compiler: install.compiler.as_ref(),
        // Only a gzip layer copies the wheels' deflate streams.
        walk_streams: opts.compression == Compression::Gzip,
        staging: &staging,
        taps: tap.then_some(&taps),
    }
    .tree(scratch, obs)?;
    let taps = taps
        .into_inner()
        .map_err(|_| BuildError::Internal("the taps' lock was poisoned"))?;
    Ok((tree, taps))
}

fn stem(component: &str) -> String {
    format!("python-{component}")
}

/// Remove the component's installed files once its layer is written: gigabytes of scratch
/// files left until the build ends would be written back to disk for nothing (the scratch
/// directory goes at the end in any case, so a failure here is no error).
pub fn discard(scratch: &Path, component: &str) {
    let prefix = format!("{}.", stem(component));
    let Ok(dir) = std::fs::read_dir(scratch) else {
        return;
    };
    for e in dir.flatten() {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&prefix))
        {
            let _ = gpuimg_store::staging::remove_dir(&e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_install_gets_a_fresh_directory_and_discard_removes_only_its_components() {
        let t = tempfile::tempdir().unwrap();
        let a = gpuimg_store::staging::fresh_subdir(t.path(), &stem("cuda")).unwrap();
        let b = gpuimg_store::staging::fresh_subdir(t.path(), &stem("cuda")).unwrap();
        let other = gpuimg_store::staging::fresh_subdir(t.path(), &stem("cuda-math")).unwrap();
        assert_ne!(a, b);
        std::fs::write(a.join("f"), b"x").unwrap();
        discard(t.path(), "cuda");
        assert!(!a.exists() && !b.exists());
        assert!(other.is_dir(), "another component's files were removed");
    }
}
