//! The dpkg database of the image: `/var/lib/dpkg/status` and `info/<pkg>.{list,md5sums,...}`,
//! so that `dpkg -l`, `dpkg-query` and apt inside the image see exactly what was installed.
//!
//! Must never invent package metadata: status stanzas are the packages' own `control` files.

use std::fmt::Write as _;
use std::path::Path;

use md5::{Digest as _, Md5};

use super::deb::ControlFiles;
use super::AptError;

/// One installed package's record for the database.
pub struct Installed {
    pub name: String,
    pub arch: String,
    pub multi_arch_same: bool,
    pub control: ControlFiles,
    pub paths: Vec<String>,
}

/// Write `var/lib/dpkg` under `root` for `pkgs`.
pub fn write_db(root: &Path, pkgs: &[Installed]) -> Result<(), AptError> {
    let db = root.join("var/lib/dpkg");
    for d in ["info", "updates", "triggers", "alternatives", "parts"] {
        let p = db.join(d);
        fs_err::create_dir_all(&p).map_err(AptError::io(&p))?;
    }
    for f in ["available", "diversions", "statoverride"] {
        let p = db.join(f);
        if !p.exists() {
            fs_err::write(&p, "").map_err(AptError::io(&p))?;
        }
    }
    // Database format 1: Multi-Arch: same packages use `info/<pkg>:<arch>.*` names.
    let format = db.join("info/format");
    fs_err::write(&format, "1\n").map_err(AptError::io(&format))?;
    let mut sorted: Vec<&Installed> = pkgs.iter().collect();
    sorted.sort_by(|a, b| (&a.name, &a.arch).cmp(&(&b.name, &b.arch)));
    let mut status = String::new();
    for p in sorted {
        status.push_str(&status_stanza(root, p)?);
        status.push('\n');
        let stem = if p.multi_arch_same {
            format!("{}:{}", p.name, p.arch)
        } else {
            p.name.clone()
        };
        let list = db.join(format!("info/{stem}.list"));
        let mut text = p.paths.join("\n");
        text.push('\n');
        fs_err::write(&list, text).map_err(AptError::io(&list))?;
        for (name, (mode, data)) in &p.control.files {
            if name == "control" {
                continue;
            }
            let path = db.join(format!("info/{stem}.{name}"));
            fs_err::write(&path, data).map_err(AptError::io(&path))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o777))
                .map_err(AptError::io(&path))?;
        }
    }
    let path = db.join("status");
    fs_err::write(&path, status).map_err(AptError::io(&path))?;
    Ok(())
}

/// The package's `control` with `Status:` after `Package:` and `Conffiles:` (md5 of the
/// unpacked file) appended.
fn status_stanza(root: &Path, p: &Installed) -> Result<String, AptError> {
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
    if let Some(conffiles) = p.control.text("conffiles") {
        let mut lines = String::new();
        for f in conffiles
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with('/'))
        {
            let path = root.join(f.trim_start_matches('/'));
            let sum = match std::fs::read(&path) {
                Ok(b) => hex::encode(Md5::digest(&b)),
                Err(_) => "newconffile".to_string(),
            };
            let _ = writeln!(lines, " {f} {sum}");
        }
        if !lines.is_empty() {
            out.push_str("Conffiles:\n");
            out.push_str(&lines);
        }
    }
    Ok(out)
}
