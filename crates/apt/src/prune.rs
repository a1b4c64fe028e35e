//! Keeping dpkg's file lists true after `strip` removed files: each
//! `var/lib/dpkg/info/<pkg>.list` and `<pkg>.md5sums` loses the lines of removed paths (a
//! path through a merged-/usr link, `/bin/ls`, is the file it leads to, `usr/bin/ls`); every
//! other line stays byte for byte, in its order, and a list that lost nothing keeps its
//! bytes. The status file is never touched: a package whose files all went is still installed
//! in the database.
//!
//! One list's bytes at a time: the caller walks its tree (the root package's
//! `sources::apt_tree::prune_lists`). Must never decide what is removed: `stripped` says.

use std::collections::BTreeSet;
use std::ops::Bound;

const INFO: &str = "var/lib/dpkg/info/";

/// A list larger than this is not read back.
pub const MAX_LIST_BYTES: u64 = 64 << 20;

/// Whether `path` (no leading `/`) is one of dpkg's file lists or md5sums files, which
/// [`prune_list`] keeps true.
pub fn is_file_list(path: &str) -> bool {
    path.strip_prefix(INFO)
        .is_some_and(|n| !n.contains('/') && (n.ends_with(".list") || n.ends_with(".md5sums")))
}

/// The file list or md5sums at `path` (its `bytes`) without the lines naming stripped paths,
/// or `None` when no line goes. `stripped(path)` says whether strip removes `path` (no leading
/// `/`, through the merged-/usr links) by what it removed from the tree or by the path alone:
/// the tree does not hold what a package replayed from its sketch only listed (its
/// component's layer is cached; `unpack::replay`), and the lists must not depend on that. A
/// line naming a directory stays while a line of the same list below it stays. `link(name)`
/// is the target of the top-level entry `name` when that is a symlink (`lib` → `usr/lib`).
pub fn prune_list<'t>(
    path: &str,
    bytes: &[u8],
    link: impl Fn(&str) -> Option<&'t str>,
    stripped: &dyn Fn(&str) -> bool,
) -> Option<Vec<u8>> {
    let md5sums = path.ends_with(".md5sums");
    // Line by line as bytes: a line that is not UTF-8 names no tree path and stays as it is.
    let lines: Vec<(&[u8], Option<String>)> = bytes
        .split_inclusive(|b| *b == b'\n')
        .map(|line| {
            let text = std::str::from_utf8(line).unwrap_or("");
            let text = text.strip_suffix('\n').unwrap_or(text);
            let named = if md5sums {
                text.split_once("  ").map_or("", |(_, p)| p)
            } else {
                text
            };
            (line, real_path(named.trim_start_matches('/'), &link))
        })
        .collect();
    let gone: Vec<bool> = lines
        .iter()
        .map(|(_, p)| p.as_deref().is_some_and(stripped))
        .collect();
    let kept: BTreeSet<&str> = lines
        .iter()
        .zip(&gone)
        .filter(|(_, g)| !**g)
        .filter_map(|((_, p), _)| p.as_deref())
        .collect();
    let mut out = Vec::with_capacity(bytes.len());
    let mut dropped = false;
    for ((line, p), g) in lines.iter().zip(&gone) {
        let below = |d: &str| {
            kept.range::<str, _>((Bound::Excluded(d), Bound::Unbounded))
                .next()
                .is_some_and(|k| k.strip_prefix(d).is_some_and(|r| r.starts_with('/')))
        };
        if *g && !p.as_deref().is_some_and(below) {
            dropped = true;
            continue;
        }
        out.extend_from_slice(line);
    }
    dropped.then_some(out)
}

/// The tree path a listed `path` (no leading `/`) is: through its first component when that is
/// a symlink (`bin/ls` → `usr/bin/ls`), else itself; `None` for the root.
fn real_path<'t>(path: &str, link: &impl Fn(&str) -> Option<&'t str>) -> Option<String> {
    if path.is_empty() || path == "." {
        return None;
    }
    Some(match path.split_once('/') {
        Some((first, rest)) => match link(first) {
            Some(target) => {
                let t = target.trim_start_matches('/').trim_end_matches('/');
                if t.is_empty() || t.split('/').any(|c| c == ".." || c == ".") {
                    path.to_string()
                } else {
                    format!("{t}/{rest}")
                }
            }
            None => path.to_string(),
        },
        None => path.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_removed_paths_go_also_through_merged_usr_links() {
        let list = "/.\n/lib\n/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu/libfoo.a\n\
                    /lib/x86_64-linux-gnu/libfoo.so.1\n/usr/share/doc/foo\n\
                    /usr/share/doc/foo/copyright\n/usr/share/man\n/usr/share/man/man1\n\
                    /usr/share/man/man1/foo.1.gz\n";
        let link = |name: &str| (name == "lib").then_some("/usr/lib/");
        let stripped = |p: &str| {
            p == "usr/lib/x86_64-linux-gnu/libfoo.a"
                || p == "usr/share/man"
                || p.starts_with("usr/share/man/")
                || p == "usr/share/doc/foo"
        };
        let out = prune_list(
            "var/lib/dpkg/info/foo.list",
            list.as_bytes(),
            link,
            &stripped,
        );
        // `/usr/share/doc/foo` stays: a line below it stays.
        assert_eq!(
            String::from_utf8(out.unwrap()).unwrap(),
            "/.\n/lib\n/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu/libfoo.so.1\n\
             /usr/share/doc/foo\n/usr/share/doc/foo/copyright\n"
        );
        let sums = "0123  usr/share/man/man1/foo.1.gz\n4567  usr/share/doc/foo/copyright\n";
        let out = prune_list(
            "var/lib/dpkg/info/foo.md5sums",
            sums.as_bytes(),
            link,
            &stripped,
        );
        assert_eq!(
            String::from_utf8(out.unwrap()).unwrap(),
            "4567  usr/share/doc/foo/copyright\n"
        );
        // A list that loses nothing is left as it is; a line that is not UTF-8 stays.
        let kept = b"/.\n/usr/bin/bar\n/usr/bin/\xff\n";
        assert_eq!(
            prune_list("var/lib/dpkg/info/bar.list", kept, link, &stripped),
            None
        );
    }

    #[test]
    fn only_the_database_lists_and_sums_are_file_lists() {
        assert!(is_file_list("var/lib/dpkg/info/foo.list"));
        assert!(is_file_list("var/lib/dpkg/info/foo:amd64.md5sums"));
        assert!(!is_file_list("var/lib/dpkg/status"));
        assert!(!is_file_list("var/lib/dpkg/info/foo.postinst"));
        assert!(!is_file_list("var/lib/dpkg/info/x/foo.list"));
    }
}
