//! `gpuimg-apt`: a native apt repository client. Resolve, verify, fetch and unpack `.deb`
//! packages with no daemon, no chroot and no maintainer scripts.
//!
//! Owns the apt side of a build: repository configuration (the profile's and the host's
//! sources), `Release`/`InRelease` and their OpenPGP signatures, `Packages` indexes, the
//! solver, `.deb` decoding and unpacking, the dpkg database, `ld.so.cache` and what skipped
//! maintainer scripts would do (fix-ups; for a root that boots, [`PackagesSpec::system`], also
//! its system users, enabled units and empty node state: `system.rs`), with the plain data it
//! speaks in ([`PackagesSpec`], [`LockedPackage`], [`DebianArch`]).
//! Its entry is this file's API: [`resolve`] (indexes only: the package set for `lock` and
//! `build`), [`describe`] (each package's control fields, for the plan), [`install`] and
//! [`install_replaying`] (the set into a root, for `build`; the latter replays packages whose
//! layers are cached from their sketches, `sketch.rs`). The root package reads the installed
//! root into its trees (`sources::apt_tree`); this crate knows nothing of them.
//! Must never trust an unsigned index (unless `trusted: true`, with a warning every time), nor
//! a byte whose sha256 the signed chain did not give, nor write outside `dest`.

mod account_requests;
mod architecture;
mod control;
mod deb;
mod decode;
mod dpkgdb;
mod error;
mod filecaps;
mod fixups;
mod hostconf;
mod index_map;
mod install;
mod ldcache;
mod locked;
mod needed;
mod nvidia_alternatives;
mod offer;
mod openpgp;
mod prefer;
mod prune;
mod relation;
mod release;
mod repo;
mod script_words;
mod sketch;
mod solver;
mod sonames;
mod spec;
mod status;
mod suites;
mod system;
mod system_units;
mod system_users;
mod universe;
mod unpack;
mod version;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::{Artifact, FetchLimits, Fetcher, Trust};
use gpuimg_store::cache::Bucket;

pub use architecture::DebianArch;
pub use error::AptError;
pub use fixups::merged_usr_links;
pub use ldcache::write_ld_cache;
pub use locked::LockedPackage;
pub use offer::{offered, read_file, Offered};
pub use prefer::Preference;
pub use prune::{is_file_list, prune_list, MAX_LIST_BYTES};
pub use solver::root_relations;
pub use sonames::{soname_hint, soname_packages};
pub use spec::{Mirror, PackagesSpec, RepoSpec};
pub use status::installed_packages;
pub use version::Version;

/// The parsers of untrusted bytes, for the root package's fuzz targets (`tests/it/fuzz`); not
/// a stable API.
#[doc(hidden)]
pub mod parsers {
    pub use super::control::{paragraphs, Paragraph};
    pub use super::deb::{read_deb, ControlFiles};
    pub use super::decode::{decode_in_order, Decoded};
    pub use super::hostconf::KeySource;
    pub use super::index_map::IndexMap;
    pub use super::openpgp::Keyring;
    pub use super::release::{parse_release, strip_clearsign, Release};
    pub use super::solver::solve;
    pub use super::universe::{Package, Universe};
    pub use super::unpack::{unpack, Unpacked};
    pub use gpuimg_elf::{parse as parse_elf, SharedObject};
}

/// How to reach repositories and where to cache what they give.
#[derive(Debug, Clone)]
pub struct AptOptions {
    /// gpuimg's cache root; this client keeps packages in its `debs` bucket, indexes in its
    /// `indexes` bucket and signed roots in its `roots` bucket (see `gpuimg_store::cache`).
    pub cache_dir: PathBuf,
    /// Use the cache alone; fail naming what is missing.
    pub offline: bool,
    /// Parallel downloads.
    pub jobs: usize,
    /// The host's apt configuration directory, read for `mirror: host` and trusted keys.
    pub apt_dir: PathBuf,
    /// Size, time and retry bounds of every download (defaults: `fetch`'s constants).
    pub limits: FetchLimits,
    /// The certificate authorities HTTPS mirrors are checked against (default: the system
    /// store; the settings phase adds `SSL_CERT_FILE` and `SSL_CERT_DIR`).
    pub trust: Trust,
    /// What later layers add for the loader: see [`LoaderExtra`].
    pub loader: LoaderExtra,
    /// Where those come from when they are known only while the install runs: asked (and
    /// waited for) just before `ld.so.cache` is written, in place of `loader`.
    pub loader_later: Option<LoaderLater>,
    /// Which versions of some packages to take first (the stack's, for the image's CUDA line
    /// and pinned release); part of the resolution's key.
    pub prefer: Vec<Preference>,
    /// SOURCE_DATE_EPOCH: the day the shadow files' `lastchg` says, on a root that boots
    /// ([`PackagesSpec::system`]; unused otherwise).
    pub source_date_epoch: u64,
}

/// Libraries that layers above the apt packages add (the Python wheels'), so that the one
/// `ld.so.cache` the install writes covers the whole image.
#[derive(Debug, Clone, Default)]
pub struct LoaderExtra {
    /// A `/etc/ld.so.conf.d/` file (image path without a leading `/`, text), written into the
    /// root (so into `metadata`) before the cache is.
    pub conf: Option<(String, String)>,
    /// The libraries in its directories: image path (no leading `/`) and ELF facts.
    pub libraries: Vec<(String, gpuimg_elf::SharedObject)>,
}

/// The libraries later layers add, when they are known only after the install has begun (the
/// wheels' libraries, taken as their layers are written): the call blocks until they are, and
/// gives `None` when the build stopped instead.
#[derive(Clone)]
pub struct LoaderLater(pub std::sync::Arc<dyn Fn() -> Option<LoaderExtra> + Send + Sync>);

impl std::fmt::Debug for LoaderLater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoaderLater")
    }
}

impl AptOptions {
    pub fn new(cache_dir: impl Into<PathBuf>) -> Self {
        AptOptions {
            cache_dir: cache_dir.into(),
            offline: false,
            jobs: 8,
            apt_dir: PathBuf::from("/etc/apt"),
            limits: FetchLimits::default(),
            trust: Trust::default(),
            loader: LoaderExtra::default(),
            loader_later: None,
            prefer: Vec::new(),
            source_date_epoch: 0,
        }
    }
}

/// What [`install`] put into `dest`.
#[derive(Debug, Clone)]
pub struct Installed {
    /// Every installed package, sorted by name then architecture.
    pub packages: Vec<LockedPackage>,
    /// Every warning the install gave, each already said to its observer (a record: callers
    /// do not say them again).
    pub warnings: Vec<String>,
    /// Provenance: each path a package wrote in the root (as it really lies there, e.g.
    /// `usr/bin/ls`) → the packages that ship it, in unpack order (the last one's bytes are
    /// there; several ship a directory). Paths no package wrote (the fix-ups' output, the dpkg
    /// database) are absent.
    pub owners: BTreeMap<String, Vec<String>>,
    /// The control fields that place each package in a component layer.
    pub infos: Vec<PackageInfo>,
    /// What `ld.so.cache` indexes of the packages' files: (SONAME, the file's real path in
    /// the root without a leading `/`), in the cache's order. [`LoaderExtra`]'s libraries are
    /// not among them.
    pub libraries: Vec<(String, String)>,
}

/// What a package's own control file says about its place in the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageInfo {
    pub name: String,
    pub essential: bool,
    pub priority: Option<String>,
    pub section: Option<String>,
    pub maintainer: Option<String>,
}

impl PackageInfo {
    /// From a package's `control` file.
    pub fn from_control(name: &str, control: &str) -> PackageInfo {
        let field = |f: &str| control_field(control, f);
        PackageInfo {
            name: name.to_string(),
            essential: field("Essential").is_some_and(|v| v.eq_ignore_ascii_case("yes")),
            priority: field("Priority"),
            section: field("Section"),
            maintainer: field("Maintainer"),
        }
    }
}

/// The value of field `f` in a control paragraph (first occurrence, trimmed).
fn control_field(control: &str, f: &str) -> Option<String> {
    control
        .lines()
        .find_map(|l| l.strip_prefix(f).and_then(|r| r.strip_prefix(':')))
        .map(|v| v.trim().to_string())
}

/// What each package's own control file says about its place in the image (Essential,
/// Priority, Section), in the order of `packages`. The packages are fetched (or found in the
/// cache) and only their control members are read; nothing is unpacked.
pub fn describe(
    packages: &[LockedPackage],
    opts: &AptOptions,
    obs: &mut dyn Observer,
) -> Result<Vec<PackageInfo>, AptError> {
    let fetcher = fetcher(opts)?;
    let paths = fetcher.fetch_all(&deb_artifacts(packages, &opts.apt_dir)?, "packages", obs)?;
    let items: Vec<(&LockedPackage, &PathBuf)> = packages.iter().zip(&paths).collect();
    decode::map_parallel(&items, decode::cpus(), |(p, path)| {
        let c = deb::read_control(&p.name, path)?;
        Ok(PackageInfo::from_control(
            &p.name,
            &c.text("control").unwrap_or_default(),
        ))
    })
    .into_iter()
    .zip(packages)
    .map(|(r, p)| r.unwrap_or_else(|| Err(stopped(&p.name))))
    .collect()
}

/// A worker that could not report (an internal error).
fn stopped(package: &str) -> AptError {
    AptError::InvalidDeb {
        package: package.to_string(),
        message: "its reader stopped (internal error)".into(),
    }
}

/// Where each locked package is fetched from: its repository's base URL on this host.
fn deb_artifacts(packages: &[LockedPackage], apt_dir: &Path) -> Result<Vec<Artifact>, AptError> {
    let mut bases = BTreeMap::new();
    let mut artifacts = Vec::new();
    for p in packages {
        if !bases.contains_key(&p.repository) {
            let base = repo::base_url(&p.repository, apt_dir)?;
            bases.insert(p.repository.clone(), base);
        }
        artifacts.push(Artifact {
            url: format!(
                "{}/{}",
                bases[&p.repository],
                p.filename.trim_start_matches("./")
            ),
            sha256: p.sha256,
            size: p.size,
            bucket: Bucket::Debs,
        });
    }
    Ok(artifacts)
}

/// Fetch and verify the indexes and resolve the profile's packages to an exact set.
pub fn resolve(
    spec: &PackagesSpec,
    arch: &DebianArch,
    opts: &AptOptions,
    obs: &mut dyn Observer,
) -> Result<Vec<LockedPackage>, AptError> {
    let fetcher = fetcher(opts)?;
    resolve_with(spec, arch, opts, &fetcher, obs, &mut Vec::new())
}

fn fetcher(opts: &AptOptions) -> Result<Fetcher, AptError> {
    Ok(Fetcher::new(
        &opts.cache_dir,
        opts.offline,
        opts.jobs,
        opts.limits,
        &opts.trust,
    )?)
}

fn resolve_with(
    spec: &PackagesSpec,
    arch: &DebianArch,
    opts: &AptOptions,
    fetcher: &Fetcher,
    obs: &mut dyn Observer,
    warnings: &mut Vec<String>,
) -> Result<Vec<LockedPackage>, AptError> {
    let arch = arch.as_str();
    let (repos, indexes) = signed_indexes(spec, arch, opts, fetcher, obs, warnings)?;
    // The same request against the same signed indexes resolves to the same set: no index is
    // read or parsed again.
    let key = resolution_key(spec, &opts.prefer, arch, &repos, &indexes);
    if let Some(set) = recorded_resolution(fetcher.cache().shared(), &key) {
        obs.message(&format!(
            "Resolved {} packages from {} repositories (indexes unchanged)",
            set.len(),
            repos.len()
        ));
        return Ok(set);
    }
    let universe = load_universe(arch, fetcher, &indexes, obs, warnings)?;
    let solved = solver::solve_preferring(&universe, &spec.packages, spec.essential, &opts.prefer)?;
    obs.message(&format!(
        "Resolved {} packages from {} repositories",
        solved.len(),
        repos.len()
    ));
    let mut out: Vec<LockedPackage> = solved
        .into_iter()
        .map(|p| LockedPackage {
            repository: repos[p.repo].lock_id.clone(),
            name: p.name,
            version: p.version.to_string(),
            architecture: p.arch,
            filename: p.filename,
            size: p.size,
            sha256: p.sha256,
        })
        .collect();
    out.sort_by(|a, b| (&a.name, &a.architecture).cmp(&(&b.name, &b.architecture)));
    // Only saves the parse next time: failing to record is no error.
    let _ = fetcher
        .cache()
        .shared()
        .put_record(Bucket::Resolutions, &key, &out);
    Ok(out)
}

/// An index file and the repository (its position) whose Release lists it.
type RepoIndex = (usize, release::IndexFile);

/// Every repository's verified Release and the index files it lists for `arch`.
fn signed_indexes(
    spec: &PackagesSpec,
    arch: &str,
    opts: &AptOptions,
    fetcher: &Fetcher,
    obs: &mut dyn Observer,
    warnings: &mut Vec<String>,
) -> Result<(Vec<repo::Repo>, Vec<RepoIndex>), AptError> {
    let repos = repo::repos_from_spec(spec, &opts.apt_dir)?;
    // Every repository's release at once (each is a round trip and a signature check); the
    // warnings and the first error in repository order.
    let releases = decode::map_parallel(&repos, repos.len(), |r| {
        let mut said = Vec::new();
        let rel = release::fetch_release(r, fetcher, &mut |w| said.push(w));
        (rel, said)
    });
    let releases = releases.into_iter().zip(&repos).map(|(r, repo)| {
        r.unwrap_or_else(|| {
            let e = AptError::InvalidRelease {
                url: repo.dist_url(),
                message: "its check stopped (internal error)".into(),
            };
            (Err(e), Vec::new())
        })
    });
    let mut indexes = Vec::new();
    for ((i, r), (rel, said)) in repos.iter().enumerate().zip(releases) {
        for w in said {
            obs.warn(&w);
            warnings.push(w);
        }
        let rel = rel.map_err(|e| suites::with_nearest(e, &opts.apt_dir))?;
        for f in release::index_files(r, &rel, arch)? {
            indexes.push((i, f));
        }
    }
    Ok((repos, indexes))
}

/// The universe of `indexes`: from the cache (mapped or read), the missing ones fetched.
fn load_universe(
    arch: &str,
    fetcher: &Fetcher,
    indexes: &[RepoIndex],
    obs: &mut dyn Observer,
    warnings: &mut Vec<String>,
) -> Result<universe::Universe, AptError> {
    // A decompressed index is cached under the digest the Release gives the plain `Packages`.
    // With its map recorded too, the universe reads the stanzas the solver asks for from that
    // file, and no text is read or scanned.
    let cache = fetcher.cache().shared();
    let mut sources: Vec<IndexText> = Vec::new();
    for (_, f) in indexes {
        let hit = match f.plain {
            Some((d, _)) => match fetcher.cache().lookup(Bucket::Indexes, &d)? {
                (None, true) => {
                    let w = format!("Cache entry for `{}` was corrupted; removed it", f.path);
                    obs.warn(&w);
                    warnings.push(w);
                    None
                }
                (hit, _) => hit,
            },
            None => None,
        };
        sources.push(match (hit, f.plain) {
            (Some(p), Some((d, size))) => match mapped_index(cache, &p, &d, size, arch) {
                Some((file, len, map)) => IndexText::Mapped(file, len, map),
                None => IndexText::Text(
                    read_index(&p, "Packages", &f.artifact.url, Some(size))?,
                    true,
                ),
            },
            _ => IndexText::Missing,
        });
    }
    let missing: Vec<usize> = (0..indexes.len())
        .filter(|&i| matches!(sources[i], IndexText::Missing))
        .collect();
    let artifacts: Vec<Artifact> = missing
        .iter()
        .map(|&i| indexes[i].1.artifact.clone())
        .collect();
    let paths = fetcher.fetch_all(&artifacts, "indexes", obs)?;
    for (&i, path) in missing.iter().zip(paths) {
        let f = &indexes[i].1;
        let text = read_index(&path, &f.path, &f.artifact.url, f.plain.map(|p| p.1))?;
        let mut cached = false;
        if let Some((plain, _)) = f.plain {
            if gpuimg_store::digest::Digest::of(text.as_bytes()) == plain {
                fetcher.cache().put(Bucket::Indexes, text.as_bytes())?;
                cached = true;
            }
        }
        sources[i] = IndexText::Text(text, cached);
    }
    let mut universe = universe::Universe::new(arch);
    for ((repo, f), src) in indexes.iter().zip(sources) {
        let url = &f.artifact.url;
        match src {
            IndexText::Mapped(file, len, map) => {
                if !universe.add_mapped(*repo, url, file, len, map) {
                    return Err(AptError::InvalidIndex {
                        url: url.clone(),
                        message: "its recorded map does not fit it (internal error)".into(),
                    });
                }
            }
            IndexText::Text(text, cached) => {
                let map = universe.add_index(*repo, url, text)?;
                if let (Some(map), Some((plain, _)), true) = (map, f.plain, cached) {
                    index_map::remember(cache, &plain, arch, &map);
                }
            }
            IndexText::Missing => {
                universe.add_index(*repo, url, String::new())?;
            }
        }
    }
    Ok(universe)
}

/// One package index, as the universe gets it.
enum IndexText {
    /// The cached decompressed text (its file and length) and its recorded map.
    Mapped(std::fs::File, u64, index_map::IndexMap),
    /// The text, and whether it is the one cached under its signed digest (then its map is
    /// recorded).
    Text(String, bool),
    /// Not in the cache: fetched next.
    Missing,
}

/// The cached decompressed index at `path` (sha256 `plain`, `size` bytes as signed) with its
/// recorded map, when one is recorded, trusted and fits the file.
fn mapped_index(
    cache: &gpuimg_store::cache::Cache,
    path: &Path,
    plain: &gpuimg_store::digest::Digest,
    size: u64,
    arch: &str,
) -> Option<(std::fs::File, u64, index_map::IndexMap)> {
    let map = index_map::recorded(cache, plain, arch)?;
    let file = fs_err::File::open(path).ok()?.into_file();
    let len = file.metadata().ok()?.len();
    (len == size && map.check(len).is_some()).then_some((file, len, map))
}

/// The key of one resolution: what was asked (roots, `essential`, architecture, each
/// repository as the lock names it) and the sha256 of every index its signed Release lists,
/// with this gpuimg's version (a solver change resolves again).
fn resolution_key(
    spec: &PackagesSpec,
    prefer: &[Preference],
    arch: &str,
    repos: &[repo::Repo],
    indexes: &[(usize, release::IndexFile)],
) -> gpuimg_store::digest::Digest {
    let mut k = gpuimg_store::cache::Key::new("apt-resolution-v1").tool_version();
    k.str(arch).bool(spec.essential).count(spec.packages.len());
    for p in &spec.packages {
        k.str(p);
    }
    k.count(prefer.len());
    for p in prefer {
        k.str(&p.to_string());
    }
    k.count(repos.len());
    for r in repos {
        k.str(&r.lock_id);
    }
    k.count(indexes.len());
    for (repo, f) in indexes {
        k.u64(*repo as u64).str(&f.path).digest(&f.artifact.sha256);
    }
    k.finish()
}

/// A recorded resolution, used only while its stamp vouches for it (the cache's trust rule:
/// the full check of a resolution is resolving again, so anything else is a miss, and the
/// fresh answer replaces it).
fn recorded_resolution(
    cache: &gpuimg_store::cache::Cache,
    key: &gpuimg_store::digest::Digest,
) -> Option<Vec<LockedPackage>> {
    let rec = cache.read_record(Bucket::Resolutions, key).ok()??;
    if !rec.trusted {
        return None;
    }
    serde_json::from_slice(&rec.bytes).ok()
}

/// The most a package index may decompress to when its `Release` does not list the plain
/// `Packages` size (the largest real ones are under 100 MiB).
pub const MAX_INDEX_BYTES: u64 = 512 << 20;

/// Read (decompressing by `name`) a package index: at most its signed plain size, or
/// [`MAX_INDEX_BYTES`] when the Release gives none.
fn read_index(path: &Path, name: &str, url: &str, plain: Option<u64>) -> Result<String, AptError> {
    let file = fs_err::File::open(path).map_err(AptError::io(path))?;
    let file = std::io::BufReader::with_capacity(1 << 20, file);
    let r: Box<dyn Read> = if name.ends_with(".xz") {
        Box::new(liblzma::read::XzDecoder::new(file))
    } else if name.ends_with(".gz") {
        Box::new(flate2::read::GzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let cap = plain.unwrap_or(MAX_INDEX_BYTES);
    let mut text = String::new();
    r.take(cap.saturating_add(1))
        .read_to_string(&mut text)
        .map_err(|e| AptError::InvalidIndex {
            url: url.to_string(),
            message: e.to_string(),
        })?;
    if text.len() as u64 > cap {
        let what = match plain {
            Some(n) => format!("the signed size of {n} bytes"),
            None => format!("the cap of {cap} bytes"),
        };
        return Err(AptError::InvalidIndex {
            url: url.to_string(),
            message: format!("it decompresses to more than {what}"),
        });
    }
    Ok(text)
}

/// Install packages into the empty directory `dest`: exactly `locked` when given (fetched by
/// file name and sha256, no index needed), else what [`resolve`] picks. On failure `dest` is
/// left empty.
///
/// Layout: merged-/usr, as debootstrap and mmdebstrap make Debian 12 (`/bin`, `/sbin`, `/lib`
/// and, on amd64, `/lib64` are symlinks into `/usr`, created before unpacking; package paths
/// under them land in `/usr` while `info/*.list` keeps the paths as packaged, like dpkg on a
/// merged system). Owners are the numeric ids in the package; modes, setuid bits, symlinks
/// and hard links are kept. Not checked: `Valid-Until` (a lock must stay buildable later);
/// only the target architecture is read (no foreign architectures).
pub fn install(
    spec: &PackagesSpec,
    arch: &DebianArch,
    opts: &AptOptions,
    locked: Option<&[LockedPackage]>,
    dest: &Path,
    obs: &mut dyn Observer,
) -> Result<Installed, AptError> {
    install_replaying(
        spec,
        arch,
        opts,
        locked,
        &|_| false,
        &mut |_| Ok(()),
        dest,
        obs,
    )
}

/// A package just unpacked in full into the root, told to [`install_replaying`]'s consumer
/// before the next package is written (for a layer that takes its entries while the next
/// packages are still being decoded).
pub struct UnpackedPackage<'a> {
    /// Its place in the unpack order (packages sorted by name, then architecture).
    pub index: usize,
    pub name: &'a str,
    /// Where its entries lie in the root (`usr/bin/ls`), as [`Installed::owners`] records
    /// them, in tarball order. A later package or a metadata step may still change them.
    pub created: &'a [String],
}

/// [`install`], where the packages `replayable` names may be written from their recorded
/// sketches (`sketch.rs`) instead of in full: for a build whose layers of those packages are
/// cached, and which needs only the other packages' files and the metadata (dpkg database,
/// fix-ups, ld.so.cache, all exactly as a full install makes them). Of such a package only
/// what something observes is written (`needed.rs`). Every package unpacked in full is
/// handed to `each` as soon as it lies in the root; an error there stops the install.
#[allow(clippy::too_many_arguments)]
pub fn install_replaying(
    spec: &PackagesSpec,
    arch: &DebianArch,
    opts: &AptOptions,
    locked: Option<&[LockedPackage]>,
    replayable: &dyn Fn(&str) -> bool,
    each: &mut dyn FnMut(&UnpackedPackage<'_>) -> std::io::Result<()>,
    dest: &Path,
    obs: &mut dyn Observer,
) -> Result<Installed, AptError> {
    let mut rd = fs_err::read_dir(dest).map_err(AptError::io(dest))?;
    if rd.next().is_some() {
        return Err(AptError::DestNotEmpty {
            path: dest.to_path_buf(),
        });
    }
    let fetcher = fetcher(opts)?;
    let mut warnings = Vec::new();
    let packages = match locked {
        Some(l) => {
            let main = spec.trusted.then(|| spec.mirror.to_string());
            let extra = spec.repositories.iter().filter(|r| r.trusted);
            for url in main.into_iter().chain(extra.map(|r| r.url.clone())) {
                let w = format!(
                    "Repository `{url}` is marked `trusted: true`: its signature was not checked when locked"
                );
                obs.warn(&w);
                warnings.push(w);
            }
            let mut l = l.to_vec();
            l.sort_by(|a, b| (&a.name, &a.architecture).cmp(&(&b.name, &b.architecture)));
            l
        }
        None => resolve_with(spec, arch, opts, &fetcher, obs, &mut warnings)?,
    };
    let paths = fetcher.fetch_all(&deb_artifacts(&packages, &opts.apt_dir)?, "packages", obs)?;
    let result = install::unpack_all(
        arch.as_str(),
        &packages,
        &paths,
        dest,
        // Decoding is CPU work: one worker per CPU (downloads use `jobs` connections).
        opts.jobs.min(decode::cpus()),
        install::Replay {
            cache: fetcher.cache().shared(),
            allowed: replayable,
        },
        &opts.loader,
        opts.loader_later.as_ref(),
        spec.system.then_some(opts.source_date_epoch),
        each,
        obs,
    );
    match result {
        Ok(u) => {
            for w in &u.warnings {
                obs.warn(w);
            }
            warnings.extend(u.warnings);
            Ok(Installed {
                packages,
                warnings,
                owners: u.owners,
                infos: u.infos,
                libraries: u.libraries,
            })
        }
        Err(e) => {
            empty_dir(dest);
            Err(e)
        }
    }
}

/// Remove everything inside `dir` (best effort), leaving `dir` itself.
fn empty_dir(dir: &Path) {
    if let Ok(root) = gpuimg_store::confined::Root::open(dir) {
        root.clear();
    }
}
