//! Where `inspect` reads an image from: an OCI layout directory, or an oci-archive read in
//! place, never extracted.
//!
//! An archive's tar is indexed once (seeking over the data): the name, data offset and size of
//! each regular entry that a layout holds (`oci-layout`, `index.json`, `blobs/<alg>/<hex>`,
//! with or without a leading `./`). Each file is then read at its offset, never past its size,
//! so nothing is written anywhere and a hostile archive can name no path outside it. A link,
//! device or other non-file under one of those names, the same name twice, an entry running
//! past the end of the file, or more than [`MAX_ENTRIES`] entries refuse the archive. JSON files are read up to [`MAX_JSON`] bytes.

use std::collections::BTreeMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::InspectError;

/// Bytes read from one JSON file (index, manifest, config) or `oci-layout`.
pub const MAX_JSON: u64 = 16 << 20;
/// Tar entries an archive may have (a layout holds a few per layer).
pub const MAX_ENTRIES: usize = 100_000;

/// An image on disk to inspect.
#[derive(Debug)]
pub enum Image {
    /// A layout directory.
    Layout(PathBuf),
    /// An oci-archive: entry name → (data offset, size).
    Archive {
        file: PathBuf,
        entries: BTreeMap<String, (u64, u64)>,
    },
}

impl Image {
    /// The layout directory at `dir` (it must hold `oci-layout`).
    pub fn layout(dir: &Path) -> Result<Image, InspectError> {
        let shown = dir.display().to_string();
        match std::fs::metadata(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(InspectError::Missing(shown))
            }
            Ok(m) if m.is_file() => return Err(InspectError::FileNotLayout(shown)),
            _ => {}
        }
        if !dir.join("oci-layout").is_file() {
            return Err(InspectError::NotLayout(shown));
        }
        Ok(Image::Layout(dir.to_path_buf()))
    }

    /// The oci-archive at `file`, indexed (it must hold `oci-layout`).
    pub fn archive(file: &Path) -> Result<Image, InspectError> {
        let shown = file.display().to_string();
        let read_err = |source| InspectError::Read {
            path: shown.clone(),
            source,
        };
        if file.is_dir() {
            return Err(InspectError::NotArchive {
                path: shown,
                reason: "it is a directory (`oci:DIR` names a layout directory)".into(),
            });
        }
        // Only a regular file on a real file system (a FIFO would block, a device never end).
        let f = regular(file).map_err(read_err)?;
        let entries = index(f).map_err(|reason| InspectError::NotArchive {
            path: shown.clone(),
            reason,
        })?;
        if !entries.contains_key("oci-layout") {
            return Err(InspectError::NotArchive {
                path: shown,
                reason: "it has no `oci-layout` entry".into(),
            });
        }
        Ok(Image::Archive {
            file: file.to_path_buf(),
            entries,
        })
    }

    /// How a file of the image is named in messages: its path, or `FILE!NAME` in an archive.
    pub fn shown(&self, name: &str) -> String {
        match self {
            Image::Layout(dir) => dir.join(name).display().to_string(),
            Image::Archive { file, .. } => format!("{}!{name}", file.display()),
        }
    }

    /// The image itself in messages.
    pub fn location(&self) -> String {
        match self {
            Image::Layout(dir) => dir.display().to_string(),
            Image::Archive { file, .. } => file.display().to_string(),
        }
    }

    /// Open the file `name` (`index.json`, `blobs/sha256/<hex>`) for reading.
    pub fn open(&self, name: &str) -> Result<Box<dyn Read>, InspectError> {
        let read_err = |source| InspectError::Read {
            path: self.shown(name),
            source,
        };
        match self {
            Image::Layout(dir) => {
                let f = regular(&dir.join(name)).map_err(read_err)?;
                Ok(Box::new(f))
            }
            Image::Archive { file, entries } => {
                let Some(&(offset, size)) = entries.get(name) else {
                    return Err(read_err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "the archive has no such entry",
                    )));
                };
                let mut f = regular(file).map_err(read_err)?;
                f.seek(SeekFrom::Start(offset)).map_err(read_err)?;
                Ok(Box::new(f.take(size)))
            }
        }
    }

    /// Where the file `name` lies: the file holding it, its offset there and its size.
    pub fn locate(&self, name: &str) -> Result<(PathBuf, u64, u64), InspectError> {
        let read_err = |source| InspectError::Read {
            path: self.shown(name),
            source,
        };
        match self {
            Image::Layout(dir) => {
                let p = dir.join(name);
                let meta = std::fs::metadata(&p).map_err(read_err)?;
                if !meta.is_file() {
                    return Err(read_err(io::Error::other("not a regular file")));
                }
                Ok((p, 0, meta.len()))
            }
            Image::Archive { file, entries } => match entries.get(name) {
                Some(&(offset, size)) => Ok((file.clone(), offset, size)),
                None => Err(read_err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "the archive has no such entry",
                ))),
            },
        }
    }

    /// The whole of the file `name`, refused past [`MAX_JSON`] bytes.
    pub fn read_small(&self, name: &str) -> Result<Vec<u8>, InspectError> {
        let mut bytes = Vec::new();
        self.open(name)?
            .take(MAX_JSON + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| InspectError::Read {
                path: self.shown(name),
                source,
            })?;
        if bytes.len() as u64 > MAX_JSON {
            return Err(InspectError::TooLarge {
                path: self.shown(name),
                cap: MAX_JSON,
            });
        }
        Ok(bytes)
    }
}

/// The layout files of the tar `f`: name → (data offset, size); a reason when it is refused.
fn index(f: std::fs::File) -> Result<BTreeMap<String, (u64, u64)>, String> {
    let len = f
        .metadata()
        .map_err(|e| format!("its size cannot be read: {e}"))?
        .len();
    let mut archive = tar::Archive::new(f);
    let mut out = BTreeMap::new();
    let entries = archive
        .entries_with_seek()
        .map_err(|e| format!("it is not a readable tar file: {e}"))?;
    for (n, entry) in entries.enumerate() {
        if n >= MAX_ENTRIES {
            return Err(format!("it has more than {MAX_ENTRIES} entries"));
        }
        let entry = entry.map_err(|e| format!("it is not a readable tar file: {e}"))?;
        let raw = entry.path_bytes();
        let raw = String::from_utf8_lossy(&raw);
        let name = raw.strip_prefix("./").unwrap_or(&raw).to_string();
        if !is_layout_file(&name) {
            continue;
        }
        let kind = entry.header().entry_type();
        if !kind.is_file() {
            return Err(format!(
                "its entry `{}` is a {}, not a plain file",
                name.escape_debug(),
                describe(kind)
            ));
        }
        let place = (entry.raw_file_position(), entry.size());
        if place.0.saturating_add(place.1) > len {
            return Err(format!(
                "its entry `{}` runs past the end of the file (the archive is truncated)",
                name.escape_debug()
            ));
        }
        if out.insert(name.clone(), place).is_some() {
            return Err(format!("its entry `{}` appears twice", name.escape_debug()));
        }
    }
    Ok(out)
}

/// `oci-layout`, `index.json` or `blobs/<alg>/<hex>` (one level, no `.` or `..`).
fn is_layout_file(name: &str) -> bool {
    if name == "oci-layout" || name == "index.json" {
        return true;
    }
    let mut parts = name.split('/');
    let (Some("blobs"), Some(alg), Some(hex), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
    word(alg) && word(hex)
}

fn describe(kind: tar::EntryType) -> &'static str {
    match kind {
        tar::EntryType::Symlink => "symbolic link",
        tar::EntryType::Link => "hard link",
        tar::EntryType::Directory => "directory",
        tar::EntryType::Char | tar::EntryType::Block => "device",
        tar::EntryType::Fifo => "FIFO",
        tar::EntryType::GNUSparse => "sparse file",
        _ => "special entry",
    }
}

/// `path` opened when it is a regular file on a real file system; the refusal as an I/O error
/// (`InspectError::Read` names the path).
fn regular(path: &Path) -> io::Result<std::fs::File> {
    gpuimg_store::user_file::open_regular(path)
        .map_err(gpuimg_store::user_file::UserFileError::into_io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_layout_names_are_indexed() {
        for ok in ["oci-layout", "index.json", "blobs/sha256/ab12"] {
            assert!(is_layout_file(ok), "{ok}");
        }
        for no in [
            "",
            "blobs",
            "blobs/",
            "blobs/sha256",
            "blobs/sha256/",
            "blobs/sha256/../../etc/passwd",
            "blobs/sha256/a/b",
            "blobs/../x",
            "/index.json",
            "x/index.json",
            "blobs/sha256/ab.cd",
        ] {
            assert!(!is_layout_file(no), "{no}");
        }
    }
}
