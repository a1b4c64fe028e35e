//! `strip: [unused-libraries]`: the wheels' shared libraries that nothing loads. The roots are
//! every file Python may import as an extension module (any `*.so`, `lib`-prefixed too:
//! Triton's `_C/libtriton.so`), every library `data/dlopen.yaml` says
//! programs load by name, and the CUDA libraries the self-test loads at boot (the caller's
//! `extra` roots); from them `DT_NEEDED` is followed as ld.so would
//! (`elf::closure`), through the objects' RPATH/RUNPATH (`$ORIGIN`) and the wheels'
//! `ld.so.conf` directories. Pure: a function of the wheels' ELF facts and the table, so the
//! same wheels always lose the same files.

use std::collections::{BTreeMap, BTreeSet};

use crate::elf::closure::LoaderView;
use crate::elf::{keep, SharedObject};
use crate::sources::wheel::{file_name, is_library_name};

/// The library paths among `objects` (every wheel object, by image path) that no root
/// reaches; `dirs` are the wheel directories the loader's cache lists, `extra` more roots.
pub fn unused_libraries(
    objects: &BTreeMap<String, SharedObject>,
    dirs: &[String],
    extra: &[String],
) -> BTreeSet<String> {
    let view = LoaderView {
        objects: objects.clone(),
        conf_dirs: dirs.to_vec(),
        ..Default::default()
    };
    let roots = objects
        .keys()
        .filter(|p| keep::is_importable(file_name(p)) || keep::is_dlopened(p))
        .cloned()
        .chain(extra.iter().cloned());
    let closure = view.closure(roots, &keep::is_host_library);
    objects
        .keys()
        .filter(|p| is_library_name(file_name(p)) && !closure.reached.contains(*p))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn so(needed: &[&str], rpath: &[&str]) -> SharedObject {
        SharedObject {
            is_64: true,
            machine: 62,
            needed: needed.iter().map(|s| s.to_string()).collect(),
            rpath: rpath.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn libraries_no_module_or_dlopen_target_reaches_are_unused() {
        let site = "usr/local/lib/python3.11/dist-packages";
        let objects = BTreeMap::from([
            (
                format!("{site}/torch/_C.cpython-311-x86_64-linux-gnu.so"),
                so(&["libtorch.so"], &["$ORIGIN/lib"]),
            ),
            (
                format!("{site}/torch/lib/libtorch.so"),
                so(&["libcublas.so.13"], &[]),
            ),
            (
                format!("{site}/nvidia/cublas/lib/libcublas.so.13"),
                so(&[], &[]),
            ),
            (
                format!("{site}/nvidia/cusolver/lib/libcusolverMg.so.12"),
                so(&[], &[]),
            ),
            // Loaded by name by cuDNN: a root.
            (
                format!("{site}/nvidia/cudnn/lib/libcudnn_ops.so.9"),
                so(&[], &[]),
            ),
        ]);
        // libcublas is found through the loader's cache (its directory is listed).
        let dirs = vec![format!("{site}/nvidia/cublas/lib")];
        let unused = unused_libraries(&objects, &dirs, &[]);
        assert_eq!(
            unused.into_iter().collect::<Vec<_>>(),
            [format!("{site}/nvidia/cusolver/lib/libcusolverMg.so.12")]
        );
        // A library the self-test loads is a root.
        let extra = [format!("{site}/nvidia/cusolver/lib/libcusolverMg.so.12")];
        assert!(unused_libraries(&objects, &dirs, &extra).is_empty());
    }
}
