//! Unpacking the whole package set into the root, in order: each package decoded ahead on
//! worker threads and unpacked in full (its sketch taken when one is wanted), or replayed
//! from its sketch (only what `needed` says is observed); each package unpacked in full handed
//! to the caller at once; then the dpkg database, the fix-ups, file capabilities, a booted
//! root's users, units and empty state (`system.rs`) and `ld.so.cache`. Writes only through the root's `confined::Root`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::LockedPackage;
use crate::{
    control_field, deb, decode, dpkgdb, filecaps, fixups, ldcache, needed, sketch, system, unpack,
    AptError, PackageInfo, UnpackedPackage,
};
use gpuimg_fetch::observe::Observer;

/// What unpacking all packages produced, before fix-ups.
pub struct Unpacking {
    pub warnings: Vec<String>,
    pub owners: BTreeMap<String, Vec<String>>,
    pub infos: Vec<PackageInfo>,
    pub libraries: Vec<(String, String)>,
}

/// Which packages may be replayed from their sketches, and where the sketches are.
pub struct Replay<'a> {
    pub cache: &'a gpuimg_store::cache::Cache,
    /// Packages whose files no layer takes from this root (their component layer is cached).
    pub allowed: &'a dyn Fn(&str) -> bool,
}

#[allow(clippy::too_many_arguments)]
pub fn unpack_all(
    arch: &str,
    packages: &[LockedPackage],
    paths: &[PathBuf],
    dest: &Path,
    jobs: usize,
    replay: Replay<'_>,
    loader: &crate::LoaderExtra,
    later: Option<&crate::LoaderLater>,
    // `Some(SOURCE_DATE_EPOCH)`: the root boots (`system.rs`).
    system_epoch: Option<u64>,
    each: &mut dyn FnMut(&UnpackedPackage<'_>) -> std::io::Result<()>,
    obs: &mut dyn Observer,
) -> Result<Unpacking, AptError> {
    let mut warnings = Vec::new();
    let mut owners = BTreeMap::new();
    let mut infos = Vec::new();
    let root = gpuimg_store::confined::Root::open(dest).map_err(AptError::io(dest))?;
    fixups::create_merged_usr(&root, arch)?;
    let total: u64 = packages.iter().map(|p| p.size).sum();
    obs.task_start("unpack", Some(total));
    let mut done = 0;
    let mut db = Vec::new();
    let mut postinsts = BTreeMap::new();
    let mut facts = unpack::ElfFacts::new();
    let mut elided = Vec::new();
    let mut replayed = 0;
    // A replayable package with a trusted sketch is written from it; every other package in
    // full, taking its sketch on the way where none is recorded.
    let sketches: Vec<Option<sketch::Sketch>> = packages
        .iter()
        .map(|p| {
            (replay.allowed)(&p.name)
                .then(|| sketch::recorded(replay.cache, &p.sha256))
                .flatten()
        })
        .collect();
    let take_sketch: Vec<bool> = packages
        .iter()
        .zip(&sketches)
        .map(|(p, s)| {
            s.is_none() && ((replay.allowed)(&p.name) || !sketch::exists(replay.cache, &p.sha256))
        })
        .collect();
    let control_only: Vec<bool> = sketches.iter().map(Option::is_some).collect();
    let items: Vec<(String, PathBuf, u64)> = packages
        .iter()
        .zip(paths)
        .map(|(p, path)| (p.name.clone(), path.clone(), p.size))
        .collect();
    let mut consume = |i: usize,
                       decoded: Result<decode::Decoded, AptError>,
                       write: Option<&[bool]>|
     -> Result<(), AptError> {
        let (p, path) = (&packages[i], &paths[i]);
        let mut taken = take_sketch[i].then(sketch::Sketch::default);
        let mut from_sketch = false;
        let (control, unpacked) = match decoded? {
            decode::Decoded::Control(c) => match &sketches[i] {
                Some(s) => {
                    replayed += 1;
                    from_sketch = true;
                    let u = unpack::replay(&root, &p.name, s, write, &mut facts)?;
                    (c, u)
                }
                None => {
                    return Err(AptError::InvalidDeb {
                        package: p.name.clone(),
                        message: "its data was not decoded (internal error)".into(),
                    })
                }
            },
            decode::Decoded::Memory(c, data) => {
                let conffiles = dpkgdb::conffiles(&c);
                let taking = taken.as_mut().map(|sketch| unpack::Taking {
                    sketch,
                    conffiles: &conffiles,
                });
                let u = unpack::unpack_sketching(&root, &p.name, &mut &data[..], taking)?;
                (c, u)
            }
            decode::Decoded::Stream => deb::read_deb(&p.name, path, |c, data| {
                let conffiles = dpkgdb::conffiles(c);
                let taking = taken.as_mut().map(|sketch| unpack::Taking {
                    sketch,
                    conffiles: &conffiles,
                });
                unpack::unpack_sketching(&root, &p.name, data, taking)
            })?,
        };
        if let Some(s) = &taken {
            sketch::remember(replay.cache, &p.sha256, s);
        }
        let ctl = control.text("control").unwrap_or_default();
        let field = |f: &str| control_field(&ctl, f);
        if field("Package").as_deref() != Some(p.name.as_str())
            || field("Version").as_deref() != Some(p.version.as_str())
        {
            return Err(AptError::InvalidDeb {
                package: p.name.clone(),
                message: format!(
                    "its control file says `{} {}`, the index said `{} {}`",
                    field("Package").unwrap_or_default(),
                    field("Version").unwrap_or_default(),
                    p.name,
                    p.version
                ),
            });
        }
        if !from_sketch {
            each(&UnpackedPackage {
                index: i,
                name: &p.name,
                created: &unpacked.created,
            })
            .map_err(|source| AptError::Consumer {
                package: p.name.clone(),
                source,
            })?;
        }
        for s in &unpacked.skipped {
            warnings.push(format!(
                "`{}`: skipped `{s}` (special file or symlink over a directory)",
                p.name
            ));
        }
        if let Some(script) = control.text("postinst") {
            postinsts.insert(p.name.clone(), script);
        }
        for path in &unpacked.created {
            owners
                .entry(path.clone())
                .or_insert_with(Vec::new)
                .push(p.name.clone());
        }
        elided.extend(unpacked.elided);
        infos.push(PackageInfo::from_control(&p.name, &ctl));
        db.push(dpkgdb::Installed {
            name: p.name.clone(),
            arch: p.architecture.clone(),
            multi_arch_same: field("Multi-Arch").as_deref() == Some("same"),
            control,
            paths: unpacked.paths,
        });
        done += p.size;
        obs.task_progress(done);
        Ok(())
    };
    // Of the replayed packages' entries: (written, all).
    let mut replayed_entries = (0, 0);
    if sketches.iter().any(Option::is_some) {
        // A replay writes only what something observes (`needed.rs`), which depends on every
        // package's entries: all are decoded first.
        let decoded: Vec<decode::Decoded> =
            decode::decode_all(&items, &control_only, jobs, REPLAY_MEMORY)
                .into_iter()
                .collect::<Result<_, _>>()?;
        let plan = replay_plan(arch, packages, &sketches, &decoded);
        for (s, i) in sketches.iter().zip(0..) {
            let Some(s) = s else { continue };
            let written = plan.as_ref().map_or(s.entries.len(), |p: &Vec<Vec<bool>>| {
                p[i].iter().filter(|&&w| w).count()
            });
            replayed_entries.0 += written;
            replayed_entries.1 += s.entries.len();
        }
        for (i, d) in decoded.into_iter().enumerate() {
            consume(i, Ok(d), plan.as_ref().map(|p| p[i].as_slice()))?;
        }
    } else {
        decode::decode_in_order(&items, &control_only, jobs, |i, d| consume(i, d, None))?;
    }
    let note = if replayed > 0 {
        format!(
            ", {replayed} of them from sketches (their layers are cached; {} of their {} entries written)",
            replayed_entries.0, replayed_entries.1
        )
    } else {
        String::new()
    };
    obs.task_done(
        "unpack",
        done,
        &format!("{} packages{note}", packages.len()),
    );
    unpack::placeholders_for_scripts(&root, &elided, &postinsts)?;
    // What the database and the fix-ups write belongs to no package, even where a package
    // shipped a file at the same path.
    root.record_writes();
    dpkgdb::write_db(&root, &db)?;
    let names: Vec<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let mut done_fixups = fixups::apply(&root, &names, &postinsts)?;
    let (caps_done, caps_warnings) = filecaps::apply(&root, &postinsts);
    done_fixups.extend(caps_done);
    warnings.extend(caps_warnings);
    if let Some(epoch) = system_epoch {
        let (system_done, system_warnings) = system::apply(&root, &names, &postinsts, epoch)?;
        done_fixups.extend(system_done);
        warnings.extend(system_warnings);
    }
    if !done_fixups.is_empty() {
        obs.message(&format!(
            "  {} fixups instead of maintainer scripts: {}",
            done_fixups.len(),
            done_fixups.join("; ")
        ));
    }
    // The wheels' libraries, where they were not known when the install began.
    let waited;
    let loader = match later {
        Some(l) => {
            waited = (l.0)().ok_or_else(|| AptError::Consumer {
                package: "ld.so.cache".into(),
                source: std::io::Error::other("the build stopped"),
            })?;
            &waited
        }
        None => loader,
    };
    if let Some((path, text)) = &loader.conf {
        let p = Path::new(path);
        if let Some(dir) = p.parent() {
            root.create_dir_all(dir)
                .map_err(AptError::staged("create", dir.display()))?;
        }
        root.write(p, text.as_bytes(), 0o644)
            .map_err(AptError::staged("write", path))?;
    }
    let entries = ldcache::write_ld_cache(&root, arch, &facts, &loader.libraries)?;
    obs.message(&format!("  /etc/ld.so.cache: {} libraries", entries.len()));
    let extra: std::collections::BTreeSet<&str> =
        loader.libraries.iter().map(|(p, _)| p.as_str()).collect();
    let libraries: Vec<(String, String)> = entries
        .into_iter()
        .filter(|(_, p)| !extra.contains(p.trim_start_matches('/')))
        .filter_map(|(soname, p)| {
            let real = root.real_path(Path::new(&p)).ok()?;
            Some((
                soname,
                real.to_string_lossy().trim_start_matches('/').to_string(),
            ))
        })
        .collect();
    for p in root.take_writes() {
        if let Ok(real) = root.real_path(&p) {
            owners.remove(real.to_string_lossy().as_ref());
        }
    }
    Ok(Unpacking {
        warnings,
        owners,
        infos,
        libraries,
    })
}

/// Compressed bytes of the packages a replay unpacks in full that are decoded in memory
/// before the first is written (past it, the rest stream and every replayed entry is
/// written).
const REPLAY_MEMORY: u64 = decode::IN_MEMORY_LIMIT;

/// Which entries of the replayed packages to write (`needed::plan`), from every package's
/// entries: the sketches', and the data of those unpacked in full. `None` (write everything)
/// when a package unpacked in full is not in memory or its tarball does not list.
fn replay_plan(
    arch: &str,
    packages: &[LockedPackage],
    sketches: &[Option<sketch::Sketch>],
    decoded: &[decode::Decoded],
) -> Option<Vec<Vec<bool>>> {
    let mut listed: Vec<Option<Vec<sketch::Header>>> = Vec::new();
    let mut postinsts = BTreeMap::new();
    for ((p, s), d) in packages.iter().zip(sketches).zip(decoded) {
        let control = match d {
            decode::Decoded::Control(c) => c,
            decode::Decoded::Memory(c, _) => c,
            decode::Decoded::Stream => return None,
        };
        if let Some(script) = control.text("postinst") {
            postinsts.insert(p.name.clone(), script);
        }
        listed.push(match (s, d) {
            (Some(_), _) => None,
            (None, decode::Decoded::Memory(_, data)) => Some(unpack::list(&p.name, data).ok()?),
            (None, _) => return None,
        });
    }
    let mut plan_packages = Vec::new();
    for ((p, s), own) in packages.iter().zip(sketches).zip(&listed) {
        fn op<'h>(package: &str, h: &'h sketch::Header, read: bool) -> Option<needed::Op<'h>> {
            Some(needed::Op {
                listed: unpack::listed_path(package, h.path.as_bytes()).ok()?,
                kind: h.kind,
                link: h.link.as_deref(),
                read,
            })
        }
        let ops: Option<Vec<needed::Op<'_>>> = match (s, own) {
            (Some(s), _) => s
                .entries
                .iter()
                .map(|e| {
                    let read = matches!(e.body, sketch::Body::Kept(_) | sketch::Body::Library(_));
                    op(&p.name, &e.header, read)
                })
                .collect(),
            (None, Some(hs)) => hs.iter().map(|h| op(&p.name, h, true)).collect(),
            (None, None) => None,
        };
        plan_packages.push(needed::Package {
            ops: ops?,
            replayed: s.is_some(),
        });
    }
    needed::plan(
        &plan_packages,
        &fixups::merged_usr_links(arch),
        &unpack::script_paths(&postinsts),
    )
}
