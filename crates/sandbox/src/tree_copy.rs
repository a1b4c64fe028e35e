//! Copies between the host and the sandbox's tmpfs mounts (reached through the parent's
//! descriptor of each, `/proc/self/fd/N`): a scratch's seed copied in before the sandbox starts
//! (owned by [`crate::SANDBOX_ID`], set-id bits dropped), and the output copied out after every
//! process of the sandbox is dead (nothing can change it while it is read). Entries are read
//! with `lstat`: a symbolic link is copied as a link, never followed. Must never follow a link
//! the sandbox wrote, never copy out anything but files, directories and links, and never set
//! a set-id bit.

use std::fs;
use std::io;
use std::os::unix::fs::{lchown, symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::SandboxError;

/// The deepest directory either copy descends to.
pub const MAX_DEPTH: usize = 256;

/// Copy the host directory `seed`'s contents into the existing directory `dest`, every entry
/// owned by `owner` (uid and gid).
pub fn copy_in(seed: &Path, dest: &Path, owner: u32) -> io::Result<()> {
    copy_in_at(seed, dest, owner, 0)
}

fn copy_in_at(from: &Path, to: &Path, owner: u32, depth: usize) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other(format!(
            "deeper than {MAX_DEPTH} directories at `{}`",
            from.display()
        )));
    }
    let mut entries = fs::read_dir(from)?.collect::<Result<Vec<_>, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let src = e.path();
        let dst = to.join(e.file_name());
        let meta = fs::symlink_metadata(&src)?;
        let ft = meta.file_type();
        if ft.is_dir() {
            fs::create_dir(&dst)?;
            copy_in_at(&src, &dst, owner, depth + 1)?;
            fs::set_permissions(&dst, fs::Permissions::from_mode(meta.mode_bits() & 0o1777))?;
        } else if ft.is_file() {
            fs::copy(&src, &dst)?;
            fs::set_permissions(&dst, fs::Permissions::from_mode(meta.mode_bits() & 0o777))?;
        } else if ft.is_symlink() {
            symlink(fs::read_link(&src)?, &dst)?;
        } else {
            return Err(io::Error::other(format!(
                "`{}` is not a file, directory or symbolic link",
                src.display()
            )));
        }
        lchown(&dst, Some(owner), Some(owner))?;
    }
    Ok(())
}

trait ModeBits {
    fn mode_bits(&self) -> u32;
}

impl ModeBits for fs::Metadata {
    fn mode_bits(&self) -> u32 {
        self.permissions().mode()
    }
}

/// Copy the sandbox's output (the directory `from`) into the new directory `to`: files and
/// directories at most 0755, links as links. The files' sizes add up to at most `max_bytes`:
/// the tmpfs bounds the pages written, not a sparse file's length, which the copy would write
/// out in full.
pub fn copy_out(from: &Path, to: &Path, max_bytes: u64) -> Result<(), SandboxError> {
    let mut left = max_bytes;
    copy_out_at(from, to, to, 0, &mut left).map_err(|e| match e {
        SandboxError::OutputTooLarge { path, .. } => SandboxError::OutputTooLarge {
            path,
            max: max_bytes,
        },
        e => e,
    })
}

fn copy_out_at(
    from: &Path,
    to: &Path,
    shown: &Path,
    depth: usize,
    left: &mut u64,
) -> Result<(), SandboxError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SandboxError::Output { path, source }
    };
    if depth > MAX_DEPTH {
        return Err(SandboxError::OutputDepth {
            path: shown.to_path_buf(),
            max: MAX_DEPTH,
        });
    }
    let mut entries = fs::read_dir(from)
        .and_then(|d| d.collect::<Result<Vec<_>, _>>())
        .map_err(io(shown))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let src = e.path();
        let dst = to.join(e.file_name());
        let shown: PathBuf = shown.join(e.file_name());
        let meta = fs::symlink_metadata(&src).map_err(io(&shown))?;
        let ft = meta.file_type();
        let mode = meta.mode_bits() & 0o755;
        if ft.is_dir() {
            fs::create_dir(&dst).map_err(io(&shown))?;
            copy_out_at(&src, &dst, &shown, depth + 1, left)?;
            fs::set_permissions(&dst, fs::Permissions::from_mode(mode | 0o700))
                .map_err(io(&shown))?;
        } else if ft.is_file() {
            *left = left
                .checked_sub(meta.len())
                .ok_or_else(|| SandboxError::OutputTooLarge {
                    path: shown.clone(),
                    max: 0,
                })?;
            fs::copy(&src, &dst).map_err(io(&shown))?;
            fs::set_permissions(&dst, fs::Permissions::from_mode(mode)).map_err(io(&shown))?;
        } else if ft.is_symlink() {
            let target = fs::read_link(&src).map_err(io(&shown))?;
            symlink(target, &dst).map_err(io(&shown))?;
        } else {
            use std::os::unix::fs::FileTypeExt;
            let kind = if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else {
                "a device"
            };
            return Err(SandboxError::OutputEntry { path: shown, kind });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_comes_out_with_links_as_links_and_no_set_id_bit() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("from");
        fs::create_dir_all(from.join("sub")).unwrap();
        fs::write(from.join("sub/a"), "a").unwrap();
        fs::set_permissions(from.join("sub/a"), fs::Permissions::from_mode(0o4755)).unwrap();
        symlink("/etc/passwd", from.join("link")).unwrap();
        let to = d.path().join("to");
        fs::create_dir(&to).unwrap();
        copy_out(&from, &to, 1).unwrap();
        assert_eq!(fs::read_to_string(to.join("sub/a")).unwrap(), "a");
        let mode = fs::metadata(to.join("sub/a")).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o755);
        assert_eq!(
            fs::read_link(to.join("link")).unwrap(),
            Path::new("/etc/passwd")
        );
    }

    #[test]
    fn a_fifo_in_the_output_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("from");
        fs::create_dir(&from).unwrap();
        let fifo = std::ffi::CString::new(from.join("p").to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let to = d.path().join("to");
        fs::create_dir(&to).unwrap();
        let e = copy_out(&from, &to, 1 << 20).unwrap_err();
        assert!(
            matches!(e, SandboxError::OutputEntry { kind: "a FIFO", .. }),
            "{e}"
        );
    }

    #[test]
    fn a_sparse_file_longer_than_the_bound_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("from");
        fs::create_dir(&from).unwrap();
        fs::write(from.join("small"), "12345678").unwrap();
        let f = fs::File::create(from.join("sparse")).unwrap();
        f.set_len(1 << 40).unwrap();
        let to = d.path().join("to");
        fs::create_dir(&to).unwrap();
        let e = copy_out(&from, &to, 1 << 20).unwrap_err();
        assert!(
            matches!(e, SandboxError::OutputTooLarge { ref path, max } if path.ends_with("sparse") && max == 1 << 20),
            "{e}"
        );
        assert!(!to.join("sparse").exists());
    }
}
