//! The size report (`gpuimg inspect --sizes`): per layer, per component, per strip class and
//! per owner (package, rootfs, `files:`, gpuimg), from what the image itself records — the
//! blob sizes of its manifest, the `io.gpuimg.uncompressed-size` and `io.gpuimg.layer.sizes`
//! annotations its layers carry.
//!
//! Compressed sizes exist per layer only (the blob); the compressed size of what was stripped
//! was never written, so it is not reported. File bytes are uncompressed regular-file data;
//! a layer's tar size adds headers and padding. Reads no layer: a pure function of
//! [`ImageInfo`].

use std::collections::BTreeMap;

use serde::Serialize;

use super::ImageInfo;
use gpuimg_oci::layer::{Bytes, Counted};

/// File bytes and what became of them, summed over some layers.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Totals {
    /// Compressed blob bytes.
    pub compressed: u64,
    /// Tar bytes (when every layer records it).
    pub uncompressed: Option<u64>,
    /// File bytes before stripping and duplicate linking, and as stored.
    pub files: Bytes,
    /// Removed by strip (all classes).
    pub stripped: Counted,
    /// Stored once as hard links to an identical file.
    pub duplicates: Counted,
}

/// One layer's row.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LayerRow {
    pub component: Option<String>,
    pub digest: String,
    #[serde(flatten)]
    pub totals: Totals,
    /// Whether the layer carries gpuimg's size record (without one, only blob and tar sizes
    /// are known).
    pub recorded: bool,
}

/// Layers of one component, summed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ComponentRow {
    pub component: String,
    #[serde(flatten)]
    pub totals: Totals,
}

/// One owner in one component.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct OwnerRow {
    /// As provenance names it: `deb libc6`, `wheel torch`, `rootfs`, `files: /ctx/app`.
    pub owner: String,
    pub component: Option<String>,
    pub before: u64,
    pub after: u64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SizeReport {
    /// Manifest, config and layer blobs: what a pull downloads, and what
    /// `gpuimg build --max-size` limits.
    pub image_size: u64,
    pub total: Totals,
    pub layers: Vec<LayerRow>,
    /// Layers summed by component, in layer order of first appearance.
    pub components: Vec<ComponentRow>,
    /// Per strip class, what it removed.
    pub strip_classes: BTreeMap<String, Counted>,
    /// Per owner and component, largest `before` first.
    pub owners: Vec<OwnerRow>,
    /// `strip: [device-code]` per library (image path): fatbin entries dropped and the bytes
    /// they held (zeros now; the file keeps its size).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub device_code: BTreeMap<String, Counted>,
}

/// The size report of an inspected image.
pub fn size_report(info: &ImageInfo) -> SizeReport {
    let mut layers = Vec::new();
    let mut strip_classes: BTreeMap<String, Counted> = BTreeMap::new();
    let mut owners = Vec::new();
    let mut device_code: BTreeMap<String, Counted> = BTreeMap::new();
    for l in &info.layers {
        let mut t = Totals {
            compressed: l.size,
            uncompressed: l.uncompressed_size,
            ..Totals::default()
        };
        if let Some(s) = &l.sizes {
            t.files = Bytes {
                before: s.before(),
                after: s.after(),
            };
            for (class, c) in &s.stripped {
                add(&mut t.stripped, c);
                add(strip_classes.entry(class.clone()).or_default(), c);
            }
            t.duplicates = s.duplicates;
            for (lib, c) in &s.device_code {
                add(device_code.entry(lib.clone()).or_default(), c);
            }
            owners.extend(s.owners.iter().map(|(o, b)| OwnerRow {
                owner: o.clone(),
                component: l.component.clone(),
                before: b.before,
                after: b.after,
            }));
        }
        layers.push(LayerRow {
            component: l.component.clone(),
            digest: l.digest.clone(),
            totals: t,
            recorded: l.sizes.is_some(),
        });
    }
    owners.sort_by(|a, b| {
        (b.before, b.after)
            .cmp(&(a.before, a.after))
            .then_with(|| (&a.owner, &a.component).cmp(&(&b.owner, &b.component)))
    });
    let mut components: Vec<ComponentRow> = Vec::new();
    for l in &layers {
        let name = l.component.clone().unwrap_or_else(|| "-".into());
        match components.iter_mut().find(|c| c.component == name) {
            Some(c) => sum(&mut c.totals, &l.totals),
            None => components.push(ComponentRow {
                component: name,
                totals: l.totals.clone(),
            }),
        }
    }
    let mut total = Totals {
        uncompressed: Some(0),
        ..Totals::default()
    };
    for l in &layers {
        sum(&mut total, &l.totals);
    }
    SizeReport {
        image_size: info.image_size,
        total,
        layers,
        components,
        strip_classes,
        owners,
        device_code,
    }
}

// Sums saturate: the numbers come from the image, which is untrusted.

fn add(into: &mut Counted, c: &Counted) {
    into.entries = into.entries.saturating_add(c.entries);
    into.bytes = into.bytes.saturating_add(c.bytes);
}

fn sum(into: &mut Totals, t: &Totals) {
    into.compressed = into.compressed.saturating_add(t.compressed);
    into.uncompressed = into
        .uncompressed
        .zip(t.uncompressed)
        .map(|(a, b)| a.saturating_add(b));
    into.files.before = into.files.before.saturating_add(t.files.before);
    into.files.after = into.files.after.saturating_add(t.files.after);
    add(&mut into.stripped, &t.stripped);
    add(&mut into.duplicates, &t.duplicates);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::LayerInfo;
    use gpuimg_oci::layer::LayerSizes;

    fn info(layers: Vec<LayerInfo>) -> ImageInfo {
        ImageInfo {
            tag: None,
            manifest_digest: gpuimg_store::digest::Digest::of(b"m"),
            platform: "linux/amd64".into(),
            created: None,
            config: serde_json::Value::Null,
            annotations: Default::default(),
            compressed_size: 0,
            uncompressed_size: None,
            image_size: 0,
            layers,
        }
    }

    fn layer(component: &str, sizes: Option<LayerSizes>) -> LayerInfo {
        LayerInfo {
            digest: "sha256:ab".into(),
            media_type: "m".into(),
            size: u64::MAX,
            uncompressed_size: Some(u64::MAX),
            component: Some(component.into()),
            sizes,
        }
    }

    #[test]
    fn components_sum_their_layers_and_hostile_numbers_saturate() {
        let mut s = LayerSizes::default();
        s.owners.insert(
            "deb a".into(),
            Bytes {
                before: u64::MAX,
                after: u64::MAX,
            },
        );
        s.owners.insert(
            "deb b".into(),
            Bytes {
                before: u64::MAX,
                after: 1,
            },
        );
        s.add_stripped("docs", "deb a", u64::MAX, u64::MAX);
        let r = size_report(&info(vec![
            layer("x", Some(s.clone())),
            layer("x", Some(s)),
            layer("y", None),
        ]));
        assert_eq!(r.components.len(), 2);
        assert_eq!(r.components[0].totals.compressed, u64::MAX);
        assert_eq!(r.total.files.before, u64::MAX);
        assert_eq!(r.strip_classes["docs"].bytes, u64::MAX);
        assert!(!r.layers[2].recorded);
        assert_eq!(r.owners.len(), 4);
    }
}
