//! What the repositories offer, read as data for a node's resolution and build: every version
//! of the packages asked for by name or prefix ([`offered`]), from the same signed indexes
//! [`crate::resolve`] reads, and one file of a package's data ([`read_file`]: a module
//! source's `dkms.conf`), the package fetched and checked like any other. Must never install
//! or unpack a package.

use std::io::Read as _;

use crate::{
    deb, deb_artifacts, fetcher, load_universe, relation, signed_indexes, stopped, AptError,
    AptOptions, DebianArch, LockedPackage, PackagesSpec, Version,
};
use gpuimg_fetch::observe::Observer;

/// A package version the repositories offer: what a node's resolution reads (kernels, driver
/// sources and user space, by name and version), never installed from this alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offered {
    pub name: String,
    pub version: Version,
    pub architecture: String,
    /// The repository, as a lock names it.
    pub repository: String,
    /// `Depends` (and `Pre-Depends`): each alternative group's package names.
    pub depends: Vec<Vec<String>>,
    pub filename: String,
    pub size: u64,
    pub sha256: gpuimg_store::digest::Digest,
}

/// Every version the repositories of `spec` offer for `arch` of each package `names` gives:
/// an exact name, or a prefix ending in `*` (`linux-image-*`). Read from the signed indexes
/// (fetched as [`resolve`] fetches them); sorted by name, then newest version first.
pub fn offered(
    spec: &PackagesSpec,
    arch: &DebianArch,
    opts: &AptOptions,
    names: &[&str],
    obs: &mut dyn Observer,
) -> Result<Vec<Offered>, AptError> {
    let fetcher = fetcher(opts)?;
    let arch = arch.as_str();
    let mut warnings = Vec::new();
    let (repos, indexes) = signed_indexes(spec, arch, opts, &fetcher, obs, &mut warnings)?;
    let universe = load_universe(arch, &fetcher, &indexes, obs, &mut warnings)?;
    let mut wanted: Vec<String> = Vec::new();
    for n in names {
        match n.strip_suffix('*') {
            Some(prefix) => wanted.extend(universe.names_starting(prefix)),
            None => wanted.push(n.to_string()),
        }
    }
    wanted.sort();
    wanted.dedup();
    let mut out = Vec::new();
    for name in &wanted {
        for id in universe.named(name) {
            let p = universe.package(id)?;
            let groups = |rels: &[Vec<relation::Relation>]| -> Vec<Vec<String>> {
                rels.iter()
                    .map(|g| g.iter().map(|r| r.name.clone()).collect())
                    .collect()
            };
            let mut depends = groups(&p.pre_depends);
            depends.extend(groups(&p.depends));
            out.push(Offered {
                name: p.name,
                version: p.version,
                architecture: p.arch,
                repository: repos[p.repo].lock_id.clone(),
                depends,
                filename: p.filename,
                size: p.size,
                sha256: p.sha256,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name).then(b.version.cmp(&a.version)));
    out.dedup_by(|a, b| {
        a.name == b.name && a.version == b.version && a.architecture == b.architecture
    });
    Ok(out)
}

/// The bytes of the first regular file of `package`'s data whose path ends with `suffix`
/// (`/dkms.conf`), at most `max` bytes (a larger one is an error); `None` when it has none. The
/// package is fetched (or found in the cache) and checked like any other; its data is read as
/// a stream and nothing is unpacked.
pub fn read_file(
    package: &LockedPackage,
    suffix: &str,
    max: u64,
    opts: &AptOptions,
    obs: &mut dyn Observer,
) -> Result<Option<Vec<u8>>, AptError> {
    let fetcher = fetcher(opts)?;
    let paths = fetcher.fetch_all(
        &deb_artifacts(std::slice::from_ref(package), &opts.apt_dir)?,
        "packages",
        obs,
    )?;
    let Some(path) = paths.first() else {
        return Err(stopped(&package.name));
    };
    let bad = |message: String| AptError::InvalidDeb {
        package: package.name.clone(),
        message,
    };
    let (_, found) = deb::read_deb(&package.name, path, |_, data| {
        let mut tar = tar::Archive::new(data);
        for e in tar.entries().map_err(|e| bad(e.to_string()))? {
            let mut e = e.map_err(|e| bad(format!("bad data: {e}")))?;
            if !e.header().entry_type().is_file() {
                continue;
            }
            let p = e.path().map_err(|e| bad(e.to_string()))?;
            if !p.to_string_lossy().ends_with(suffix) {
                continue;
            }
            let mut buf = Vec::new();
            (&mut e)
                .take(max + 1)
                .read_to_end(&mut buf)
                .map_err(|e| bad(format!("bad data: {e}")))?;
            if buf.len() as u64 > max {
                return Err(bad(format!("its `{suffix}` is larger than {max} bytes")));
            }
            return Ok(Some(buf));
        }
        Ok(None)
    })?;
    Ok(found)
}
