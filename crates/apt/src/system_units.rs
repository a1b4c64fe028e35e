//! Units enabled as the skipped postinst scripts would have enabled them on a first install:
//! their literal `deb-systemd-helper enable 'U'` lines (dh_installsystemd's) and
//! `systemctl enable U` lines (systemd's own: `getty@tty1.service`, `remote-fs.target`),
//! packages by name, lines in order; read by `script_words`, never run.
//!
//! For each unit, its `[Install]` section's link closure, as deb-systemd-helper's
//! `get_link_closure` makes it: `Alias=A` → `/etc/systemd/system/A` and `Also=U` → U's
//! closure, in file order, then `WantedBy=X` → `X.wants/<unit>` and `RequiredBy=X` →
//! `X.requires/<unit>`; a template takes the instance it is named with, else its
//! `DefaultInstance=`. Every link points at the unit file where it was found first in
//! `/etc/systemd/system`, `/lib/systemd/system`, `/usr/lib/systemd/system` (so
//! `/lib/systemd/system/ssh.service` on a merged-/usr root, as on Debian).
//!
//! Where the root has `systemctl` (package `systemd` ships `/bin/systemctl`; the caller says
//! whether it is installed, so that a replayed root, which leaves that file out, decides the
//! same), deb-systemd-helper's first install goes through `systemctl preset
//! --preset-mode=enable-only` (without it, the helper links the closure itself and presets
//! play no part): the first matching line of the `*.preset` files (by name,
//! `/etc/systemd/system-preset` replacing a file of the same name in
//! `/usr/lib/systemd/system-preset` and `/lib/systemd/system-preset`) decides for the named
//! unit; `disable` keeps its links away, no match enables (Debian ships no `disable *`). Its
//! state is written either way, as deb-systemd-helper writes it:
//! `/var/lib/systemd/deb-systemd-helper-enabled/<unit>.dsh-also` (one link per line, closure
//! order) and an empty file per link at the link's path under that directory. A unit whose
//! enable is guarded by `deb-systemd-helper debian-installed` (dh's `--no-enable`, e.g.
//! `ssh.socket`) is not enabled on a first install; its `update-state` line still records its
//! `.dsh-also`. `systemctl enable` writes the links and no state. A line it does not
//! understand, or a unit it cannot find, is a warning naming the package and line. Must never
//! run a script or `systemctl`, nor follow a link out of the root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::script_words::{self, Word};
use crate::AptError;
use gpuimg_store::confined::Root;

/// Where unit files are looked for, in order.
pub const UNIT_DIRS: [&str; 3] = [
    "etc/systemd/system",
    "lib/systemd/system",
    "usr/lib/systemd/system",
];
/// Where preset files are read, the overriding one first.
pub const PRESET_DIRS: [&str; 3] = [
    "etc/systemd/system-preset",
    "usr/lib/systemd/system-preset",
    "lib/systemd/system-preset",
];
/// deb-systemd-helper's state.
pub const STATE_DIR: &str = "var/lib/systemd/deb-systemd-helper-enabled";
/// Where the links go.
const LINKS_DIR: &str = "etc/systemd/system";

/// The most units one closure takes in through `Also=` (real ones take a handful): bounds the
/// recursion a package's unit files can ask for.
const MAX_CLOSURE: usize = 64;

/// A unit file or a preset file is small.
const MAX_READ: u64 = crate::fixups::MAX_READ;

/// One unit a script asks for.
struct Asked {
    package: String,
    line: usize,
    unit: String,
    how: How,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// `deb-systemd-helper enable`: presets, links, state.
    Helper,
    /// `deb-systemd-helper update-state` alone: the `.dsh-also` file.
    StateOnly,
    /// `systemctl enable`: links only.
    Systemctl,
}

/// Enable the units; returns (a line per unit, warnings). `has_systemctl`: the root has
/// `/bin/systemctl` (presets apply).
pub fn apply(
    root: &Root,
    postinsts: &BTreeMap<String, String>,
    has_systemctl: bool,
) -> Result<(Vec<String>, Vec<String>), AptError> {
    let mut warnings = Vec::new();
    let asked = requests(postinsts, &mut warnings);
    // deb-systemd-helper asks systemctl (and so the presets) only where the root has one.
    let presets = if has_systemctl {
        Some(presets(root)?)
    } else {
        None
    };
    let mut done = Vec::new();
    for a in &asked {
        let mut seen = BTreeSet::new();
        let links = match closure(root, &a.unit, &mut seen) {
            Ok(l) => l,
            Err(why) => {
                warnings.push(format!(
                    "`{}` postinst line {}: unit `{}`: {why}; not enabled",
                    a.package, a.line, a.unit
                ));
                continue;
            }
        };
        let linked = match a.how {
            How::Systemctl => true,
            How::Helper => presets.as_ref().is_none_or(|p| preset_enables(p, &a.unit)),
            How::StateOnly => false,
        };
        if linked {
            for l in &links {
                if let Some(w) = link(root, l)? {
                    warnings.push(format!("`{}` postinst: {w}", a.package));
                }
            }
        }
        if a.how != How::Systemctl {
            state(root, &a.unit, &links, a.how == How::Helper)?;
        }
        let what = match (a.how, linked) {
            (How::StateOnly, _) => "recorded (not enabled)",
            (_, true) => "enabled",
            (_, false) => "recorded, disabled by a preset",
        };
        done.push(format!("{} {what}", a.unit));
    }
    Ok((done, warnings))
}

/// A link: where (`/etc/systemd/system/...`) and the unit file it points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub at: String,
    pub to: String,
}

/// The units the scripts enable, in package then line order, each once.
fn requests(postinsts: &BTreeMap<String, String>, warnings: &mut Vec<String>) -> Vec<Asked> {
    let mut out: Vec<Asked> = Vec::new();
    for (package, script) in postinsts {
        let commands = script_words::commands(script);
        let mut guarded = BTreeSet::new();
        let mut enabled = Vec::new();
        let mut updated = Vec::new();
        for c in &commands {
            let (words, how) = match (c.invoking("deb-systemd-helper"), c.invoking("systemctl")) {
                (Some(w), _) => (w, How::Helper),
                (None, Some(w)) => (w, How::Systemctl),
                (None, None) => continue,
            };
            let mut rest = words[1..]
                .iter()
                .skip_while(|w| w.literal().is_some_and(|s| s.starts_with('-')));
            let Some(verb) = rest.next().and_then(Word::literal) else {
                continue;
            };
            let units: Vec<&Word> = rest.collect();
            let bucket = match (how, verb) {
                (How::Helper, "enable") => &mut enabled,
                (How::Helper, "update-state") => &mut updated,
                (How::Helper, "debian-installed") => {
                    guarded.extend(units.iter().filter_map(|w| w.literal()).map(String::from));
                    continue;
                }
                (How::Systemctl, "enable") => &mut enabled,
                _ => continue,
            };
            for u in units {
                match u.literal() {
                    Some(s) if s.starts_with('-') => {}
                    Some(s) if s.contains('.') && !s.contains('/') => {
                        bucket.push((c.line, s.to_string(), how))
                    }
                    _ => warnings.push(format!(
                        "`{package}` postinst line {}: `{}`: not understood (unit `{}`); not done",
                        c.line,
                        c.shown(),
                        u.shown()
                    )),
                }
            }
        }
        let mut mine: Vec<Asked> = Vec::new();
        for (line, unit, how) in enabled {
            if how == How::Helper && guarded.contains(&unit) {
                continue;
            }
            if !mine.iter().any(|a| a.unit == unit) {
                mine.push(Asked {
                    package: package.clone(),
                    line,
                    unit,
                    how,
                });
            }
        }
        for (line, unit, _) in updated {
            if !mine.iter().any(|a| a.unit == unit) {
                mine.push(Asked {
                    package: package.clone(),
                    line,
                    unit,
                    how: How::StateOnly,
                });
            }
        }
        out.extend(mine);
    }
    out
}

/// The unit file for `name` (a template's for an instance): its path as found, without a
/// leading `/`.
fn find(root: &Root, name: &str) -> Option<String> {
    let template = instance_of(name).map(|(t, _)| t);
    for n in std::iter::once(name.to_string()).chain(template) {
        for d in UNIT_DIRS {
            let p = format!("{d}/{n}");
            if matches!(root.metadata(Path::new(&p)), Ok(Some(m)) if m.is_regular()) {
                return Some(p);
            }
        }
    }
    None
}

/// `foo@bar.service` → (`foo@.service`, `bar`); `None` for a non-instance name.
fn instance_of(name: &str) -> Option<(String, String)> {
    let (prefix, rest) = name.split_once('@')?;
    let (inst, suffix) = rest.rsplit_once('.')?;
    Some((format!("{prefix}@.{suffix}"), inst.to_string()))
}

/// deb-systemd-helper's link closure of `name`.
fn closure(root: &Root, name: &str, seen: &mut BTreeSet<String>) -> Result<Vec<Link>, String> {
    if !seen.insert(name.to_string()) {
        return Ok(Vec::new());
    }
    if seen.len() > MAX_CLOSURE {
        return Err(format!("more than {MAX_CLOSURE} units through `Also=`"));
    }
    let path = find(root, name).ok_or("no unit file")?;
    let text = root
        .read(Path::new(&path), MAX_READ)
        .map_err(|e| e.to_string())?;
    let to = format!("/{path}");
    let mut links = Vec::new();
    let mut wanted = Vec::new();
    let mut default_instance = None;
    let mut install = false;
    for line in String::from_utf8_lossy(&text).lines() {
        let t = line.trim();
        if t.starts_with('[') {
            install = t == "[Install]";
            continue;
        }
        let Some((key, value)) = t.split_once('=').filter(|_| install) else {
            continue;
        };
        let mut values = value.split_whitespace().map(String::from);
        match key.trim() {
            "Alias" => links.extend(values.map(|a| Link {
                at: format!("/{LINKS_DIR}/{a}"),
                to: to.clone(),
            })),
            "Also" => {
                for also in values {
                    links.extend(closure(root, &also, seen)?);
                }
            }
            "WantedBy" => wanted.extend(values.map(|v| (v, "wants"))),
            "RequiredBy" => wanted.extend(values.map(|v| (v, "requires"))),
            "DefaultInstance" => default_instance = values.next_back(),
            _ => {}
        }
    }
    // A template is linked under its instance's name: the one asked for, or its default.
    let linked_name = if name.contains("@.") {
        default_instance.map(|i| name.replacen("@.", &format!("@{i}."), 1))
    } else {
        Some(name.to_string())
    };
    if let Some(n) = linked_name {
        for (target, dir) in wanted {
            links.push(Link {
                at: format!("/{LINKS_DIR}/{target}.{dir}/{n}"),
                to: to.clone(),
            });
        }
    }
    Ok(links)
}

/// Create one link (its directories too); an entry already there with another target is
/// left alone and said.
fn link(root: &Root, l: &Link) -> Result<Option<String>, AptError> {
    let at = Path::new(l.at.trim_start_matches('/'));
    match root.symlink_metadata(at) {
        Ok(Some(m)) if m.is_link() => {
            if root.read_link(at).ok().as_deref() == Some(Path::new(&l.to)) {
                return Ok(None);
            }
            return Ok(Some(format!(
                "`{}` already points elsewhere; left as it is",
                l.at
            )));
        }
        Ok(Some(_)) => {
            return Ok(Some(format!(
                "`{}` exists and is no link; left as it is",
                l.at
            )))
        }
        _ => {}
    }
    if let Some(p) = at.parent() {
        root.create_dir_all(p)
            .map_err(AptError::staged("create", p.display()))?;
    }
    root.symlink(Path::new(&l.to), at)
        .map_err(AptError::staged("create", &l.at))?;
    Ok(None)
}

/// deb-systemd-helper's state of one unit: its `.dsh-also` and, for an enable, an empty file
/// per link.
fn state(root: &Root, unit: &str, links: &[Link], enable: bool) -> Result<(), AptError> {
    root.create_dir_all(Path::new(STATE_DIR))
        .map_err(AptError::staged("create", STATE_DIR))?;
    if enable {
        for l in links {
            let rel = l.at.trim_start_matches('/');
            let rel = rel.strip_prefix(LINKS_DIR).unwrap_or(rel);
            let p = format!("{STATE_DIR}{rel}");
            let p = Path::new(&p);
            if let Some(d) = p.parent() {
                root.create_dir_all(d)
                    .map_err(AptError::staged("create", d.display()))?;
            }
            if !root.exists(p) {
                root.write(p, b"", 0o644)
                    .map_err(AptError::staged("write", p.display()))?;
            }
        }
    }
    let mut text = String::new();
    for l in links {
        if !text.lines().any(|x| x == l.at) {
            text.push_str(&l.at);
            text.push('\n');
        }
    }
    let p = format!("{STATE_DIR}/{unit}.dsh-also");
    root.write(Path::new(&p), text.as_bytes(), 0o644)
        .map_err(AptError::staged("write", &p))
}

/// The preset lines, in the order they are consulted: (enable?, pattern).
fn presets(root: &Root) -> Result<Vec<(bool, String)>, AptError> {
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for dir in PRESET_DIRS {
        let Ok(names) = root.read_dir(Path::new(dir)) else {
            continue;
        };
        for (name, _) in names {
            let name = name.to_string_lossy().into_owned();
            if name.ends_with(".preset") && !files.contains_key(&name) {
                files.insert(name.clone(), format!("{dir}/{name}"));
            }
        }
    }
    let mut out = Vec::new();
    for path in files.values() {
        let p = Path::new(path);
        if !matches!(root.metadata(p), Ok(Some(m)) if m.is_regular()) {
            continue;
        }
        let text = root
            .read(p, MAX_READ)
            .map_err(AptError::staged("read", path))?;
        for line in String::from_utf8_lossy(&text).lines() {
            let mut w = line.split_whitespace();
            match (w.next(), w.next()) {
                (Some("enable"), Some(pat)) => out.push((true, pat.to_string())),
                (Some("disable"), Some(pat)) => out.push((false, pat.to_string())),
                _ => {}
            }
        }
    }
    Ok(out)
}

/// Whether `systemctl preset --preset-mode=enable-only` would enable `unit`: the first
/// matching line decides; none matching enables.
fn preset_enables(presets: &[(bool, String)], unit: &str) -> bool {
    presets
        .iter()
        .find(|(_, pat)| glob(pat.as_bytes(), unit.as_bytes()))
        .is_none_or(|(enable, _)| *enable)
}

/// fnmatch(3) with `*` and `?` (what preset patterns use), without backtracking blow-up:
/// the last `*` is the only one retried.
fn glob(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        match pat.get(p) {
            Some(b'*') => {
                star = Some((p, i));
                p += 1;
            }
            Some(c) if *c == b'?' || *c == s[i] => {
                p += 1;
                i += 1;
            }
            _ => match star {
                Some((sp, si)) => {
                    p = sp + 1;
                    i = si + 1;
                    star = Some((sp, si + 1));
                }
                None => return false,
            },
        }
    }
    pat[p.min(pat.len())..].iter().all(|c| *c == b'*')
}

#[cfg(test)]
#[path = "system_units_tests.rs"]
mod tests;
