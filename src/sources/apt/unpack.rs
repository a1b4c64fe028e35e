//! Writing a package's data tarball into the image root, as dpkg would but without scripts:
//! modes, owners, symlinks and hard links exactly as the package says.
//!
//! Every operation goes through [`crate::confined::Root`]: a `..` in a package path is
//! refused, symlinks met on the way (e.g. `/lib -> usr/lib` under merged-/usr, or a package's
//! absolute link) resolve inside the root as in a container, and the last component is never
//! written through. Must never write outside the root.

use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::AptError;
use crate::confined::Root;

/// What unpacking one package produced: its paths as dpkg lists them (`/.`, `/usr`, ...),
/// and where the entries it created really are in the root (`usr/bin/ls` for `/bin/ls` under
/// merged-/usr): the package's provenance for the layer split.
pub struct Unpacked {
    pub paths: Vec<String>,
    pub skipped: Vec<String>,
    pub created: Vec<String>,
}

/// Unpack one data tarball into `root`.
pub fn unpack(root: &Root, package: &str, data: &mut dyn Read) -> Result<Unpacked, AptError> {
    let mut tar = tar::Archive::new(data);
    let mut out = Unpacked {
        paths: Vec::new(),
        skipped: Vec::new(),
        created: Vec::new(),
    };
    let bad = |message: String| AptError::InvalidDeb {
        package: package.to_string(),
        message,
    };
    let fail = |path: &str| {
        let path = PathBuf::from(path);
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
        if rel.is_empty() {
            out.paths.push("/.".to_string());
            continue;
        }
        let listed = format!("/{}", rel.join("/"));
        let target = Path::new(&listed);
        let h = entry.header();
        let mode = h.mode().map_err(|e| bad(e.to_string()))? & 0o7777;
        let uid = id(h.uid(), "uid", &listed).map_err(bad)?;
        let gid = id(h.gid(), "gid", &listed).map_err(bad)?;
        let kind = h.entry_type();
        let existing = root.symlink_metadata(target).map_err(fail(&listed))?;
        match kind {
            tar::EntryType::Directory => {
                match existing {
                    Some(m) if m.is_directory() => {}
                    // A symlink to a directory stays (merged-/usr: `/lib -> usr/lib`).
                    Some(m)
                        if m.is_link()
                            && root
                                .metadata(target)
                                .map_err(fail(&listed))?
                                .is_some_and(|t| t.is_directory()) =>
                    {
                        out.paths.push(listed);
                        continue;
                    }
                    Some(_) => {
                        root.remove_file(target).map_err(fail(&listed))?;
                        root.create_dir(target, 0o700).map_err(fail(&listed))?;
                    }
                    None => root.create_dir(target, 0o700).map_err(fail(&listed))?,
                }
                root.set_owner(target, uid, gid).map_err(fail(&listed))?;
                root.set_mode(target, mode).map_err(fail(&listed))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                root.remove_non_dir(target).map_err(fail(&listed))?;
                let mut f = root.create_new(target, 0o600).map_err(fail(&listed))?;
                io::copy(&mut entry, &mut f).map_err(fail(&listed))?;
                Root::set_owner_mode_fd(&f, uid, gid, mode).map_err(fail(&listed))?;
            }
            tar::EntryType::Symlink => {
                let link = entry
                    .link_name_bytes()
                    .ok_or_else(|| bad(format!("symlink `{listed}` has no target")))?;
                let link = PathBuf::from(OsStr::from_bytes(&link));
                if existing.is_some_and(|m| m.is_directory()) {
                    // dpkg keeps a directory where a package ships a symlink.
                    out.skipped.push(listed.clone());
                } else {
                    root.remove_non_dir(target).map_err(fail(&listed))?;
                    root.symlink(&link, target).map_err(fail(&listed))?;
                    root.set_owner(target, uid, gid).map_err(fail(&listed))?;
                }
            }
            tar::EntryType::Link => {
                let link = entry
                    .link_name_bytes()
                    .ok_or_else(|| bad(format!("hard link `{listed}` has no target")))?;
                let src = format!("/{}", components(package, &link)?.join("/"));
                match root.symlink_metadata(Path::new(&src)).map_err(fail(&src))? {
                    Some(m) if m.is_regular() => {}
                    _ => {
                        return Err(bad(format!(
                            "hard link `{listed}` points at `{src}`, which is not a file unpacked before it"
                        )))
                    }
                }
                root.remove_non_dir(target).map_err(fail(&listed))?;
                root.hard_link(Path::new(&src), target)
                    .map_err(fail(&listed))?;
            }
            _ => {
                out.skipped.push(listed);
                continue;
            }
        }
        let mine = match kind {
            // Every package that ships a directory owns it (the split picks one).
            tar::EntryType::Directory => true,
            tar::EntryType::Symlink => out.skipped.last().is_none_or(|s| *s != listed),
            _ => true,
        };
        if mine {
            let real = root.real_path(target).map_err(fail(&listed))?;
            out.created.push(real.to_string_lossy().into_owned());
        }
        out.paths.push(listed);
    }
    Ok(out)
}

/// A tar owner id as the `u32` the image stores; never truncated.
fn id(v: io::Result<u64>, what: &str, listed: &str) -> Result<u32, String> {
    let v = v.map_err(|e| e.to_string())?;
    u32::try_from(v).map_err(|_| format!("`{listed}` has {what} {v}, which does not fit 32 bits"))
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
