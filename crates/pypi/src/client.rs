//! The index client: project pages (PEP 691 JSON asked first, PEP 503 HTML accepted; `file:`
//! indexes read from disk; find-links directories and pages), and each wheel's core metadata
//! without its body — the PEP 658/714 metadata file when the index has one, else HTTP range
//! reads of the wheel's zip directory (`zipdir`).
//!
//! Cache: every project page fetched is kept as the last copy of its URL (`roots-v1`, with its
//! media type and final URL), the only copy `--offline` reads; metadata is kept per wheel in
//! `wheel-metadata-v1`, keyed by what it was read from — the wheel's sha256 (else URL) with the
//! PEP 658 file's sha256 as the page announces it (else the file's URL), or with the wheel's
//! URL when read from the wheel by ranges — never by the wheel's hash alone.
//! `file:` indexes and find-links directories are read through `local` (regular files only,
//! capped like remote pages and wheels).
//! Must never download a wheel's body to resolve, never ask the network when offline, and
//! never let one index's metadata answer for another's wheel.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pep508_rs::PackageName;

use gpuimg_fetch::{ByteRange, Fetched, Fetcher, Get};
use gpuimg_store::cache::{Bucket, Key};
use gpuimg_store::digest::Digest;

use super::local;
use super::metadata::{self, CoreMetadata};
use super::page::{self, DistFile};
use super::request::{Index, Links, PythonRequest};
use super::zipdir::{self, Ranged};
use super::PypiError;

/// The largest project page read (a popular project's JSON page is a few MiB).
pub const MAX_PAGE_BYTES: u64 = 64 << 20;
/// The largest metadata file read.
pub const MAX_METADATA_FILE_BYTES: u64 = zipdir::MAX_METADATA_BYTES;

/// A project's files, from the first index that lists it, plus find-links.
#[derive(Debug, Clone)]
pub struct Project {
    pub name: PackageName,
    /// The files, each with the name of the index (or `find-links`) it came from.
    pub files: Vec<(DistFile, String)>,
    /// Where it was looked for, for messages.
    pub searched: Vec<String>,
}

/// What the metadata cache keeps per wheel.
#[derive(serde::Serialize, serde::Deserialize)]
struct MetaRecord {
    metadata: String,
    size: Option<u64>,
}

pub struct Client<'a> {
    pub fetcher: Fetcher,
    request: &'a PythonRequest,
    offline: bool,
    projects: Mutex<HashMap<PackageName, Arc<Project>>>,
    /// Sizes learnt from range reads, by URL.
    sizes: Mutex<HashMap<String, u64>>,
}

impl<'a> Client<'a> {
    pub fn new(
        request: &'a PythonRequest,
        cache_root: &Path,
        offline: bool,
    ) -> Result<Self, PypiError> {
        let mut fetcher = Fetcher::new(
            cache_root,
            offline,
            request.jobs,
            request.limits,
            &request.trust,
        )?;
        fetcher.set_credentials(request.credentials.clone());
        Ok(Client {
            fetcher,
            request,
            offline,
            projects: Mutex::default(),
            sizes: Mutex::default(),
        })
    }

    /// `name`'s files (memoised).
    pub fn project(&self, name: &PackageName) -> Result<Arc<Project>, PypiError> {
        if let Some(p) = self.lock_projects().get(name) {
            return Ok(p.clone());
        }
        let p = Arc::new(self.load_project(name)?);
        self.lock_projects().insert(name.clone(), p.clone());
        Ok(p)
    }

    fn lock_projects(&self) -> std::sync::MutexGuard<'_, HashMap<PackageName, Arc<Project>>> {
        self.projects.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Load the pages of `names` not loaded yet, several at a time; errors wait for
    /// [`Client::project`] to report them.
    pub fn prefetch(&self, names: &[PackageName]) {
        let todo: Vec<&PackageName> = {
            let have = self.lock_projects();
            names.iter().filter(|n| !have.contains_key(*n)).collect()
        };
        if todo.len() < 2 {
            return;
        }
        self.map_parallel(&todo, |n| {
            let _ = self.project(n);
        });
    }

    /// `f` of each item, up to the request's `jobs` at a time, in the items' order.
    pub fn map_parallel<T: Sync, R: Send>(
        &self,
        items: &[T],
        f: impl Fn(&T) -> R + Sync,
    ) -> Vec<R> {
        if items.len() < 2 {
            return items.iter().map(f).collect();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let done = Mutex::new(Vec::with_capacity(items.len()));
        std::thread::scope(|s| {
            for _ in 0..self.request.jobs.clamp(1, 16).min(items.len()) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    done.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
                });
            }
        });
        let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
        done.sort_by_key(|(i, _)| *i);
        done.into_iter().map(|(_, r)| r).collect()
    }

    fn load_project(&self, name: &PackageName) -> Result<Project, PypiError> {
        let mut files = Vec::new();
        let mut searched = Vec::new();
        for index in &self.request.indexes {
            searched.push(format!("{} ({})", index.url, index.name));
            if let Some(found) = self.page(index, name)? {
                if !found.is_empty() {
                    files.extend(found.into_iter().map(|f| (f, index.name.clone())));
                    break;
                }
            }
        }
        for links in &self.request.find_links {
            let listed = match links {
                Links::Dir(d) => {
                    searched.push(format!("{} (find-links)", d.display()));
                    dir_files(d)?
                }
                Links::Page(u) => {
                    searched.push(format!("{u} (find-links)"));
                    self.cached_page(u, "find-links")?.unwrap_or_default()
                }
            };
            files.extend(
                listed.into_iter().filter_map(|f| {
                    belongs(&f.filename, name).then(|| (f, "find-links".to_string()))
                }),
            );
        }
        Ok(Project {
            name: name.clone(),
            files,
            searched,
        })
    }

    /// The files of `name` on the indexes named `index` (the first that lists it), or in
    /// find-links for `find-links`.
    pub fn project_on(&self, name: &PackageName, index: &str) -> Result<Vec<DistFile>, PypiError> {
        if index == "find-links" {
            let p = self.project(name)?;
            return Ok(p
                .files
                .iter()
                .filter(|(_, i)| i == "find-links")
                .map(|(f, _)| f.clone())
                .collect());
        }
        for i in self.request.indexes_named(index) {
            if let Some(found) = self.page(i, name)? {
                if !found.is_empty() {
                    return Ok(found);
                }
            }
        }
        Ok(Vec::new())
    }

    /// Copy a local wheel into the cache's `wheels-v1`, checked against the pin's sha256 and
    /// size on the way.
    pub fn import_local(&self, path: &Path, pin: &crate::PinnedWheel) -> Result<(), PypiError> {
        use std::io::Read;
        let read_err = |source| PypiError::Read {
            path: path.to_path_buf(),
            source,
        };
        let cache = self.fetcher.cache();
        let tmp = cache.temp()?;
        let mut w = gpuimg_store::digest::HashingWriter::new(tmp);
        self.request
            .budget
            .check_wheel_size(&pin.filename, pin.size)?;
        let (mut f, _) = local::open_regular(path).map_err(read_err)?;
        // Never more than the promised size is written; a byte past it is an error.
        std::io::copy(&mut (&mut f).take(pin.size), &mut w).map_err(read_err)?;
        let longer = f.read(&mut [0u8; 1]).map_err(read_err)? > 0;
        let (tmp, digest, size) = w.finish();
        let size = size + u64::from(longer);
        if digest != pin.sha256 || size != pin.size {
            return Err(PypiError::HashMismatch {
                filename: path.display().to_string(),
                expected: format!("{} ({} bytes)", pin.sha256, pin.size),
                actual: format!("{digest} ({size} bytes)"),
            });
        }
        cache.commit(tmp, Bucket::Wheels, &digest)?;
        Ok(())
    }

    /// The files `index` lists for `name`; `None` when it does not know the project.
    fn page(&self, index: &Index, name: &PackageName) -> Result<Option<Vec<DistFile>>, PypiError> {
        let url = index
            .url
            .join(&format!("{name}/"))
            .map_err(|e| PypiError::bad(&index.origin, e.to_string()))?;
        if url.scheme() == "file" {
            return local_page(&url);
        }
        self.cached_page(&url, &index.name)
    }

    /// A page over HTTP: fetched (and kept) online, the kept copy offline.
    fn cached_page(&self, url: &url::Url, index: &str) -> Result<Option<Vec<DistFile>>, PypiError> {
        let key = format!("pypi-page-v1 {url}");
        let cache = self.fetcher.cache();
        let kept = if self.offline {
            match cache.get_root(&key)? {
                Some(b) => b,
                None => {
                    return Err(PypiError::Offline {
                        project: url.to_string(),
                        index: index.to_string(),
                    })
                }
            }
        } else {
            let got = self.fetcher.get(&Get {
                url: url.as_str(),
                accept: Some(page::ACCEPT),
                range: None,
                cap: MAX_PAGE_BYTES,
            })?;
            let kept = match got {
                Fetched::Page(p) => encode(200, p.content_type.as_deref(), &p.url, &p.body),
                Fetched::Missing(status) => encode(status, None, url.as_str(), &[]),
                Fetched::RangeIgnored => encode(404, None, url.as_str(), &[]),
            };
            cache.put_root(&key, &kept)?;
            kept
        };
        let (status, content_type, final_url, body) =
            decode(&kept).ok_or_else(|| PypiError::BadPage {
                url: url.to_string(),
                message: "the cached copy is damaged".into(),
            })?;
        if status != 200 {
            return Ok(None);
        }
        let base = url::Url::parse(&final_url).unwrap_or_else(|_| url.clone());
        page::parse(body, content_type.as_deref(), &base)
            .map(Some)
            .map_err(|message| PypiError::BadPage {
                url: url.to_string(),
                message,
            })
    }

    /// The core metadata of `file` (a wheel of `project`), without its body; also its size
    /// when learnt on the way.
    pub fn metadata(&self, file: &DistFile) -> Result<(CoreMetadata, Option<u64>), String> {
        if let Some(path) = local_path(&file.url) {
            let (f, size) =
                local::open_regular(&path).map_err(|e| format!("`{}`: {e}", path.display()))?;
            self.request
                .budget
                .check_wheel_size(&file.filename, size)
                .map_err(|e| e.to_string())?;
            let bytes = zipdir::metadata(&mut zipdir::LocalFile { file: f, size })?;
            return Ok((metadata::parse(&bytes)?, Some(size)));
        }
        let cache = self.fetcher.cache().shared();
        if let Some((_, r)) = self.kept_metadata(file) {
            return Ok((metadata::parse(r.metadata.as_bytes())?, r.size));
        }
        if self.offline {
            return Err(format!(
                "its metadata is not in the cache and `--offline` forbids fetching it ({})",
                file.filename
            ));
        }
        let announced = match &file.metadata {
            Some(hash) => self.metadata_file(file, hash.as_ref())?,
            None => None,
        };
        let (bytes, size, key) = match announced {
            Some(b) => (b, file.size, meta_keys(file).0),
            // No metadata file (or one announced but not served): range reads of the wheel.
            None => {
                let mut r = HttpRange::new(self, &file.url, file.size)?;
                let bytes = zipdir::metadata(&mut r)?;
                (bytes, Some(r.size), None)
            }
        };
        let key = key.unwrap_or(meta_keys(file).1);
        let parsed = metadata::parse(&bytes)?;
        let rec = MetaRecord {
            metadata: String::from_utf8_lossy(&bytes).into_owned(),
            size,
        };
        // Only saves fetching it again: failing to record is no error.
        let _ = cache.put_record(Bucket::WheelMetadata, &key, &rec);
        Ok((parsed, size))
    }

    /// The cached metadata of `file` read from the same source it would be read from now (its
    /// key, and the record); only a record the cache trusts, unless offline.
    fn kept_metadata(&self, file: &DistFile) -> Option<(Digest, MetaRecord)> {
        let cache = self.fetcher.cache().shared();
        let (announced, wheel) = meta_keys(file);
        for key in announced.into_iter().chain([wheel]) {
            if let Ok(Some(rec)) = cache.read_record(Bucket::WheelMetadata, &key) {
                if rec.trusted || self.offline {
                    if let Ok(r) = serde_json::from_slice::<MetaRecord>(&rec.bytes) {
                        return Some((key, r));
                    }
                }
            }
        }
        None
    }

    /// The PEP 658 file beside the wheel, checked against its sha256 when the page gives one;
    /// `None` when the server does not have it after all.
    fn metadata_file(
        &self,
        file: &DistFile,
        hash: Option<&Digest>,
    ) -> Result<Option<Vec<u8>>, String> {
        let url = format!("{}.metadata", file.url);
        let got = self
            .fetcher
            .get(&Get {
                url: &url,
                accept: None,
                range: None,
                cap: MAX_METADATA_FILE_BYTES,
            })
            .map_err(|e| e.to_string())?;
        let body = match got {
            Fetched::Page(p) => p.body,
            _ => return Ok(None),
        };
        if let Some(want) = hash {
            let got = Digest::of(&body);
            if got != *want {
                return Err(format!(
                    "the metadata file `{url}` has the sha256 `{got}`, not the index's `{want}`"
                ));
            }
        }
        Ok(Some(body))
    }

    /// The size of `file` in bytes: the page's, one learnt from range reads, the metadata
    /// record's, else asked of the server with a one-byte range.
    pub fn size_of(&self, file: &DistFile, known: Option<u64>) -> Result<u64, String> {
        if let Some(s) = file.size.or(known) {
            return Ok(s);
        }
        if let Some(s) = self
            .sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&file.url)
        {
            return Ok(*s);
        }
        if let Some(path) = local_path(&file.url) {
            return fs_err::metadata(&path)
                .map(|m| m.len())
                .map_err(|e| e.to_string());
        }
        if self.offline {
            return Err(format!("its size is not in the cache ({})", file.filename));
        }
        let r = HttpRange {
            client: self,
            url: file.url.clone(),
            size: 0,
            first: None,
        };
        let size = r
            .get(ByteRange::Suffix(1))?
            .1
            .ok_or_else(|| format!("the server gives no size for `{}`", file.url))?;
        if let Some((key, mut m)) = self.kept_metadata(file) {
            m.size = Some(size);
            let cache = self.fetcher.cache().shared();
            let _ = cache.put_record(Bucket::WheelMetadata, &key, &m);
        }
        Ok(size)
    }
}

/// The metadata record's keys, by what the metadata is read from, each with the wheel's
/// sha256 (or, without one, its URL), never the wheel's hash alone: the PEP 658 file the page
/// announces (by the sha256 it announces, else by the file's URL), when it does; and the wheel
/// itself, read by ranges at its URL (a page's metadata never answers for another index's).
fn meta_keys(file: &DistFile) -> (Option<Digest>, Digest) {
    let wheel = |k: &mut Key| {
        match &file.sha256 {
            Some(d) => k.str("sha256").digest(d),
            None => k.str("url").str(&file.url),
        };
    };
    let announced = file.metadata.as_ref().map(|hash| {
        let mut k = Key::new("wheel-metadata-v2");
        wheel(&mut k);
        match hash {
            Some(h) => k.str("metadata-file-sha256").digest(h),
            None => k
                .str("metadata-file-url")
                .str(&format!("{}.metadata", file.url)),
        };
        k.finish()
    });
    let mut k = Key::new("wheel-metadata-v2");
    wheel(&mut k);
    k.str("read-from-wheel-at").str(&file.url);
    (announced, k.finish())
}

/// `status`, media type and final URL, then the body.
fn encode(status: u16, content_type: Option<&str>, url: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "gpuimg-page-v1\n{status}\n{}\n{url}\n",
        content_type.unwrap_or("")
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

type Decoded<'b> = (u16, Option<String>, String, &'b [u8]);

fn decode(kept: &[u8]) -> Option<Decoded<'_>> {
    let mut rest = kept;
    let mut line = || -> Option<String> {
        let i = rest.iter().position(|&b| b == b'\n')?;
        let l = String::from_utf8(rest[..i].to_vec()).ok()?;
        rest = &rest[i + 1..];
        Some(l)
    };
    if line()? != "gpuimg-page-v1" {
        return None;
    }
    let status = line()?.parse().ok()?;
    let ct = line()?;
    let url = line()?;
    Some((status, (!ct.is_empty()).then_some(ct), url, rest))
}

/// Whether a file name is a distribution of `name`.
fn belongs(filename: &str, name: &PackageName) -> bool {
    if let Some(w) = super::filename::WheelName::parse(filename) {
        return &w.name == name;
    }
    super::filename::sdist_version(filename, name).is_some()
}

pub(super) fn local_path(url: &str) -> Option<PathBuf> {
    let u = url::Url::parse(url).ok()?;
    (u.scheme() == "file")
        .then(|| u.to_file_path().ok())
        .flatten()
}

/// A `file:` index's page: `<dir>/<project>/index.html` (or `index.json`).
fn local_page(url: &url::Url) -> Result<Option<Vec<DistFile>>, PypiError> {
    let Some(dir) = url.to_file_path().ok() else {
        return Ok(None);
    };
    for (name, ct) in [("index.json", Some(page::JSON)), ("index.html", None)] {
        let path = dir.join(name);
        let body = match local::read_capped(&path, MAX_PAGE_BYTES) {
            Ok(b) => b,
            // No such page (or no such project directory): the index does not list it.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) =>
            {
                continue
            }
            Err(source) => return Err(PypiError::Read { path, source }),
        };
        let base = url::Url::from_file_path(&path).unwrap_or_else(|_| url.clone());
        return page::parse(&body, ct, &base)
            .map(Some)
            .map_err(|message| PypiError::BadPage {
                url: path.display().to_string(),
                message,
            });
    }
    Ok(None)
}

/// The distributions in a find-links directory (not recursive).
fn dir_files(dir: &Path) -> Result<Vec<DistFile>, PypiError> {
    let entries = match fs_err::read_dir(dir) {
        Ok(e) => e,
        // A find-links directory that is not there lists nothing (pip warns and goes on).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(PypiError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let Some(filename) = path.file_name().and_then(|n| n.to_str()).map(String::from) else {
            continue;
        };
        if !path.is_file() {
            continue;
        }
        let Ok(url) = url::Url::from_file_path(&path) else {
            continue;
        };
        out.push(DistFile {
            filename,
            url: url.to_string(),
            sha256: None,
            requires_python: None,
            yanked: None,
            metadata: None,
            size: None,
        });
    }
    out.sort_by(|a, b| a.filename.cmp(&b.filename));
    Ok(out)
}

/// Byte ranges of a wheel on an HTTP server.
struct HttpRange<'c, 'a> {
    client: &'c Client<'a>,
    url: String,
    size: u64,
    /// The first answer (a suffix read), kept to serve the tail read from.
    first: Option<(u64, Vec<u8>)>,
}

impl<'c, 'a> HttpRange<'c, 'a> {
    /// Learns the size (and the tail) with one suffix read when the page did not give it.
    fn new(client: &'c Client<'a>, url: &str, size: Option<u64>) -> Result<Self, String> {
        let mut r = HttpRange {
            client,
            url: url.to_string(),
            size: size.unwrap_or(0),
            first: None,
        };
        if size.is_none() {
            let (body, total) = r.get(ByteRange::Suffix(zipdir::TAIL_BYTES))?;
            let total = total.ok_or_else(|| {
                format!("the server gives no size for `{url}` in its range answer")
            })?;
            let start = total
                .checked_sub(body.len() as u64)
                .ok_or_else(|| format!("the server's range answer for `{url}` is inconsistent"))?;
            r.size = total;
            r.first = Some((start, body));
            client
                .sizes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(url.to_string(), total);
        }
        Ok(r)
    }

    fn get(&self, range: ByteRange) -> Result<(Vec<u8>, Option<u64>), String> {
        let want = match range {
            ByteRange::Suffix(n) => n,
            ByteRange::Span { len, .. } => len,
        };
        match self
            .client
            .fetcher
            .get(&Get {
                url: &self.url,
                accept: None,
                range: Some(range),
                cap: want,
            })
            .map_err(|e| e.to_string())?
        {
            Fetched::Page(p) => Ok((p.body, p.total)),
            Fetched::Missing(s) => Err(format!("`{}` answers HTTP {s}", self.url)),
            Fetched::RangeIgnored => Err(format!(
                "the index has no metadata files and `{}` does not serve byte ranges",
                self.url
            )),
        }
    }
}

impl Ranged for HttpRange<'_, '_> {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, String> {
        if let Some((s, bytes)) = &self.first {
            if start >= *s
                && start
                    .checked_add(len)
                    .is_some_and(|e| e <= s + bytes.len() as u64)
            {
                let i = (start - s) as usize;
                return Ok(bytes[i..i + len as usize].to_vec());
            }
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        let (body, _) = self.get(ByteRange::Span { start, len })?;
        if body.len() as u64 != len {
            return Err(format!(
                "`{}` sent {} bytes for a range of {len}",
                self.url,
                body.len()
            ));
        }
        Ok(body)
    }
}
