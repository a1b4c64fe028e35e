//! Stage `plan`: what each component layer of an image is made from.
//!
//! `components` decides which component each apt package belongs to (a fixed table in
//! `data/components.yaml`, rules on the package's own control fields, the profile's
//! `layers:`); `split` cuts one assembled tree into one tree per component, keeping hard-link
//! groups and directories consistent.
//! Must never do I/O beyond reading its embedded table: it reasons over trees and metadata.

pub mod components;
pub mod split;
