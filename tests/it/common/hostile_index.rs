//! What a hostile Python index serves, written beside (or over) a `pyindex` index: a project
//! page listing thousands of versions whose wheels are not there; a PEP 658 metadata file
//! swapped for a lying one with the page's announced sha256 updated to match; a page whose
//! sizes are rewritten; FIFOs named like pages and wheels.

use std::fmt::Write as _;
use std::path::Path;

use super::pyindex::sha256_hex;

/// A PEP 691 page for `project` listing `n` wheels (`1.0` … `1.<n-1>`) that the server does
/// not have: each with a sha256 and a size, no metadata file, so reading a version's metadata
/// costs one range request that answers 404.
pub fn many_missing_versions(root: &Path, project: &str, n: usize) {
    let dir = root.join("simple").join(project);
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = String::new();
    for i in 0..n {
        let f = format!("{project}-1.{i}-py3-none-any.whl");
        let sha = sha256_hex(f.as_bytes());
        let _ = write!(
            files,
            "{}{{\"filename\":\"{f}\",\"url\":\"../../files/{f}\",\"hashes\":{{\"sha256\":\"{sha}\"}},\"size\":4096}}",
            if i == 0 { "" } else { "," }
        );
    }
    let page = format!(
        "{{\"meta\":{{\"api-version\":\"1.1\"}},\"name\":\"{project}\",\"files\":[{files}]}}"
    );
    std::fs::write(dir.join("index.json"), page).unwrap();
    std::fs::write(dir.join("index.html"), "<html><body></body></html>").unwrap();
}

/// Replace the PEP 658 file of `filename` (under `root/files/`) with `metadata`, and the
/// sha256 the pages of `project` announce for it, so that the lie checks out.
pub fn swap_metadata_file(root: &Path, project: &str, filename: &str, metadata: &str) {
    let file = root.join("files").join(format!("{filename}.metadata"));
    let old = sha256_hex(&std::fs::read(&file).unwrap());
    std::fs::write(&file, metadata).unwrap();
    let new = sha256_hex(metadata.as_bytes());
    rewrite_pages(root, project, &old, &new);
}

/// Replace `from` with `to` in `project`'s pages (HTML and JSON); one at least has it.
pub fn rewrite_pages(root: &Path, project: &str, from: &str, to: &str) {
    let mut found = false;
    for page in ["index.html", "index.json"] {
        let p = root.join("simple").join(project).join(page);
        if let Ok(text) = std::fs::read_to_string(&p) {
            found |= text.contains(from);
            std::fs::write(&p, text.replace(from, to)).unwrap();
        }
    }
    assert!(found, "`{from}` is in no page of {project}");
}

/// Make a FIFO at `path` (nothing ever writes to it).
pub fn fifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

/// Run `f` on a thread; its result, or a panic naming `what` when it has not returned within
/// a minute (a guard against a hang, never a measure of speed: the bounded code answers in
/// milliseconds).
pub fn within_a_minute<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} has not returned: it blocks"))
}
