//! Each strip class's general rule: which paths it removes, by the path alone (not even
//! whether it is a directory: a directory goes only when nothing below it stays, `mod.rs`),
//! so a package streamed into its layer is stripped exactly as the whole tree is, and a dpkg
//! list can be judged line by line (a stray `.pyc` is known by its `.py`, which its package
//! ships with it).
//! "Site" below means a Python site directory (`site-packages`, `dist-packages`, wherever it
//! lies: wheels, Debian's python3-* packages, a rootfs).
//!
//! | class | removes | never removes |
//! |---|---|---|
//! | `docs` | `usr/share/doc`, `usr/share/info`, `usr/local/share/{doc,info}` | licence files; `usr/share/doc/<pkg>` directories |
//! | `man` | `usr/share/man`, `usr/local/share/man` | |
//! | `locales` | `usr/share/locale`, `usr/local/share/locale`, `usr/share/i18n/locales` | `locale.alias` |
//! | `headers` | `usr/include`, `usr/local/include`; `include` directories and `.h`/`.hpp`/`.hh`/`.cuh` files in a site | the catalog's keep-list (Triton's `cuda.h`, `Python.h`) |
//! | `static-libs` | `.a` (import libraries `.dll.a` too) in `lib` directories and sites | |
//! | `debug-symbols` | `usr/lib/debug`; `.debug` files in a site (and, in the driver, the DWARF and `.symtab` inside modifiable shared objects: `elf::strip`) | |
//! | `build-files` | `cmake` and `pkgconfig` directories, `.cmake`, `.pc`, `.la` files in `lib`/`share` directories and sites; the catalog's tools a runtime image does not run | |
//! | `python-caches` | `__pycache__` directories, a `.pyc`/`.pyo` beside its `.py` | a `.pyc` without its source (it is the module); with `python.compile`, `__pycache__/*.<tag>.pyc` of the image's Python |
//! | `tests` | `tests` and `test` directories inside a package in a site | a top-level `test`/`tests` package; the catalog's keep-list (`torch/testing`, …) |
//! | `type-stubs` | `.pyi` files | `py.typed` markers (zero bytes; they change no behaviour at run time) |
//! | `other-gpu-backends` | only the catalog's paths (Triton's AMD backend) | |
//!
//! Every class: licence, copyright and notice files and everything in a `.dist-info` or
//! `.egg-info` directory stay (see `mod.rs`).

use super::pattern::site_relative;
use super::Rules;
use crate::profile::StripClass;

/// Whether `class`'s general rule, or the rules' extra paths for it, remove `e`.
/// `has` says whether the tree holds a path.
pub fn removes(class: StripClass, path: &str, rules: &Rules, has: &dyn Fn(&str) -> bool) -> bool {
    (general(class, path, rules, has) && !rules.keeps(class, path)) || rules.removes(class, path)
}

fn under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether a directory component of `path` (not its last) is a `lib`-like or `share`
/// directory, or `path` lies in a site.
fn in_lib_or_share(path: &str) -> bool {
    site_relative(path).is_some()
        || path
            .split('/')
            .rev()
            .skip(1)
            .any(|c| c.starts_with("lib") || c == "share")
}

/// Whether a component of `path` below its site's top-level package is one of `names`.
fn package_dir_named(path: &str, names: &[&str]) -> bool {
    site_relative(path).is_some_and(|rel| rel.split('/').skip(1).any(|c| names.contains(&c)))
}

fn general(class: StripClass, path: &str, rules: &Rules, has: &dyn Fn(&str) -> bool) -> bool {
    let name = file_name(path);
    match class {
        StripClass::Docs => {
            [
                "usr/share/doc",
                "usr/share/info",
                "usr/local/share/doc",
                "usr/local/share/info",
            ]
            .iter()
            .any(|d| under(path, d) && path != *d)
                && !is_doc_package_dir(path)
        }
        StripClass::Man => under(path, "usr/share/man") || under(path, "usr/local/share/man"),
        StripClass::Locales => {
            (under(path, "usr/share/locale") || under(path, "usr/local/share/locale"))
                && name != "locale.alias"
                || under(path, "usr/share/i18n/locales")
        }
        StripClass::Headers => {
            under(path, "usr/include")
                || under(path, "usr/local/include")
                || package_dir_named(path, &["include"])
                || (site_relative(path).is_some()
                    && [".h", ".hpp", ".hh", ".hxx", ".cuh"]
                        .iter()
                        .any(|x| name.ends_with(x)))
        }
        StripClass::StaticLibs => name.ends_with(".a") && in_lib_or_share(path),
        StripClass::DebugSymbols => {
            under(path, "usr/lib/debug")
                || (name.ends_with(".debug") && site_relative(path).is_some())
        }
        StripClass::BuildFiles => {
            let file = [".cmake", ".pc", ".la"].iter().any(|x| name.ends_with(x));
            let dirs = ["cmake", "pkgconfig"];
            if site_relative(path).is_some() {
                package_dir_named(path, &dirs) || file
            } else {
                in_lib_or_share(path)
                    && (file || path.split('/').skip(1).any(|c| dirs.contains(&c)))
            }
        }
        StripClass::PythonCaches => {
            let in_cache = path.split('/').any(|c| c == "__pycache__");
            // A `.pyc` beside its `.py` is stray; one alone is the module (a sourceless
            // distribution) and stays.
            let stray = !in_cache
                && [".pyc", ".pyo"].iter().any(|x| {
                    path.strip_suffix(x)
                        .is_some_and(|stem| has(&format!("{stem}.py")))
                });
            let compiled = |tag: &str| {
                name.strip_suffix(".pyc")
                    .and_then(|n| n.rsplit_once('.'))
                    .is_some_and(|(_, t)| t == tag)
            };
            match &rules.compiled_tag {
                None => in_cache || stray,
                // `__pycache__` directories hold what gpuimg compiled: they stay.
                Some(tag) => stray || (in_cache && name != "__pycache__" && !compiled(tag)),
            }
        }
        StripClass::Tests => package_dir_named(path, &["tests", "test"]),
        StripClass::TypeStubs => name.ends_with(".pyi"),
        StripClass::UnusedLibraries => rules.unused.contains(path),
        StripClass::OtherGpuBackends | StripClass::DeviceCode => false,
    }
}

/// `usr/share/doc/<pkg>` directories stay so that kept copyright files have a parent.
fn is_doc_package_dir(path: &str) -> bool {
    path.strip_prefix("usr/share/doc/")
        .is_some_and(|rest| !rest.contains('/'))
}
