//! `inspect --files`: every path of an image with its type, mode, size, layer and owner, and
//! each ELF file's machine (read from its first bytes).
//!
//! Layers are read streaming (gzip, zstd or plain tar), hashing the compressed bytes as they
//! pass; a blob whose digest or size differs from its descriptor fails the whole listing, so
//! nothing from a damaged image is shown. A path in a later layer replaces the same path from
//! an earlier one. OCI whiteouts (`.wh.NAME`, `.wh..wh..opq`) are applied, though gpuimg never
//! writes them. Only ownership records are kept in memory, with a cap per record and in all.

use std::collections::BTreeMap;
use std::io::{self, BufReader, Read};

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::owners::{component_owner, owner_readers, Claims, ImageView, OwnerReader};
use super::unused::Elves;
use super::{blob_name, select, Image, InspectError, Pick};
use gpuimg_elf::{self as elf, machine::HEAD_BYTES};
use gpuimg_oci::image::ANN_COMPONENT;
use gpuimg_store::digest::Digest;

/// Bytes read from one ownership record (a dpkg `.list`); larger records fail the listing.
pub const MAX_RECORD: u64 = 16 << 20;
/// Bytes of ownership records kept in all.
pub const MAX_RECORDS: u64 = 256 << 20;

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Hardlink,
    Char,
    Block,
    Fifo,
}

/// One path of the merged image.
#[derive(Debug, Clone, Serialize)]
pub struct FileEntry {
    /// Absolute in the listing (`/usr/bin/ls`).
    pub path: String,
    #[serde(rename = "type")]
    pub kind: FileKind,
    /// Permission bits with setuid/setgid/sticky, e.g. `0o4755`; written as `"4755"`.
    #[serde(serialize_with = "octal")]
    pub mode: u32,
    /// Bytes of a regular file (a hard link: of the file it links to); 0 otherwise.
    pub size: u64,
    /// The layer's `io.gpuimg.component`, or `#N` (1-based) for a layer without one.
    pub layer: String,
    /// Who owns the path: package(s) as `dpkg -S` writes them, or gpuimg's component.
    pub owner: Option<String>,
    /// A symlink's target as stored, or the absolute path a hard link points at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// An ELF file's machine as ELF names it (`x86-64`, `aarch64`, `riscv`, `cuda`); a hard
    /// link's is its file's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
}

fn octal<S: serde::Serializer>(mode: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{mode:04o}"))
}

/// Every path of an image, sorted by path.
#[derive(Debug, Serialize)]
pub struct FileListing {
    pub files: Vec<FileEntry>,
}

/// A reader that hashes and counts what passes through it.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// Records kept so far (path → bytes; a later layer's record replaces an earlier one).
struct Records<'r> {
    readers: &'r [Box<dyn OwnerReader>],
    kept: BTreeMap<String, (usize, Vec<u8>)>,
    total: u64,
}

impl Records<'_> {
    fn reader_for(&self, path: &str) -> Option<usize> {
        self.readers.iter().position(|r| r.wants(path))
    }

    fn forget(&mut self, path: &str) {
        if let Some((_, b)) = self.kept.remove(path) {
            self.total -= b.len() as u64;
        }
    }

    /// Forget every record below directory `dir` (`""`: the root).
    fn forget_under(&mut self, dir: &str) {
        let under = format!("{dir}/");
        let doomed: Vec<String> = (self.kept.keys())
            .filter(|p| dir.is_empty() || p.starts_with(&under))
            .cloned()
            .collect();
        for p in doomed {
            self.forget(&p);
        }
    }

    fn keep(
        &mut self,
        path: &str,
        layer: &str,
        reader: usize,
        data: &mut dyn Read,
    ) -> Result<io::Result<()>, InspectError> {
        let mut bytes = Vec::new();
        if let Err(e) = data.take(MAX_RECORD + 1).read_to_end(&mut bytes) {
            return Ok(Err(e));
        }
        if bytes.len() as u64 > MAX_RECORD {
            return Err(InspectError::RecordTooLarge {
                path: format!("/{path}"),
                layer: layer.to_string(),
                cap: MAX_RECORD,
            });
        }
        self.forget(path);
        self.total += bytes.len() as u64;
        if self.total > MAX_RECORDS {
            return Err(InspectError::RecordsTooLarge {
                path: format!("/{path}"),
                cap: MAX_RECORDS,
            });
        }
        self.kept.insert(path.to_string(), (reader, bytes));
        Ok(Ok(()))
    }
}

/// A tar path as a relative path without `./`, leading or trailing `/`; `None` for the root.
fn normalize(raw: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(raw);
    let parts: Vec<&str> = text
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Remove `path` and everything under it that an earlier layer (not `layer`) put there.
fn remove_earlier(tree: &mut BTreeMap<String, FileEntry>, prefix: &str, layer: &str, this: bool) {
    let under = format!("{prefix}/");
    let doomed: Vec<String> = tree
        .range::<str, _>((
            std::ops::Bound::Included(if prefix.is_empty() { "" } else { prefix }),
            std::ops::Bound::Unbounded,
        ))
        .take_while(|(p, _)| prefix.is_empty() || p.as_str() == prefix || p.starts_with(&under))
        .filter(|(p, e)| (this || p.as_str() != prefix) && e.layer != layer)
        .map(|(p, _)| p.clone())
        .collect();
    for p in doomed {
        tree.remove(&p);
    }
}

/// Read one layer's tar stream into `tree`; I/O and tar errors come back as `io::Error`.
fn read_tar(
    data: &mut dyn Read,
    layer: &str,
    tree: &mut BTreeMap<String, FileEntry>,
    records: &mut Records,
    mut elves: Option<&mut Elves>,
) -> Result<io::Result<()>, InspectError> {
    let mut archive = tar::Archive::new(data);
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => return Ok(Err(e)),
    };
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => return Ok(Err(e)),
        };
        let Some(path) = normalize(&entry.path_bytes()) else {
            continue;
        };
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", &path));
        if name == ".wh..wh..opq" {
            let parent = parent.to_string();
            remove_earlier(tree, &parent, layer, false);
            records.forget_under(&parent);
            continue;
        }
        if let Some(hidden) = name.strip_prefix(".wh.") {
            let target = if parent.is_empty() {
                hidden.to_string()
            } else {
                format!("{parent}/{hidden}")
            };
            remove_earlier(tree, &target, layer, true);
            records.forget(&target);
            continue;
        }
        let h = entry.header();
        let mode = h.mode().unwrap_or(0) & 0o7777;
        let size = h.size().unwrap_or(0);
        let link = entry.link_name_bytes();
        let (kind, link) = match h.entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => (FileKind::File, None),
            tar::EntryType::Directory => (FileKind::Dir, None),
            tar::EntryType::Symlink => (
                FileKind::Symlink,
                link.map(|l| String::from_utf8_lossy(&l).into_owned()),
            ),
            tar::EntryType::Link => (
                FileKind::Hardlink,
                link.and_then(|l| normalize(&l)).map(|l| format!("/{l}")),
            ),
            tar::EntryType::Char => (FileKind::Char, None),
            tar::EntryType::Block => (FileKind::Block, None),
            tar::EntryType::Fifo => (FileKind::Fifo, None),
            _ => continue,
        };
        records.forget(&path);
        if let Some(elves) = elves.as_deref_mut() {
            elves.forget(&path);
        }
        let mut machine = None;
        if kind == FileKind::File {
            // The ELF header's first bytes, read here and handed on before the rest.
            let mut head = Vec::new();
            if let Err(e) = (&mut entry).take(HEAD_BYTES as u64).read_to_end(&mut head) {
                return Ok(Err(e));
            }
            machine = elf::machine::head(&head).map(|h| elf::machine::elf_name(h.machine));
            let mut data = (&head[..]).chain(&mut entry);
            if let Some(reader) = records.reader_for(&path) {
                if let Err(e) = records.keep(&path, layer, reader, &mut data)? {
                    return Ok(Err(e));
                }
            } else if let Some(elves) = elves.as_deref_mut() {
                if let Err(e) = elves.read(&path, mode, &mut data) {
                    return Ok(Err(e));
                }
            }
        }
        tree.insert(
            path.clone(),
            FileEntry {
                path: format!("/{path}"),
                kind,
                mode,
                size: if kind == FileKind::File { size } else { 0 },
                layer: layer.to_string(),
                owner: None,
                link,
                machine,
            },
        );
    }
    Ok(Ok(()))
}

/// Stream the layer blob `file` into `tree`, checking its digest and size at the end.
fn read_layer(
    file: Box<dyn Read>,
    desc: &oci_spec::image::Descriptor,
    layer: &str,
    tree: &mut BTreeMap<String, FileEntry>,
    records: &mut Records,
    elves: Option<&mut Elves>,
) -> Result<(), InspectError> {
    let digest = desc.digest().to_string();
    let corrupt = || InspectError::LayerCorrupt {
        layer: layer.to_string(),
        digest: digest.clone(),
    };
    let want: Digest = digest.parse().map_err(|_| corrupt())?;
    let mut raw = Hashing {
        inner: file,
        hasher: Sha256::new(),
        count: 0,
    };
    let media_type = desc.media_type().to_string();
    let read = {
        let buffered = BufReader::new(&mut raw);
        let mut decoder: Box<dyn Read + '_> = match media_type.as_str() {
            "application/vnd.oci.image.layer.v1.tar+gzip"
            | "application/vnd.docker.image.rootfs.diff.tar.gzip" => {
                Box::new(flate2::bufread::MultiGzDecoder::new(buffered))
            }
            "application/vnd.oci.image.layer.v1.tar+zstd" => {
                match zstd::stream::read::Decoder::with_buffer(buffered) {
                    Ok(d) => Box::new(d),
                    Err(e) => return Err(unreadable(layer, &digest, &e)),
                }
            }
            "application/vnd.oci.image.layer.v1.tar"
            | "application/vnd.docker.image.rootfs.diff.tar" => Box::new(buffered),
            _ => {
                return Err(InspectError::LayerMediaType {
                    layer: layer.to_string(),
                    media_type,
                })
            }
        };
        read_tar(&mut decoder, layer, tree, records, elves)?
    };
    // The tar reader stops at its end marker: hash what follows too, then judge the blob
    // before any decoding error (a damaged blob is reported as damaged, not as bad gzip).
    let drained = io::copy(&mut raw, &mut io::sink());
    let got = Digest::from_bytes(raw.hasher.finalize().into());
    if drained.is_ok() && (got != want || raw.count != desc.size()) {
        return Err(corrupt());
    }
    read.and(drained.map(drop))
        .map_err(|e| unreadable(layer, &digest, &e))
}

fn unreadable(layer: &str, digest: &str, e: &io::Error) -> InspectError {
    InspectError::LayerUnreadable {
        layer: layer.to_string(),
        digest: digest.to_string(),
        message: e.to_string(),
    }
}

/// Every path of the image `which` picks in `img` (tagged, or the first; or one manifest of
/// an index), with its layer and owner, sorted by path.
pub fn inspect_files<'a>(
    img: &Image,
    which: impl Into<Pick<'a>>,
) -> Result<FileListing, InspectError> {
    listing(img, which.into(), None)
}

/// [`inspect_files`], also collecting the shared objects' ELF facts and the loader's
/// configuration into `elves` when given.
pub(super) fn listing(
    img: &Image,
    which: Pick<'_>,
    mut elves: Option<&mut Elves>,
) -> Result<FileListing, InspectError> {
    let manifest = select(img, which)?.manifest;
    let readers = owner_readers();
    let mut records = Records {
        readers: &readers,
        kept: BTreeMap::new(),
        total: 0,
    };
    let mut tree: BTreeMap<String, FileEntry> = BTreeMap::new();
    for (i, desc) in manifest.layers().iter().enumerate() {
        let layer = desc
            .annotations()
            .as_ref()
            .and_then(|a| a.get(ANN_COMPONENT).cloned())
            .unwrap_or_else(|| format!("#{}", i + 1));
        let d: Digest = desc
            .digest()
            .to_string()
            .parse()
            .map_err(|_| InspectError::Corrupt(desc.digest().to_string()))?;
        let blob = img.open(&blob_name(&d))?;
        read_layer(
            blob,
            desc,
            &layer,
            &mut tree,
            &mut records,
            elves.as_deref_mut(),
        )?;
    }
    let mut claims = Claims::default();
    {
        let view = ImageView::new(&tree);
        for (path, (reader, data)) in &records.kept {
            readers[*reader].claim(path, data, &view, &mut claims);
        }
    }
    let sizes: BTreeMap<String, (u64, Option<String>)> = tree
        .values()
        .filter(|e| e.kind == FileKind::File)
        .map(|e| (e.path.clone(), (e.size, e.machine.clone())))
        .collect();
    let files = tree
        .into_iter()
        .map(|(rel, mut e)| {
            e.owner = match component_owner(&e.layer) {
                Some(c) => Some(c.to_string()),
                None => claims.owner_of(&rel),
            };
            if e.kind == FileKind::Hardlink {
                let file = e.link.as_ref().and_then(|l| sizes.get(l));
                e.size = file.map_or(0, |f| f.0);
                e.machine = file.and_then(|f| f.1.clone());
            }
            e
        })
        .collect();
    Ok(FileListing { files })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(layer: &str) -> FileEntry {
        FileEntry {
            path: String::new(),
            kind: FileKind::File,
            mode: 0o644,
            size: 1,
            layer: layer.into(),
            owner: None,
            link: None,
            machine: None,
        }
    }

    fn desc(media_type: &str, bytes: &[u8]) -> oci_spec::image::Descriptor {
        oci_spec::image::DescriptorBuilder::default()
            .media_type(oci_spec::image::MediaType::Other(media_type.into()))
            .digest(
                Digest::of(bytes)
                    .to_string()
                    .parse::<oci_spec::image::Digest>()
                    .unwrap(),
            )
            .size(bytes.len() as u64)
            .build()
            .unwrap()
    }

    fn read_blob(media_type: &str, bytes: &[u8]) -> Result<Vec<String>, InspectError> {
        let readers = owner_readers();
        let mut records = Records {
            readers: &readers,
            kept: BTreeMap::new(),
            total: 0,
        };
        let mut tree = BTreeMap::new();
        read_layer(
            Box::new(std::io::Cursor::new(bytes.to_vec())),
            &desc(media_type, bytes),
            "os",
            &mut tree,
            &mut records,
            None,
        )?;
        let mut out: Vec<String> = tree.into_keys().collect();
        out.extend(records.kept.into_keys().map(|k| format!("record {k}")));
        Ok(out)
    }

    fn tar_of(paths: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (p, data) in paths {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o644);
            h.set_size(data.len() as u64);
            b.append_data(&mut h, p, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn layers_of_every_media_type_are_read_and_records_kept() {
        let tar = tar_of(&[
            ("./usr/bin/x", b"x"),
            ("var/lib/dpkg/info/x.list", b"/usr/bin/x\n"),
        ]);
        let want = [
            "usr/bin/x",
            "var/lib/dpkg/info/x.list",
            "record var/lib/dpkg/info/x.list",
        ];
        let gz = {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&tar).unwrap();
            e.finish().unwrap()
        };
        let zst = zstd::encode_all(&tar[..], 3).unwrap();
        for (mt, bytes) in [
            ("application/vnd.oci.image.layer.v1.tar", &tar),
            ("application/vnd.oci.image.layer.v1.tar+gzip", &gz),
            ("application/vnd.oci.image.layer.v1.tar+zstd", &zst),
        ] {
            assert_eq!(read_blob(mt, bytes).unwrap(), want, "{mt}");
        }
    }

    #[test]
    fn a_blob_matching_its_digest_but_not_its_media_type_is_unreadable() {
        let tar = tar_of(&[("a", b"a")]);
        let err = read_blob("application/vnd.oci.image.layer.v1.tar+gzip", &tar).unwrap_err();
        assert!(matches!(err, InspectError::LayerUnreadable { .. }), "{err}");
        let err = read_blob("application/vnd.oci.image.layer.v1.tar+zstd", &tar).unwrap_err();
        assert!(matches!(err, InspectError::LayerUnreadable { .. }), "{err}");
        let err = read_blob("application/x-tar", &tar).unwrap_err();
        assert!(matches!(err, InspectError::LayerMediaType { .. }), "{err}");
        let big = vec![b'/'; (MAX_RECORD + 1) as usize];
        let err = read_blob(
            "application/vnd.oci.image.layer.v1.tar",
            &tar_of(&[("var/lib/dpkg/info/huge.list", &big)]),
        )
        .unwrap_err();
        assert!(matches!(err, InspectError::RecordTooLarge { .. }), "{err}");
    }

    #[test]
    fn paths_are_normalised() {
        assert_eq!(normalize(b"./usr/bin/").as_deref(), Some("usr/bin"));
        assert_eq!(normalize(b"/etc//passwd").as_deref(), Some("etc/passwd"));
        assert_eq!(normalize(b"./"), None);
        assert_eq!(normalize(b"."), None);
    }

    #[test]
    fn whiteouts_remove_only_earlier_layers_entries() {
        let mut t = BTreeMap::new();
        for p in ["a", "a/x", "a/x/deep", "a/y", "ab", "b"] {
            t.insert(p.to_string(), e("one"));
        }
        t.insert("a/new".to_string(), e("two"));
        remove_earlier(&mut t, "a/x", "two", true);
        assert_eq!(
            t.keys().collect::<Vec<_>>(),
            ["a", "a/new", "a/y", "ab", "b"]
        );
        remove_earlier(&mut t, "a", "two", false);
        assert_eq!(t.keys().collect::<Vec<_>>(), ["a", "a/new", "ab", "b"]);
        remove_earlier(&mut t, "", "two", false);
        assert_eq!(t.keys().collect::<Vec<_>>(), ["a/new"]);
    }
}
