//! `gpuimg-wheel`: a wheel installer (the binary distribution format, PEP 427 and its
//! successors) that turns fetched wheels into one [`Tree`] for the image's interpreter.
//!
//! Owns installing pinned wheels: each wheel is checked in full before a byte is written
//! (`archive`: its zip directory read bounded, no name twice; `prepare`: the pin's name and
//! version, one `.dist-info`, `WHEEL`, `RECORD` listing every file, no path leaving its scheme,
//! no symlink, no two entries at one path; `resolved`: its `Requires-Dist` against the
//! dependencies resolution took from it), then unpacked in parallel into a staging root, every
//! file hashed against its `RECORD` row (`extract`); launchers, `INSTALLER`, `REQUESTED` and a
//! `RECORD` for the installed paths are written, `.pyc` compiled when asked (`compile`, with a
//! [`HostPython`]). Beside it, what the build asks of wheels as the installer sees them: their
//! shared libraries' ELF facts ([`library_reads`], [`Taps`]), `RECORD`s kept true after a tree
//! pass ([`prune_records`], [`rehash_records`]), the resolution's edges ([`dependency_edges`]).
//! Its entry is [`install`] ([`install_tapped`] with taps on the libraries left in their
//! wheels); it takes the plain data of `gpuimg-pypi` ([`FetchedWheel`], [`PinnedWheel`],
//! [`ImagePython`]) and writes a `gpuimg_assemble::Tree`. The root package adapts it to its
//! `sources::Source` (`sources::wheel_tree`) and keeps what it records of each wheel in the
//! cache (`sources::wheel_facts`); this crate knows no lock file, profile or cache.
//! Must never run package or image code (compiling only parses sources with the host's
//! `py_compile`), never write outside the staging root, and never take a path from the build
//! host's Python.

mod archive;
mod compile;
mod entry_points;
mod error;
mod extract;
mod filename;
mod libraries;
mod prepare;
mod prune;
mod record;
mod resolved;
mod scheme;
mod wheel_file;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

pub use compile::{cache_tag, HostPython};
pub use error::WheelError;
pub use filename::normalize;
use libraries::file_name;
pub use libraries::{
    is_library_name, is_module_name, library_reads, LibraryRead, LibraryTap, Taps, WheelLibrary,
};
pub use prune::{prune_records, rehash_records};
pub use record::FileHash;
pub use resolved::edges as dependency_edges;

use gpuimg_assemble::{ArchivedFile, DataSource, Deflated, Entry, EntryKind, Provenance, Tree};
use gpuimg_fetch::observe::Observer;
use gpuimg_pypi::ImagePython;
use gpuimg_pypi::{FetchedWheel, PinnedWheel};
use gpuimg_store::confined::Root;
use prepare::Prepared;
use record::{Hasher, Row};
use scheme::{Role, Scheme};

/// The installer's version: part of every python-packages layer key. Bump it when what the
/// installer writes or accepts for the same wheels changes (v2: a bounded zip directory, no
/// name twice, versions and `Requires-Dist` checked against the resolution).
pub const INSTALLER_VERSION: &str = "wheel-installer-v2";

/// Bytes all the wheels of one install may unpack to together.
const MAX_SET_BYTES: u64 = 256 << 30;

/// What generated the entries no wheel owns (the scheme directories).
pub const GENERATED_BY: &str = "wheel installer";

/// Install `wheels` for `python` under `staging` (a fresh directory), `.pyc` compiled by
/// `compiler` when given. `set` is every wheel of the resolution (the lock's, `wheels` among
/// them): what each wheel's own `METADATA` says is checked against the dependencies the
/// resolution took from it (`resolved`). The tree holds every installed file and its directories, each file
/// stamped with its wheel's project; warnings go to `obs`. With `walk_streams` (for a gzip
/// layer), a large file written as its deflated entry inflates keeps where that stream lies
/// (`gpuimg_assemble::Deflated`).
pub fn install(
    wheels: &[FetchedWheel],
    set: &[PinnedWheel],
    python: &ImagePython,
    compiler: Option<&HostPython>,
    walk_streams: bool,
    staging: &Path,
    obs: &mut dyn Observer,
) -> Result<Tree, WheelError> {
    install_tapped(
        wheels,
        set,
        python,
        compiler,
        walk_streams,
        staging,
        None,
        obs,
    )
}

/// [`install`], with a tap (`gpuimg_assemble::Tap`) on each shared object left in its wheel when
/// `taps` is given: writing the tree's layer then takes the objects' ELF facts
/// ([`LibraryRead::read_with`]), each tap under its wheel's and member's names.
#[allow(clippy::too_many_arguments)]
pub fn install_tapped(
    wheels: &[FetchedWheel],
    set: &[PinnedWheel],
    python: &ImagePython,
    compiler: Option<&HostPython>,
    walk_streams: bool,
    staging: &Path,
    mut taps: Option<&mut Taps>,
    obs: &mut dyn Observer,
) -> Result<Tree, WheelError> {
    let scheme = Scheme::of(python).map_err(WheelError::Scheme)?;
    let mut sorted: Vec<&FetchedWheel> = wheels.iter().collect();
    sorted.sort_by_key(|w| normalize(&w.pin.name));
    for pair in sorted.windows(2) {
        if normalize(&pair[0].pin.name) == normalize(&pair[1].pin.name) {
            return Err(WheelError::TwoPins {
                name: pair[0].pin.name.clone(),
                first: pair[0].pin.filename.clone(),
                second: pair[1].pin.filename.clone(),
            });
        }
    }
    let prepared: Vec<Prepared> = sorted
        .iter()
        .map(|w| prepare::prepare(w, &scheme))
        .collect::<Result<_, _>>()?;
    resolved::check(&prepared, &resolved::edges(set))?;
    let total: u64 = prepared.iter().flat_map(|p| &p.items).map(|i| i.size).sum();
    if total > MAX_SET_BYTES {
        return Err(WheelError::SetTooLarge { cap: MAX_SET_BYTES });
    }

    let winners = choose(&prepared, obs);
    check_clashes(&prepared, &winners)?;
    let jobs: Vec<extract::Job> = winners.values().copied().collect();

    let root_path = staging.join("python-root");
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| WheelError::Write { path, source }
    };
    fs_err::create_dir_all(&root_path).map_err(write_err(&root_path))?;
    let root = Root::open(&root_path).map_err(write_err(&root_path))?;
    for dir in directories(winners.keys()) {
        root.create_dir_all(Path::new(&dir))
            .map_err(write_err(&root_path.join(&dir)))?;
    }
    let written = extract::extract(
        &prepared,
        &jobs,
        &root_path,
        &scheme.interpreter,
        walk_streams,
        obs,
    )?;
    let mut finals: BTreeMap<(usize, usize), (FileHash, u64)> = BTreeMap::new();
    let mut streams: BTreeMap<(usize, usize), Arc<Deflated>> = BTreeMap::new();
    let mut archived: BTreeMap<(usize, usize), Arc<ArchivedFile>> = BTreeMap::new();
    for (job, w) in jobs.iter().zip(written) {
        finals.insert(*job, (w.hash, w.size));
        if let Some(d) = w.deflated {
            streams.insert(*job, d);
        }
        if let Some(a) = w.archived {
            archived.insert(*job, a);
        }
    }

    // `.pyc` files, each owned by its source's wheel.
    let mut extra: Vec<Vec<(String, FileHash, u64)>> = vec![Vec::new(); prepared.len()];
    if let Some(host) = compiler {
        let compiled = compile_all(host, &prepared, &winners, &root, &root_path, python)?;
        for (w, dest, hash, size) in compiled {
            extra[w].push((dest, hash, size));
        }
    }

    // One RECORD per wheel, for the paths as installed.
    let mut records = Vec::new();
    for (w, p) in prepared.iter().enumerate() {
        let mut rows: Vec<Row> = Vec::new();
        for (i, item) in p.items.iter().enumerate() {
            let (hash, size) = finals
                .get(&(w, i))
                .cloned()
                .unwrap_or_else(|| (item.hash.clone(), item.size));
            rows.push(Row {
                path: scheme.record_path(&item.dest),
                hash: Some(hash),
                size: Some(size),
            });
        }
        for (dest, hash, size) in &extra[w] {
            rows.push(Row {
                path: scheme.record_path(dest),
                hash: Some(hash.clone()),
                size: Some(*size),
            });
        }
        let record = format!("{}/RECORD", p.dist_info);
        rows.push(Row {
            path: scheme.record_path(&record),
            hash: None,
            size: None,
        });
        rows.sort_by(|a, b| a.path.cmp(&b.path));
        let text = record::write(&rows);
        root.write(Path::new(&record), text.as_bytes(), 0o644)
            .map_err(write_err(&root_path.join(&record)))?;
        records.push((w, record));
    }

    // The tree: every winning file, the `.pyc`s, the RECORDs, and their directories.
    let mut files: BTreeMap<String, (usize, u32)> = BTreeMap::new();
    let mut sources: BTreeMap<String, Large> = BTreeMap::new();
    for (dest, &(w, i)) in &winners {
        files.insert(dest.clone(), (w, prepared[w].items[i].mode));
        if let Some(a) = archived.get(&(w, i)) {
            let name = file_name(dest);
            let a = match taps.as_deref_mut() {
                Some(taps) if is_library_name(name) || is_module_name(name) => {
                    let tap = Arc::new(LibraryTap::default());
                    taps.insert((a.label.clone(), a.member.clone()), Arc::clone(&tap));
                    Arc::new(ArchivedFile {
                        tap: Some(gpuimg_assemble::TapRef(tap)),
                        ..(**a).clone()
                    })
                }
                _ => Arc::clone(a),
            };
            sources.insert(dest.clone(), Large::Archived(a));
        } else if let Some(d) = streams.get(&(w, i)) {
            sources.insert(dest.clone(), Large::Written(Arc::clone(d)));
        }
    }
    for (w, list) in extra.iter().enumerate() {
        for (dest, _, _) in list {
            files.insert(dest.clone(), (w, 0o644));
        }
    }
    for (w, record) in records {
        files.insert(record, (w, 0o644));
    }
    let tree = build_tree(&prepared, &files, &sources, &scheme, &root_path)?;
    let n_pyc: usize = extra.iter().map(Vec::len).sum();
    obs.message(&format!(
        "{:>12} {} wheels, {} files{}",
        "python",
        prepared.len(),
        files.len(),
        if compiler.is_some() {
            format!(
                ", {n_pyc} compiled with {}",
                compiler.map_or(String::new(), |h| h.version.clone())
            )
        } else {
            String::new()
        }
    ));
    Ok(tree)
}

/// Which wheel's item each installed path comes from. Two wheels shipping the same path with
/// the same hash share it (the first keeps it); with different bytes the later wheel (in name
/// order) wins, with a warning, as the last one pip installs would.
fn choose(prepared: &[Prepared], obs: &mut dyn Observer) -> BTreeMap<String, (usize, usize)> {
    let mut winners: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (w, p) in prepared.iter().enumerate() {
        for (i, item) in p.items.iter().enumerate() {
            match winners.get(&item.dest) {
                None => {
                    winners.insert(item.dest.clone(), (w, i));
                }
                Some(&(w0, i0)) => {
                    let earlier = &prepared[w0].items[i0];
                    if earlier.hash == item.hash && earlier.size == item.size {
                        continue;
                    }
                    obs.warn(&format!(
                        "`/{}` is in both `{}` and `{}` with different contents; `{}`'s is installed",
                        item.dest, prepared[w0].label, p.label, p.label
                    ));
                    winners.insert(item.dest.clone(), (w, i));
                }
            }
        }
    }
    winners
}

/// A path one wheel installs as a file must not be a directory of another's.
fn check_clashes(
    prepared: &[Prepared],
    winners: &BTreeMap<String, (usize, usize)>,
) -> Result<(), WheelError> {
    for (dest, &(w, _)) in winners {
        let mut p = dest.as_str();
        while let Some((parent, _)) = p.rsplit_once('/') {
            if let Some(&(w0, _)) = winners.get(parent) {
                return Err(WheelError::Clash {
                    first: prepared[w0].label.clone(),
                    second: prepared[w].label.clone(),
                    path: parent.to_string(),
                });
            }
            p = parent;
        }
    }
    Ok(())
}

/// Every directory above the given paths, parents first.
fn directories<'a>(paths: impl Iterator<Item = &'a String>) -> BTreeSet<String> {
    let mut dirs = BTreeSet::new();
    for path in paths {
        let mut p = path.as_str();
        while let Some((parent, _)) = p.rsplit_once('/') {
            if !dirs.insert(parent.to_string()) {
                break;
            }
            p = parent;
        }
    }
    dirs
}

/// Compile every installed `.py` of the site directory (outside `.dist-info`) that does not
/// already have its `.pyc` from a wheel: (wheel, pyc path, hash, size) for each one written.
fn compile_all(
    host: &HostPython,
    prepared: &[Prepared],
    winners: &BTreeMap<String, (usize, usize)>,
    root: &Root,
    root_path: &Path,
    python: &ImagePython,
) -> Result<Vec<(usize, String, FileHash, u64)>, WheelError> {
    let mut sources = Vec::new();
    let mut owners = Vec::new();
    for (dest, &(w, i)) in winners {
        let item = &prepared[w].items[i];
        if item.role != Role::Lib || dest.starts_with(&prepared[w].dist_info) {
            continue;
        }
        let Some(pyc) = compile::pyc_path(dest, python.version) else {
            continue;
        };
        if winners.contains_key(&pyc) {
            continue;
        }
        sources.push(compile::Source {
            src: root_path.join(dest),
            dfile: format!("/{dest}"),
            cfile: root_path.join(&pyc),
        });
        owners.push((w, pyc));
    }
    let done = compile::compile(host, &sources)?;
    let mut out = Vec::new();
    for ((w, pyc), ok) in owners.into_iter().zip(done) {
        if !ok {
            continue;
        }
        let read_err = |source| WheelError::Write {
            path: root_path.join(&pyc),
            source,
        };
        let mut f = root.open_file(Path::new(&pyc)).map_err(read_err)?;
        let mut h = Hasher::new(record::HashAlgo::Sha256);
        let size = hash_file(&mut f, &mut h).map_err(read_err)?;
        out.push((w, pyc, h.finish(), size));
    }
    Ok(out)
}

fn hash_file(f: &mut std::fs::File, h: &mut Hasher) -> std::io::Result<u64> {
    use std::io::Read;
    let mut buf = vec![0u8; 64 << 10];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            return Ok(n);
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
}

/// Where a large file's bytes are besides (or instead of) the staging root.
enum Large {
    /// Written, and also one walked deflate stream in its wheel.
    Written(Arc<Deflated>),
    /// Left in its wheel, not written.
    Archived(Arc<ArchivedFile>),
}

/// The tree of `files` (path → (wheel, mode)), read back from staging, with their directories;
/// a file in `large` keeps where its bytes also lie as a deflate stream, or is read from its
/// wheel as it was left there.
fn build_tree(
    prepared: &[Prepared],
    files: &BTreeMap<String, (usize, u32)>,
    large: &BTreeMap<String, Large>,
    scheme: &Scheme,
    root_path: &Path,
) -> Result<Tree, WheelError> {
    let mut tree = Tree::new("the python packages");
    tree.set_default_provenance(Provenance::generated(GENERATED_BY));
    // The scheme's own directories and their parents belong to no wheel.
    let roots = [&scheme.site, &scheme.scripts, &scheme.data, &scheme.include];
    let mut shared = directories(roots.into_iter());
    shared.extend(roots.iter().map(|r| r.to_string()));
    let mut dir_owner: BTreeMap<String, usize> = BTreeMap::new();
    for (dest, &(w, mode)) in files {
        let (size, data) = match large.get(dest) {
            Some(Large::Archived(a)) => (a.size, DataSource::Archived(Arc::clone(a))),
            other => {
                let path = root_path.join(dest);
                let meta = fs_err::symlink_metadata(&path).map_err(|source| WheelError::Write {
                    path: path.clone(),
                    source,
                })?;
                if !meta.is_file() {
                    return Err(WheelError::Internal(
                        "a staged wheel file is not a regular file",
                    ));
                }
                let deflated = match other {
                    Some(Large::Written(d)) => Some(Arc::clone(d)),
                    _ => None,
                };
                let data = DataSource::Path {
                    path,
                    identity: gpuimg_assemble::identity(&meta),
                    deflated,
                };
                (meta.len(), data)
            }
        };
        tree.insert_with(
            Entry {
                path: dest.clone(),
                kind: EntryKind::File { size, data },
                mode,
                uid: 0,
                gid: 0,
            },
            Provenance::wheel(prepared[w].project.as_str()),
        );
        let mut p = dest.as_str();
        while let Some((parent, _)) = p.rsplit_once('/') {
            if !shared.contains(parent) {
                let o = dir_owner.entry(parent.to_string()).or_insert(w);
                *o = (*o).min(w);
            }
            p = parent;
        }
    }
    for (dir, w) in dir_owner {
        tree.insert_with(
            Entry {
                path: dir,
                kind: EntryKind::Dir,
                mode: 0o755,
                uid: 0,
                gid: 0,
            },
            Provenance::wheel(prepared[w].project.as_str()),
        );
    }
    tree.add_missing_parents();
    tree.check_links().map_err(WheelError::Shape)?;
    gpuimg_assemble::shape::check(&tree).map_err(WheelError::Shape)?;
    Ok(tree)
}
