//! Stage `export`: put an image on disk as an OCI layout directory, an oci-archive tarball or
//! a docker-archive (the same blobs with docker's `manifest.json` and `repositories`).
//!
//! Writes are atomic: everything goes to a locked staging sibling (`.NAME.gpuimg-tmp.<hex>`,
//! see [`gpuimg_store::staging`]) which then takes the target's place in one rename (an exchange
//! when something is there; where the file system refuses an exchange, the old entry is
//! renamed aside first, a short window without an output). A failed export removes its staging at once; a killed one leaves
//! the previous output as it was, and the next export reclaims the leftovers. Existing
//! contents are replaced only when they are gpuimg's to replace (see `existing`) or with
//! `--force`. Must never build JSON or layers: it copies what `image` and `layer` made.

mod archive;
mod existing;
mod file;
mod layout;

use std::path::{Path, PathBuf};

pub use existing::Replace;
use existing::{Existing, Refusal};
pub use file::{check_file_target, write_file};

use crate::image::{ImageJson, ImageLayer, IndexJson};
use crate::reference::{ImageRef, Transport};
use gpuimg_store::cache::Cache;
use gpuimg_store::digest::Digest;
use gpuimg_store::staging::{self, Staged};

/// Where the image goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An OCI image layout directory.
    Layout(PathBuf),
    /// An oci-archive: the layout as one tar file.
    Archive(PathBuf),
    /// A docker-archive: the blobs with `manifest.json` and `repositories`, so that `docker
    /// load` and `podman load` read it (gzip or plain layers only).
    DockerArchive(PathBuf),
}

impl Target {
    /// Where `-o` points (parsed by [`ImageRef::parse`]; its tag is the build's to use).
    pub fn of(r: &ImageRef) -> Target {
        match r.transport {
            Transport::Layout => Target::Layout(r.path.clone()),
            Transport::Archive => Target::Archive(r.path.clone()),
            Transport::DockerArchive => Target::DockerArchive(r.path.clone()),
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            Target::Layout(p) | Target::Archive(p) | Target::DockerArchive(p) => p,
        }
    }

    /// How the target is named in `--json` output (`oci:DIR` / `oci-archive:FILE` /
    /// `docker-archive:FILE`).
    pub fn display(&self) -> String {
        match self {
            Target::Layout(p) => format!("oci:{}", p.display()),
            Target::Archive(p) => format!("oci-archive:{}", p.display()),
            Target::DockerArchive(p) => format!("docker-archive:{}", p.display()),
        }
    }

    /// Whether the target's readers accept only gzip or plain layers (older docker cannot
    /// load zstd ones).
    pub fn needs_gzip(&self) -> bool {
        matches!(self, Target::DockerArchive(_))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("Failed to write `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Refusing to replace `{path}`: {reason} (`--force` replaces it)")]
    Refused { path: String, reason: String },
    #[error("Refusing to write over `{path}`: it is a {kind}")]
    Special { path: String, kind: &'static str },
    #[error("Failed to create a staging entry for the output")]
    Stage(#[source] std::io::Error),
    #[error("Output path `{0}` names no file or directory")]
    NoName(String),
    #[error("Layer blob `{0}` vanished from the cache during the build")]
    MissingBlob(String),
    #[error("A docker-archive holds one platform's image, not an image index: pick the platform with `--platform`, or write an `oci:` layout or an `oci-archive:`")]
    IndexInDockerArchive,
    #[error("A docker-archive holds gzip or plain layers only; layer `{0}` is zstd (build with `--compression gzip`)")]
    ZstdInDockerArchive(String),
}

pub(crate) fn io_err(path: &Path) -> impl Fn(std::io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Check, before building, that `target` may be written: what is there now is gpuimg's to
/// replace under `replace`. [`export`] checks again before it replaces anything.
pub fn check_target(target: &Target, replace: Replace) -> Result<(), ExportError> {
    stem_of(target.path())?;
    existing_at(target, replace).map(|_| ())
}

/// What goes into a layout or archive: the JSON blobs (configs, manifests, an image index),
/// the layer blobs (from the cache) and `index.json`. A blob two images share is written once.
pub(crate) struct Contents<'a> {
    json: Vec<(Digest, &'a [u8])>,
    layers: Vec<&'a ImageLayer>,
    index: &'a [u8],
}

/// Write the image to `target`.
pub fn export(
    target: &Target,
    replace: Replace,
    image: &ImageJson,
    layers: &[ImageLayer],
    cache: &Cache,
) -> Result<(), ExportError> {
    let contents = Contents {
        json: vec![
            (image.config.0, &image.config.1),
            (image.manifest.0, &image.manifest.1),
        ],
        layers: layers.iter().collect(),
        index: &image.index,
    };
    export_contents(
        target,
        replace,
        &contents,
        Some(&image.docker),
        layers,
        cache,
    )
}

/// Write a multi-platform image to `target` (a layout or an oci-archive; a docker-archive
/// holds one platform's image, so the caller exports that one with [`export`]): the image
/// index `index` over `images`, each image's config, manifest and layers.
pub fn export_index(
    target: &Target,
    replace: Replace,
    index: &IndexJson,
    images: &[(&ImageJson, &[ImageLayer])],
    cache: &Cache,
) -> Result<(), ExportError> {
    let mut json = vec![(index.index.0, index.index.1.as_slice())];
    let mut layers = Vec::new();
    for (image, ls) in images {
        json.push((image.config.0, &image.config.1));
        json.push((image.manifest.0, &image.manifest.1));
        layers.extend(ls.iter());
    }
    let contents = Contents {
        json,
        layers,
        index: &index.layout,
    };
    if matches!(target, Target::DockerArchive(_)) {
        return Err(ExportError::IndexInDockerArchive);
    }
    export_contents(target, replace, &contents, None, &[], cache)
}

fn export_contents(
    target: &Target,
    replace: Replace,
    contents: &Contents<'_>,
    docker_json: Option<&crate::image::DockerJson>,
    layers: &[ImageLayer],
    cache: &Cache,
) -> Result<(), ExportError> {
    let path = target.path();
    let stem = stem_of(path)?;
    let parent = parent_of(path);
    fs_err::create_dir_all(&parent).map_err(io_err(&parent))?;
    staging::reclaim(&parent, Some(&stem));
    let existing = existing_at(target, replace)?;
    match target {
        Target::Layout(dir) => {
            let stage = Staged::dir(&parent, &stem, 0o755).map_err(ExportError::Stage)?;
            layout::fill_layout(stage.path(), contents, cache)?;
            swap_into_place(stage, dir, existing, &parent, &stem)
        }
        Target::Archive(file) | Target::DockerArchive(file) => {
            let docker = matches!(target, Target::DockerArchive(_));
            if docker {
                if let Some(l) = layers
                    .iter()
                    .find(|l| l.blob.compression.media_type().ends_with("+zstd"))
                {
                    return Err(ExportError::ZstdInDockerArchive(l.component.clone()));
                }
            }
            let stage =
                Staged::file(&parent, &stem, layout::FILE_MODE).map_err(ExportError::Stage)?;
            let extra = if docker { docker_json } else { None };
            archive::fill_archive(&stage, contents, extra, cache)?;
            swap_into_place(stage, file, existing, &parent, &stem)
        }
    }
}

fn existing_at(target: &Target, replace: Replace) -> Result<Existing, ExportError> {
    let path = target.path();
    let r = match target {
        Target::Layout(dir) => existing::check_layout_dir(dir, replace),
        Target::Archive(file) => existing::check_archive_file(file, replace, false),
        Target::DockerArchive(file) => existing::check_archive_file(file, replace, true),
    };
    r.map_err(|refusal| match refusal {
        Refusal::NotOurs(reason) => ExportError::Refused {
            path: path.display().to_string(),
            reason,
        },
        Refusal::Special(kind) => ExportError::Special {
            path: path.display().to_string(),
            kind,
        },
        Refusal::Io(source) => ExportError::Io {
            path: path.display().to_string(),
            source,
        },
    })
}

/// Put the finished `stage` at `dest`, replacing what `existing` says is there.
fn swap_into_place(
    stage: Staged,
    dest: &Path,
    existing: Existing,
    parent: &Path,
    stem: &str,
) -> Result<(), ExportError> {
    let err = io_err(dest);
    if existing == Existing::Nothing {
        return stage.persist(dest).map_err(err);
    }
    if stage.exchange(dest).is_ok() {
        // The staging path now holds what `dest` was. Should removing it fail, the image is
        // in place all the same and the next export reclaims the leftover.
        drop(stage);
        return Ok(());
    }
    // No RENAME_EXCHANGE here: move the old entry onto an empty staging slot of its kind
    // (rename replaces an empty directory or a file), then the new one into place.
    let slot = match existing {
        Existing::Dir => Staged::dir(parent, stem, 0o700),
        _ => Staged::file(parent, stem, 0o600),
    }
    .map_err(ExportError::Stage)?;
    std::fs::rename(dest, slot.path()).map_err(&err)?;
    stage.persist(dest).map_err(err)?;
    drop(slot);
    Ok(())
}

/// The target's file name, which staging entries beside it start with (`.NAME`).
fn stem_of(target: &Path) -> Result<String, ExportError> {
    match target.file_name() {
        Some(n) => Ok(format!(".{}", n.to_string_lossy())),
        None => Err(ExportError::NoName(target.display().to_string())),
    }
}

pub(crate) fn parent_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
