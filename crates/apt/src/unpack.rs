//! Writing a package's data tarball into the image root, as dpkg would but without scripts:
//! modes, owners, symlinks and hard links exactly as the package says.
//!
//! Two ways in: [`unpack`] writes a data tarball and can take its [`Sketch`] on the way;
//! [`replay`] writes a package from its sketch alone, for a package whose component layer is
//! cached: directories, symlinks and the files a metadata step reads as they are, libraries
//! as empty placeholders whose ELF facts go to [`ElfFacts`], everything else left out. Both
//! apply entries through the same code, so paths, owners and overwrites resolve the same way.
//!
//! Every operation goes through [`gpuimg_store::confined::Root`]: a `..` in a package path is
//! refused, symlinks met on the way (e.g. `/lib -> usr/lib` under merged-/usr, or a package's
//! absolute link) resolve inside the root as in a container, and the last component is never
//! written through. Must never write outside the root.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::sketch::{Body, Header, Kind, Sketch, SketchEntry};
use crate::{dpkgdb, fixups, ldcache, AptError};
use gpuimg_elf::SharedObject;
use gpuimg_store::confined::Root;

/// What unpacking one package produced: its paths as dpkg lists them (`/.`, `/usr`, ...),
/// and where the entries it created really are in the root (`usr/bin/ls` for `/bin/ls` under
/// merged-/usr): the package's provenance for the layer split.
#[derive(Default)]
pub struct Unpacked {
    pub paths: Vec<String>,
    pub skipped: Vec<String>,
    pub created: Vec<String>,
    /// Regular files a replay left out (as dpkg lists them): they exist in the package's
    /// cached layer, not in this root.
    pub elided: Vec<String>,
}

/// The ELF facts of the library placeholders a replay wrote, by (device, inode): what
/// `ld.so.cache` would have read from the real files.
pub type ElfFacts = HashMap<(u64, u64), Option<SharedObject>>;

/// Bytes a sketch keeps of one file at most: past the most any metadata step reads (the
/// fix-ups' and a conffile's checksum), so a file too large for them stays too large.
const KEEP_CAP: u64 = if fixups::MAX_READ > dpkgdb::MAX_CONFFILE {
    fixups::MAX_READ
} else {
    dpkgdb::MAX_CONFFILE
} + 1;

/// Unpack one data tarball into `root`.
pub fn unpack(root: &Root, package: &str, data: &mut dyn Read) -> Result<Unpacked, AptError> {
    unpack_sketching(root, package, data, None)
}

/// Taking a sketch while unpacking: where it goes, and the package's conffiles (whose bytes
/// the dpkg database's checksums read).
pub struct Taking<'a> {
    pub sketch: &'a mut Sketch,
    pub conffiles: &'a [String],
}

/// Unpack one data tarball into `root`; with `taking`, also record every entry as
/// [`replay`] needs it.
pub fn unpack_sketching(
    root: &Root,
    package: &str,
    data: &mut dyn Read,
    mut taking: Option<Taking<'_>>,
) -> Result<Unpacked, AptError> {
    let mut tar = tar::Archive::new(data);
    let mut out = Unpacked::default();
    let mut parents = RealParents::new();
    let bad = |message: String| AptError::InvalidDeb {
        package: package.to_string(),
        message,
    };
    for entry in tar.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(format!("bad data tarball: {e}")))?;
        let h = entry.header();
        let kind = kind_of(h.entry_type());
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let listed = listed_path(package, path.as_bytes())?;
        let header = Header {
            mode: h.mode().map_err(|e| bad(e.to_string()))? & 0o7777,
            uid: id(h.uid(), "uid", &listed).map_err(bad)?,
            gid: id(h.gid(), "gid", &listed).map_err(bad)?,
            link: match kind {
                Kind::Symlink | Kind::HardLink => Some(
                    entry
                        .link_name_bytes()
                        .ok_or_else(|| bad(format!("link `{listed}` has no target")))?
                        .into_owned(),
                ),
                _ => None,
            },
            kind,
            path,
        };
        let keep = |listed: &str| {
            taking
                .as_ref()
                .is_some_and(|t| t.conffiles.iter().any(|c| c == listed))
                || fixups::reads(listed)
                || dpkgdb::reads(listed)
        };
        // Without a sketch to take, nothing is read back or held in memory.
        let sketching: Option<&dyn Fn(&str) -> bool> = taking.is_some().then_some(&keep);
        let body = apply(
            root,
            package,
            &header,
            Content::Stream(&mut entry, sketching),
            &mut out,
            &mut parents,
        )?;
        if let Some(t) = taking.as_mut() {
            t.sketch.push(SketchEntry { header, body });
        }
    }
    Ok(out)
}

/// Write a package into `root` from its sketch (see the module doc); library placeholders'
/// facts are added to `facts`. With `write`, only the entries it marks are written (see
/// `needed`); the others are listed for the dpkg database, as if written.
pub fn replay(
    root: &Root,
    package: &str,
    sketch: &Sketch,
    write: Option<&[bool]>,
    facts: &mut ElfFacts,
) -> Result<Unpacked, AptError> {
    let mut out = Unpacked::default();
    let mut parents = RealParents::new();
    for (i, e) in sketch.entries.iter().enumerate() {
        if write.is_some_and(|w| !w.get(i).copied().unwrap_or(true)) {
            // What `apply` records of an entry, without writing it.
            let listed = listed_path(package, e.header.path.as_bytes())?;
            if e.header.kind == Kind::Other {
                out.skipped.push(listed);
                continue;
            }
            if matches!(e.body, Body::Elided) || e.header.kind == Kind::HardLink {
                out.elided.push(listed.clone());
            }
            out.paths
                .push(if listed == "/" { "/.".into() } else { listed });
            continue;
        }
        let content = match &e.body {
            Body::Kept(bytes) => Content::Bytes(bytes),
            Body::Library(so) => Content::Library(so.clone(), facts),
            Body::Elided | Body::None => Content::Elided,
        };
        apply(root, package, &e.header, content, &mut out, &mut parents)?;
    }
    Ok(out)
}

/// The entries of a data tarball held in memory (headers only; nothing is written).
pub fn list(package: &str, data: &[u8]) -> Result<Vec<Header>, AptError> {
    let bad = |message: String| AptError::InvalidDeb {
        package: package.to_string(),
        message,
    };
    let mut tar = tar::Archive::new(data);
    let mut out = Vec::new();
    for entry in tar.entries().map_err(|e| bad(e.to_string()))? {
        let entry = entry.map_err(|e| bad(format!("bad data tarball: {e}")))?;
        let h = entry.header();
        let kind = kind_of(h.entry_type());
        out.push(Header {
            path: String::from_utf8_lossy(&entry.path_bytes()).into_owned(),
            kind,
            mode: 0,
            uid: 0,
            gid: 0,
            link: match kind {
                Kind::Symlink | Kind::HardLink => entry.link_name_bytes().map(|l| l.into_owned()),
                _ => None,
            },
        });
    }
    Ok(out)
}

fn kind_of(t: tar::EntryType) -> Kind {
    match t {
        tar::EntryType::Directory => Kind::Dir,
        tar::EntryType::Regular | tar::EntryType::Continuous => Kind::File,
        tar::EntryType::Symlink => Kind::Symlink,
        tar::EntryType::Link => Kind::HardLink,
        _ => Kind::Other,
    }
}

/// The absolute paths the maintainer scripts name (every word that starts with `/`).
pub fn script_paths(
    postinsts: &std::collections::BTreeMap<String, String>,
) -> std::collections::HashSet<&str> {
    postinsts
        .values()
        .flat_map(|s| s.split(|c: char| c.is_whitespace() || "'\";|&()`=".contains(c)))
        .filter(|w| w.starts_with('/'))
        .collect()
}

/// Empty files where a replay left out a file that a maintainer script names (an
/// `update-alternatives` target or link, a `setcap` path): the fix-ups look at whether these
/// exist, as they would in a full unpack. Must run before the fix-ups.
pub fn placeholders_for_scripts(
    root: &Root,
    elided: &[String],
    postinsts: &std::collections::BTreeMap<String, String>,
) -> Result<(), AptError> {
    if elided.is_empty() {
        return Ok(());
    }
    let words = script_paths(postinsts);
    for listed in elided.iter().filter(|l| words.contains(l.as_str())) {
        let p = Path::new(listed);
        if !root.exists(p) {
            root.create_new(p, 0o644)
                .map_err(AptError::staged("create a placeholder for", listed))?;
        }
    }
    Ok(())
}

/// Where a regular file's bytes come from.
enum Content<'a> {
    /// The data tarball: written whole. When a sketch is being taken (`Some(keep)`), what it
    /// keeps is read through memory and libraries' ELF facts are read back.
    Stream(&'a mut dyn Read, Option<&'a dyn Fn(&str) -> bool>),
    /// A sketch's kept bytes.
    Bytes(&'a [u8]),
    /// A library left out: an empty placeholder, its facts recorded.
    Library(Option<SharedObject>, &'a mut ElfFacts),
    /// Left out.
    Elided,
}

/// Where each directory named so far really is (a listed parent → its real path), so that an
/// entry's real path costs one walk per directory, not one per entry. Forgotten whenever a
/// symlink appears or goes, which can move what a listed path resolves to.
type RealParents = std::collections::HashMap<String, PathBuf>;

/// Apply one entry; returns what a sketch keeps of it.
fn apply(
    root: &Root,
    package: &str,
    h: &Header,
    content: Content<'_>,
    out: &mut Unpacked,
    parents: &mut RealParents,
) -> Result<Body, AptError> {
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
    let listed = listed_path(package, h.path.as_bytes())?;
    if listed == "/" {
        out.paths.push("/.".to_string());
        return Ok(Body::None);
    }
    let target = Path::new(&listed);
    let (mode, uid, gid) = (h.mode, h.uid, h.gid);
    let mut body = Body::None;
    let existing = root.symlink_metadata(target).map_err(fail(&listed))?;
    // Whatever non-directory lies where the entry goes is replaced (nothing else writes the
    // root meanwhile: where nothing lay, there is nothing to remove).
    let clear = || match existing {
        Some(_) => root.remove_non_dir(target).map_err(fail(&listed)),
        None => Ok(()),
    };
    match h.kind {
        Kind::Dir => {
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
                    return Ok(body);
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
        Kind::File => match content {
            Content::Stream(data, keep) => {
                clear()?;
                let mut f = root.create_new(target, 0o600).map_err(fail(&listed))?;
                if keep.is_some_and(|k| k(&listed)) {
                    let mut kept = Vec::new();
                    data.take(KEEP_CAP)
                        .read_to_end(&mut kept)
                        .map_err(fail(&listed))?;
                    io::Write::write_all(&mut f, &kept).map_err(fail(&listed))?;
                    // Past what the metadata steps read they fail on it, and so does a replay.
                    io::copy(data, &mut f).map_err(fail(&listed))?;
                    body = Body::Kept(kept);
                } else {
                    io::copy(data, &mut f).map_err(fail(&listed))?;
                    body = Body::Elided;
                }
                Root::set_owner_mode_fd(&f, uid, gid, mode).map_err(fail(&listed))?;
                drop(f);
                if keep.is_some() && matches!(body, Body::Elided) && ldcache::is_candidate(&listed)
                {
                    body = Body::Library(ldcache::facts(root, target));
                }
            }
            Content::Bytes(bytes) => {
                clear()?;
                let mut f = root.create_new(target, 0o600).map_err(fail(&listed))?;
                io::Write::write_all(&mut f, bytes).map_err(fail(&listed))?;
                Root::set_owner_mode_fd(&f, uid, gid, mode).map_err(fail(&listed))?;
            }
            Content::Library(so, facts) => {
                clear()?;
                let f = root.create_new(target, 0o600).map_err(fail(&listed))?;
                Root::set_owner_mode_fd(&f, uid, gid, mode).map_err(fail(&listed))?;
                let id = Root::file_id(&f).map_err(fail(&listed))?;
                facts.insert(id, so);
            }
            Content::Elided => {
                // What was here is replaced by a file the root does not hold.
                if existing.is_some() {
                    root.remove_non_dir(target).map_err(fail(&listed))?;
                }
                out.elided.push(listed.clone());
            }
        },
        Kind::Symlink => {
            let link = PathBuf::from(OsStr::from_bytes(link_of(h, &listed, bad)?));
            if existing.is_some_and(|m| m.is_directory()) {
                // dpkg keeps a directory where a package ships a symlink.
                out.skipped.push(listed.clone());
                out.paths.push(listed);
                return Ok(body);
            }
            clear()?;
            root.symlink(&link, target).map_err(fail(&listed))?;
            root.set_owner(target, uid, gid).map_err(fail(&listed))?;
        }
        Kind::HardLink => {
            let src = listed_path(package, link_of(h, &listed, bad)?)?;
            match root.symlink_metadata(Path::new(&src)).map_err(fail(&src))? {
                Some(m) if m.is_regular() => {
                    clear()?;
                    root.hard_link(Path::new(&src), target)
                        .map_err(fail(&listed))?;
                }
                // A replay left the file it links to out: so is the link.
                _ if matches!(content, Content::Elided) => {
                    if existing.is_some() {
                        root.remove_non_dir(target).map_err(fail(&listed))?;
                    }
                    out.elided.push(listed.clone());
                }
                _ => {
                    return Err(bad(format!(
                        "hard link `{listed}` points at `{src}`, which is not a file unpacked before it"
                    )))
                }
            }
        }
        Kind::Other => {
            out.skipped.push(listed);
            return Ok(body);
        }
    }
    if h.kind == Kind::Symlink || existing.is_some_and(|m| m.is_link() || !m.is_directory()) {
        parents.clear();
    }
    let real = match listed
        .rsplit_once('/')
        .and_then(|(p, n)| Some((parents.get(p)?, n)))
    {
        Some((parent, name)) => parent.join(name),
        None => {
            let real = root.real_path(target).map_err(fail(&listed))?;
            if let Some((p, _)) = listed.rsplit_once('/') {
                parents.insert(
                    p.to_string(),
                    real.parent().map(Path::to_path_buf).unwrap_or_default(),
                );
            }
            real
        }
    };
    out.created.push(real.to_string_lossy().into_owned());
    out.paths.push(listed);
    Ok(body)
}

fn link_of<'h>(
    h: &'h Header,
    listed: &str,
    bad: impl Fn(String) -> AptError,
) -> Result<&'h [u8], AptError> {
    h.link
        .as_deref()
        .ok_or_else(|| bad(format!("link `{listed}` has no target")))
}

/// A tar owner id as the `u32` the image stores; never truncated.
fn id(v: io::Result<u64>, what: &str, listed: &str) -> Result<u32, String> {
    let v = v.map_err(|e| e.to_string())?;
    u32::try_from(v).map_err(|_| format!("`{listed}` has {what} {v}, which does not fit 32 bits"))
}

/// A package path as dpkg lists it (`/usr/bin/ls`; `/` for the root), refusing `..`.
pub fn listed_path(package: &str, raw: &[u8]) -> Result<String, AptError> {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::new();
    for c in text.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(AptError::UnsafePath {
                    package: package.to_string(),
                    path: text.into_owned(),
                })
            }
            c => {
                out.push('/');
                out.push_str(c);
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}
