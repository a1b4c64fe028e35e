//! The wheel layers a build writes before its plan is complete (`super::prewrite_wheels`):
//! the libraries' ELF facts that the one-provider rule, `ld.so.cache` and the metadata
//! layer's key need are taken while those layers are written, instead of inflating every
//! library once for its facts and once more for its layer. Holds each layer until the
//! complete plan takes it; must never hand over a layer other than the one the complete plan
//! would write.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::assemble::Tree;
use crate::digest::Digest;
use crate::layer::LayerBlob;
use crate::sources::wheel::Taps;

/// One wheel layer written before the plan was complete.
pub struct PrewrittenLayer {
    pub blob: LayerBlob,
    /// Its tree, for the check against the layers below it (which did not exist yet).
    pub tree: Tree,
    /// What strip removed from it, protecting no library.
    removed: BTreeSet<String>,
}

/// The wheel layers written before the plan was complete, by key, and what their libraries
/// showed as they were written.
#[derive(Default)]
pub struct Prewritten {
    layers: BTreeMap<Digest, PrewrittenLayer>,
    /// The taps of the libraries those layers left in their wheels.
    pub taps: Taps,
}

impl Prewritten {
    pub(super) fn add(
        &mut self,
        key: &Digest,
        blob: &LayerBlob,
        tree: Tree,
        removed: BTreeSet<String>,
    ) {
        self.layers.insert(
            *key,
            PrewrittenLayer {
                blob: blob.clone(),
                tree,
                removed,
            },
        );
    }

    /// The layer written under `key`, when it is the one a plan protecting `protect` writes:
    /// strip removed none of those paths from it (protecting a path strip leaves alone
    /// changes nothing).
    pub(super) fn take(&self, key: &Digest, protect: &HashSet<String>) -> Option<&PrewrittenLayer> {
        self.layers
            .get(key)
            .filter(|l| l.removed.iter().all(|p| !protect.contains(p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob() -> LayerBlob {
        LayerBlob {
            digest: Digest::of(b"blob"),
            size: 4,
            diff_id: Digest::of(b"tar"),
            uncompressed_size: 3,
            compression: crate::layer::Compression::Zstd,
            sizes: Default::default(),
            linked: Default::default(),
        }
    }

    #[test]
    fn a_layer_is_taken_only_when_strip_removed_nothing_the_plan_protects() {
        let key = Digest::of(b"key");
        let mut p = Prewritten::default();
        let removed = BTreeSet::from(["site/pkg/include/libx.so".to_string()]);
        p.add(&key, &blob(), Tree::new("t"), removed);
        assert_eq!(p.layers.len(), 1);
        assert!(p.take(&key, &HashSet::new()).is_some());
        let other = HashSet::from(["site/pkg/lib/liby.so".to_string()]);
        assert!(p.take(&key, &other).is_some());
        let hit = HashSet::from(["site/pkg/include/libx.so".to_string()]);
        assert!(
            p.take(&key, &hit).is_none(),
            "a protected library was removed"
        );
        assert!(p.take(&Digest::of(b"other key"), &HashSet::new()).is_none());
    }
}
