//! A Python package index written by the test: real wheels (zips with `METADATA`, `WHEEL`,
//! `RECORD` and a module), source distributions, and the project pages of the simple API in
//! both forms (PEP 503 HTML with `#sha256=` fragments and `data-*` attributes, PEP 691 JSON),
//! with PEP 658 metadata files when asked for. Served by `http::serve` from `root`; the index
//! URL is `<server>/simple/`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use sha2::Digest as _;

/// One distribution file on the index.
#[derive(Clone, Debug)]
pub struct Dist {
    pub name: String,
    pub version: String,
    /// The wheel's tags (`py3-none-any`); `None` for a source distribution.
    pub tags: Option<String>,
    /// `Requires-Dist` lines.
    pub requires: Vec<String>,
    pub requires_python: Option<String>,
    /// `Some(reason)`: listed as yanked.
    pub yanked: Option<String>,
}

impl Dist {
    /// A pure-Python wheel.
    pub fn wheel(name: &str, version: &str) -> Dist {
        Dist {
            name: name.into(),
            version: version.into(),
            tags: Some("py3-none-any".into()),
            requires: vec![],
            requires_python: None,
            yanked: None,
        }
    }

    pub fn sdist(name: &str, version: &str) -> Dist {
        Dist {
            tags: None,
            ..Dist::wheel(name, version)
        }
    }

    pub fn tags(mut self, t: &str) -> Dist {
        self.tags = Some(t.into());
        self
    }

    pub fn requires(mut self, r: &str) -> Dist {
        self.requires.push(r.into());
        self
    }

    pub fn requires_python(mut self, r: &str) -> Dist {
        self.requires_python = Some(r.into());
        self
    }

    pub fn yanked(mut self, why: &str) -> Dist {
        self.yanked = Some(why.into());
        self
    }

    /// The file name on the index.
    pub fn filename(&self) -> String {
        let n = self.name.replace('-', "_");
        match &self.tags {
            Some(t) => format!("{n}-{}-{t}.whl", self.version),
            None => format!("{n}-{}.tar.gz", self.version),
        }
    }

    pub fn metadata(&self) -> String {
        let mut m = format!(
            "Metadata-Version: 2.1\nName: {}\nVersion: {}\n",
            self.name, self.version
        );
        if let Some(r) = &self.requires_python {
            let _ = writeln!(m, "Requires-Python: {r}");
        }
        for r in &self.requires {
            let _ = writeln!(m, "Requires-Dist: {r}");
        }
        m
    }

    /// The file's bytes: a wheel with its metadata first or last, or a gzip'd tar stand-in.
    pub fn bytes(&self) -> Vec<u8> {
        let Some(tags) = &self.tags else {
            return format!("sdist of {} {}\n", self.name, self.version).into_bytes();
        };
        let n = self.name.replace('-', "_");
        let di = format!("{n}-{}.dist-info", self.version);
        let module = format!("{n}/__init__.py");
        let body = format!("VERSION = {:?}\n", self.version);
        // A large member, so that a wheel's directory is not all in its first bytes.
        let padding = vec![b'#'; 96 * 1024];
        let wheel =
            format!("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tags}\n");
        let record = format!("{module},,\n{di}/METADATA,,\n{di}/WHEEL,,\n{di}/RECORD,,\n");
        zip(&[
            (module.as_str(), body.as_bytes()),
            (&format!("{n}/padding.txt"), &padding),
            (&format!("{di}/METADATA"), self.metadata().as_bytes()),
            (&format!("{di}/WHEEL"), wheel.as_bytes()),
            (&format!("{di}/RECORD"), record.as_bytes()),
        ])
    }
}

/// A zip of stored (uncompressed) members.
pub fn zip(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in members {
        let offset = out.len() as u32;
        let crc = crc32fast::hash(data);
        let fixed = |sig: &[u8]| {
            let mut h = sig.to_vec();
            h.extend([20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            h.extend(crc.to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((name.len() as u16).to_le_bytes());
            h
        };
        let mut local = fixed(&[0x50, 0x4b, 0x03, 0x04]);
        local.extend(0u16.to_le_bytes());
        local.extend(name.as_bytes());
        out.extend(local);
        out.extend(*data);
        let mut c = vec![0x50, 0x4b, 0x01, 0x02, 20, 0];
        c.extend(&fixed(&[])[..]);
        c.extend([0u8; 12]);
        c.extend(offset.to_le_bytes());
        c.extend(name.as_bytes());
        central.extend(c);
    }
    let cd_offset = out.len() as u32;
    out.extend(&central);
    let mut e = vec![0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0];
    e.extend((members.len() as u16).to_le_bytes());
    e.extend((members.len() as u16).to_le_bytes());
    e.extend((central.len() as u32).to_le_bytes());
    e.extend(cd_offset.to_le_bytes());
    e.extend(0u16.to_le_bytes());
    out.extend(e);
    out
}

pub fn sha256_hex(b: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(b))
}

/// How the pages are written.
#[derive(Clone, Copy, Debug)]
pub struct Pages {
    /// Write `index.json` (PEP 691) beside `index.html`.
    pub json: bool,
    /// Write PEP 658 metadata files and announce them.
    pub metadata_files: bool,
}

/// Write `dists` under `root`: files in `files/`, pages in `simple/<project>/`.
pub fn write_index(root: &Path, dists: &[Dist], pages: Pages) {
    let files = root.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let mut projects: std::collections::BTreeMap<String, Vec<&Dist>> = Default::default();
    for d in dists {
        projects.entry(d.name.clone()).or_default().push(d);
    }
    for (project, ds) in projects {
        let dir = root.join("simple").join(&project);
        std::fs::create_dir_all(&dir).unwrap();
        let mut html = String::from("<!DOCTYPE html>\n<html><body>\n");
        let mut json = Vec::new();
        for d in ds {
            let bytes = d.bytes();
            let sha = sha256_hex(&bytes);
            let f = d.filename();
            std::fs::File::create(files.join(&f))
                .unwrap()
                .write_all(&bytes)
                .unwrap();
            let mut attrs = String::new();
            let mut entry = serde_json::json!({
                "filename": f,
                "url": format!("../../files/{f}"),
                "hashes": {"sha256": sha},
                "size": bytes.len(),
            });
            if let Some(r) = &d.requires_python {
                let esc = r
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;");
                let _ = write!(attrs, " data-requires-python=\"{esc}\"");
                entry["requires-python"] = r.clone().into();
            }
            if let Some(y) = &d.yanked {
                let _ = write!(attrs, " data-yanked=\"{y}\"");
                entry["yanked"] = y.clone().into();
            }
            if pages.metadata_files && d.tags.is_some() {
                let meta = d.metadata();
                std::fs::write(files.join(format!("{f}.metadata")), &meta).unwrap();
                let msha = sha256_hex(meta.as_bytes());
                let _ = write!(attrs, " data-core-metadata=\"sha256={msha}\"");
                entry["core-metadata"] = serde_json::json!({"sha256": msha});
            }
            let _ = writeln!(
                html,
                "<a href=\"../../files/{f}#sha256={sha}\"{attrs}>{f}</a><br/>"
            );
            json.push(entry);
        }
        html.push_str("</body></html>\n");
        std::fs::write(dir.join("index.html"), html).unwrap();
        if pages.json {
            let page = serde_json::json!({
                "meta": {"api-version": "1.1"},
                "name": project,
                "files": json,
            });
            std::fs::write(dir.join("index.json"), page.to_string()).unwrap();
        }
    }
}
