//! What already lies at an output path, and whether gpuimg may replace it.
//!
//! Replaceable without `--force`: nothing, an empty directory, an OCI layout made of exactly
//! `oci-layout`, `index.json` (naming only the tag being rebuilt) and `blobs/sha256/<hex>`,
//! or (for `oci-archive:`) a tar file holding exactly such a layout (for `docker-archive:`,
//! the blobs with `manifest.json` tagging only the tag being rebuilt and `repositories`).
//! Everything else is
//! refused; `--force` replaces directories, files and symlinks but never devices, FIFOs or
//! sockets. Reads only; never writes.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::image::ANN_REF_NAME;
use crate::reference::Tag;

/// How much of an existing `index.json` or `oci-layout` is read before giving up.
const MAX_JSON: u64 = 16 << 20;

/// Which existing contents may be replaced.
#[derive(Debug, Clone, Copy)]
pub enum Replace<'a> {
    /// Only a layout (or archive of one) that names no tag but this one.
    IfOurs(&'a Tag),
    /// Anything but a device, FIFO or socket (`--force`).
    Force,
}

/// What is at the target path now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    Nothing,
    Dir,
    /// A regular file or a symbolic link (the link itself, never what it points to).
    File,
}

/// Why an existing entry may not be replaced.
#[derive(Debug)]
pub enum Refusal {
    /// Replaceable with `--force`.
    NotOurs(String),
    /// Never replaced.
    Special(&'static str),
    /// The path cannot be looked at (e.g. a parent is a file): `--force` would not help.
    Io(std::io::Error),
}

/// Check the layout directory target `dir`.
pub fn check_layout_dir(dir: &Path, replace: Replace) -> Result<Existing, Refusal> {
    let existing = kind(dir)?;
    let tag = match replace {
        Replace::Force => return Ok(existing),
        Replace::IfOurs(tag) => tag,
    };
    match existing {
        Existing::Nothing => Ok(Existing::Nothing),
        Existing::File if is_symlink(dir) => Err(Refusal::NotOurs("it is a symbolic link".into())),
        Existing::File => Err(Refusal::NotOurs(
            "it is a file, not an OCI layout directory".into(),
        )),
        Existing::Dir => {
            dir_listing(dir)
                .and_then(|l| l.check(tag))
                .map_err(Refusal::NotOurs)?;
            Ok(Existing::Dir)
        }
    }
}

/// Check the archive target `file` (`docker`: a docker-archive, whose `manifest.json` and
/// `repositories` are ours too).
pub fn check_archive_file(
    file: &Path,
    replace: Replace,
    docker: bool,
) -> Result<Existing, Refusal> {
    let existing = kind(file)?;
    let tag = match replace {
        Replace::Force => return Ok(existing),
        Replace::IfOurs(tag) => tag,
    };
    match existing {
        Existing::Nothing => Ok(Existing::Nothing),
        Existing::Dir => Err(Refusal::NotOurs(
            "it is a directory, and an archive is a file".into(),
        )),
        Existing::File if is_symlink(file) => Err(Refusal::NotOurs("it is a symbolic link".into())),
        Existing::File => {
            tar_listing(file)
                .and_then(|l| {
                    if docker {
                        l.check_docker(tag)
                    } else {
                        l.check(tag)
                    }
                })
                .map_err(Refusal::NotOurs)?;
            Ok(Existing::File)
        }
    }
}

fn kind(path: &Path) -> Result<Existing, Refusal> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Existing::Nothing),
        Err(e) => return Err(Refusal::Io(e)),
    };
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        Ok(Existing::Dir)
    } else if t.is_file() || t.is_symlink() {
        Ok(Existing::File)
    } else if t.is_fifo() {
        Err(Refusal::Special("FIFO"))
    } else if t.is_socket() {
        Err(Refusal::Special("socket"))
    } else {
        Err(Refusal::Special("device"))
    }
}

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// The entries of a layout (directory or tar), relative, with what `oci-layout` and
/// `index.json` hold.
#[derive(Default)]
struct Listing {
    /// Paths other than the two JSON files, `/`-separated, directories ending in `/`.
    entries: Vec<String>,
    oci_layout: Option<Vec<u8>>,
    index: Option<Vec<u8>>,
    /// A docker-archive's `manifest.json` (its `repositories` is in `entries`).
    docker_manifest: Option<Vec<u8>>,
}

impl Listing {
    /// A docker-archive of ours: blobs, `repositories`, and a `manifest.json` whose every
    /// image is tagged `…:TAG` with this tag only.
    fn check_docker(mut self, tag: &Tag) -> Result<(), String> {
        let Some(manifest) = self.docker_manifest.take() else {
            return Err("it has no `manifest.json`, so it is not a docker-archive".into());
        };
        if self.oci_layout.is_some() || self.index.is_some() {
            return Err("it holds an OCI layout, not a docker-archive".into());
        }
        self.entries.retain(|e| e != "repositories");
        let v: serde_json::Value = serde_json::from_slice(&manifest)
            .map_err(|_| "its `manifest.json` is not valid JSON".to_string())?;
        let Some(images) = v.as_array() else {
            return Err("its `manifest.json` is not a list".into());
        };
        for img in images {
            let tags = img["RepoTags"].as_array().cloned().unwrap_or_default();
            if tags.is_empty() {
                return Err(format!(
                    "it also holds an untagged image, which rebuilding `{tag}` would delete"
                ));
            }
            for t in tags {
                let t = t.as_str().unwrap_or_default();
                if t.rsplit_once(':').map(|(_, t)| t) != Some(tag.as_str()) {
                    return Err(format!(
                        "it also holds the image tagged `{}`, which rebuilding `{tag}` would delete",
                        t.escape_debug()
                    ));
                }
            }
        }
        self.check_blobs()
    }

    /// Every entry but the JSON files is `blobs/`, `blobs/sha256/` or a blob.
    fn check_blobs(&self) -> Result<(), String> {
        for e in &self.entries {
            let ok = match e.as_str() {
                "blobs/" | "blobs/sha256/" => true,
                other => other
                    .strip_prefix("blobs/sha256/")
                    .is_some_and(|h| h.len() == 64 && h.bytes().all(is_lower_hex)),
            };
            if !ok {
                return Err(format!(
                    "it holds `{e}`, which is not part of an image archive"
                ));
            }
        }
        Ok(())
    }

    fn check(&self, tag: &Tag) -> Result<(), String> {
        let docker = self.docker_manifest.is_some();
        if self.entries.is_empty() && self.oci_layout.is_none() && self.index.is_none() && !docker {
            return Ok(()); // An empty directory.
        }
        if docker {
            return Err("it holds `manifest.json`, which is not part of an OCI layout".into());
        }
        self.check_blobs()
            .map_err(|e| e.replace("an image archive", "an OCI layout"))?;
        let Some(layout) = &self.oci_layout else {
            return Err("it has no `oci-layout` file, so it is not an OCI layout".into());
        };
        let v: serde_json::Value = serde_json::from_slice(layout)
            .map_err(|_| "its `oci-layout` is not valid JSON".to_string())?;
        if !v["imageLayoutVersion"].is_string() {
            return Err("its `oci-layout` has no `imageLayoutVersion`".into());
        }
        let Some(index) = &self.index else {
            return Err("it has no `index.json`".into());
        };
        let v: serde_json::Value = serde_json::from_slice(index)
            .map_err(|_| "its `index.json` is not valid JSON".to_string())?;
        let Some(manifests) = v["manifests"].as_array() else {
            return Err("its `index.json` has no `manifests` list".into());
        };
        for m in manifests {
            match m["annotations"][ANN_REF_NAME].as_str() {
                Some(t) if t == tag.as_str() => {}
                Some(t) => {
                    return Err(format!(
                    "it also holds the image tagged `{t}`, which rebuilding `{tag}` would delete"
                ))
                }
                None => {
                    return Err(format!(
                        "it also holds an untagged image, which rebuilding `{tag}` would delete"
                    ))
                }
            }
        }
        Ok(())
    }

    fn add(&mut self, rel: &str, is_dir: bool, body: Option<&mut dyn Read>) -> Result<(), String> {
        let read = |r: &mut dyn Read| -> Result<Vec<u8>, String> {
            let mut buf = Vec::new();
            r.take(MAX_JSON + 1)
                .read_to_end(&mut buf)
                .map_err(|e| format!("`{rel}` cannot be read ({e})"))?;
            if buf.len() as u64 > MAX_JSON {
                return Err(format!("its `{rel}` is larger than an index can be"));
            }
            Ok(buf)
        };
        match (rel, is_dir, body) {
            ("oci-layout", false, Some(r)) => self.oci_layout = Some(read(r)?),
            ("index.json", false, Some(r)) => self.index = Some(read(r)?),
            ("manifest.json", false, Some(r)) => self.docker_manifest = Some(read(r)?),
            (_, true, _) => self.entries.push(format!("{rel}/")),
            (_, false, Some(_)) => self.entries.push(rel.to_string()),
            // Neither a plain file nor a directory (a link, a device...): never part of ours.
            (_, false, None) => self.entries.push(format!("{rel} (not a plain file)")),
        }
        Ok(())
    }
}

fn is_lower_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// The layout directory's entries, descending only into `blobs/` and `blobs/sha256/`.
fn dir_listing(dir: &Path) -> Result<Listing, String> {
    let mut l = Listing::default();
    let mut todo = vec![String::new()];
    while let Some(rel) = todo.pop() {
        let abs = dir.join(&rel);
        let rd = std::fs::read_dir(&abs).map_err(|e| format!("it cannot be listed ({e})"))?;
        for e in rd {
            let e = e.map_err(|e| format!("it cannot be listed ({e})"))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let t = e
                .file_type()
                .map_err(|e| format!("`{child}` cannot be inspected ({e})"))?;
            if t.is_dir() {
                l.add(&child, true, None)?;
                if child == "blobs" || child == "blobs/sha256" {
                    todo.push(child);
                }
            } else if t.is_file() {
                if child == "oci-layout" || child == "index.json" {
                    let mut f = File::open(e.path())
                        .map_err(|e| format!("`{child}` cannot be read ({e})"))?;
                    l.add(&child, false, Some(&mut f))?;
                } else {
                    l.add(&child, false, Some(&mut std::io::empty()))?;
                }
            } else {
                l.add(&child, false, None)?;
            }
        }
    }
    Ok(l)
}

/// The entries of an (uncompressed) tar file.
fn tar_listing(file: &Path) -> Result<Listing, String> {
    let f = File::open(file).map_err(|e| format!("it cannot be read ({e})"))?;
    let not_tar = |e: std::io::Error| format!("it is not a tar archive ({e})");
    let mut a = tar::Archive::new(f);
    let mut l = Listing::default();
    let mut any = false;
    for entry in a.entries_with_seek().map_err(not_tar)? {
        let mut entry = entry.map_err(not_tar)?;
        let path = entry.path_bytes().into_owned();
        let path = String::from_utf8_lossy(&path).into_owned();
        let rel = path
            .trim_start_matches("./")
            .trim_end_matches('/')
            .to_string();
        if rel.is_empty() || rel == "." {
            continue;
        }
        any = true;
        match entry.header().entry_type() {
            tar::EntryType::Directory => l.add(&rel, true, None)?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                l.add(&rel, false, Some(&mut entry))?
            }
            _ => l.add(&rel, false, None)?,
        }
    }
    if !any {
        return Err("it is not a tar archive holding an OCI layout".into());
    }
    Ok(l)
}
