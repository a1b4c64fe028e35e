//! A file the user names on the command line or in a profile (`device-code`, `inspect`,
//! `files.src`, `python.requirements`): only a regular file on a real file system is read.
//! FIFOs, sockets and devices are refused without blocking (opened non-blocking, checked on
//! the open descriptor, so a swap after the check is seen), and so are the pseudo file systems
//! whose "files" are the kernel's state (procfs, sysfs, debugfs, …, told by `statfs` type).
//! Must never open a path for reading in a way that can block, and never follow a check by a
//! second open of the same path.

use std::fs::File;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a named file is not read.
#[derive(Debug, thiserror::Error)]
pub enum UserFileError {
    #[error("Failed to open `{path}`: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}` is a {kind}, not a regular file")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("`{path}` is on {fs}, whose files are the kernel's state, not data")]
    Pseudo { path: PathBuf, fs: &'static str },
}

impl UserFileError {
    /// The refusal as an I/O error that does not repeat the path (for callers whose own
    /// error names it): an open failure as it was, a refusal as `InvalidInput`.
    pub fn into_io(self) -> std::io::Error {
        let why = match self {
            UserFileError::Open { source, .. } => return source,
            UserFileError::NotRegular { kind, .. } => format!("is a {kind}, not a regular file"),
            UserFileError::Pseudo { fs, .. } => {
                format!("is on {fs}, whose files are the kernel's state")
            }
        };
        std::io::Error::new(std::io::ErrorKind::InvalidInput, why)
    }
}

/// Pseudo file systems by `statfs` `f_type` (linux/magic.h).
const PSEUDO: &[(u64, &str)] = &[
    (0x9fa0, "procfs"),
    (0x6265_6572, "sysfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0x0027_e0eb, "cgroupfs"),
    (0x6367_7270, "cgroup2fs"),
    (0xcafe_4a11, "bpffs"),
    (0x6265_6570, "configfs"),
    (0xde5e_81e4, "efivarfs"),
    (0x6165_676c, "pstorefs"),
    (0x1cd1, "devpts"),
];

/// The pseudo file system `file` is on, if it is on one.
pub fn pseudo_fs_of(file: &File) -> std::io::Result<Option<&'static str>> {
    let st = rustix::fs::fstatfs(file)?;
    Ok(pseudo_name(st.f_type as u64))
}

/// The pseudo file system `path` is on, if it is on one (the path is not opened).
pub fn pseudo_fs(path: &Path) -> std::io::Result<Option<&'static str>> {
    let st = rustix::fs::statfs(path)?;
    Ok(pseudo_name(st.f_type as u64))
}

fn pseudo_name(t: u64) -> Option<&'static str> {
    PSEUDO.iter().find(|(m, _)| *m == t).map(|(_, n)| *n)
}

/// What kind of special file `t` is; `None` for a regular file, directory or symlink.
pub fn special_kind(t: &std::fs::FileType) -> Option<&'static str> {
    if t.is_fifo() {
        Some("FIFO")
    } else if t.is_socket() {
        Some("socket")
    } else if t.is_char_device() {
        Some("character device")
    } else if t.is_block_device() {
        Some("block device")
    } else {
        None
    }
}

/// Open `path` for reading when it is a regular file on a real file system (symlinks are
/// followed: what counts is the file reached).
pub fn open_regular(path: &Path) -> Result<File, UserFileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| UserFileError::Open {
            path: path.to_path_buf(),
            source,
        })?;
    let meta = file.metadata().map_err(|source| UserFileError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        let kind = special_kind(&meta.file_type()).unwrap_or(if meta.is_dir() {
            "directory"
        } else {
            "special file"
        });
        return Err(UserFileError::NotRegular {
            path: path.to_path_buf(),
            kind,
        });
    }
    if let Some(fs) = pseudo_fs_of(&file).map_err(|source| UserFileError::Open {
        path: path.to_path_buf(),
        source,
    })? {
        return Err(UserFileError::Pseudo {
            path: path.to_path_buf(),
            fs,
        });
    }
    // Regular files ignore O_NONBLOCK; it is cleared all the same so reads behave as usual.
    let _ = rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::empty());
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_opens() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, "x").unwrap();
        assert!(open_regular(&p).is_ok());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &p,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = open_regular(&p).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
    }

    #[test]
    fn devices_directories_and_procfs_are_refused() {
        let e = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = open_regular(Path::new("/")).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let e = open_regular(Path::new("/proc/self/environ")).unwrap_err();
        assert!(e.to_string().contains("procfs"), "{e}");
        assert_eq!(pseudo_fs(Path::new("/proc/self")).unwrap(), Some("procfs"));
        assert_eq!(pseudo_fs(Path::new("/")).unwrap(), None);
    }
}
