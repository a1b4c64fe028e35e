//! Paths of a node read under a root directory (`gpuimg-selftest --root DIR`, `/` on the node
//! itself), as the node resolves them: symbolic links followed one component at a time, an
//! absolute target taken from the root, `..` never above it, at most `MAX_LINKS` links; and
//! bounded reads of what they name (a regular file opened without blocking, at most a given
//! number of bytes).
//!
//! The one place the host checks touch the file system. Never writes, never follows a link out
//! of the root, never opens what is not a regular file or a directory; every failure is an
//! `InRootError` naming the path, never a panic.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Symbolic links followed at most in one resolution (the kernel's own limit).
const MAX_LINKS: usize = 40;
/// Entries of one directory read at most.
const MAX_ENTRIES: usize = 10_000;

/// Why a path could not be resolved or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InRootError {
    #[error("`{0}` does not exist")]
    Missing(String),
    #[error("`{path}` could not be read: {message}")]
    Io { path: String, message: String },
    #[error("`{0}` has more than {MAX_LINKS} symbolic links on its way")]
    Loop(String),
    #[error("`{0}` is not a regular file")]
    NotFile(String),
    #[error("`{path}` is larger than {limit} bytes")]
    TooLarge { path: String, limit: u64 },
}

/// A root directory the node's paths are read under.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
}

impl Root {
    pub fn new(dir: &Path) -> Root {
        Root {
            dir: dir.to_path_buf(),
        }
    }

    /// Where the node's absolute `path` lies on this machine (the root joined with it).
    pub fn host_path(&self, path: &str) -> PathBuf {
        self.dir.join(path.trim_start_matches('/'))
    }

    /// How reports show the node's `path`: the path this machine read.
    pub fn show(&self, path: &str) -> String {
        self.host_path(path).display().to_string()
    }

    fn io(&self, path: &str, e: &std::io::Error) -> InRootError {
        if e.kind() == std::io::ErrorKind::NotFound {
            InRootError::Missing(self.show(path))
        } else {
            InRootError::Io {
                path: self.show(path),
                message: e.to_string(),
            }
        }
    }

    /// The node's absolute `path` with every symbolic link on its way followed under the root:
    /// the path (absolute, in the node's terms) of what it names, which exists.
    pub fn resolve(&self, path: &str) -> Result<String, InRootError> {
        let mut done: Vec<String> = Vec::new();
        let mut todo: Vec<String> = parts(path).rev().collect();
        let mut links = 0;
        while let Some(part) = todo.pop() {
            match part.as_str() {
                "." => continue,
                ".." => {
                    done.pop();
                    continue;
                }
                _ => {}
            }
            done.push(part);
            let here = format!("/{}", done.join("/"));
            let meta =
                std::fs::symlink_metadata(self.host_path(&here)).map_err(|e| self.io(&here, &e))?;
            if !meta.file_type().is_symlink() {
                continue;
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(InRootError::Loop(self.show(path)));
            }
            let target =
                std::fs::read_link(self.host_path(&here)).map_err(|e| self.io(&here, &e))?;
            let target = target.to_string_lossy().into_owned();
            done.pop();
            if target.starts_with('/') {
                done.clear();
            }
            todo.extend(parts(&target).rev());
        }
        Ok(format!("/{}", done.join("/")))
    }

    /// The bytes of the regular file the node's `path` names, at most `limit` of them.
    pub fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>, InRootError> {
        let real = self.resolve(path)?;
        let host = self.host_path(&real);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&host)
            .map_err(|e| self.io(&real, &e))?;
        let meta = file.metadata().map_err(|e| self.io(&real, &e))?;
        if !meta.is_file() {
            return Err(InRootError::NotFile(self.show(&real)));
        }
        let mut bytes = Vec::new();
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| self.io(&real, &e))?;
        if bytes.len() as u64 > limit {
            return Err(InRootError::TooLarge {
                path: self.show(&real),
                limit,
            });
        }
        Ok(bytes)
    }

    /// The text of the small file the node's `path` names (a procfs or sysfs file), trimmed.
    pub fn read_text(&self, path: &str) -> Result<String, InRootError> {
        let bytes = self.read(path, 64 << 10)?;
        Ok(String::from_utf8_lossy(&bytes).trim().to_string())
    }

    /// The names in the directory the node's `path` names, each with its size when it is a
    /// regular file (followed under the root), sorted; at most `MAX_ENTRIES`.
    pub fn list(&self, path: &str) -> Result<Vec<(String, Option<u64>)>, InRootError> {
        let real = self.resolve(path)?;
        let rd = std::fs::read_dir(self.host_path(&real)).map_err(|e| self.io(&real, &e))?;
        let mut out = Vec::new();
        for entry in rd.take(MAX_ENTRIES) {
            let entry = entry.map_err(|e| self.io(&real, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let size = self
                .resolve(&format!("{}/{name}", real.trim_end_matches('/')))
                .ok()
                .and_then(|p| std::fs::symlink_metadata(self.host_path(&p)).ok())
                .filter(|m| m.is_file())
                .map(|m| m.len());
            out.push((name, size));
        }
        out.sort();
        Ok(out)
    }
}

/// The non-empty components of a path.
fn parts(path: &str) -> impl DoubleEndedIterator<Item = String> + '_ {
    path.split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, Root) {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("usr/lib/x86_64-linux-gnu/nvidia/current")).unwrap();
        std::fs::create_dir_all(r.join("etc/alternatives")).unwrap();
        symlink("usr/lib", r.join("lib")).unwrap();
        std::fs::write(
            r.join("usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.309.01"),
            b"elf",
        )
        .unwrap();
        symlink(
            "libcuda.so.535.309.01",
            r.join("usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1"),
        )
        .unwrap();
        symlink(
            "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1",
            r.join("etc/alternatives/libcuda.so.1"),
        )
        .unwrap();
        symlink(
            "/etc/alternatives/libcuda.so.1",
            r.join("usr/lib/x86_64-linux-gnu/libcuda.so.1"),
        )
        .unwrap();
        symlink("../../../../..", r.join("usr/lib/x86_64-linux-gnu/up")).unwrap();
        symlink("loop", r.join("etc/loop")).unwrap();
        let fifo = std::ffi::CString::new(r.join("etc/fifo").to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path the test owns.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let root = Root::new(r);
        (d, root)
    }

    #[test]
    fn links_are_followed_under_the_root_as_the_node_would() {
        let (_d, root) = tree();
        assert_eq!(
            root.resolve("/lib/x86_64-linux-gnu/libcuda.so.1").unwrap(),
            "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.309.01"
        );
        assert_eq!(
            root.read("/usr/lib/x86_64-linux-gnu/libcuda.so.1", 3)
                .unwrap(),
            b"elf"
        );
        // `..` stops at the root: a link that climbs lands on the root's own `/etc`.
        assert_eq!(
            root.resolve("/usr/lib/x86_64-linux-gnu/up/etc").unwrap(),
            "/etc"
        );
    }

    #[test]
    fn what_cannot_be_read_is_named() {
        let (_d, root) = tree();
        let shown = |p: &str| root.show(p);
        for (path, want) in [
            ("/etc/loop", InRootError::Loop(shown("/etc/loop"))),
            ("/etc/none", InRootError::Missing(shown("/etc/none"))),
            ("/etc", InRootError::NotFile(shown("/etc"))),
            // Opened without blocking, then refused: nobody writes to it.
            ("/etc/fifo", InRootError::NotFile(shown("/etc/fifo"))),
        ] {
            assert_eq!(root.read(path, 10).unwrap_err(), want, "{path}");
        }
        assert_eq!(
            root.read("/lib/x86_64-linux-gnu/libcuda.so.1", 2)
                .unwrap_err()
                .to_string(),
            format!(
                "`{}` is larger than 2 bytes",
                shown("/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.309.01")
            )
        );
        let names: Vec<String> = root
            .list("/lib/x86_64-linux-gnu/nvidia/current")
            .unwrap()
            .into_iter()
            .map(|(n, s)| format!("{n}:{s:?}"))
            .collect();
        assert_eq!(
            names,
            ["libcuda.so.1:Some(3)", "libcuda.so.535.309.01:Some(3)"]
        );
    }
}
