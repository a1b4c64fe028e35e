//! Which extended attributes an image carries, and reading them from a directory or a
//! tarball's PAX headers. Carried: `security.capability` (file capabilities, e.g. ping's
//! `cap_net_raw`) and `user.*`. Not carried, with a warning: labels and ACLs that belong to
//! the build host (`security.selinux`, `security.ima`, `system.posix_acl_*`, `trusted.*`, …).

use std::path::Path;

/// The PAX record prefix for extended attributes (GNU tar, umoci, containers/storage).
pub const PAX_PREFIX: &str = "SCHILY.xattr.";

/// Largest value Linux stores for one attribute.
const XATTR_SIZE_MAX: usize = 64 * 1024;

/// Is this attribute carried into layers?
pub fn carried(name: &str) -> bool {
    name == "security.capability" || name.starts_with("user.")
}

/// Why an attribute is not carried, for the warning.
pub fn why_not(name: &str) -> &'static str {
    if name.starts_with("security.") {
        "security labels belong to the build host's policy"
    } else if name.starts_with("system.posix_acl") {
        "ACLs are not applied by container runtimes consistently; set modes instead"
    } else if name.starts_with("trusted.") {
        "`trusted.*` attributes are private to the host"
    } else {
        "gpuimg carries only `security.capability` and `user.*`"
    }
}

/// The extended attributes of `path` itself (not following a symlink). A file system without
/// extended attributes has none.
pub fn read_dir_entry(path: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut list = vec![0u8; XATTR_SIZE_MAX];
    let n = match rustix::fs::llistxattr(path, &mut list[..]) {
        Ok(n) => n,
        Err(rustix::io::Errno::NOTSUP) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for name in list[..n].split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        let mut value = vec![0u8; XATTR_SIZE_MAX];
        match rustix::fs::lgetxattr(path, name, &mut value[..]) {
            Ok(len) => {
                value.truncate(len);
                out.push((name.to_string(), value));
            }
            // Removed between listing and reading.
            Err(rustix::io::Errno::NODATA) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// The `SCHILY.xattr.*` records of a tar entry's PAX header.
pub fn read_tar_entry<R: std::io::Read>(
    entry: &mut tar::Entry<'_, R>,
) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    if let Some(exts) = entry.pax_extensions()? {
        for ext in exts {
            let ext = ext?;
            let Ok(key) = ext.key() else { continue };
            if let Some(name) = key.strip_prefix(PAX_PREFIX) {
                out.push((name.to_string(), ext.value_bytes().to_vec()));
            }
        }
    }
    Ok(out)
}
