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
pub(crate) fn carried(name: &str) -> bool {
    name == "security.capability" || name.starts_with("user.")
}

/// Why an attribute is not carried, for the warning.
pub(crate) fn why_not(name: &str) -> &'static str {
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
///
/// Most entries have none: the list is asked for into a small buffer first, and a buffer of
/// the size the kernel reports is made only when it does not fit (a walk used to zero 64 KiB
/// per entry for it).
pub(crate) fn read_dir_entry(path: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let list = match read_sized(
        |buf| rustix::fs::llistxattr(path, buf),
        || rustix::fs::llistxattr_query(path),
    ) {
        Ok(list) => list,
        Err(rustix::io::Errno::NOTSUP) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for name in list.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        match read_sized(
            |buf| rustix::fs::lgetxattr(path, name, buf),
            || rustix::fs::lgetxattr_query(path, name),
        ) {
            Ok(value) => out.push((name.to_string(), value)),
            // Removed between listing and reading.
            Err(rustix::io::Errno::NODATA) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// Bytes `call` writes into a buffer it is given: a small one first; on `ERANGE`, one of the
/// size `query` reports (at most `XATTR_SIZE_MAX`, the kernel's own limit for one list or
/// value), asked again while the answer grows between the two calls.
fn read_sized(
    mut call: impl FnMut(&mut [u8]) -> rustix::io::Result<usize>,
    query: impl Fn() -> rustix::io::Result<usize>,
) -> rustix::io::Result<Vec<u8>> {
    let mut small = [0u8; 256];
    match call(&mut small) {
        Ok(n) => return Ok(small[..n].to_vec()),
        Err(rustix::io::Errno::RANGE) => {}
        Err(e) => return Err(e),
    }
    for _ in 0..4 {
        let want = query()?.min(XATTR_SIZE_MAX);
        let mut buf = vec![0u8; want];
        match call(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(rustix::io::Errno::RANGE) => continue,
            Err(e) => return Err(e),
        }
    }
    // Still growing after four tries: the largest buffer the kernel can fill.
    let mut buf = vec![0u8; XATTR_SIZE_MAX];
    let n = call(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// The `SCHILY.xattr.*` records of a tar entry's PAX header.
pub(crate) fn read_tar_entry<R: std::io::Read>(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set(path: &Path, name: &str, value: &[u8]) {
        rustix::fs::lsetxattr(path, name, value, rustix::fs::XattrFlags::empty()).unwrap_or_else(
            |e| {
                panic!(
                    "setting {name} on {}: {e} (the test needs user.* attributes)",
                    path.display()
                )
            },
        );
    }

    #[test]
    fn lists_and_values_of_any_size_are_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let none = dir.path().join("none");
        std::fs::write(&none, "x").unwrap();
        assert!(read_dir_entry(&none).unwrap().is_empty());

        // A short value, one past the small buffer, one of 1.5 kB (ext4 keeps an inode's
        // attributes in one 4 KiB block); then a list of names
        // longer than the small buffer.
        let some = dir.path().join("some");
        std::fs::write(&some, "x").unwrap();
        let long: Vec<u8> = (0..1_500u32).map(|i| (i % 251) as u8).collect();
        set(&some, "user.a", b"1");
        set(&some, "user.b", &[7u8; 257]);
        set(&some, "user.c", &long);
        let mut got = read_dir_entry(&some).unwrap();
        got.sort();
        assert_eq!(
            got,
            vec![
                ("user.a".to_string(), b"1".to_vec()),
                ("user.b".to_string(), vec![7u8; 257]),
                ("user.c".to_string(), long),
            ]
        );

        let many = dir.path().join("many");
        std::fs::write(&many, "x").unwrap();
        let names: Vec<String> = (0..40)
            .map(|i| format!("user.name-of-some-length-{i:02}"))
            .collect();
        for n in &names {
            set(&many, n, n.as_bytes());
        }
        let mut got = read_dir_entry(&many).unwrap();
        got.sort();
        let want: Vec<_> = names
            .iter()
            .map(|n| (n.clone(), n.as_bytes().to_vec()))
            .collect();
        assert_eq!(got, want);
    }
}
