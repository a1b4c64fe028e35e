//! Keeping each installed distribution's `RECORD` true after `strip` removed files: the rows
//! of removed paths are dropped, every other row is kept as it was (hash and size included),
//! and a `RECORD` that lost no row keeps its bytes. The `.dist-info` directory itself always
//! stays (strip never removes it), so a distribution whose files all went is still recorded.
//! Works on any tree: wheels gpuimg installed, a rootfs's pip-installed packages. A file
//! rewritten in place (device-code pruning) keeps its row with the new hash
//! (`rehash_records`).

use std::collections::BTreeSet;

use crate::record;
use crate::WheelError;
use gpuimg_assemble::Tree;

/// A `RECORD` larger than this is not read back (torch's is about 2 MB).
pub const MAX_RECORD_BYTES: u64 = 64 << 20;

/// Drop the rows of `removed` paths from every `*.dist-info/RECORD` in `tree`; how many
/// RECORDs were rewritten.
pub fn prune_records(tree: &mut Tree, removed: &BTreeSet<String>) -> Result<usize, WheelError> {
    if removed.is_empty() {
        return Ok(0);
    }
    rewrite_records(tree, |site, rows| {
        let before = rows.len();
        rows.retain(|r| !resolve(site, &r.path).is_some_and(|p| removed.contains(&p)));
        rows.len() != before
    })
}

/// Give the rows of the paths in `changed` (tree path → new hash; the sizes stay) their new
/// hash in every `*.dist-info/RECORD` of `tree` that lists them; how many RECORDs were
/// rewritten. For files rewritten in place (device-code pruning keeps the size).
pub fn rehash_records(
    tree: &mut Tree,
    changed: &std::collections::BTreeMap<String, record::FileHash>,
) -> Result<usize, WheelError> {
    if changed.is_empty() {
        return Ok(0);
    }
    rewrite_records(tree, |site, rows| {
        let mut touched = false;
        for r in rows.iter_mut() {
            if let Some(h) = resolve(site, &r.path).and_then(|p| changed.get(&p)) {
                r.hash = Some(h.clone());
                touched = true;
            }
        }
        touched
    })
}

/// Read every `*.dist-info/RECORD` of `tree`, let `edit` change its rows (given the site
/// directory they are relative to; it says whether it changed any), and write back the ones
/// it changed (a RECORD left alone keeps its bytes); how many were rewritten.
fn rewrite_records(
    tree: &mut Tree,
    mut edit: impl FnMut(&str, &mut Vec<record::Row>) -> bool,
) -> Result<usize, WheelError> {
    let records: Vec<String> = tree
        .iter()
        .filter(|e| is_record(&e.path))
        .map(|e| e.path.clone())
        .collect();
    let mut n = 0;
    for path in records {
        let bad = |why: String| WheelError::RecordAfterStrip {
            path: format!("/{path}"),
            why,
        };
        let Some(bytes) = tree
            .read_file(&path, MAX_RECORD_BYTES)
            .map_err(|e| bad(e.to_string()))?
        else {
            continue;
        };
        let text = String::from_utf8(bytes).map_err(|_| bad("it is not UTF-8".into()))?;
        let mut rows = record::parse(&text).map_err(bad)?;
        if edit(site_of(&path), &mut rows) {
            tree.replace_data(&path, record::write(&rows).into_bytes());
            n += 1;
        }
    }
    Ok(n)
}

/// `…/<name>.dist-info/RECORD`.
fn is_record(path: &str) -> bool {
    path.strip_suffix("/RECORD")
        .and_then(|d| d.rsplit('/').next())
        .is_some_and(|d| d.ends_with(".dist-info"))
}

/// The directory a RECORD's rows are relative to: the one holding its `.dist-info`.
fn site_of(record: &str) -> &str {
    let dist_info = record.rsplit_once('/').map_or("", |(d, _)| d);
    dist_info.rsplit_once('/').map_or("", |(s, _)| s)
}

/// The tree path a row names: relative to `site` (`..` climbing), or absolute.
fn resolve(site: &str, row: &str) -> Option<String> {
    let mut parts: Vec<&str> = if row.starts_with('/') {
        Vec::new()
    } else {
        site.split('/').filter(|c| !c.is_empty()).collect()
    };
    for c in row.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use gpuimg_assemble::{DataSource, Entry, EntryKind, Provenance};

    const SITE: &str = "usr/local/lib/python3.11/dist-packages";

    fn file(t: &mut Tree, path: &str, data: &str) {
        t.insert_with(
            Entry {
                path: path.into(),
                kind: EntryKind::File {
                    size: data.len() as u64,
                    data: DataSource::Bytes(Arc::new(data.as_bytes().to_vec())),
                },
                mode: 0o644,
                uid: 0,
                gid: 0,
            },
            Provenance::wheel("demo"),
        );
    }

    #[test]
    fn rows_of_removed_paths_go_and_the_rest_stay_as_they_were() {
        let record = "demo/__init__.py,sha256=AAAA,3\n\
                      demo/tests/test_a.py,sha256=BBBB,5\n\
                      demo/__init__.pyi,sha256=CCCC,7\n\
                      ../../../bin/demo,sha256=DDDD,9\n\
                      demo-1.0.dist-info/RECORD,,\n";
        let other = "other/x.py,sha256=EEEE,1\nother-2.0.dist-info/RECORD,,\n";
        let mut t = Tree::new("t");
        file(&mut t, &format!("{SITE}/demo-1.0.dist-info/RECORD"), record);
        file(&mut t, &format!("{SITE}/other-2.0.dist-info/RECORD"), other);
        t.add_missing_parents();
        let removed: BTreeSet<String> = [
            format!("{SITE}/demo/tests/test_a.py"),
            format!("{SITE}/demo/__init__.pyi"),
            "usr/local/bin/demo".to_string(),
        ]
        .into_iter()
        .collect();
        assert_eq!(prune_records(&mut t, &removed).unwrap(), 1);
        let now = t
            .read_file(&format!("{SITE}/demo-1.0.dist-info/RECORD"), 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(
            String::from_utf8(now).unwrap(),
            "demo/__init__.py,sha256=AAAA,3\ndemo-1.0.dist-info/RECORD,,\n"
        );
        assert_eq!(
            t.provenance_of(&format!("{SITE}/demo-1.0.dist-info/RECORD")),
            Some(&Provenance::wheel("demo"))
        );
        let untouched = t
            .read_file(&format!("{SITE}/other-2.0.dist-info/RECORD"), 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(untouched, other.as_bytes());
    }

    #[test]
    fn a_record_that_cannot_be_read_is_refused_naming_it() {
        let mut t = Tree::new("t");
        file(&mut t, &format!("{SITE}/bad-1.0.dist-info/RECORD"), "a,b\n");
        t.add_missing_parents();
        let removed: BTreeSet<String> = [format!("{SITE}/bad/x.pyi")].into_iter().collect();
        let e = prune_records(&mut t, &removed).unwrap_err().to_string();
        assert!(
            e.contains("bad-1.0.dist-info/RECORD") && e.contains("row 1"),
            "{e}"
        );
    }

    #[test]
    fn rows_resolve_against_the_site() {
        assert_eq!(resolve("a/b/c", "../../x"), Some("a/x".into()));
        assert_eq!(resolve("a", "../../x"), None);
        assert_eq!(resolve("a/b", "/usr/bin/x"), Some("usr/bin/x".into()));
        assert_eq!(site_of("a/b/p-1.dist-info/RECORD"), "a/b");
    }

    #[test]
    fn a_file_rewritten_in_place_gets_its_new_hash_and_other_rows_stay() {
        let record =
            "demo/lib.so,sha256=AAAA,3\ndemo/x.py,sha256=BBBB,5\ndemo-1.0.dist-info/RECORD,,\n";
        let mut t = Tree::new("t");
        file(&mut t, &format!("{SITE}/demo-1.0.dist-info/RECORD"), record);
        t.add_missing_parents();
        let h = record::FileHash::sha256_of(b"new");
        let changed =
            std::collections::BTreeMap::from([(format!("{SITE}/demo/lib.so"), h.clone())]);
        assert_eq!(rehash_records(&mut t, &changed).unwrap(), 1);
        let now = t
            .read_file(&format!("{SITE}/demo-1.0.dist-info/RECORD"), 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(
            String::from_utf8(now).unwrap(),
            format!("demo/lib.so,{h},3\ndemo/x.py,sha256=BBBB,5\ndemo-1.0.dist-info/RECORD,,\n")
        );
    }
}
