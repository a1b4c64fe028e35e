//! Index a root filesystem tarball in place: record each entry's header and data offset.
//!
//! Compressed tarballs (gzip, zstd, xz) are first decompressed once into `scratch`; plain
//! tarballs are read where they lie. The layer stage later copies data spans by offset, so
//! entries can be written in sorted order without extracting anything.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::paths::{normalise_entry, symlink_stays_inside, PathProblem};
use super::tree::{identity, DataSource, Entry, EntryKind, Tree};
use super::AssembleError;

pub fn index(path: &Path, allow_special: bool, scratch: &Path) -> Result<Tree, AssembleError> {
    let origin = path.display().to_string();
    let tar_err = |source: std::io::Error| AssembleError::Tar {
        path: origin.clone(),
        source,
    };
    let ident = identity(&fs_err::metadata(path).map_err(tar_err)?);
    let plain = decompressed(path, scratch).map_err(tar_err)?;
    let plain = Arc::new(plain);
    let file = fs_err::File::open(plain.as_path()).map_err(tar_err)?;
    let mut archive = tar::Archive::new(BufReader::with_capacity(1 << 16, file));
    let mut tree = Tree::new(origin.clone());
    for entry in archive.entries().map_err(tar_err)? {
        let mut entry = entry.map_err(tar_err)?;
        let attrs = super::xattr::read_tar_entry(&mut entry).map_err(tar_err)?;
        let header = entry.header();
        let raw_path = entry.path().map_err(tar_err)?.into_owned();
        let name = match normalise_entry(&raw_path) {
            Ok(n) => n,
            Err(p) => {
                return Err(problem(&origin, &raw_path.display().to_string(), p));
            }
        };
        if name.is_empty() {
            continue; // "./" itself: the root directory carries no metadata in a layer.
        }
        let mode = header.mode().map_err(tar_err)? & 0o7777;
        let id = |v: u64, what: &'static str| {
            u32::try_from(v).map_err(|_| AssembleError::IdTooLarge {
                origin: origin.clone(),
                entry: name.clone(),
                what,
                value: v,
            })
        };
        let uid = id(header.uid().map_err(tar_err)?, "uid")?;
        let gid = id(header.gid().map_err(tar_err)?, "gid")?;
        let et = header.entry_type();
        let link_target =
            || -> Result<String, AssembleError> {
                let t = entry.link_name().map_err(tar_err)?.ok_or_else(|| {
                    AssembleError::Unsupported {
                        origin: origin.clone(),
                        entry: name.clone(),
                        kind: "link without a target".into(),
                    }
                })?;
                t.to_str()
                    .map(str::to_string)
                    .ok_or_else(|| AssembleError::NotUtf8 {
                        origin: origin.clone(),
                        entry: name.clone(),
                    })
            };
        let special = |label: &'static str| AssembleError::Special {
            origin: origin.clone(),
            entry: name.clone(),
            kind: label,
        };
        let kind = match et {
            tar::EntryType::Directory => EntryKind::Dir,
            tar::EntryType::Regular | tar::EntryType::Continuous => EntryKind::File {
                size: entry.size(),
                data: DataSource::TarSpan {
                    tarball: plain.clone(),
                    offset: entry.raw_file_position(),
                    identity: ident,
                },
            },
            tar::EntryType::Symlink => {
                let target = link_target()?;
                if !symlink_stays_inside(&name, &target) {
                    return Err(AssembleError::Escapes {
                        origin,
                        entry: format!("{name} -> {target}"),
                        why: "symlink target leaves the root",
                    });
                }
                EntryKind::Symlink { target }
            }
            tar::EntryType::Link => {
                let target = link_target()?;
                let target = normalise_entry(Path::new(&target))
                    .map_err(|p| problem(&origin, &format!("{name} => {target}"), p))?;
                EntryKind::Hardlink { target }
            }
            tar::EntryType::Char | tar::EntryType::Block => {
                let label = if et == tar::EntryType::Char {
                    "character device"
                } else {
                    "block device"
                };
                if !allow_special {
                    return Err(special(label));
                }
                let major = header.device_major().map_err(tar_err)?.unwrap_or(0);
                let minor = header.device_minor().map_err(tar_err)?.unwrap_or(0);
                if et == tar::EntryType::Char {
                    EntryKind::CharDevice { major, minor }
                } else {
                    EntryKind::BlockDevice { major, minor }
                }
            }
            tar::EntryType::Fifo => {
                if !allow_special {
                    return Err(special("fifo"));
                }
                EntryKind::Fifo
            }
            tar::EntryType::XGlobalHeader => continue,
            other => {
                return Err(AssembleError::Unsupported {
                    origin,
                    entry: name,
                    kind: format!("{other:?}"),
                })
            }
        };
        if let Some(prev) = tree.get(&name) {
            let was_dir = matches!(prev.kind, EntryKind::Dir);
            if was_dir != matches!(kind, EntryKind::Dir) {
                let other = if was_dir { &kind } else { &prev.kind };
                return Err(AssembleError::DirAndFile {
                    origin,
                    entry: name,
                    kind: super::shape::kind_name(other),
                });
            }
        }
        tree.insert(Entry {
            path: name.clone(),
            kind,
            mode,
            uid,
            gid,
        });
        if !attrs.is_empty() {
            tree.set_xattrs(&name, attrs);
        }
    }
    tree.order_hardlinks();
    Ok(tree)
}

fn problem(origin: &str, entry: &str, p: PathProblem) -> AssembleError {
    match p {
        PathProblem::Absolute => AssembleError::Escapes {
            origin: origin.to_string(),
            entry: entry.to_string(),
            why: "absolute path",
        },
        PathProblem::DotDot => AssembleError::Escapes {
            origin: origin.to_string(),
            entry: entry.to_string(),
            why: "`..` component",
        },
        PathProblem::NotUtf8 => AssembleError::NotUtf8 {
            origin: origin.to_string(),
            entry: entry.to_string(),
        },
    }
}

/// The bytes of the regular file `member` (a normalised path) in the root filesystem tarball
/// at `path` (plain, gzip or zstd), read in one streaming pass without extracting anything;
/// `None` when the tarball has no such regular file (the last entry of that name counts, as
/// in a layer). Longer than `cap` bytes is an error.
pub fn read_member(path: &Path, member: &str, cap: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut magic = [0u8; 6];
    let n = read_up_to(&mut fs_err::File::open(path)?, &mut magic)?;
    let file = BufReader::new(fs_err::File::open(path)?);
    let reader: Box<dyn Read> = if magic[..n].starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else if magic[..n].starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::Decoder::new(file)?)
    } else {
        Box::new(file)
    };
    let mut archive = tar::Archive::new(reader);
    let mut found = None;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let raw = entry.path()?.into_owned();
        if normalise_entry(&raw).ok().as_deref() != Some(member) {
            continue;
        }
        if !entry.header().entry_type().is_file() {
            found = None;
            continue;
        }
        if entry.size() > cap {
            return Err(std::io::Error::other(format!(
                "`{member}` is larger than {cap} bytes"
            )));
        }
        let mut data = Vec::new();
        (&mut entry).take(cap).read_to_end(&mut data)?;
        found = Some(data);
    }
    Ok(found)
}

/// The path of an uncompressed copy of `path`: itself when it is a plain tar.
fn decompressed(path: &Path, scratch: &Path) -> std::io::Result<PathBuf> {
    let mut magic = [0u8; 6];
    let mut f = fs_err::File::open(path)?;
    let n = read_up_to(&mut f, &mut magic)?;
    let magic = &magic[..n];
    let reader: Box<dyn Read> = if magic.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(
            fs_err::File::open(path)?,
        )))
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::Decoder::new(fs_err::File::open(path)?)?)
    } else if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        return Err(std::io::Error::other(
            "xz-compressed tarballs are not supported; use gzip, zstd or plain tar",
        ));
    } else {
        return Ok(path.to_path_buf());
    };
    fs_err::create_dir_all(scratch)?;
    let mut out = tempfile::Builder::new()
        .prefix("rootfs-")
        .suffix(".tar")
        .tempfile_in(scratch)?;
    let mut reader = reader;
    std::io::copy(&mut reader, &mut out)?;
    let (_, p) = out.keep().map_err(|e| e.error)?;
    Ok(p)
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}
