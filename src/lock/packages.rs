//! One locked .deb package: enough to fetch exactly the same bytes again.

use serde::{Deserialize, Serialize};

use gpuimg_store::digest::Digest;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedPackage {
    pub name: String,
    pub version: String,
    pub architecture: String,
    /// `host:<suite>` (resolved through each build host's apt sources, so no mirror host name
    /// lands in the lock) or the repository's base URL as written in the profile.
    pub repository: String,
    /// Path of the .deb below the repository's base URL (the index's `Filename`).
    pub filename: String,
    pub size: u64,
    pub sha256: Digest,
}

impl LockedPackage {
    /// The release the package's version names, as a dotted version: the Debian version
    /// without its epoch and revision, cut at the first `~` or `+` (`11.8.89~11.8.0-5~deb12u1`
    /// → 11.8.89, `2.21.5-1+cuda12.4` → 2.21.5, `1:9.1.0.70-1` → 9.1.0.70); `None` when what
    /// is left is not one.
    pub fn upstream_release(&self) -> Option<gpuimg_expect::version::Version> {
        upstream_release(&self.version)
    }
}

/// The release a Debian version text stands for: see [`LockedPackage::upstream_release`].
pub fn upstream_release(debian_version: &str) -> Option<gpuimg_expect::version::Version> {
    let v = debian_version
        .split_once(':')
        .map_or(debian_version, |(_, v)| v);
    let v = v.rsplit_once('-').map_or(v, |(u, _)| u);
    let v = v.split(['~', '+']).next()?;
    v.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deb(version: &str) -> LockedPackage {
        LockedPackage {
            name: "p".into(),
            version: version.into(),
            architecture: "amd64".into(),
            repository: "host:bookworm".into(),
            filename: "p.deb".into(),
            size: 1,
            sha256: Digest::of(b"p"),
        }
    }

    #[test]
    fn the_upstream_release_leaves_out_epoch_revision_and_suffixes() {
        let r = |v: &str| deb(v).upstream_release().map(|v| v.to_string());
        assert_eq!(r("11.8.89~11.8.0-5~deb12u1").as_deref(), Some("11.8.89"));
        assert_eq!(r("2.21.5-1+cuda12.4").as_deref(), Some("2.21.5"));
        assert_eq!(r("1:9.1.0.70-1").as_deref(), Some("9.1.0.70"));
        assert_eq!(r("12.4.127-1").as_deref(), Some("12.4.127"));
        assert_eq!(r("12.4.127").as_deref(), Some("12.4.127"));
        assert_eq!(r("git20240101-1"), None);
    }
}
