//! `inspect --unused`: what `elf::reach` (the one computation `strip: [unused-libraries]`
//! makes over the wheels before the layers are written) says of an image read back from its
//! layers. Its extra roots are the ELF files in the `PATH` directories, the entrypoint, and the
//! libraries the self-test's expectation (`/etc/gpuimg/expect.json`) says it loads by name;
//! with the extension modules and `data/dlopen.yaml`'s files, `DT_NEEDED` and the library
//! names in each reached object's strings are followed. Reported: the Python packages' shared
//! libraries nothing reaches (Debian packages' libraries are never judged: glibc, PAM and
//! others load theirs by name), and each needed name of a reached object nothing in the image
//! provides.
//!
//! Reads each ELF file's headers, dynamic section and names (its first [`HEAD`] bytes and the
//! last [`WINDOW`] before the read position are kept, to reread what lies before its dynamic
//! section), and scans its bytes as they pass for library names (`elf::names`). Must never
//! modify the image.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read};
use std::rc::Rc;

use oci_spec::image::ImageConfiguration;
use serde::{Deserialize, Serialize};

use super::files::{listing, FileKind};
use super::{parse, read_blob, select, Image, InspectError, Pick};
use gpuimg_elf::closure::LoaderView;
use gpuimg_elf::names::{NameScan, Scanning};
use gpuimg_elf::{self as elf, reach, SharedObject};

/// Bytes of a file's beginning kept while reading it, for its string table.
pub const HEAD: usize = 32 << 20;
/// Bytes read of one loader configuration file.
const MAX_CONF: u64 = 64 << 10;
/// Bytes read of the self-test's expectation.
const MAX_EXPECT: u64 = 1 << 20;
/// Where the self-test's expectation lies (`expect::DEFAULT_PATH`, no leading `/`).
const EXPECT_PATH: &str = "etc/gpuimg/expect.json";

/// The ELF facts and loader configuration collected while the layers are read.
#[derive(Debug, Default)]
pub struct Elves {
    objects: BTreeMap<String, SharedObject>,
    conf: BTreeMap<String, Vec<u8>>,
    expect: Option<Vec<u8>>,
}

/// What `inspect` reads of the self-test's expectation (the `expect` module owns its format):
/// the libraries it loads by name at boot, each with the companions it loads after it.
#[derive(Debug, Default, Deserialize)]
struct Loads {
    #[serde(default)]
    libraries: Vec<Loaded>,
}

#[derive(Debug, Deserialize)]
struct Loaded {
    soname: String,
    dir: String,
    #[serde(default)]
    companions: Vec<String>,
}

impl Loads {
    /// The image paths loaded (no leading `/`), as `plan::unused::selftest_roots` has them.
    fn paths(&self) -> Vec<String> {
        (self.libraries.iter())
            .flat_map(|l| {
                std::iter::once(&l.soname)
                    .chain(&l.companions)
                    .map(|n| format!("{}/{n}", l.dir.trim_start_matches('/')))
            })
            .collect()
    }
}

/// What a [`Seen`] reader kept: the file's first [`HEAD`] bytes, and the last [`WINDOW`]
/// bytes before the read position (a big library's string table often lies just before its
/// dynamic section, far from the start).
#[derive(Default)]
struct Kept {
    head: Vec<u8>,
    window: std::collections::VecDeque<u8>,
    /// The file offset of `window`'s first byte.
    window_at: u64,
}

impl Kept {
    fn range(&self, off: u64, len: u64) -> Option<Vec<u8>> {
        let start = usize::try_from(off).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        if start < self.head.len() {
            return Some(self.head[start..end.min(self.head.len())].to_vec());
        }
        let from = usize::try_from(off.checked_sub(self.window_at)?).ok()?;
        (from < self.window.len()).then(|| {
            let to = (from + (end - start)).min(self.window.len());
            self.window.range(from..to).copied().collect()
        })
    }
}

/// Bytes kept before the read position.
pub const WINDOW: usize = 8 << 20;

/// A reader that keeps what [`Kept`] holds of the bytes that pass.
struct Seen<'a> {
    inner: &'a mut dyn Read,
    kept: Rc<RefCell<Kept>>,
}

impl Read for Seen<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut k = self.kept.borrow_mut();
        let room = HEAD.saturating_sub(k.head.len()).min(n);
        k.head.extend_from_slice(&buf[..room]);
        k.window.extend(&buf[..n]);
        let over = k.window.len().saturating_sub(WINDOW);
        k.window.drain(..over);
        k.window_at += over as u64;
        Ok(n)
    }
}

fn is_conf(path: &str) -> bool {
    path == "etc/ld.so.conf"
        || path
            .strip_prefix("etc/ld.so.conf.d/")
            .is_some_and(|n| !n.contains('/') && n.ends_with(".conf"))
}

impl Elves {
    pub(super) fn forget(&mut self, path: &str) {
        self.objects.remove(path);
        self.conf.remove(path);
        if path == EXPECT_PATH {
            self.expect = None;
        }
    }

    /// Read the regular file `path` (mode `mode`) from `data` if it may be an ELF object or
    /// is loader configuration.
    pub(super) fn read(&mut self, path: &str, mode: u32, data: &mut dyn Read) -> io::Result<()> {
        if is_conf(path) {
            let mut bytes = Vec::new();
            data.take(MAX_CONF).read_to_end(&mut bytes)?;
            self.conf.insert(path.to_string(), bytes);
            return Ok(());
        }
        if path == EXPECT_PATH {
            let mut bytes = Vec::new();
            data.take(MAX_EXPECT).read_to_end(&mut bytes)?;
            self.expect = Some(bytes);
            return Ok(());
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        if !(name.contains(".so") || mode & 0o111 != 0) {
            return Ok(());
        }
        let kept = Rc::new(RefCell::new(Kept::default()));
        let mut scan = NameScan::new();
        let so = {
            let mut seen = Seen {
                inner: &mut *data,
                kept: Rc::clone(&kept),
            };
            let mut again = |off: u64, len: u64| kept.borrow().range(off, len);
            let mut scanning = Scanning {
                inner: &mut seen,
                scan: &mut scan,
            };
            elf::parse_stream(&mut scanning, &mut again)
        };
        // The rest of the file passes by the scan alone: nothing more is kept.
        if let Some(so) = so {
            let mut rest = Scanning {
                inner: data,
                scan: &mut scan,
            };
            io::copy(&mut rest, &mut io::sink())?;
            self.objects
                .insert(path.to_string(), so.with_names(scan.finish()));
        }
        Ok(())
    }

    /// The directories the loader configuration lists, in the order ldconfig reads them
    /// (`/etc/ld.so.conf`, its `include` of `ld.so.conf.d/*.conf` in name order).
    fn conf_dirs(&self) -> Vec<String> {
        let dirs = |bytes: &[u8]| -> Vec<Result<String, ()>> {
            String::from_utf8_lossy(bytes)
                .lines()
                .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
                .filter_map(|l| match l {
                    l if l.starts_with("include") => Some(Err(())),
                    l if l.starts_with('/') => Some(Ok(elf::closure::normalize(&l))),
                    _ => None,
                })
                .collect()
        };
        let included: Vec<String> = (self.conf.iter())
            .filter(|(p, _)| p.as_str() != "etc/ld.so.conf")
            .flat_map(|(_, b)| dirs(b).into_iter().flatten())
            .collect();
        let Some(main) = self.conf.get("etc/ld.so.conf") else {
            return included;
        };
        let mut out = Vec::new();
        for line in dirs(main) {
            match line {
                Ok(d) => out.push(d),
                Err(()) => out.extend(included.iter().cloned()),
            }
        }
        out
    }
}

/// One library nothing reaches.
#[derive(Debug, Serialize)]
pub struct UnusedLibrary {
    pub path: String,
    pub size: u64,
    pub owner: Option<String>,
}

/// A name an object needs that nothing in the image provides.
#[derive(Debug, Serialize)]
pub struct MissingLibrary {
    pub needed: String,
    pub by: String,
}

/// What `inspect --unused` reports.
#[derive(Debug, Serialize)]
pub struct UnusedReport {
    /// How many ELF objects the image holds, and how many the roots reach.
    pub objects: usize,
    pub reached: usize,
    pub unused: Vec<UnusedLibrary>,
    pub unused_bytes: u64,
    pub missing: Vec<MissingLibrary>,
}

/// The ELF closure of the image `which` picks in `img` (tagged, or the first; or one
/// manifest of an index).
pub fn inspect_unused<'a>(
    img: &Image,
    which: impl Into<Pick<'a>>,
) -> Result<UnusedReport, InspectError> {
    let which = which.into();
    let selected = select(img, which)?;
    let config_digest = selected.manifest.config().digest().to_string();
    let config: ImageConfiguration = parse(&config_digest, &read_blob(img, &config_digest)?)?;
    let mut elves = Elves::default();
    let files = listing(img, which, Some(&mut elves))?.files;
    let mut view = LoaderView::default();
    let mut sizes = BTreeMap::new();
    for f in &files {
        let rel = f.path.trim_start_matches('/').to_string();
        match f.kind {
            FileKind::File => {
                sizes.insert(rel.clone(), (f.size, f.owner.clone()));
                if let Some(so) = elves.objects.remove(&rel) {
                    view.objects.insert(rel, so);
                }
            }
            FileKind::Symlink | FileKind::Hardlink => {
                if let Some(l) = &f.link {
                    view.links.insert(rel, l.clone());
                }
            }
            _ => {}
        }
    }
    view.conf_dirs = elves.conf_dirs();
    let env: Vec<String> = config
        .config()
        .as_ref()
        .and_then(|c| c.env().clone())
        .unwrap_or_default();
    let var = |k: &str| {
        env.iter()
            .find_map(|e| e.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            .map(str::to_string)
    };
    let dirs = |v: Option<String>| -> Vec<String> {
        v.unwrap_or_default()
            .split(':')
            .filter(|d| !d.is_empty())
            .map(elf::closure::normalize)
            .collect()
    };
    view.library_path = dirs(var("LD_LIBRARY_PATH"));
    let mut path_dirs: BTreeSet<String> = ["bin", "sbin", "usr/bin", "usr/sbin"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    path_dirs.extend(dirs(var("PATH")));
    let mut roots: Vec<String> = (view.objects.keys())
        .filter(|p| path_dirs.contains(p.rsplit_once('/').map_or("", |(d, _)| d)))
        .cloned()
        .collect();
    let entry = config.config().as_ref().and_then(|c| {
        c.entrypoint()
            .as_ref()
            .and_then(|e| e.first().cloned())
            .or_else(|| c.cmd().as_ref().and_then(|c| c.first().cloned()))
    });
    if let Some(e) = entry.filter(|e| e.starts_with('/')) {
        roots.push(e);
    }
    // An expectation that does not read (an older format, a damaged file) loads nothing more.
    let loads: Loads = (elves.expect.as_deref())
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_default();
    roots.extend(loads.paths());
    let reach = reach::reach(&view, roots);
    let unused: Vec<UnusedLibrary> = (reach.unused.iter())
        .map(|p| {
            let (size, owner) = sizes.get(p).cloned().unwrap_or((0, None));
            UnusedLibrary {
                path: format!("/{p}"),
                size,
                owner,
            }
        })
        .collect();
    Ok(UnusedReport {
        objects: view.objects.len(),
        reached: reach.reached.len(),
        unused_bytes: unused.iter().map(|u| u.size).sum(),
        unused,
        missing: (reach.missing.into_iter())
            .map(|(by, needed)| MissingLibrary {
                needed,
                by: format!("/{by}"),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_configuration_is_read_in_ldconfig_order() {
        let mut e = Elves::default();
        e.conf.insert(
            "etc/ld.so.conf".into(),
            b"# comment\ninclude /etc/ld.so.conf.d/*.conf\n/opt/x/lib\n".to_vec(),
        );
        e.conf.insert(
            "etc/ld.so.conf.d/x86_64-linux-gnu.conf".into(),
            b"/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n".to_vec(),
        );
        e.conf.insert(
            "etc/ld.so.conf.d/gpuimg-python.conf".into(),
            b"/a/b/\n".to_vec(),
        );
        assert_eq!(
            e.conf_dirs(),
            [
                "a/b",
                "usr/local/lib/x86_64-linux-gnu",
                "lib/x86_64-linux-gnu",
                "opt/x/lib"
            ]
        );
    }
}
