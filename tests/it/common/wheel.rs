//! Wheels made by the tests: a [`WheelSpec`] lists a project's files and writes a real wheel
//! (zip, `WHEEL`, `METADATA`, a `RECORD` with sha256 and sizes), and can be told to lie (a
//! wrong hash or size in `RECORD`, a file left out of it) or to carry entries no builder
//! would write (`../` or absolute names, a symlink), for the installer's refusals.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

/// How the written RECORD lies about one file.
#[derive(Debug, Clone)]
pub enum Lie {
    /// The file's hash is of other bytes.
    Hash(String),
    /// The file's size is off by one.
    Size(String),
    /// The file has no row.
    Omit(String),
    /// The file's row gives no size.
    NoSize(String),
}

/// An entry written as it is, after the RECORD (not listed in it).
#[derive(Debug, Clone)]
pub enum Raw {
    File { name: String, data: Vec<u8> },
    Symlink { name: String, target: String },
}

#[derive(Debug, Clone)]
pub struct WheelSpec {
    pub name: String,
    pub version: String,
    pub tag: String,
    pub root_is_purelib: bool,
    /// (archive path, bytes, unix mode).
    pub files: Vec<(String, Vec<u8>, u32)>,
    /// Extra `METADATA` header lines (`Requires-Dist: x`).
    pub metadata: Vec<String>,
    pub entry_points: Option<String>,
    pub lies: Vec<Lie>,
    pub raw: Vec<Raw>,
}

impl WheelSpec {
    pub fn new(name: &str, version: &str) -> WheelSpec {
        WheelSpec {
            name: name.into(),
            version: version.into(),
            tag: "py3-none-any".into(),
            root_is_purelib: true,
            files: Vec::new(),
            metadata: Vec::new(),
            entry_points: None,
            lies: Vec::new(),
            raw: Vec::new(),
        }
    }

    /// A file at `path` in the archive, mode 0644.
    pub fn file(mut self, path: &str, data: &str) -> Self {
        self.files
            .push((path.into(), data.as_bytes().to_vec(), 0o644));
        self
    }

    /// A file with an explicit unix mode.
    pub fn file_mode(mut self, path: &str, data: &[u8], mode: u32) -> Self {
        self.files.push((path.into(), data.to_vec(), mode));
        self
    }

    pub fn entry_points(mut self, text: &str) -> Self {
        self.entry_points = Some(text.into());
        self
    }

    pub fn requires(mut self, req: &str) -> Self {
        self.metadata.push(format!("Requires-Dist: {req}"));
        self
    }

    /// A `METADATA` header line (`License-Expression: MIT`).
    pub fn header(mut self, line: &str) -> Self {
        self.metadata.push(line.into());
        self
    }

    pub fn lie(mut self, lie: Lie) -> Self {
        self.lies.push(lie);
        self
    }

    pub fn raw(mut self, raw: Raw) -> Self {
        self.raw.push(raw);
        self
    }

    /// The distribution name as wheel file names write it.
    pub fn escaped(&self) -> String {
        self.name.replace(['-', '.'], "_")
    }

    pub fn dist_info(&self) -> String {
        format!("{}-{}.dist-info", self.escaped(), self.version)
    }

    pub fn data_dir(&self) -> String {
        format!("{}-{}.data", self.escaped(), self.version)
    }

    pub fn filename(&self) -> String {
        format!("{}-{}-{}.whl", self.escaped(), self.version, self.tag)
    }

    /// The `METADATA` text.
    pub fn metadata_text(&self) -> String {
        let mut m = format!(
            "Metadata-Version: 2.1\nName: {}\nVersion: {}\n",
            self.name, self.version
        );
        for l in &self.metadata {
            m.push_str(l);
            m.push('\n');
        }
        m
    }

    /// Write the wheel into `dir`; returns its path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        let di = self.dist_info();
        let mut files = self.files.clone();
        files.push((
            format!("{di}/METADATA"),
            self.metadata_text().into_bytes(),
            0o644,
        ));
        files.push((
            format!("{di}/WHEEL"),
            format!(
                "Wheel-Version: 1.0\nGenerator: gpuimg-tests\nRoot-Is-Purelib: {}\nTag: {}\n",
                self.root_is_purelib, self.tag
            )
            .into_bytes(),
            0o644,
        ));
        if let Some(ep) = &self.entry_points {
            files.push((
                format!("{di}/entry_points.txt"),
                ep.clone().into_bytes(),
                0o644,
            ));
        }
        let mut record = String::new();
        for (path, data, _) in &files {
            let mut hash = Sha256::digest(data);
            let mut size = Some(data.len());
            let mut listed = true;
            for lie in &self.lies {
                match lie {
                    Lie::Hash(p) if p == path => hash = Sha256::digest(b"not these bytes"),
                    Lie::Size(p) if p == path => size = Some(data.len() + 1),
                    Lie::NoSize(p) if p == path => size = None,
                    Lie::Omit(p) if p == path => listed = false,
                    _ => {}
                }
            }
            if listed {
                let size = size.map(|s| s.to_string()).unwrap_or_default();
                record.push_str(&format!(
                    "{path},sha256={},{size}\n",
                    URL_SAFE_NO_PAD.encode(hash)
                ));
            }
        }
        record.push_str(&format!("{di}/RECORD,,\n"));
        files.push((format!("{di}/RECORD"), record.into_bytes(), 0o644));

        let path = dir.join(self.filename());
        let f = std::fs::File::create(&path)
            .unwrap_or_else(|e| panic!("failed to create `{}`: {e}", path.display()));
        let mut z = ZipWriter::new(f);
        for (name, data, mode) in &files {
            let o = SimpleFileOptions::default()
                .compression_method(CompressionMethod::Deflated)
                .unix_permissions(*mode);
            z.start_file(name.as_str(), o).unwrap();
            z.write_all(data).unwrap();
        }
        for r in &self.raw {
            let o = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
            match r {
                Raw::File { name, data } => {
                    z.start_file(name.as_str(), o).unwrap();
                    z.write_all(data).unwrap();
                }
                Raw::Symlink { name, target } => {
                    z.add_symlink(name.as_str(), target.as_str(), o).unwrap();
                }
            }
        }
        z.finish().unwrap();
        path
    }

    /// The pin a resolver would hand over for the wheel written at `path`.
    pub fn pin(&self, path: &Path, requested: bool) -> gpuimg_pypi::PinnedWheel {
        let bytes = std::fs::read(path).unwrap();
        gpuimg_pypi::PinnedWheel {
            name: self.name.to_lowercase().replace(['_', '.'], "-"),
            version: self.version.clone(),
            filename: self.filename(),
            sha256: gpuimg_store::digest::Digest::of(&bytes),
            size: bytes.len() as u64,
            index: "host".into(),
            requested,
            required_by: vec![format!("{}", self.name)],
        }
    }

    /// Write the wheel into `dir` and hand it over as fetched.
    pub fn fetched(&self, dir: &Path, requested: bool) -> gpuimg_pypi::FetchedWheel {
        let path = self.write(dir);
        gpuimg_pypi::FetchedWheel {
            pin: self.pin(&path, requested),
            path,
        }
    }
}

/// The sha256 of `data` as RECORD writes it.
pub fn record_hash(data: &[u8]) -> String {
    format!("sha256={}", URL_SAFE_NO_PAD.encode(Sha256::digest(data)))
}

/// A PEP 503 index of `wheels` under `dir/index`: the files in `files/`, one
/// `simple/<project>/index.html` page per project linking them with their sha256.
pub fn wheel_index(dir: &Path, wheels: &[WheelSpec]) -> PathBuf {
    let root = dir.join("index");
    std::fs::create_dir_all(root.join("files")).unwrap();
    let mut pages: std::collections::BTreeMap<String, String> = Default::default();
    for w in wheels {
        let path = w.write(&root.join("files"));
        let sha = gpuimg_store::digest::Digest::of(&std::fs::read(&path).unwrap()).hex();
        let project = w.name.to_lowercase().replace(['_', '.'], "-");
        let f = w.filename();
        pages.entry(project).or_default().push_str(&format!(
            "<a href=\"../../files/{f}#sha256={sha}\">{f}</a><br/>\n"
        ));
    }
    for (project, links) in pages {
        let page = root.join("simple").join(&project);
        std::fs::create_dir_all(&page).unwrap();
        std::fs::write(
            page.join("index.html"),
            format!("<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n"),
        )
        .unwrap();
    }
    root
}
