//! Reopen a file a tree recorded by path, refusing any other file that has taken its place
//! since (the rewrite of records and the layer writer both read files back this way).

use std::io;

/// Open the file the tree saw, and only that: the same device and inode as when it was walked
/// (a path swapped for a link to another file since is refused), never blocking on a FIFO.
pub fn open_same_file(path: &std::path::Path, identity: &[u64; 5]) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let changed = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` changed while the image was being built (it is no longer the file that was read)",
                path.display()
            ),
        )
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("Failed to open `{}`: {e}", path.display()),
            )
        })?;
    let m = f.metadata()?;
    if !m.is_file() || m.dev() != identity[0] || m.ino() != identity[1] {
        return Err(changed());
    }
    Ok(f)
}
