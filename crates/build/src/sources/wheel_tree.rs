//! The wheel installer's output (`gpuimg_wheel`) as a [`Source`]: one layer's fetched wheels
//! installed for the image's interpreter ([`gpuimg_wheel::install_tapped`]), each installed
//! path stamped by the installer with the project that shipped it.
//!
//! Must never decide which wheels a layer holds: `plan::wheel_components` does.

use std::path::Path;
use std::sync::Mutex;

use crate::sources::Source;
use gpuimg_assemble::Tree;
use gpuimg_fetch::observe::Observer;
use gpuimg_pypi::{FetchedWheel, ImagePython, PinnedWheel};
use gpuimg_wheel::{HostPython, Taps, WheelError};

/// One layer's wheels: the fetched wheels installed for the image's interpreter under
/// `staging`; with `taps`, each shared object left in its wheel gets a tap there, which writing
/// the tree's layer fills.
pub struct Wheels<'a> {
    pub fetched: &'a [FetchedWheel],
    /// The whole resolution: the layer's wheels are checked against the edges of all of them.
    pub set: &'a [PinnedWheel],
    pub python: &'a ImagePython,
    pub compiler: Option<&'a HostPython>,
    /// Walk the deflate streams of files left in their wheels (a gzip layer copies them).
    pub walk_streams: bool,
    pub staging: &'a Path,
    pub taps: Option<&'a Mutex<Taps>>,
}

impl Source for Wheels<'_> {
    type Error = WheelError;

    fn describe(&self) -> String {
        format!("{} wheels", self.fetched.len())
    }

    fn tree(&self, _scratch: &Path, obs: &mut dyn Observer) -> Result<Tree, WheelError> {
        let mut guard = match self.taps {
            Some(m) => Some(
                m.lock()
                    .map_err(|_| WheelError::Internal("the taps' lock was poisoned"))?,
            ),
            None => None,
        };
        gpuimg_wheel::install_tapped(
            self.fetched,
            self.set,
            self.python,
            self.compiler,
            self.walk_streams,
            self.staging,
            guard.as_deref_mut(),
            obs,
        )
    }
}
