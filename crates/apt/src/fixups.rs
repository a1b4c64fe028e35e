//! What skipped maintainer scripts would have done that a working image needs, done natively:
//! merged-/usr links before unpacking (as debootstrap does for Debian 12), /etc/passwd and
//! /etc/group from base-passwd's masters, base-files' dot files and nsswitch.conf, the CA bundle,
//! literal `update-alternatives --install` links (ld.so.cache: `ldcache.rs`). Skipped on
//! purpose: debconf, man/mime/icon caches, Python byte-compilation (done lazily at run time);
//! init/systemd registration and users beyond base-passwd's static ids too, except in a root
//! that boots (`system.rs`). Must never run package code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::AptError;
use gpuimg_store::confined::Root;

/// Files the fix-ups read from packages are small; anything larger is refused, not read.
pub const MAX_READ: u64 = 16 << 20;

/// Where the fix-ups read a package file, or look whether one exists before writing their own
/// (`/etc/passwd` is written only when no package ships it): a replay keeps these files'
/// bytes, so this must cover every path [`apply`] reads or tests (except alternatives', which
/// come from the postinst scripts, see `unpack`).
pub fn reads(path: &str) -> bool {
    const DIRS: [&str; 3] = [
        "/usr/share/base-passwd/",
        "/usr/share/base-files/",
        "/usr/share/ca-certificates/",
    ];
    DIRS.iter().any(|d| path.starts_with(d))
        || COPIES
            .iter()
            .any(|(_, _, to)| path.strip_prefix('/') == Some(to))
        || path.strip_prefix('/') == Some(CA_CONF)
        || crate::ldcache::reads(path)
        || crate::nvidia_alternatives::reads(path)
        || crate::system::reads(path)
}

/// Files the fix-ups copy from a package's shipped copy where no package shipped the target:
/// (package, from, to), root-relative.
const COPIES: [(&str, &str, &str); 7] = [
    (
        "base-passwd",
        "usr/share/base-passwd/passwd.master",
        "etc/passwd",
    ),
    (
        "base-passwd",
        "usr/share/base-passwd/group.master",
        "etc/group",
    ),
    (
        "base-files",
        "usr/share/base-files/dot.profile",
        "root/.profile",
    ),
    (
        "base-files",
        "usr/share/base-files/dot.bashrc",
        "root/.bashrc",
    ),
    ("base-files", "usr/share/base-files/profile", "etc/profile"),
    (
        "base-files",
        "usr/share/base-files/nsswitch.conf",
        "etc/nsswitch.conf",
    ),
    ("base-files", "usr/share/base-files/motd", "etc/motd"),
];
/// Written by the CA bundle step only where no package shipped it.
const CA_CONF: &str = "etc/ca-certificates.conf";

/// Directories that merged-/usr turns into symlinks into `usr/`, for one architecture.
pub fn merged_usr_links(debian_arch: &str) -> Vec<&'static str> {
    let mut v = vec!["bin", "sbin", "lib"];
    if debian_arch == "amd64" {
        v.push("lib64");
    }
    v
}

/// Create `usr/<d>` and `<d> -> usr/<d>` for each merged directory.
pub fn create_merged_usr(root: &Root, debian_arch: &str) -> Result<(), AptError> {
    for d in merged_usr_links(debian_arch) {
        let real = format!("usr/{d}");
        root.create_dir_all(Path::new(&real))
            .map_err(AptError::staged("create", &real))?;
        root.symlink(Path::new(&real), Path::new(d))
            .map_err(AptError::staged("create", d))?;
    }
    Ok(())
}

fn copy_if_missing(root: &Root, from: &str, to: &str) -> Result<bool, AptError> {
    let (src, dst) = (Path::new(from), Path::new(to));
    let is_file = root
        .metadata(src)
        .map_err(AptError::staged("read", from))?
        .is_some_and(|m| m.is_regular());
    if !is_file || root.exists(dst) {
        return Ok(false);
    }
    let data = root
        .read(src, MAX_READ)
        .map_err(AptError::staged("read", from))?;
    if let Some(p) = dst.parent() {
        root.create_dir_all(p)
            .map_err(AptError::staged("create", to))?;
    }
    root.write(dst, &data, 0o644)
        .map_err(AptError::staged("write", to))?;
    Ok(true)
}

/// Apply every fixup for the installed set; returns a line per action taken.
pub fn apply(
    root: &Root,
    installed: &[&str],
    postinsts: &BTreeMap<String, String>,
) -> Result<Vec<String>, AptError> {
    let mut done = Vec::new();
    let has = |n: &str| installed.contains(&n);
    for (package, from, to) in COPIES {
        if has(package) && copy_if_missing(root, from, to)? {
            done.push(format!("/{to} from {package}"));
        }
    }
    if has("ca-certificates") {
        done.extend(ca_bundle(root)?);
    }
    done.extend(alternatives(root, postinsts)?);
    done.extend(crate::nvidia_alternatives::apply(root, postinsts)?);
    Ok(done)
}

/// `update-ca-certificates`: every `.crt` under /usr/share/ca-certificates, sorted, concatenated.
fn ca_bundle(root: &Root) -> Result<Option<String>, AptError> {
    let base = PathBuf::from("usr/share/ca-certificates");
    let mut certs: Vec<PathBuf> = Vec::new();
    let mut stack = vec![base.clone()];
    while let Some(d) = stack.pop() {
        let Ok(names) = root.read_dir(&d) else {
            continue;
        };
        for (name, kind) in names {
            let p = d.join(&name);
            match kind {
                gpuimg_store::confined::Kind::Dir => stack.push(p),
                gpuimg_store::confined::Kind::File if p.extension().is_some_and(|x| x == "crt") => {
                    certs.push(p)
                }
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
    let mut used = 0;
    for c in &certs {
        let Ok(mut b) = root.read(c, MAX_READ) else {
            continue;
        };
        used += 1;
        if !b.ends_with(b"\n") {
            b.push(b'\n');
        }
        bundle.extend_from_slice(&b);
        if let Ok(rel) = c.strip_prefix(&base) {
            conf.push_str(&format!("{}\n", rel.display()));
        }
    }
    root.create_dir_all(Path::new("etc/ssl/certs"))
        .map_err(AptError::staged("create", "etc/ssl/certs"))?;
    let out = "etc/ssl/certs/ca-certificates.crt";
    root.write(Path::new(out), &bundle, 0o644)
        .map_err(AptError::staged("write", out))?;
    let conf_path = Path::new(CA_CONF);
    if !root.exists(conf_path) {
        root.write(conf_path, conf.as_bytes(), 0o644)
            .map_err(AptError::staged("write", CA_CONF))?;
    }
    Ok(Some(format!(
        "/etc/ssl/certs/ca-certificates.crt from {used} certificates"
    )))
}

/// Literal `update-alternatives --install LINK NAME PATH PRIORITY` lines of postinst scripts:
/// the highest priority wins; `LINK -> /etc/alternatives/NAME -> PATH`.
fn alternatives(
    root: &Root,
    postinsts: &BTreeMap<String, String>,
) -> Result<Vec<String>, AptError> {
    let mut best: BTreeMap<String, (String, String, i64)> = BTreeMap::new();
    // The NVIDIA driver's triggers compute their slaves: `nvidia_alternatives` does them
    // (mesa's `glx` choice only exists where mesa's libraries were diverted, never here).
    let computed = [
        "nvidia-alternative",
        "glx-alternative-nvidia",
        "glx-alternative-mesa",
    ];
    for (package, script) in postinsts {
        if computed.contains(&package.as_str()) {
            continue;
        }
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
            if !matches!(root.metadata(Path::new(path)), Ok(Some(_))) {
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
    for (name, (link, path, prio)) in best {
        let alt = format!("etc/alternatives/{name}");
        root.create_dir_all(Path::new("etc/alternatives"))
            .map_err(AptError::staged("create", "etc/alternatives"))?;
        root.remove_non_dir(Path::new(&alt))
            .map_err(AptError::staged("replace", &alt))?;
        root.symlink(Path::new(path.as_str()), Path::new(&alt))
            .map_err(AptError::staged("create", &alt))?;
        let l = Path::new(link.as_str());
        let parent_is_dir = l
            .parent()
            .map(|p| matches!(root.metadata(p), Ok(Some(m)) if m.is_directory()))
            .unwrap_or(false);
        if !root.exists(l) && parent_is_dir {
            root.symlink(Path::new(&format!("/{alt}")), l)
                .map_err(AptError::staged("create", &link))?;
        }
        let state = format!("var/lib/dpkg/alternatives/{name}");
        root.create_dir_all(Path::new("var/lib/dpkg/alternatives"))
            .map_err(AptError::staged("create", "var/lib/dpkg/alternatives"))?;
        root.write(
            Path::new(&state),
            format!("auto\n{link}\n\n{path}\n{prio}\n\n").as_bytes(),
            0o644,
        )
        .map_err(AptError::staged("write", &state))?;
        done.push(format!("{link} -> {path} (alternative `{name}`)"));
    }
    Ok(done)
}
