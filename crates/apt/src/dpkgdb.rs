//! The dpkg database of the image: `/var/lib/dpkg/status` and `info/<pkg>.{list,md5sums,...}`,
//! so that `dpkg -l`, `dpkg-query` and apt inside the image see exactly what was installed.
//!
//! Must never invent package metadata: status stanzas are the packages' own `control` files.

use std::fmt::Write as _;
use std::path::Path;

use md5::{Digest as _, Md5};

use crate::deb::ControlFiles;
use crate::AptError;
use gpuimg_store::confined::Root;

/// Conffiles larger than this get dpkg's `newconffile` marker instead of a checksum.
pub const MAX_CONFFILE: u64 = 64 << 20;

/// Whether the database step looks at a package file at `path` (it writes `available`,
/// `diversions` and `statoverride` only where none exists): a replay keeps these files' bytes.
/// Conffiles, whose checksums it reads, are kept by their package's `conffiles` member.
pub fn reads(path: &str) -> bool {
    path.starts_with("/var/lib/dpkg/")
}

/// A package's conffiles (`/etc/...`), as its `conffiles` member lists them: the database
/// records each one's checksum, read from the root.
pub fn conffiles(control: &ControlFiles) -> Vec<String> {
    control
        .text("conffiles")
        .map(|t| {
            t.lines()
                .map(str::trim)
                .filter(|l| l.starts_with('/'))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// One installed package's record for the database.
pub struct Installed {
    pub name: String,
    pub arch: String,
    pub multi_arch_same: bool,
    pub control: ControlFiles,
    pub paths: Vec<String>,
}

fn write(root: &Root, path: &str, data: &[u8], mode: u32) -> Result<(), AptError> {
    root.write(Path::new(path), data, mode)
        .map_err(AptError::staged("write", path))
}

/// Write `var/lib/dpkg` under `root` for `pkgs`.
pub fn write_db(root: &Root, pkgs: &[Installed]) -> Result<(), AptError> {
    for d in ["info", "updates", "triggers", "alternatives", "parts"] {
        let p = format!("var/lib/dpkg/{d}");
        root.create_dir_all(Path::new(&p))
            .map_err(AptError::staged("create", &p))?;
    }
    for f in ["available", "diversions", "statoverride"] {
        let p = format!("var/lib/dpkg/{f}");
        if !root.exists(Path::new(&p)) {
            write(root, &p, b"", 0o644)?;
        }
    }
    // Database format 1: Multi-Arch: same packages use `info/<pkg>:<arch>.*` names.
    write(root, "var/lib/dpkg/info/format", b"1\n", 0o644)?;
    let mut sorted: Vec<&Installed> = pkgs.iter().collect();
    sorted.sort_by(|a, b| (&a.name, &a.arch).cmp(&(&b.name, &b.arch)));
    let mut status = String::new();
    for p in sorted {
        status.push_str(&status_stanza(root, p));
        status.push('\n');
        let stem = if p.multi_arch_same {
            format!("{}:{}", p.name, p.arch)
        } else {
            p.name.clone()
        };
        if stem.contains('/') {
            return Err(AptError::InvalidDeb {
                package: p.name.clone(),
                message: format!("`{stem}` is not a package name"),
            });
        }
        let mut text = p.paths.join("\n");
        text.push('\n');
        write(
            root,
            &format!("var/lib/dpkg/info/{stem}.list"),
            text.as_bytes(),
            0o644,
        )?;
        for (name, (mode, data)) in &p.control.files {
            if name == "control" {
                continue;
            }
            if name.contains('/') || name.is_empty() || name.starts_with('.') {
                return Err(AptError::InvalidDeb {
                    package: p.name.clone(),
                    message: format!("control member `{name}` is not a plain file name"),
                });
            }
            write(
                root,
                &format!("var/lib/dpkg/info/{stem}.{name}"),
                data,
                mode & 0o777,
            )?;
        }
    }
    write(root, "var/lib/dpkg/status", status.as_bytes(), 0o644)?;
    Ok(())
}

/// The package's `control` with `Status:` after `Package:` and `Conffiles:` (md5 of the
/// unpacked file) appended.
fn status_stanza(root: &Root, p: &Installed) -> String {
    let control = p.control.text("control").unwrap_or_default();
    let mut out = String::new();
    for line in control.trim_end().lines() {
        if line.trim().is_empty() {
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if line.starts_with("Package:") {
            out.push_str("Status: install ok installed\n");
        }
    }
    let mut lines = String::new();
    for f in &conffiles(&p.control) {
        let sum = match root.read(Path::new(f), MAX_CONFFILE) {
            Ok(b) => hex::encode(Md5::digest(&b)),
            Err(_) => "newconffile".to_string(),
        };
        let _ = writeln!(lines, " {f} {sum}");
    }
    if !lines.is_empty() {
        out.push_str("Conffiles:\n");
        out.push_str(&lines);
    }
    out
}
