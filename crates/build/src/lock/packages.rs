//! One locked .deb package (`gpuimg_apt::LockedPackage`, the apt client's plain data: enough to
//! fetch exactly the same bytes again) and the release its version names, in the catalog's
//! version terms.
//!
//! Must never change a locked package's fields: the lock file's bytes depend on them.

pub use gpuimg_apt::LockedPackage;

/// The release a Debian version text names, as a dotted version: the Debian version without
/// its epoch and revision, cut at the first `~` or `+` (`11.8.89~11.8.0-5~deb12u1` → 11.8.89,
/// `2.21.5-1+cuda12.4` → 2.21.5, `1:9.1.0.70-1` → 9.1.0.70); `None` when what is left is not
/// one.
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

    #[test]
    fn the_upstream_release_leaves_out_epoch_revision_and_suffixes() {
        let r = |v: &str| upstream_release(v).map(|v| v.to_string());
        assert_eq!(r("11.8.89~11.8.0-5~deb12u1").as_deref(), Some("11.8.89"));
        assert_eq!(r("2.21.5-1+cuda12.4").as_deref(), Some("2.21.5"));
        assert_eq!(r("1:9.1.0.70-1").as_deref(), Some("9.1.0.70"));
        assert_eq!(r("12.4.127-1").as_deref(), Some("12.4.127"));
        assert_eq!(r("12.4.127").as_deref(), Some("12.4.127"));
        assert_eq!(r("git20240101-1"), None);
    }
}
