//! A file's identity: (device, inode, size, mtime ns, ctime ns), which changes whenever its
//! content may have changed (like git's index). The cache's trust stamps and the layer keys
//! of files read in place both use it. A leaf: imports nothing from the crate.

/// (dev, ino, size, mtime ns, ctime ns) of the file behind `meta`.
pub fn identity(meta: &std::fs::Metadata) -> [u64; 5] {
    use std::os::unix::fs::MetadataExt;
    let ns = |s: i64, n: i64| {
        (s as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(n as u64)
    };
    [
        meta.dev(),
        meta.ino(),
        meta.len(),
        ns(meta.mtime(), meta.mtime_nsec()),
        ns(meta.ctime(), meta.ctime_nsec()),
    ]
}
