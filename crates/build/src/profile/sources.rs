//! `files.src` checks: inside the build context (`context:`, like Docker's) after resolving
//! symlinks, and only regular files, directories and symlinks (no FIFO, socket or device,
//! also not inside a source directory). Also the `files.mode` grammar.
//! Must never open a source: only `lstat`/`realpath`, so a FIFO can never block a load.

use std::path::{Component, Path, PathBuf};

use super::{Located, ProfileError};

/// A path written in the profile: relative to the profile's directory `dir` (absolute values
/// as they are), without `./` segments, so that messages show `./rootfs.tar`, not
/// `././rootfs.tar`.
pub fn join(dir: &Path, value: &str) -> PathBuf {
    let v = Path::new(value);
    if v.is_absolute() {
        return v.to_path_buf();
    }
    let mut out = dir.to_path_buf();
    for c in v.components() {
        if c != Component::CurDir {
            out.push(c);
        }
    }
    out
}

/// The canonical build context: `context:` relative to the profile's directory, or that
/// directory itself.
pub(super) fn build_context(
    context: Option<&Located<String>>,
    dir: &Path,
    file: &str,
) -> Result<PathBuf, ProfileError> {
    let Some(c) = context else {
        return fs_err::canonicalize(dir).map_err(|source| ProfileError::Read {
            path: dir.display().to_string(),
            source,
        });
    };
    let given = join(dir, &c.value);
    let err = |m: String| ProfileError::invalid(file, c, "context", m);
    match std::fs::canonicalize(&given) {
        Ok(p) if p.is_dir() => Ok(p),
        Ok(_) => Err(err(format!("`{}` is not a directory", given.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(err(format!("`{}` does not exist", given.display())))
        }
        Err(e) => Err(err(format!("Failed to resolve `{}`: {e}", given.display()))),
    }
}

/// Check one `files.src` and return its canonical path.
pub(super) fn source(
    src: &Located<String>,
    dir: &Path,
    context: &Path,
    file: &str,
) -> Result<PathBuf, ProfileError> {
    source_for("files.src", src, dir, context, file)
}

/// Check a path the profile names under `key` (a `files.src`, `python.requirements`, a
/// `python.find-links` directory): inside `context` after resolving symlinks, no special file.
pub(super) fn source_for(
    key: &str,
    src: &Located<String>,
    dir: &Path,
    context: &Path,
    file: &str,
) -> Result<PathBuf, ProfileError> {
    let err = |m: String| ProfileError::invalid(file, src, key, m);
    let given = join(dir, &src.value);
    let real = match std::fs::canonicalize(&given) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(err(match std::fs::symlink_metadata(&given) {
                Ok(_) => format!("`{}` is a symlink to nothing", given.display()),
                Err(_) => format!("`{}` does not exist", given.display()),
            }));
        }
        Err(e) => return Err(err(format!("Failed to resolve `{}`: {e}", given.display()))),
    };
    let shown = if std::path::absolute(&given).is_ok_and(|a| a == real) {
        format!("`{}`", given.display())
    } else {
        format!("`{}` (resolved: `{}`)", given.display(), real.display())
    };
    if !real.starts_with(context) {
        return Err(err(format!(
            "{shown} is outside the build context `{}`; set `context:` to a directory that holds it (`context: /` allows any path)",
            context.display()
        )));
    }
    let meta = std::fs::symlink_metadata(&real)
        .map_err(|e| err(format!("Failed to read {shown}: {e}")))?;
    if let Some(kind) = gpuimg_store::user_file::special_kind(&meta.file_type()) {
        return Err(err(format!("{shown} is a {kind}; {COPIES}")));
    }
    if let Some(fs) = gpuimg_store::user_file::pseudo_fs(&real).map_err(|e| err(e.to_string()))? {
        return Err(err(format!(
            "{shown} is on {fs}, whose files are the kernel's state; {COPIES} of a real file system"
        )));
    }
    if meta.is_dir() {
        if let Some((path, kind)) = special_inside(&real).map_err(|e| err(e.to_string()))? {
            let inside = path.strip_prefix(&real).unwrap_or(&path);
            return Err(err(format!(
                "`{}` is a {kind}; {COPIES}",
                given.join(inside).display()
            )));
        }
    }
    Ok(real)
}

const COPIES: &str = "`files:` copies only regular files, directories and symlinks";

/// The first special file under `root` (lstat only, symlinks not followed), in name order.
fn special_inside(root: &Path) -> Result<Option<(PathBuf, &'static str)>, std::io::Error> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries = fs_err::read_dir(&dir)?.collect::<Result<Vec<_>, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries.iter().rev() {
            let t = e.file_type()?;
            if let Some(kind) = gpuimg_store::user_file::special_kind(&t) {
                return Ok(Some((e.path(), kind)));
            }
            if t.is_dir() {
                if let Some(fs) = gpuimg_store::user_file::pseudo_fs(&e.path())? {
                    return Ok(Some((e.path(), fs)));
                }
                stack.push(e.path());
            }
        }
    }
    Ok(None)
}

/// `files.mode`: 3 or 4 octal digits (`"755"`, `"0755"`, `"4755"`); nothing else.
pub(super) fn parse_mode(m: &str) -> Option<u32> {
    let ok = (3..=4).contains(&m.len()) && m.bytes().all(|b| (b'0'..=b'7').contains(&b));
    ok.then(|| u32::from_str_radix(m, 8).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(parse_mode("0755"), Some(0o755));
        assert_eq!(parse_mode("755"), Some(0o755));
        assert_eq!(parse_mode("4755"), Some(0o4755));
        assert_eq!(parse_mode("7777"), Some(0o7777));
        for bad in [
            "+755", "-755", "0o755", "999", "07777 7", "", "75", "07555", " 755", "0x1ff",
        ] {
            assert_eq!(parse_mode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn join_drops_dot_segments() {
        assert_eq!(join(Path::new("."), "./r.tar"), PathBuf::from("./r.tar"));
        assert_eq!(join(Path::new("/p"), "./a/./b"), PathBuf::from("/p/a/b"));
        assert_eq!(join(Path::new("/p"), "/abs"), PathBuf::from("/abs"));
        assert_eq!(join(Path::new("/p"), "."), PathBuf::from("/p"));
    }
}
