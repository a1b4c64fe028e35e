//! Stage `sources`: package sources spoken natively. `apt`: Debian/Ubuntu repositories.
//!
//! Must never run code from a package (no maintainer scripts, no chroot).

pub mod apt;
