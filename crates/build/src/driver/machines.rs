//! The image's machine check (issue 34, item 1): every ELF file the image would run or load
//! is for the platform's machine, or the build fails before anything is exported, naming the
//! first such file, its machine and the platform (`elf::startable` says which files those
//! are). What each layer holds of it, its ELF files' heads and its loader configuration, is
//! recorded beside its blob (`machines-v1/<diff_id>.json`, [`LayerMachines`]): made from the
//! tree a build wrote the layer from, or, for a layer reused without a record, read once from
//! its blob. Reads the first bytes of the files that may be run or loaded only (executable,
//! or named `*.so*`, `*.ko*`), and the loader configuration whole (capped); must never write
//! anything but that record.

use std::collections::BTreeMap;
use std::io::{self, Read};

use serde::{Deserialize, Serialize};

use super::BuildError;
use gpuimg_assemble::{EntryKind, Tree};
use gpuimg_elf::machine::{self, Head, HEAD_BYTES};
use gpuimg_elf::startable::{self, Foreign, Image, DEFAULT_PATH};
use gpuimg_oci::image::ImageLayer;
use gpuimg_oci::layer::{self, Compression, LayerBlob};
use gpuimg_store::cache::{Bucket, Cache};
use gpuimg_store::digest::Digest;

const BUCKET: Bucket = Bucket::Machines;
/// Bytes read of one loader configuration file.
const MAX_CONF: u64 = 64 << 10;

/// What one layer holds that the machine check reads.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerMachines {
    /// Each regular file that is an ELF file (or a hard link to one) and may be run or loaded
    /// ([`may_run`]), by path.
    elves: BTreeMap<String, Head>,
    /// `/etc/ld.so.conf` and `/etc/ld.so.conf.d/*.conf`, by path.
    conf: BTreeMap<String, String>,
}

/// Whether the file at `path` (mode `mode`) may be one the image runs or loads: executable, or
/// named like a shared object or a kernel module. Only those are read (a wheel's thousands of
/// `.py` files are not opened).
fn may_run(path: &str, mode: u32) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    mode & 0o111 != 0 || name.contains(".so") || name.contains(".ko")
}

fn is_conf(path: &str) -> bool {
    path == "etc/ld.so.conf"
        || path
            .strip_prefix("etc/ld.so.conf.d/")
            .is_some_and(|n| !n.contains('/') && n.ends_with(".conf"))
}

impl LayerMachines {
    /// A hard link at `path` to `target` (an earlier entry): the same file.
    fn link(&mut self, path: &str, target: &str) {
        if let Some(h) = self.elves.get(target).copied() {
            self.elves.insert(path.to_string(), h);
        }
    }

    /// The file at `path` whose first bytes `data` gives.
    fn file(&mut self, path: &str, data: &mut dyn Read) -> io::Result<()> {
        let cap = if is_conf(path) {
            MAX_CONF
        } else {
            HEAD_BYTES as u64
        };
        let mut bytes = Vec::new();
        data.take(cap).read_to_end(&mut bytes)?;
        if is_conf(path) {
            self.conf.insert(
                path.to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            );
        } else if let Some(h) = machine::head(&bytes) {
            self.elves.insert(path.to_string(), h);
        }
        Ok(())
    }
}

/// The record of `tree`, read from its files.
fn of_tree(tree: &Tree) -> io::Result<LayerMachines> {
    let mut m = LayerMachines::default();
    for e in tree.iter() {
        let EntryKind::File { size, .. } = &e.kind else {
            continue;
        };
        let wanted = if is_conf(&e.path) {
            MAX_CONF
        } else if *size >= HEAD_BYTES as u64 && may_run(&e.path, e.mode) {
            HEAD_BYTES as u64
        } else {
            continue;
        };
        if let Some(bytes) = tree.read_head(&e.path, wanted)? {
            m.file(&e.path, &mut &bytes[..])?;
        }
    }
    for e in tree.iter() {
        if let EntryKind::Hardlink { target } = &e.kind {
            m.link(&e.path, target);
        }
    }
    Ok(m)
}

/// The record of the layer `blob`, read from the blob.
fn of_blob(cache: &Cache, blob: &LayerBlob) -> io::Result<LayerMachines> {
    let file =
        io::BufReader::with_capacity(1 << 20, fs_err::File::open(cache.blob_path(&blob.digest))?);
    let reader: Box<dyn Read> = match blob.compression {
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(file)),
        Compression::Zstd => Box::new(zstd::Decoder::new(file)?),
    };
    let mut m = LayerMachines::default();
    let norm = |p: &str| p.trim_end_matches('/').trim_start_matches("./").to_string();
    for entry in tar::Archive::new(reader).entries()? {
        let mut entry = entry?;
        let path = norm(&entry.path()?.to_string_lossy());
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous
                if is_conf(&path) || may_run(&path, entry.header().mode()?) =>
            {
                m.file(&path, &mut entry)?
            }
            tar::EntryType::Link => {
                if let Some(t) = entry.link_name()? {
                    m.link(&path, &norm(&t.to_string_lossy()));
                }
            }
            _ => {}
        }
    }
    Ok(m)
}

/// The trusted record of `diff_id`, if there is one.
fn recorded(cache: &Cache, diff_id: &Digest) -> Option<LayerMachines> {
    let rec = cache.read_record(BUCKET, diff_id).ok()??;
    rec.trusted
        .then(|| serde_json::from_slice(&rec.bytes).ok())
        .flatten()
}

fn read_error(component: &str) -> impl Fn(io::Error) -> BuildError + '_ {
    move |source| BuildError::Machines {
        layer: component.to_string(),
        source,
    }
}

/// Record what the layer `blob` of `component`, written (or found) for `tree`, holds, unless
/// a record is there already.
pub fn remember(
    cache: &Cache,
    component: &str,
    blob: &LayerBlob,
    tree: &Tree,
) -> Result<(), BuildError> {
    if recorded(cache, &blob.diff_id).is_some() {
        return Ok(());
    }
    let m = of_tree(tree).map_err(read_error(component))?;
    // Only saves reading the blob: failing to record is no error.
    let _ = cache.put_record(BUCKET, &blob.diff_id, &m);
    Ok(())
}

/// The record of `layer`, else read from its blob (and recorded).
fn of_layer(cache: &Cache, layer: &ImageLayer) -> Result<LayerMachines, BuildError> {
    if let Some(m) = recorded(cache, &layer.blob.diff_id) {
        return Ok(m);
    }
    let m = of_blob(cache, &layer.blob).map_err(read_error(&layer.component))?;
    let _ = cache.put_record(BUCKET, &layer.blob.diff_id, &m);
    Ok(m)
}

/// What the image's config says of how it starts: its `PATH` and the program its entrypoint
/// (else `cmd`) names by path.
fn started(config: &[u8]) -> (String, Option<String>) {
    let v: serde_json::Value = serde_json::from_slice(config).unwrap_or_default();
    let c = &v["config"];
    let path = (c["Env"].as_array().into_iter().flatten())
        .filter_map(|e| e.as_str()?.strip_prefix("PATH="))
        .next_back()
        .unwrap_or(DEFAULT_PATH)
        .to_string();
    let first = |k: &str| c[k].as_array()?.first()?.as_str().map(str::to_string);
    let program = match c["Entrypoint"].as_array().filter(|a| !a.is_empty()) {
        Some(_) => first("Entrypoint"),
        None => first("Cmd"),
    };
    (path, program.filter(|p| p.starts_with('/')))
}

/// `a` or `an` before a machine's name.
pub(super) fn article(name: &str) -> &'static str {
    if name.starts_with(['a', 'e', 'i', 'o', 'x']) || name.starts_with("s390") {
        "an"
    } else {
        "a"
    }
}

pub(super) fn also(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => " (and 1 more file the image would run or load is for another machine)".into(),
        n => format!(" (and {n} more files the image would run or load are for other machines)"),
    }
}

/// Fail when an ELF file the image of `layers` (config `config`) would run or load is not for
/// `platform`'s machine. Besides the image's `ld.so.conf`, the loader searches the wheels'
/// library directories `loader_dirs` (the plan's, with an apt base).
pub fn check(
    cache: &Cache,
    layers: &[ImageLayer],
    config: &[u8],
    platform: &crate::profile::Platform,
    loader_dirs: &[String],
) -> Result<(), BuildError> {
    let Some(want) = machine::of_architecture(&platform.architecture) else {
        return Ok(());
    };
    let mut elves: BTreeMap<String, Head> = BTreeMap::new();
    let mut links: BTreeMap<String, String> = BTreeMap::new();
    let mut conf: BTreeMap<String, String> = BTreeMap::new();
    for l in layers {
        let listing = layer::listing::load(cache, &l.blob).map_err(read_error(&l.component))?;
        for (p, target) in listing {
            elves.remove(&p);
            conf.remove(&p);
            match target {
                Some(t) => links.insert(p, t),
                None => links.remove(&p),
            };
        }
        let m = of_layer(cache, l)?;
        elves.extend(m.elves);
        conf.extend(m.conf);
    }
    let (path, program) = started(config);
    let mut dirs: Vec<String> = conf
        .values()
        .flat_map(|t| startable::conf_dirs(t))
        .collect();
    dirs.extend(loader_dirs.iter().cloned());
    let image = Image {
        elves: &elves,
        links: &links,
        programs: program
            .into_iter()
            .chain([gpuimg_expect::BINARY_PATH.to_string()])
            .collect(),
        path_dirs: path
            .split(':')
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .collect(),
        library_dirs: dirs,
    };
    let found = startable::foreign(&image, want);
    match found.split_first() {
        None => Ok(()),
        Some((Foreign { path, head }, rest)) => Err(BuildError::ForeignMachine {
            path: format!("/{path}"),
            machine: machine::elf_name(head.machine),
            platform: platform.to_string(),
            others: rest.len(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_names_path_and_program() {
        let c = br#"{"config":{"Env":["A=1","PATH=/opt/bin:/usr/bin"],"Entrypoint":["/usr/local/bin/gpuimg-selftest","--"],"Cmd":["x"]}}"#;
        assert_eq!(
            started(c),
            (
                "/opt/bin:/usr/bin".to_string(),
                Some("/usr/local/bin/gpuimg-selftest".to_string())
            )
        );
        let c = br#"{"config":{"Cmd":["/app/run"]}}"#;
        assert_eq!(
            started(c),
            (DEFAULT_PATH.to_string(), Some("/app/run".into()))
        );
        let c = br#"{"config":{"Entrypoint":["python3"]}}"#;
        assert_eq!(started(c).1, None);
        assert_eq!(started(b"not json").0, DEFAULT_PATH);
    }

    #[test]
    fn hard_links_share_their_files_head() {
        let mut elf = [0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[16] = 2;
        elf[18] = 62;
        let mut m = LayerMachines::default();
        m.file("usr/bin/a", &mut &elf[..]).unwrap();
        m.file("usr/bin/script", &mut &b"#!/bin/sh\nexit 0\n...."[..])
            .unwrap();
        m.file("etc/ld.so.conf.d/x.conf", &mut &b"/opt/x\n"[..])
            .unwrap();
        m.link("usr/bin/b", "usr/bin/a");
        m.link("usr/bin/c", "usr/bin/script");
        assert_eq!(
            m.elves.keys().collect::<Vec<_>>(),
            ["usr/bin/a", "usr/bin/b"]
        );
        assert_eq!(
            m.elves["usr/bin/b"],
            Head {
                machine: 62,
                kind: 2
            }
        );
        assert_eq!(m.conf["etc/ld.so.conf.d/x.conf"], "/opt/x\n");
    }

    /// A layer's blob says what its tree says: ELF files (one stored as a hard link to an
    /// identical one), the loader configuration; both compressions.
    #[test]
    fn the_blob_says_what_the_tree_says() {
        use gpuimg_assemble::{DataSource, Entry};
        use std::sync::Arc;
        let t = tempfile::tempdir().unwrap();
        let cache = Cache::open(t.path()).unwrap();
        let mut elf = vec![7u8; layer::DEDUP_MIN_BYTES as usize + 10];
        elf[..20].copy_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0\xb7\0");
        let mut tree = Tree::new("t");
        for (path, bytes) in [
            ("usr/lib/a.so", elf.clone()),
            ("opt/b.so", elf.clone()),
            ("etc/ld.so.conf.d/x.conf", b"/opt\n".to_vec()),
            (
                "usr/share/doc",
                b"not an ELF file, long enough to be read".to_vec(),
            ),
        ] {
            tree.insert(Entry {
                path: path.into(),
                kind: EntryKind::File {
                    size: bytes.len() as u64,
                    data: DataSource::Bytes(Arc::new(bytes)),
                },
                mode: 0o644,
                uid: 0,
                gid: 0,
            });
        }
        tree.add_missing_parents();
        let from_tree = of_tree(&tree).unwrap();
        assert_eq!(
            from_tree.elves.keys().collect::<Vec<_>>(),
            ["opt/b.so", "usr/lib/a.so"]
        );
        assert_eq!(
            from_tree.elves["opt/b.so"],
            Head {
                machine: 183,
                kind: 3
            }
        );
        assert_eq!(from_tree.conf.len(), 1);
        for compression in [Compression::Gzip, Compression::Zstd] {
            let opts = layer::LayerOptions {
                compression,
                epoch: 0,
            };
            let (blob, _) =
                layer::write_layer("t", &tree, opts, &cache, &mut gpuimg_fetch::observe::Silent)
                    .unwrap();
            assert!(!blob.linked.is_empty(), "one file stored as a link");
            assert_eq!(of_blob(&cache, &blob).unwrap(), from_tree);
            // Recorded once, then read from the record.
            remember(&cache, "t", &blob, &tree).unwrap();
            assert_eq!(recorded(&cache, &blob.diff_id), Some(from_tree.clone()));
        }
    }
}
