//! Files: write and read them, and list a tree with every entry's type, mode, owner and
//! content digest (to compare two trees).

use std::path::Path;

/// Write `text` to `path`, creating its parent directories.
pub fn write(path: &Path, text: &str) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)
            .unwrap_or_else(|e| panic!("failed to create `{}`: {e}", p.display()));
    }
    std::fs::write(path, text)
        .unwrap_or_else(|e| panic!("failed to write `{}`: {e}", path.display()));
}

/// A whole file as text.
pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("failed to read `{}`: {e}", p.display()))
}

/// Every path under `root` with its type, mode, owner and content digest, sorted.
pub fn tree(root: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let what = if m.file_type().is_symlink() {
                format!("-> {}", std::fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                "dir".into()
            } else {
                gpuimg_store::digest::Digest::of(&std::fs::read(&p).unwrap()).to_string()
            };
            out.push(format!(
                "{rel} {:o} {}:{} {what}",
                m.mode(),
                m.uid(),
                m.gid()
            ));
        }
    }
    out.sort();
    out
}
