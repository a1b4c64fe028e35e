//! What skipped maintainer scripts would have done that a working image needs, done natively:
//! merged-/usr links before unpacking (as debootstrap does for Debian 12), /etc/passwd and
//! /etc/group from base-passwd's masters, base-files' dot files and nsswitch.conf, the CA bundle,
//! literal `update-alternatives --install` links (ld.so.cache: `ldcache.rs`). Skipped on
//! purpose: debconf, init/systemd registration, man/mime/icon caches, Python byte-compilation
//! (done lazily at run time), users beyond base-passwd's static ids. Must never run package code.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::Path;

use super::unpack::Root;
use super::AptError;

/// Directories that merged-/usr turns into symlinks into `usr/`, for one architecture.
pub fn merged_usr_links(debian_arch: &str) -> Vec<&'static str> {
    let mut v = vec!["bin", "sbin", "lib"];
    if debian_arch == "amd64" {
        v.push("lib64");
    }
    v
}

/// Create `usr/<d>` and `<d> -> usr/<d>` for each merged directory.
pub fn create_merged_usr(root: &Path, debian_arch: &str) -> Result<(), AptError> {
    for d in merged_usr_links(debian_arch) {
        let real = root.join("usr").join(d);
        fs_err::create_dir_all(&real).map_err(AptError::io(&real))?;
        let link = root.join(d);
        symlink(format!("usr/{d}"), &link).map_err(AptError::io(&link))?;
    }
    Ok(())
}

fn copy_if_missing(root: &Path, from: &str, to: &str) -> Result<bool, AptError> {
    let (src, dst) = (root.join(from), root.join(to));
    if !src.is_file() || dst.symlink_metadata().is_ok() {
        return Ok(false);
    }
    if let Some(p) = dst.parent() {
        fs_err::create_dir_all(p).map_err(AptError::io(p))?;
    }
    fs_err::copy(&src, &dst).map_err(AptError::io(&dst))?;
    Ok(true)
}

/// Apply every fixup for the installed set; returns a line per action taken.
pub fn apply(
    root: &Path,
    installed: &[&str],
    postinsts: &BTreeMap<String, String>,
) -> Result<Vec<String>, AptError> {
    let mut done = Vec::new();
    let has = |n: &str| installed.contains(&n);
    if has("base-passwd") {
        for (m, e) in [("passwd", "etc/passwd"), ("group", "etc/group")] {
            if copy_if_missing(root, &format!("usr/share/base-passwd/{m}.master"), e)? {
                done.push(format!("/{e} from base-passwd"));
            }
        }
    }
    if has("base-files") {
        for (from, to) in [
            ("usr/share/base-files/dot.profile", "root/.profile"),
            ("usr/share/base-files/dot.bashrc", "root/.bashrc"),
            ("usr/share/base-files/profile", "etc/profile"),
            ("usr/share/base-files/nsswitch.conf", "etc/nsswitch.conf"),
            ("usr/share/base-files/motd", "etc/motd"),
        ] {
            if copy_if_missing(root, from, to)? {
                done.push(format!("/{to} from base-files"));
            }
        }
    }
    if has("ca-certificates") {
        done.extend(ca_bundle(root)?);
    }
    done.extend(alternatives(root, postinsts)?);
    Ok(done)
}

/// `update-ca-certificates`: every `.crt` under /usr/share/ca-certificates, sorted, concatenated.
fn ca_bundle(root: &Path) -> Result<Option<String>, AptError> {
    let base = root.join("usr/share/ca-certificates");
    let mut certs = Vec::new();
    let mut stack = vec![base.clone()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() && p.extension().is_some_and(|x| x == "crt") => certs.push(p),
                _ => {}
            }
        }
    }
    if certs.is_empty() {
        return Ok(None);
    }
    certs.sort();
    let mut bundle = Vec::new();
    let mut conf = String::new();
    for c in &certs {
        let mut b = fs_err::read(c).map_err(AptError::io(c))?;
        if !b.ends_with(b"\n") {
            b.push(b'\n');
        }
        bundle.extend_from_slice(&b);
        if let Ok(rel) = c.strip_prefix(&base) {
            conf.push_str(&format!("{}\n", rel.display()));
        }
    }
    let dir = root.join("etc/ssl/certs");
    fs_err::create_dir_all(&dir).map_err(AptError::io(&dir))?;
    let out = dir.join("ca-certificates.crt");
    fs_err::write(&out, bundle).map_err(AptError::io(&out))?;
    let conf_path = root.join("etc/ca-certificates.conf");
    if conf_path.symlink_metadata().is_err() {
        fs_err::write(&conf_path, conf).map_err(AptError::io(&conf_path))?;
    }
    Ok(Some(format!(
        "/etc/ssl/certs/ca-certificates.crt from {} certificates",
        certs.len()
    )))
}

/// Literal `update-alternatives --install LINK NAME PATH PRIORITY` lines of postinst scripts:
/// the highest priority wins; `LINK -> /etc/alternatives/NAME -> PATH`.
fn alternatives(
    root: &Path,
    postinsts: &BTreeMap<String, String>,
) -> Result<Vec<String>, AptError> {
    let mut best: BTreeMap<String, (String, String, i64)> = BTreeMap::new();
    for script in postinsts.values() {
        let joined = script.replace("\\\n", " ");
        for line in joined.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(i) = words.iter().position(|w| *w == "--install") else {
                continue;
            };
            if !words[..i]
                .iter()
                .any(|w| w.ends_with("update-alternatives"))
            {
                continue;
            }
            let [link, name, path, prio, ..] = words[i + 1..] else {
                continue;
            };
            let Ok(prio) = prio.parse::<i64>() else {
                continue;
            };
            if [link, name, path].iter().any(|w| {
                w.contains(['$', '"', '\'', '`']) || w.contains("..") || name.contains('/')
            }) {
                continue;
            }
            if !root.join(path.trim_start_matches('/')).exists() {
                continue;
            }
            let e = best
                .entry(name.to_string())
                .or_insert((link.into(), path.into(), prio));
            if prio > e.2 {
                *e = (link.into(), path.into(), prio);
            }
        }
    }
    let mut done = Vec::new();
    let adir = root.join("etc/alternatives");
    for (name, (link, path, prio)) in best {
        fs_err::create_dir_all(&adir).map_err(AptError::io(&adir))?;
        let alt = adir.join(&name);
        let _ = std::fs::remove_file(&alt);
        symlink(&path, &alt).map_err(AptError::io(&alt))?;
        let parts: Vec<String> = link.split('/').map(str::to_string).collect();
        let l = Root::new(root)
            .resolve(&parts)
            .map_err(AptError::io(&link))?;
        if l.symlink_metadata().is_err() && l.parent().is_some_and(Path::is_dir) {
            symlink(format!("/etc/alternatives/{name}"), &l).map_err(AptError::io(&l))?;
        }
        let state = root.join("var/lib/dpkg/alternatives").join(&name);
        if let Some(p) = state.parent() {
            fs_err::create_dir_all(p).map_err(AptError::io(p))?;
        }
        fs_err::write(&state, format!("auto\n{link}\n\n{path}\n{prio}\n\n"))
            .map_err(AptError::io(&state))?;
        done.push(format!("{link} -> {path} (alternative `{name}`)"));
    }
    Ok(done)
}
