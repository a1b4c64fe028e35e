//! Which of an image's shared objects something loads, and so which of its Python packages'
//! libraries nothing does: the one computation behind `strip: [unused-libraries]`
//! (`plan::unused`, over the wheels' ELF facts before any layer is written), `inspect
//! --unused` (over the image read back) and the build's "provided by nothing" warning (only
//! for what is reached), so that the preview and the strip cannot disagree.
//!
//! Roots: every Python extension module (a `*.so` in a site directory or `lib-dynload`), every
//! file `data/dlopen.yaml` says is loaded by name, and the caller's `extra` (the libraries the
//! self-test loads at boot, the `PATH` executables and the entrypoint). From them
//! `elf::closure` follows `DT_NEEDED` and the library names each reached object's strings
//! hold, to a fixed point. Pure.

use std::collections::BTreeSet;

use super::closure::LoaderView;
use super::keep;

/// What the roots reach.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reach {
    /// Every object reached, roots included.
    pub reached: BTreeSet<String>,
    /// The Python packages' libraries (`lib*.so*` in a site directory) nothing reaches.
    pub unused: BTreeSet<String>,
    /// (object, needed name) pairs of reached objects that nothing in the image provides and
    /// the host does not bind in, optional plugins' left out, sorted.
    pub missing: Vec<(String, String)>,
}

/// Whether `path` lies in a Python site directory.
pub fn in_site(path: &str) -> bool {
    path.contains("/dist-packages/") || path.contains("/site-packages/")
}

/// Whether a file name is one a shared library has (`lib*.so`, `lib*.so.N…`).
pub fn is_library_name(name: &str) -> bool {
    name.starts_with("lib")
        && (name.ends_with(".so") || name.contains(".so."))
        && !name.ends_with(".py")
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether the object at `path` is a root by itself: a Python extension module, or a file
/// `data/dlopen.yaml` says is loaded by name.
pub fn is_root(path: &str) -> bool {
    (keep::is_importable(file_name(path)) && (in_site(path) || path.contains("/lib-dynload/")))
        || keep::is_dlopened(path)
}

/// What the roots of `view` (see the module doc) and `extra` reach; paths without a leading
/// `/`.
pub fn reach<I: IntoIterator<Item = String>>(view: &LoaderView, extra: I) -> Reach {
    let roots = view.objects.keys().filter(|p| is_root(p)).cloned();
    let closure = view.closure(roots.chain(extra), &keep::is_host_library);
    let unused = (view.objects.keys())
        .filter(|p| in_site(p) && is_library_name(file_name(p)) && !closure.reached.contains(*p))
        .cloned()
        .collect();
    Reach {
        missing: (closure.unresolved.into_iter())
            .filter(|(by, _)| !keep::is_optional(by))
            .collect(),
        reached: closure.reached,
        unused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SharedObject;

    fn so(needed: &[&str], named: &[&str]) -> SharedObject {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        SharedObject {
            is_64: true,
            machine: 62,
            needed: v(needed),
            named: v(named),
            ..Default::default()
        }
    }

    /// cuDNN in little: the extension module needs cuDNN, whose strings name cuBLASLt (its
    /// engine loads it by name), whose strings name a plugin that needs a library nothing
    /// provides; a library named only by an unreached library's strings stays unused, and a
    /// name no file has is no missing need.
    #[test]
    fn names_in_reached_objects_strings_are_followed_to_a_fixed_point() {
        let site = "usr/local/lib/python3.11/dist-packages";
        let mut v = LoaderView {
            conf_dirs: vec![format!("{site}/nvidia/cudnn/lib"), format!("{site}/x/lib")],
            ..Default::default()
        };
        let mut add = |p: &str, o| {
            v.objects.insert(format!("{site}/{p}"), o);
        };
        add("torch/_C.so", so(&["libcudnn.so.9"], &[]));
        add(
            "nvidia/cudnn/lib/libcudnn.so.9",
            so(&[], &["libcublasLt.so.12", "libibverbs.so.1"]),
        );
        add("x/lib/libcublasLt.so.12", so(&[], &["libplugin.so.2"]));
        add("x/lib/libplugin.so.1", so(&["libquadmath.so.0"], &[]));
        add(
            "x/lib/libunused.so.1",
            so(&["libgone.so.1"], &["libnamed.so.1"]),
        );
        add("x/lib/libnamed.so.1", so(&[], &[]));
        let r = reach(&v, []);
        let short = |s: &BTreeSet<String>| -> Vec<String> {
            s.iter().map(|p| p[site.len() + 1..].to_string()).collect()
        };
        // A `lib*.so` in a site directory is importable, so a root: the test's are versioned.
        // The plugin's file name is not its string's name: not found, not reached.
        assert_eq!(
            short(&r.unused),
            [
                "x/lib/libnamed.so.1",
                "x/lib/libplugin.so.1",
                "x/lib/libunused.so.1"
            ]
        );
        assert!(r.missing.is_empty(), "{:?}", r.missing);
        // Found by its name, the plugin is reached, and its missing need is reported.
        v.objects.insert(
            format!("{site}/x/lib/libplugin.so.2"),
            so(&["libquadmath.so.0"], &[]),
        );
        let r = reach(&v, []);
        assert!(r.reached.contains(&format!("{site}/x/lib/libplugin.so.2")));
        assert_eq!(
            r.missing,
            [(
                format!("{site}/x/lib/libplugin.so.2"),
                "libquadmath.so.0".to_string()
            )]
        );
        // An extra root (a library the self-test loads) reaches what it names.
        let r = reach(&v, [format!("{site}/x/lib/libunused.so.1")]);
        assert_eq!(short(&r.unused), ["x/lib/libplugin.so.1"]);
        assert_eq!(r.missing.len(), 2);
    }
}
