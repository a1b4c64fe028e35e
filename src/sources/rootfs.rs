//! `base.rootfs` as a [`Source`]: a root filesystem tarball (plain, gzip or zstd, indexed in
//! place) or directory (walked with lstat); every entry is [`Provenance::Rootfs`].
//!
//! Must never extract the tarball or follow a symlink: `assemble` reads it.

use std::path::PathBuf;

use super::Source;
#[cfg(doc)]
use crate::assemble::Provenance;
use crate::assemble::{self, AssembleError, Input, Tree};

/// A root filesystem tarball or directory.
#[derive(Debug, Clone)]
pub struct Rootfs {
    pub path: PathBuf,
    /// `base.allow-special-files`: device nodes and FIFOs are kept rather than refused.
    pub allow_special: bool,
}

impl Source for Rootfs {
    fn describe(&self) -> String {
        format!("rootfs `{}`", self.path.display())
    }

    fn tree(&self, scratch: &std::path::Path) -> Result<Tree, AssembleError> {
        assemble::assemble(
            &Input::Rootfs {
                path: &self.path,
                allow_special: self.allow_special,
            },
            scratch,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assemble::{EntryKind, Provenance};

    fn check(tree: &Tree, paths: &[&str]) {
        let got: Vec<&str> = tree.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(got, paths);
        for (e, p) in tree.iter_with_provenance() {
            assert_eq!(p, &Provenance::Rootfs, "{}", e.path);
        }
        assert_eq!(tree.default_provenance(), &Provenance::Rootfs);
    }

    #[test]
    fn a_directory_is_all_rootfs() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        std::fs::write(root.join("usr/bin/b"), b"x").unwrap();
        std::fs::hard_link(root.join("usr/bin/b"), root.join("usr/bin/a")).unwrap();
        std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
        let src = Rootfs {
            path: root.clone(),
            allow_special: false,
        };
        assert!(src.describe().contains(&root.display().to_string()));
        let tree = src.tree(&t.path().join("scratch")).unwrap();
        check(&tree, &["bin", "usr", "usr/bin", "usr/bin/a", "usr/bin/b"]);
        assert!(matches!(
            tree.get("usr/bin/b").map(|e| &e.kind),
            Some(EntryKind::Hardlink { target }) if target == "usr/bin/a"
        ));
    }

    #[test]
    fn a_tarball_is_all_rootfs() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("rootfs.tar");
        let mut b = tar::Builder::new(std::fs::File::create(&path).unwrap());
        let header = || {
            let mut h = tar::Header::new_gnu();
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            h
        };
        let mut h = header();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        b.append_data(&mut h, "etc/", std::io::empty()).unwrap();
        let mut h = header();
        h.set_mode(0o644);
        h.set_size(3);
        b.append_data(&mut h, "etc/hostname", &b"box"[..]).unwrap();
        let mut h = header();
        h.set_entry_type(tar::EntryType::Link);
        h.set_mode(0o644);
        h.set_size(0);
        b.append_link(&mut h, "etc/alias", "etc/hostname").unwrap();
        b.into_inner().unwrap();
        let src = Rootfs {
            path,
            allow_special: false,
        };
        let tree = src.tree(&t.path().join("scratch")).unwrap();
        // `etc/alias` sorts first: it carries the data, and stays rootfs.
        check(&tree, &["etc", "etc/alias", "etc/hostname"]);
        assert!(matches!(
            tree.get("etc/alias").map(|e| &e.kind),
            Some(EntryKind::File { size: 3, .. })
        ));
    }
}
