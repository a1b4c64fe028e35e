//! `strip: [unused-libraries]`: the wheels' shared libraries that nothing loads, as
//! `elf::reach` computes them (the one computation `inspect --unused` and the build's
//! missing-library warning make too) over the wheels' ELF facts, their directories in
//! `ld.so.cache`, and the self-test's libraries as more roots (it loads them by name at
//! boot). Pure: a function of the wheels' ELF facts and the table, so the same wheels always
//! lose the same files.

use std::collections::{BTreeMap, BTreeSet};

use gpuimg_elf::closure::LoaderView;
use gpuimg_elf::{reach, SharedObject};
use gpuimg_expect::LibraryExpectation;

/// The image paths (no leading `/`) the self-test loads by name: each checked library and the
/// companions it loads after it.
pub fn selftest_roots(checked: &[LibraryExpectation]) -> Vec<String> {
    checked
        .iter()
        .flat_map(|l| {
            std::iter::once(&l.soname)
                .chain(&l.companions)
                .map(|n| format!("{}/{n}", l.dir.trim_start_matches('/')))
        })
        .collect()
}

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
    reach::reach(&view, extra.iter().cloned()).unused
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
        // A library a reached library names in its strings (cuDNN loads it by name) is used.
        let mut objects = objects;
        if let Some(cudnn) = objects.get_mut(&format!("{site}/nvidia/cudnn/lib/libcudnn_ops.so.9"))
        {
            cudnn.named = vec!["libcusolverMg.so.12".into()];
        }
        let dirs = vec![dirs[0].clone(), format!("{site}/nvidia/cusolver/lib")];
        assert!(unused_libraries(&objects, &dirs, &[]).is_empty());
    }
}
