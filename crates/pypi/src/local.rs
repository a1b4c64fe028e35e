//! Reading a `file:` index's pages and wheels, and find-links directories: regular files only
//! (symlinks followed), opened without blocking, so a FIFO, socket or device named like a page
//! or a wheel is refused at once; a page read is capped like a remote one.
//! Must never block on, or read without a cap from, a path an index names.

use std::io::{self, Read};
use std::path::Path;

/// Open `path` for reading if it is a regular file on a real file system (the one rule of
/// `gpuimg_store::user_file`): the file and its size. Anything else (a FIFO, a device, a
/// directory, procfs) is an `InvalidInput` error, never a wait.
pub fn open_regular(path: &Path) -> io::Result<(std::fs::File, u64)> {
    let f = gpuimg_store::user_file::open_regular(path)
        .map_err(gpuimg_store::user_file::UserFileError::into_io)?;
    let size = f.metadata()?.len();
    Ok((f, size))
}

/// The bytes of the regular file `path`, at most `cap` of them (more is `InvalidData`).
pub fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let (f, size) = open_regular(path)?;
    if size > cap {
        return Err(too_large(cap));
    }
    let mut out = Vec::new();
    f.take(cap.saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > cap {
        return Err(too_large(cap));
    }
    Ok(out)
}

fn too_large(cap: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("is larger than the {cap} bytes allowed"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_and_directories_are_refused_without_blocking_and_reads_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("index.html");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        assert_eq!(
            open_regular(&fifo).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert!(open_regular(dir.path()).is_err());
        let f = dir.path().join("page");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_capped(&f, 10).unwrap(), b"0123456789");
        assert_eq!(
            read_capped(&f, 9).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }
}
