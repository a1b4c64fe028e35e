//! `base.rootfs` as a [`Source`]: a root filesystem tarball (plain, gzip or zstd, indexed in
//! place) or directory (walked with lstat); every entry is [`Provenance::Rootfs`].
//!
//! [`read_file`] reads one file of the root (the dpkg database, for the image's Python)
//! without extracting anything, through the root-confined API for a directory.
//! Must never extract the tarball or follow a symlink out of the root.

use std::path::{Path, PathBuf};

use super::Source;
#[cfg(doc)]
use gpuimg_assemble::Provenance;
use gpuimg_assemble::{AssembleError, Input, Tree};

/// A root filesystem tarball or directory.
#[derive(Debug, Clone)]
pub struct Rootfs {
    pub path: PathBuf,
    /// `base.allow-special-files`: device nodes and FIFOs are kept rather than refused.
    pub allow_special: bool,
}

/// The dpkg database of a root filesystem, when it has one.
pub const DPKG_STATUS: &str = "var/lib/dpkg/status";

/// The regular file `member` (relative, normalised) of the root filesystem at `path` (a
/// directory, read inside it as a container would see it, or a tarball); `None` when absent.
/// At most `cap` bytes.
pub fn read_file(path: &Path, member: &str, cap: u64) -> std::io::Result<Option<Vec<u8>>> {
    if fs_err::metadata(path)?.is_dir() {
        let root = gpuimg_store::confined::Root::open(path)?;
        let p = Path::new(member);
        match root.metadata(p)? {
            Some(m) if m.is_regular() => root.read(p, cap).map(Some),
            _ => Ok(None),
        }
    } else {
        gpuimg_assemble::read_tarball_member(path, member, cap)
    }
}

impl Source for Rootfs {
    type Error = AssembleError;

    fn describe(&self) -> String {
        format!("rootfs `{}`", self.path.display())
    }

    fn tree(
        &self,
        scratch: &std::path::Path,
        _obs: &mut dyn gpuimg_fetch::observe::Observer,
    ) -> Result<Tree, AssembleError> {
        gpuimg_assemble::assemble(
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
    use gpuimg_assemble::{EntryKind, Provenance};

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
        let tree = src
            .tree(
                &t.path().join("scratch"),
                &mut gpuimg_fetch::observe::Silent,
            )
            .unwrap();
        check(&tree, &["bin", "usr", "usr/bin", "usr/bin/a", "usr/bin/b"]);
        assert!(matches!(
            tree.get("usr/bin/b").map(|e| &e.kind),
            Some(EntryKind::Hardlink { target }) if target == "usr/bin/a"
        ));
    }

    #[test]
    fn one_file_is_read_from_a_directory_or_a_tarball_without_leaving_the_root() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("var/lib/dpkg")).unwrap();
        std::fs::write(root.join("var/lib/dpkg/status"), b"Package: a\n").unwrap();
        assert_eq!(
            read_file(&root, DPKG_STATUS, 100).unwrap().as_deref(),
            Some(&b"Package: a\n"[..])
        );
        assert!(read_file(&root, DPKG_STATUS, 3).is_err(), "capped");
        assert_eq!(read_file(&root, "etc/missing", 100).unwrap(), None);
        // A symlink to the host's file resolves inside the root.
        std::fs::write(t.path().join("secret"), b"host").unwrap();
        std::os::unix::fs::symlink(t.path().join("secret"), root.join("etc-link")).unwrap();
        assert_eq!(read_file(&root, "etc-link", 100).unwrap(), None);

        let tarball = t.path().join("r.tar.gz");
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&tarball).unwrap(),
            flate2::Compression::fast(),
        );
        let mut b = tar::Builder::new(gz);
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(4);
        b.append_data(&mut h, "./var/lib/dpkg/status", &b"abcd"[..])
            .unwrap();
        b.into_inner().unwrap().finish().unwrap();
        assert_eq!(
            read_file(&tarball, DPKG_STATUS, 100).unwrap().as_deref(),
            Some(&b"abcd"[..])
        );
        assert_eq!(read_file(&tarball, "etc/x", 100).unwrap(), None);
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
        let tree = src
            .tree(
                &t.path().join("scratch"),
                &mut gpuimg_fetch::observe::Silent,
            )
            .unwrap();
        // `etc/alias` sorts first: it carries the data, and stays rootfs.
        check(&tree, &["etc", "etc/alias", "etc/hostname"]);
        assert!(matches!(
            tree.get("etc/alias").map(|e| &e.kind),
            Some(EntryKind::File { size: 3, .. })
        ));
    }
}
