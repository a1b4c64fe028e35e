//! `LockedArtifact`: one typed entry of the lock's `artifacts` list, tagged by `kind`.
//!
//! Each kind of source (`deb`, `wheel`) has one variant holding its own locked record; nothing
//! else in the lock format changes when a kind is added.

use serde::{Deserialize, Serialize};

use super::{LockedPackage, LockedWheel};

/// One artifact a build fetches, with what identifies its bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum LockedArtifact {
    /// A Debian package (`{"kind": "deb", "name": ..., "sha256": ...}`).
    Deb(LockedPackage),
    /// A Python wheel (`{"kind": "wheel", "name": ..., "filename": ..., "sha256": ...}`).
    Wheel(LockedWheel),
}

impl LockedArtifact {
    /// The .deb this entry locks, if it is one.
    pub fn as_deb(&self) -> Option<&LockedPackage> {
        match self {
            LockedArtifact::Deb(p) => Some(p),
            LockedArtifact::Wheel(_) => None,
        }
    }

    /// The wheel this entry locks, if it is one.
    pub fn as_wheel(&self) -> Option<&LockedWheel> {
        match self {
            LockedArtifact::Wheel(w) => Some(w),
            LockedArtifact::Deb(_) => None,
        }
    }
}

impl From<LockedPackage> for LockedArtifact {
    fn from(p: LockedPackage) -> Self {
        LockedArtifact::Deb(p)
    }
}
