//! Writing a package's data tarball into the image root, as dpkg would but without scripts:
//! modes, owners, symlinks and hard links exactly as the package says.
//!
//! Every path is resolved inside the root: a `..` in a package path is refused, and symlinks met
//! on the way (e.g. `/lib -> usr/lib` under merged-/usr) are followed as a chroot would, never
//! out of the root. Must never write outside `root`.

use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use super::AptError;

pub struct Root {
    dir: PathBuf,
}

/// What unpacking one package produced: its paths as dpkg lists them (`/.`, `/usr`, ...).
pub struct Unpacked {
    pub paths: Vec<String>,
    pub skipped: Vec<String>,
}

impl Root {
    pub fn new(dir: &Path) -> Self {
        Root {
            dir: dir.to_path_buf(),
        }
    }

    /// Resolve `rel` (components only, no `..`) to a host path below the root, following
    /// symlinks for every component but the last, clamped to the root.
    pub fn resolve(&self, rel: &[String]) -> io::Result<PathBuf> {
        let mut cur = self.dir.clone();
        let mut hops = 0;
        let mut pending: Vec<String> = rel.iter().rev().cloned().collect();
        while let Some(c) = pending.pop() {
            let last = pending.is_empty();
            match c.as_str() {
                "" | "." => continue,
                ".." => {
                    if cur != self.dir {
                        cur.pop();
                    }
                    continue;
                }
                _ => {}
            }
            let next = cur.join(&c);
            if last {
                return Ok(next);
            }
            match std::fs::symlink_metadata(&next) {
                Ok(m) if m.file_type().is_symlink() => {
                    hops += 1;
                    if hops > 40 {
                        return Err(io::Error::other("too many levels of symbolic links"));
                    }
                    let target = std::fs::read_link(&next)?;
                    if target.is_absolute() {
                        cur = self.dir.clone();
                    }
                    for t in target.components().rev() {
                        match t {
                            Component::Normal(s) => pending.push(s.to_string_lossy().into()),
                            Component::ParentDir => pending.push("..".into()),
                            _ => {}
                        }
                    }
                }
                _ => cur = next,
            }
        }
        Ok(cur)
    }

    /// Unpack one data tarball.
    pub fn unpack(&self, package: &str, data: &mut dyn Read) -> Result<Unpacked, AptError> {
        let mut tar = tar::Archive::new(data);
        let mut out = Unpacked {
            paths: Vec::new(),
            skipped: Vec::new(),
        };
        let bad = |message: String| AptError::InvalidDeb {
            package: package.to_string(),
            message,
        };
        let fail = |path: &Path| {
            let path = path.to_path_buf();
            move |source| AptError::Unpack {
                package: package.to_string(),
                path,
                source,
            }
        };
        for entry in tar.entries().map_err(|e| bad(e.to_string()))? {
            let mut entry = entry.map_err(|e| bad(format!("bad data tarball: {e}")))?;
            let raw = entry.path_bytes().into_owned();
            let rel = components(package, &raw)?;
            let listed = if rel.is_empty() {
                "/.".to_string()
            } else {
                format!("/{}", rel.join("/"))
            };
            if rel.is_empty() {
                out.paths.push(listed);
                continue;
            }
            let h = entry.header();
            let mode = h.mode().map_err(|e| bad(e.to_string()))? & 0o7777;
            let uid = h.uid().map_err(|e| bad(e.to_string()))? as u32;
            let gid = h.gid().map_err(|e| bad(e.to_string()))? as u32;
            let kind = h.entry_type();
            let target = self.resolve(&rel).map_err(fail(Path::new(&listed)))?;
            let existing = std::fs::symlink_metadata(&target).ok();
            match kind {
                tar::EntryType::Directory => {
                    match existing {
                        Some(m) if m.is_dir() => {}
                        // A symlink to a directory stays (merged-/usr: `/lib -> usr/lib`).
                        Some(m) if m.file_type().is_symlink() && target.is_dir() => {
                            out.paths.push(listed);
                            continue;
                        }
                        Some(_) => {
                            std::fs::remove_file(&target).map_err(fail(&target))?;
                            std::fs::create_dir(&target).map_err(fail(&target))?;
                        }
                        None => std::fs::create_dir(&target).map_err(fail(&target))?,
                    }
                    set_owner_mode(&target, uid, gid, mode).map_err(fail(&target))?;
                }
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    remove_non_dir(&target, existing.as_ref()).map_err(fail(&target))?;
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&target)
                        .map_err(fail(&target))?;
                    io::copy(&mut entry, &mut f).map_err(fail(&target))?;
                    drop(f);
                    set_owner_mode(&target, uid, gid, mode).map_err(fail(&target))?;
                }
                tar::EntryType::Symlink => {
                    let link = entry
                        .link_name_bytes()
                        .ok_or_else(|| bad(format!("symlink `{listed}` has no target")))?;
                    let link = PathBuf::from(OsStr::from_bytes(&link));
                    if existing.as_ref().is_some_and(|m| m.is_dir()) {
                        // dpkg keeps a directory where a package ships a symlink.
                        out.skipped.push(listed.clone());
                    } else {
                        remove_non_dir(&target, existing.as_ref()).map_err(fail(&target))?;
                        symlink(&link, &target).map_err(fail(&target))?;
                        std::os::unix::fs::lchown(&target, Some(uid), Some(gid))
                            .map_err(fail(&target))?;
                    }
                }
                tar::EntryType::Link => {
                    let link = entry
                        .link_name_bytes()
                        .ok_or_else(|| bad(format!("hard link `{listed}` has no target")))?;
                    let lrel = components(package, &link)?;
                    let src = self.resolve(&lrel).map_err(fail(Path::new(&listed)))?;
                    remove_non_dir(&target, existing.as_ref()).map_err(fail(&target))?;
                    std::fs::hard_link(&src, &target).map_err(fail(&target))?;
                }
                _ => {
                    out.skipped.push(listed);
                    continue;
                }
            }
            out.paths.push(listed);
        }
        Ok(out)
    }
}

/// Split a package path into components, refusing `..` and anything that is not a plain name.
fn components(package: &str, raw: &[u8]) -> Result<Vec<String>, AptError> {
    let text = String::from_utf8_lossy(raw);
    let mut out = Vec::new();
    for c in text.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(AptError::UnsafePath {
                    package: package.to_string(),
                    path: text.into_owned(),
                })
            }
            c => out.push(c.to_string()),
        }
    }
    Ok(out)
}

fn remove_non_dir(path: &Path, existing: Option<&std::fs::Metadata>) -> io::Result<()> {
    match existing {
        Some(m) if m.is_dir() => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "a directory is in the way",
        )),
        Some(_) => std::fs::remove_file(path),
        None => Ok(()),
    }
}

fn set_owner_mode(path: &Path, uid: u32, gid: u32, mode: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}
