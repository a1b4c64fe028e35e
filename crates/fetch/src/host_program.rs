//! Starting a program of the build host: found by name only in the absolute directories of
//! `PATH` (an empty or relative entry, `.` included, would search the working directory), and
//! started from a fresh empty directory of its own, so that nothing in the directory gpuimg was
//! started from (a CI checkout, `/tmp`) is found, imported or read by it.
//! Must never search the working directory, and never start a program by a bare name.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The absolute directories of a `PATH` value, in order; empty and relative entries dropped.
pub fn search_dirs(path: Option<&OsStr>) -> Vec<PathBuf> {
    path.map(|p| {
        std::env::split_paths(p)
            .filter(|d| d.is_absolute())
            .collect()
    })
    .unwrap_or_default()
}

/// The first executable regular file called `name` in `dirs`. `name` must be a plain file name
/// (no `/`): a path is never looked up.
pub fn find_in(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    dirs.iter().filter(|d| d.is_absolute()).find_map(|d| {
        let cand = d.join(name);
        let meta = std::fs::metadata(&cand).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(cand)
    })
}

/// A fresh empty directory (mode 0700, removed when dropped) that programs are started from.
pub struct Isolated {
    dir: tempfile::TempDir,
}

impl Isolated {
    /// Make the empty directory in the system's temporary directory.
    pub fn new() -> std::io::Result<Isolated> {
        let dir = tempfile::Builder::new().prefix("gpuimg-empty-").tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        Ok(Isolated { dir })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A command for `program`, an absolute path, started from the empty directory. `None`
    /// for a relative path (it would be looked up in `PATH` or the working directory).
    pub fn command(&self, program: &Path) -> Option<Command> {
        if !program.is_absolute() {
            return None;
        }
        let mut c = Command::new(program);
        c.current_dir(self.dir.path());
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_empty_path_entries_are_never_searched() {
        let dirs = search_dirs(Some(OsStr::new(".:bin::/usr/bin:./x")));
        assert_eq!(dirs, vec![PathBuf::from("/usr/bin")]);
    }

    #[test]
    fn a_name_with_a_slash_is_not_looked_up() {
        let dirs = vec![PathBuf::from("/bin"), PathBuf::from("/usr/bin")];
        assert!(find_in("sh", &dirs).is_some());
        assert_eq!(find_in("./sh", &dirs), None);
        assert_eq!(find_in("../bin/sh", &dirs), None);
        assert_eq!(find_in("", &dirs), None);
    }

    #[test]
    fn a_file_that_is_not_executable_is_not_a_program() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("tool"), "#!/bin/sh\n").unwrap();
        let dirs = vec![t.path().to_path_buf()];
        assert_eq!(find_in("tool", &dirs), None);
        std::fs::set_permissions(
            t.path().join("tool"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_eq!(find_in("tool", &dirs), Some(t.path().join("tool")));
    }

    #[test]
    fn commands_start_in_an_empty_directory_and_only_by_absolute_path() {
        let iso = Isolated::new().unwrap();
        assert!(iso.command(Path::new("sh")).is_none());
        let out = iso
            .command(Path::new("/bin/sh"))
            .unwrap()
            .args(["-c", "pwd; ls -A | wc -l"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        assert_eq!(lines.next().map(PathBuf::from).as_deref(), Some(iso.path()));
        assert_eq!(lines.next().map(str::trim), Some("0"));
    }
}
