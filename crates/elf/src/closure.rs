//! The dynamic loader's search, done statically over an image's files: which file each
//! `DT_NEEDED` name of a shared object resolves to (its `DT_RPATH` and its loaders', then
//! `LD_LIBRARY_PATH`, its `DT_RUNPATH`, the `ld.so.cache` directories by SONAME, then the
//! default directories, with `$ORIGIN` expanded), what a set of roots reaches, and which
//! names nothing in the image provides. The library names an object's strings hold
//! (`SharedObject::named`, what it may `dlopen`) are looked up the same way and followed,
//! to a fixed point; one the image lacks is no missing need.
//!
//! Pure: the caller hands in the image's shared objects, symlinks and directories; paths are
//! relative to the image root (no leading `/`). Must never touch the file system.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::SharedObject;

/// The directories ld.so searches last (x86_64 and aarch64 glibc: the multiarch directories
/// come from Debian's `ld.so.conf.d`, these are built in).
pub const DEFAULT_DIRS: [&str; 4] = ["lib", "usr/lib", "lib64", "usr/lib64"];

/// How many symlinks a lookup follows before giving up (the kernel's own limit is 40).
const MAX_LINKS: usize = 16;

/// An image as the loader sees it.
#[derive(Debug, Default)]
pub struct LoaderView {
    /// Every ELF shared object by its real path.
    pub objects: BTreeMap<String, SharedObject>,
    /// Symlinks (and hard links) by path, each with its target as stored (relative or
    /// absolute).
    pub links: BTreeMap<String, String>,
    /// `LD_LIBRARY_PATH` of the image's environment.
    pub library_path: Vec<String>,
    /// The `ld.so.conf` directories, in order (what `ld.so.cache` indexes besides the
    /// default directories).
    pub conf_dirs: Vec<String>,
    /// SONAMEs the image provides whose files are not among `objects` (a base known only by
    /// its library index).
    pub known_sonames: BTreeSet<String>,
}

/// What the roots reach.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Closure {
    /// Every object reached, roots included.
    pub reached: BTreeSet<String>,
    /// (object, needed name) pairs that nothing in the image provides and `host` does not
    /// claim, sorted.
    pub unresolved: Vec<(String, String)>,
}

/// `path` with `.` and `..` parts applied, relative to the root (`..` stops at the root).
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

impl LoaderView {
    /// The real path `path` names, following symlinks; `None` when it names no object.
    pub fn real(&self, path: &str) -> Option<String> {
        let mut p = normalize(path);
        for _ in 0..MAX_LINKS {
            if self.objects.contains_key(&p) {
                return Some(p);
            }
            let target = self.links.get(&p)?;
            p = match target.strip_prefix('/') {
                Some(abs) => normalize(abs),
                None => normalize(&format!("{}/{target}", parent(&p))),
            };
        }
        None
    }

    /// `dirs` with `$ORIGIN` (the directory of `object`) expanded, normalised.
    fn expand(object: &str, dirs: &[String]) -> Vec<String> {
        let origin = parent(object);
        dirs.iter()
            .map(|d| normalize(&d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)))
            .collect()
    }

    /// The `ld.so.cache` the image would have: SONAME → path, over the conf directories and
    /// then the default ones (the first directory holding a SONAME wins).
    fn cache(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let dirs = (self.conf_dirs.iter())
            .map(|d| normalize(d))
            .chain(DEFAULT_DIRS.iter().map(|d| d.to_string()));
        for dir in dirs {
            let prefix = if dir.is_empty() {
                String::new()
            } else {
                format!("{dir}/")
            };
            let in_dir = |p: &&String| {
                p.strip_prefix(&prefix)
                    .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
            };
            for p in self.objects.keys().chain(self.links.keys()).filter(in_dir) {
                let Some(real) = self.real(p) else { continue };
                let name = p.rsplit('/').next().unwrap_or(p);
                let soname = (self.objects.get(&real))
                    .and_then(|o| o.soname.as_deref())
                    .unwrap_or(name);
                // ldconfig indexes a file under its SONAME.
                out.entry(soname.to_string()).or_insert(real);
            }
        }
        out
    }

    /// Follow `DT_NEEDED` from `roots` as ld.so would; names for which `host` is true (the
    /// container runtime injects them) count as provided.
    pub fn closure<I: IntoIterator<Item = String>>(
        &self,
        roots: I,
        host: &dyn Fn(&str) -> bool,
    ) -> Closure {
        let cache = self.cache();
        let mut out = Closure::default();
        // Each object with the DT_RPATH directories of its loaders (inherited while no
        // RUNPATH intervenes).
        let mut queue: VecDeque<(String, Vec<String>)> = VecDeque::new();
        for r in roots {
            if let Some(real) = self.real(&r) {
                if out.reached.insert(real.clone()) {
                    queue.push_back((real, Vec::new()));
                }
            }
        }
        let mut unresolved = BTreeSet::new();
        while let Some((path, inherited)) = queue.pop_front() {
            let Some(obj) = self.objects.get(&path) else {
                continue;
            };
            let runpath = Self::expand(&path, &obj.runpath);
            // DT_RPATH applies only without a DT_RUNPATH, and then passes on to what the
            // object loads; a RUNPATH serves the object's own needs only.
            let rpath_chain: Vec<String> = if obj.runpath.is_empty() {
                let mut chain = Self::expand(&path, &obj.rpath);
                chain.extend(inherited.iter().cloned());
                chain
            } else {
                Vec::new()
            };
            // A name its strings hold is looked up as its `dlopen` would be, and is no
            // need: one nothing provides is not reported.
            let needed = obj.needed.iter().map(|n| (n, true));
            for (name, needs) in needed.chain(obj.named.iter().map(|n| (n, false))) {
                let found = if name.contains('/') {
                    Self::expand(&path, std::slice::from_ref(name))
                        .first()
                        .and_then(|p| self.real(p))
                } else {
                    (rpath_chain.iter())
                        .chain(self.library_path.iter())
                        .chain(runpath.iter())
                        .find_map(|d| self.real(&format!("{d}/{name}")))
                        .or_else(|| cache.get(name).cloned())
                };
                match found {
                    Some(real) => {
                        if out.reached.insert(real.clone()) {
                            queue.push_back((real, rpath_chain.clone()));
                        }
                    }
                    None if !needs || host(name) || self.known_sonames.contains(name) => {}
                    None => {
                        unresolved.insert((path.clone(), name.clone()));
                    }
                }
            }
        }
        out.unresolved = unresolved.into_iter().collect();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn so(soname: &str, needed: &[&str], rpath: &[&str], runpath: &[&str]) -> SharedObject {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        SharedObject {
            is_64: true,
            machine: 62,
            soname: (!soname.is_empty()).then(|| soname.to_string()),
            needed: v(needed),
            rpath: v(rpath),
            runpath: v(runpath),
            named: Vec::new(),
        }
    }

    /// torch's layout in little: an extension module with DT_RPATH `$ORIGIN/lib`, a library
    /// there with DT_RPATH `$ORIGIN/../../nvidia/cublas/lib`, one reached only by the
    /// inherited RPATH, the C++ library through a symlink in a cache directory, libcuda from
    /// the host, and an unused library.
    #[test]
    fn follows_rpaths_origin_links_and_the_cache() {
        let site = "usr/local/lib/python3.11/dist-packages";
        let mut v = LoaderView::default();
        let mut add = |p: String, o| {
            v.objects.insert(p, o);
        };
        add(
            format!("{site}/torch/_C.so"),
            so("", &["libtorch.so"], &["$ORIGIN/lib"], &[]),
        );
        add(
            format!("{site}/torch/lib/libtorch.so"),
            so(
                "libtorch.so",
                &[
                    "libcublas.so.13",
                    "libc10.so",
                    "libstdc++.so.6",
                    "libcuda.so.1",
                ],
                &["$ORIGIN/../../nvidia/cublas/lib"],
                &[],
            ),
        );
        // Found only through _C.so's inherited RPATH ($ORIGIN/lib of _C.so).
        add(
            format!("{site}/torch/lib/libc10.so"),
            so("libc10.so", &[], &[], &[]),
        );
        add(
            format!("{site}/nvidia/cublas/lib/libcublas.so.13"),
            so("libcublas.so.13", &["libcublasLt.so.13"], &[], &["$ORIGIN"]),
        );
        add(
            format!("{site}/nvidia/cublas/lib/libcublasLt.so.13"),
            so("libcublasLt.so.13", &["libmissing.so.1"], &[], &[]),
        );
        add(
            format!("{site}/nvidia/cusolver/lib/libcusolverMg.so.12"),
            so("libcusolverMg.so.12", &[], &[], &[]),
        );
        add(
            "usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30".into(),
            so("libstdc++.so.6", &[], &[], &[]),
        );
        v.links.insert(
            "usr/lib/x86_64-linux-gnu/libstdc++.so.6".into(),
            "libstdc++.so.6.0.30".into(),
        );
        v.conf_dirs = vec!["/usr/lib/x86_64-linux-gnu".into()];
        let c = v.closure([format!("/{site}/torch/_C.so")], &|n| {
            n.starts_with("libcuda.so")
        });
        let reached: Vec<&str> = c.reached.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            reached,
            [
                "usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30",
                format!("{site}/nvidia/cublas/lib/libcublas.so.13").as_str(),
                format!("{site}/nvidia/cublas/lib/libcublasLt.so.13").as_str(),
                format!("{site}/torch/_C.so").as_str(),
                format!("{site}/torch/lib/libc10.so").as_str(),
                format!("{site}/torch/lib/libtorch.so").as_str(),
            ]
        );
        assert_eq!(
            c.unresolved,
            vec![(
                format!("{site}/nvidia/cublas/lib/libcublasLt.so.13"),
                "libmissing.so.1".to_string()
            )]
        );
        // Without the C++ library in the image, its name is unresolved; known SONAMEs count.
        v.links.clear();
        v.objects
            .remove("usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30");
        let c = v.closure([format!("{site}/torch/_C.so")], &|_| false);
        let names: Vec<&str> = c.unresolved.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, ["libmissing.so.1", "libcuda.so.1", "libstdc++.so.6"]);
        v.known_sonames.insert("libstdc++.so.6".into());
        let c = v.closure([format!("{site}/torch/_C.so")], &|n| n == "libcuda.so.1");
        assert_eq!(c.unresolved.len(), 1);
    }

    /// A RUNPATH serves its object's own needs only, and stops the RPATHs of its loaders.
    #[test]
    fn runpath_is_not_inherited() {
        let mut v = LoaderView::default();
        v.objects.insert(
            "a/root.so".into(),
            so("", &["libb.so"], &[], &["$ORIGIN/b"]),
        );
        v.objects
            .insert("a/b/libb.so".into(), so("libb.so", &["libc2.so"], &[], &[]));
        v.objects
            .insert("a/b/libc2.so".into(), so("libc2.so", &[], &[], &[]));
        let c = v.closure(["a/root.so".to_string()], &|_| false);
        assert_eq!(
            c.unresolved,
            vec![("a/b/libb.so".to_string(), "libc2.so".to_string())]
        );
        // With DT_RPATH instead, libb's need is found through root's inherited directory.
        v.objects.insert(
            "a/root.so".into(),
            so("", &["libb.so"], &["$ORIGIN/b"], &[]),
        );
        let c = v.closure(["a/root.so".to_string()], &|_| false);
        assert!(c.unresolved.is_empty());
        assert_eq!(c.reached.len(), 3);
    }
}
