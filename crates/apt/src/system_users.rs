//! System users and groups of a booted root, as the skipped maintainer scripts and
//! `systemd-sysusers` would have made them, with ids that depend on nothing but the package
//! set: the `u`, `g` and `m` lines of every `sysusers.d/*.conf` (`/etc/sysusers.d` replaces a
//! file of the same name in `/usr/lib/sysusers.d`; files by name, lines in order; systemd
//! applies them all at boot anyway, so applying them here only fixes the ids), then the
//! literal `adduser`/`addgroup`/`useradd`/`groupadd` lines of the postinst scripts (packages
//! by name, lines in order; read as data by `account_requests`, never run). Every such line counts,
//! whatever condition or function it sits in: a first install takes the `configure` path and
//! the `getent` guards find nothing yet.
//!
//! Ids, in this order: every explicit id first (a sysusers id, `--uid`/`--gid`/`-u`/`-g`);
//! then sysusers' dynamic ids downward from 999 (as `systemd-sysusers` allocates them, a user
//! and its group on one number where both are free); then the scripts' dynamic ids upward
//! from 100 (adduser's `FIRST_SYSTEM_UID`/`GID`; a user and its group each take the first free
//! id of its own kind, as adduser 3.134 does). A name that exists already is left as it is.
//! Defaults are adduser's: shell `/usr/sbin/nologin`, home `/nonexistent`, primary group
//! `nogroup` (65534) unless `--group`/`--ingroup`/`--gid`, no home directory unless one is
//! named without `--no-create-home` (or `useradd -m`).
//!
//! Writes `/etc/passwd`, `/etc/group`, `/etc/shadow` and `/etc/gshadow` whole: the entries
//! already there first (those without a shadow entry given one, as `shadowconfig on`'s
//! pwconv/grpconv would: the password field moves to the shadow file, `lastchg` from
//! `SOURCE_DATE_EPOCH`), then the new ones in the order they were made. A line it does not
//! understand is a warning naming the package (or file) and line, and is not done: it never
//! guesses. Must never run a script or a program, nor read outside the root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::account_requests::{self, Asked, Maker, Primary, Request};
use crate::AptError;
use gpuimg_store::confined::Root;

/// Directories of `sysusers.d` files, the overriding one first.
pub const SYSUSERS_DIRS: [&str; 3] = ["etc/sysusers.d", "usr/lib/sysusers.d", "lib/sysusers.d"];

/// The most a passwd-style file or a sysusers file may hold.
const MAX_READ: u64 = crate::fixups::MAX_READ;

/// adduser's and sysusers' system id range.
const FIRST_SYSTEM: u32 = 100;
const LAST_SYSTEM: u32 = 999;

/// The four files, as lists of fields, and the ids in use (kept beside the rows, so that
/// looking for a free id costs one lookup per candidate).
struct Db {
    passwd: Vec<Vec<String>>,
    group: Vec<Vec<String>>,
    shadow: Vec<Vec<String>>,
    gshadow: Vec<Vec<String>>,
    uids: BTreeSet<u32>,
    gids: BTreeSet<u32>,
}

impl Db {
    fn new(
        passwd: Vec<Vec<String>>,
        group: Vec<Vec<String>>,
        shadow: Vec<Vec<String>>,
        gshadow: Vec<Vec<String>>,
    ) -> Db {
        let ids = |rows: &[Vec<String>]| rows.iter().filter_map(|e| e[2].parse().ok()).collect();
        Db {
            uids: ids(&passwd),
            gids: ids(&group),
            passwd,
            group,
            shadow,
            gshadow,
        }
    }
    fn uids(&self) -> &BTreeSet<u32> {
        &self.uids
    }
    fn gids(&self) -> &BTreeSet<u32> {
        &self.gids
    }
    fn has_user(&self, name: &str) -> bool {
        self.passwd.iter().any(|e| e[0] == name)
    }
    fn gid_of(&self, name: &str) -> Option<u32> {
        self.group
            .iter()
            .find(|e| e[0] == name)
            .and_then(|e| e[2].parse().ok())
    }
}

/// Make the users and groups; returns (a line per account made, warnings).
pub fn apply(
    root: &Root,
    postinsts: &BTreeMap<String, String>,
    epoch: u64,
) -> Result<(Vec<String>, Vec<String>), AptError> {
    let mut warnings = Vec::new();
    let mut asked = sysusers_requests(root, &mut warnings)?;
    for (package, script) in postinsts {
        asked.extend(account_requests::script_requests(
            package,
            script,
            &mut warnings,
        ));
    }
    let mut db = Db::new(
        read_table(root, "etc/passwd", 7)?,
        read_table(root, "etc/group", 4)?,
        read_table(root, "etc/shadow", 9)?,
        read_table(root, "etc/gshadow", 4)?,
    );
    let day = (epoch / 86400).to_string();
    shadow_existing(&mut db, &day);
    let mut done = Vec::new();
    // Explicit ids are taken before any dynamic one.
    let mut reserved_u: BTreeSet<u32> = BTreeSet::new();
    let mut reserved_g: BTreeSet<u32> = BTreeSet::new();
    for a in &asked {
        match &a.request {
            Request::Group { gid: Some(g), .. } => {
                reserved_g.insert(*g);
            }
            Request::User { uid, primary, .. } => {
                if let Some(u) = uid {
                    reserved_u.insert(*u);
                }
                if let Primary::Own(Some(g)) | Primary::Id(g) = primary {
                    reserved_g.insert(*g);
                }
            }
            _ => {}
        }
    }
    let mut ids = Ids {
        reserved_u,
        reserved_g,
    };
    let phases = [
        asked
            .iter()
            .filter(|a| a.maker == Maker::Sysusers)
            .collect::<Vec<_>>(),
        asked
            .iter()
            .filter(|a| a.maker != Maker::Sysusers)
            .collect(),
    ];
    for a in phases.into_iter().flatten() {
        match make(&mut db, &mut ids, a, &day) {
            Ok(Some(line)) => done.push(line),
            Ok(None) => {}
            Err(why) => warnings.push(format!("{}: {why}; not done", a.origin)),
        }
        if let Request::User {
            name,
            home,
            create_home: true,
            ..
        } = &a.request
        {
            create_home(root, &db, name, home)?;
        }
    }
    let shadow_gid = db.gid_of("shadow").unwrap_or(0);
    write_table(root, "etc/passwd", &db.passwd, 0o644, 0)?;
    write_table(root, "etc/group", &db.group, 0o644, 0)?;
    write_table(root, "etc/shadow", &db.shadow, 0o640, shadow_gid)?;
    write_table(root, "etc/gshadow", &db.gshadow, 0o640, shadow_gid)?;
    Ok((done, warnings))
}

/// Explicit ids every request names, kept from dynamic allocation.
struct Ids {
    reserved_u: BTreeSet<u32>,
    reserved_g: BTreeSet<u32>,
}

impl Ids {
    fn free_uid(&self, db: &Db, id: u32) -> bool {
        !self.reserved_u.contains(&id) && !db.uids().contains(&id)
    }
    fn free_gid(&self, db: &Db, id: u32) -> bool {
        !self.reserved_g.contains(&id) && !db.gids().contains(&id)
    }
    fn up(&self, free: impl Fn(u32) -> bool) -> Result<u32, String> {
        (FIRST_SYSTEM..=LAST_SYSTEM)
            .find(|&i| free(i))
            .ok_or_else(|| "no free system id is left".to_string())
    }
    fn down(&self, free: impl Fn(u32) -> bool) -> Result<u32, String> {
        (FIRST_SYSTEM..=LAST_SYSTEM)
            .rev()
            .find(|&i| free(i))
            .ok_or_else(|| "no free system id is left".to_string())
    }
}

/// Carry out one request; `Ok(None)` when there was nothing to do.
fn make(db: &mut Db, ids: &mut Ids, a: &Asked, day: &str) -> Result<Option<String>, String> {
    let locked = match a.maker {
        Maker::Sysusers => "!*",
        _ => "!",
    };
    match &a.request {
        Request::Group { name, gid } => {
            if db.gid_of(name).is_some() {
                return Ok(None);
            }
            let gid = match gid {
                Some(g) if db.gids().contains(g) => {
                    return Err(format!("gid {g} is taken by another group"))
                }
                Some(g) => *g,
                None if a.maker == Maker::Sysusers => ids.down(|i| ids.free_gid(db, i))?,
                None => ids.up(|i| ids.free_gid(db, i))?,
            };
            add_group(db, name, gid, locked);
            Ok(Some(format!("group {name} ({gid})")))
        }
        Request::User {
            name,
            uid,
            primary,
            gecos,
            home,
            shell,
            ..
        } => {
            if db.has_user(name) {
                return Ok(None);
            }
            if let Some(u) = uid {
                if db.uids().contains(u) {
                    return Err(format!("uid {u} is taken by another user"));
                }
            }
            let (gid, new_group) = match primary {
                Primary::Id(g) => (*g, false),
                Primary::Named(g) => (
                    db.gid_of(g)
                        .ok_or_else(|| format!("its group `{g}` does not exist"))?,
                    false,
                ),
                Primary::Own(g) => match db.gid_of(name) {
                    Some(existing) => (existing, false),
                    None => {
                        let gid = match (g, uid, a.maker) {
                            (Some(g), _, _) if !db.gids().contains(g) => *g,
                            (Some(g), _, _) => {
                                return Err(format!("gid {g} is taken by another group"))
                            }
                            (None, Some(u), _) if ids.free_gid(db, *u) => *u,
                            (None, None, Maker::Sysusers) => ids
                                .down(|i| ids.free_gid(db, i) && ids.free_uid(db, i))
                                .or_else(|_| ids.down(|i| ids.free_gid(db, i)))?,
                            (None, _, Maker::Sysusers) => ids.down(|i| ids.free_gid(db, i))?,
                            (None, _, _) => ids.up(|i| ids.free_gid(db, i))?,
                        };
                        (gid, true)
                    }
                },
            };
            let uid = match uid {
                Some(u) => *u,
                None if a.maker == Maker::Sysusers => {
                    if ids.free_uid(db, gid) && (FIRST_SYSTEM..=LAST_SYSTEM).contains(&gid) {
                        gid
                    } else {
                        ids.down(|i| ids.free_uid(db, i))?
                    }
                }
                None => ids.up(|i| ids.free_uid(db, i))?,
            };
            if new_group {
                add_group(db, name, gid, locked);
            }
            db.uids.insert(uid);
            db.passwd.push(vec![
                name.clone(),
                "x".into(),
                uid.to_string(),
                gid.to_string(),
                gecos.clone(),
                home.clone(),
                shell.clone(),
            ]);
            let ages: [&str; 3] = match a.maker {
                Maker::Useradd => ["0", "99999", "7"],
                _ => ["", "", ""],
            };
            let mut sh = vec![name.clone(), locked.into(), day.to_string()];
            sh.extend(ages.iter().map(|s| s.to_string()));
            sh.extend(["", "", ""].iter().map(|s| s.to_string()));
            db.shadow.push(sh);
            Ok(Some(format!("user {name} ({uid}:{gid})")))
        }
        Request::Member { user, group } => {
            let Some(g) = db.group.iter_mut().find(|e| e[0] == *group) else {
                return Err(format!("group `{group}` does not exist"));
            };
            let mut members: Vec<String> = g[3]
                .split(',')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            if members.contains(user) {
                return Ok(None);
            }
            members.push(user.clone());
            g[3] = members.join(",");
            if let Some(gs) = db.gshadow.iter_mut().find(|e| e[0] == *group) {
                gs[3] = members.join(",");
            }
            Ok(Some(format!("{user} in group {group}")))
        }
    }
}

fn add_group(db: &mut Db, name: &str, gid: u32, locked: &str) {
    db.gids.insert(gid);
    db.group.push(vec![
        name.into(),
        "x".into(),
        gid.to_string(),
        String::new(),
    ]);
    db.gshadow.push(vec![
        name.into(),
        locked.into(),
        String::new(),
        String::new(),
    ]);
}

/// `shadowconfig on`: every entry without a shadow entry gets one (its password field moved
/// there, `x` left behind).
fn shadow_existing(db: &mut Db, day: &str) {
    for e in &mut db.passwd {
        if !db.shadow.iter().any(|s| s[0] == e[0]) {
            let pw = std::mem::replace(&mut e[1], "x".into());
            let pw = if pw == "x" { "*".into() } else { pw };
            db.shadow.push(vec![
                e[0].clone(),
                pw,
                day.to_string(),
                "0".into(),
                "99999".into(),
                "7".into(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
    }
    for e in &mut db.group {
        if !db.gshadow.iter().any(|s| s[0] == e[0]) {
            let pw = std::mem::replace(&mut e[1], "x".into());
            let pw = if pw == "x" { "*".into() } else { pw };
            db.gshadow
                .push(vec![e[0].clone(), pw, String::new(), e[3].clone()]);
        }
    }
}

fn create_home(root: &Root, db: &Db, name: &str, home: &str) -> Result<(), AptError> {
    let Some(e) = db.passwd.iter().find(|e| e[0] == name) else {
        return Ok(());
    };
    let rel = home.trim_start_matches('/');
    if rel.is_empty() || rel.split('/').any(|c| c == "..") || root.exists(Path::new(rel)) {
        return Ok(());
    }
    let (uid, gid) = (e[2].parse().unwrap_or(0), e[3].parse().unwrap_or(0));
    root.create_dir_all(Path::new(rel))
        .map_err(AptError::staged("create", rel))?;
    root.set_owner(Path::new(rel), uid, gid)
        .map_err(AptError::staged("chown", rel))?;
    Ok(())
}

/// A passwd-style file as rows of `fields` fields (absent: none; a short row is padded).
fn read_table(root: &Root, path: &str, fields: usize) -> Result<Vec<Vec<String>>, AptError> {
    let p = Path::new(path);
    if !matches!(root.metadata(p), Ok(Some(m)) if m.is_regular()) {
        return Ok(Vec::new());
    }
    let bytes = root
        .read(p, MAX_READ)
        .map_err(AptError::staged("read", path))?;
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut row: Vec<String> = l.splitn(fields, ':').map(String::from).collect();
            row.resize(fields, String::new());
            row
        })
        .collect())
}

fn write_table(
    root: &Root,
    path: &str,
    rows: &[Vec<String>],
    mode: u32,
    gid: u32,
) -> Result<(), AptError> {
    let mut text = String::new();
    for r in rows {
        text.push_str(&r.join(":"));
        text.push('\n');
    }
    let p = Path::new(path);
    root.write(p, text.as_bytes(), mode)
        .map_err(AptError::staged("write", path))?;
    root.set_owner(p, 0, gid)
        .map_err(AptError::staged("chown", path))
}

/// Every `sysusers.d/*.conf` file's requests, files by name (the first directory's file of
/// a name wins), lines in order.
fn sysusers_requests(root: &Root, warnings: &mut Vec<String>) -> Result<Vec<Asked>, AptError> {
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for dir in SYSUSERS_DIRS {
        let Ok(names) = root.read_dir(Path::new(dir)) else {
            continue;
        };
        for (name, _) in names {
            let name = name.to_string_lossy().into_owned();
            if name.ends_with(".conf") && !files.contains_key(&name) {
                files.insert(name.clone(), format!("{dir}/{name}"));
            }
        }
    }
    let mut out = Vec::new();
    for path in files.values() {
        let p = Path::new(path);
        if !matches!(root.metadata(p), Ok(Some(m)) if m.is_regular()) {
            continue; // a link to /dev/null masks it
        }
        let bytes = root
            .read(p, MAX_READ)
            .map_err(AptError::staged("read", path))?;
        for (n, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
            let origin = format!("`/{path}` line {}: `{}`", n + 1, line.trim());
            match account_requests::sysusers_line(line) {
                Ok(Some(request)) => out.push(Asked {
                    maker: Maker::Sysusers,
                    request,
                    origin,
                }),
                Ok(None) => {}
                Err(why) => warnings.push(format!("{origin}: {why}; not done")),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "system_users_tests.rs"]
mod tests;
