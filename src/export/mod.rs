//! Stage `export`: put an image on disk as an OCI layout directory or an oci-archive tarball.
//!
//! Writes are atomic: everything goes to a temporary sibling first, which then takes the
//! target's place in one rename (an exchange when a previous layout exists). A build killed
//! at any point leaves the previous output as it was; leftovers of killed builds are removed
//! by the next one. Must never build JSON or layers: it copies what `image` and `layer` made.

mod archive;
mod layout;

use std::path::{Path, PathBuf};

use crate::cache::Cache;
use crate::image::{ImageJson, ImageLayer};

/// Where the image goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An OCI image layout directory.
    Layout(PathBuf),
    /// An oci-archive: the layout as one tar file.
    Archive(PathBuf),
}

impl Target {
    /// Parse `-o`: `DIR`, `oci:DIR` or `oci-archive:FILE`.
    pub fn parse(s: &str) -> Target {
        if let Some(p) = s.strip_prefix("oci-archive:") {
            Target::Archive(PathBuf::from(p))
        } else if let Some(p) = s.strip_prefix("oci:") {
            Target::Layout(PathBuf::from(p))
        } else {
            Target::Layout(PathBuf::from(s))
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            Target::Layout(p) | Target::Archive(p) => p,
        }
    }

    /// How the target is named in `--json` output (`oci:DIR` / `oci-archive:FILE`).
    pub fn display(&self) -> String {
        match self {
            Target::Layout(p) => format!("oci:{}", p.display()),
            Target::Archive(p) => format!("oci-archive:{}", p.display()),
        }
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
    #[error("Refusing to replace `{0}`: it exists and is not an OCI image layout")]
    NotALayout(String),
    #[error("Layer blob `{0}` vanished from the cache during the build")]
    MissingBlob(String),
}

pub(crate) fn io_err(path: &Path) -> impl Fn(std::io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Write the image to `target`.
pub fn export(
    target: &Target,
    image: &ImageJson,
    layers: &[ImageLayer],
    cache: &Cache,
) -> Result<(), ExportError> {
    match target {
        Target::Layout(dir) => layout::write_layout(dir, image, layers, cache),
        Target::Archive(file) => archive::write_archive(file, image, layers, cache),
    }
}

/// The temporary sibling used while writing `target`, and removal of stale ones.
pub(crate) fn staging_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".into());
    let parent = parent_of(target);
    parent.join(format!(".{name}.gpuimg-tmp.{}", std::process::id()))
}

pub(crate) fn parent_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Remove staging leftovers of builds that are no longer running.
pub(crate) fn remove_stale(target: &Path) {
    let Some(name) = target.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let prefix = format!(".{name}.gpuimg-tmp.");
    let Ok(rd) = std::fs::read_dir(parent_of(target)) else {
        return;
    };
    for e in rd.flatten() {
        let fname = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = fname.strip_prefix(&prefix) else {
            continue;
        };
        let alive = pid
            .parse::<u32>()
            .map(|p| p != std::process::id() && Path::new(&format!("/proc/{p}")).exists())
            .unwrap_or(false);
        if !alive {
            let p = e.path();
            let _ = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
        }
    }
}
