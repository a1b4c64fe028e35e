//! What the packages ask for in accounts, read as data: the `u`, `g` and `m` lines of a
//! `sysusers.d` file and the literal `adduser`/`addgroup`/`useradd`/`groupadd` commands of a
//! postinst script (`script_words`), each turned into a [`Request`] with adduser's defaults
//! (shell `/usr/sbin/nologin`, home `/nonexistent`, primary group `nogroup` unless
//! `--group`/`--ingroup`/`--gid`; a gecos given with `--gecos` gets adduser's `,,,`).
//! `system_users` allocates ids and writes the files. An option or form it does not know is an
//! error that says what it did not understand: never a guess. Must never touch the file system.

use std::collections::BTreeMap;

use crate::script_words::{self, Word};

pub const NOGROUP: u32 = 65534;
pub const NOLOGIN: &str = "/usr/sbin/nologin";

/// Who asked for an account: decides how its id is found and its shadow entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maker {
    Sysusers,
    Adduser,
    Useradd,
}

/// A user's primary group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Primary {
    /// The group of the user's own name (made if missing).
    Own(Option<u32>),
    Id(u32),
    Named(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Group {
        name: String,
        gid: Option<u32>,
    },
    User {
        name: String,
        uid: Option<u32>,
        primary: Primary,
        gecos: String,
        home: String,
        shell: String,
        create_home: bool,
    },
    Member {
        user: String,
        group: String,
    },
}

/// A request and where it came from (for messages).
pub struct Asked {
    pub maker: Maker,
    pub request: Request,
    pub origin: String,
}

/// Fields of a sysusers line (double or single quotes group).
fn sysusers_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            None => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

pub fn sysusers_line(line: &str) -> Result<Option<Request>, String> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    let f = sysusers_fields(t);
    if !["u", "g", "m"].contains(&f[0].as_str()) {
        return Err(format!("`{}` lines are not supported", f[0]));
    }
    let field = |i: usize| f.get(i).map(String::as_str).filter(|s| *s != "-");
    let name = field(1).ok_or("no name")?.to_string();
    let number = |s: &str| s.parse::<u32>().map_err(|_| format!("`{s}` is no id"));
    match f[0].as_str() {
        "g" => Ok(Some(Request::Group {
            name,
            gid: field(2).map(number).transpose()?,
        })),
        "u" => {
            let (uid, primary) = match field(2) {
                None => (None, Primary::Own(None)),
                Some(id) => match id.split_once(':') {
                    Some((u, g)) => (
                        Some(number(u)?),
                        match g.parse::<u32>() {
                            Ok(g) => Primary::Id(g),
                            Err(_) => Primary::Named(g.to_string()),
                        },
                    ),
                    None if id.starts_with('/') => {
                        return Err("an id taken from a file's owner is not supported".into())
                    }
                    None => (Some(number(id)?), Primary::Own(Some(number(id)?))),
                },
            };
            Ok(Some(Request::User {
                name,
                uid,
                primary,
                gecos: field(3).unwrap_or("").to_string(),
                home: field(4).unwrap_or("/").to_string(),
                shell: field(5).unwrap_or(NOLOGIN).to_string(),
                create_home: false,
            }))
        }
        "m" => Ok(Some(Request::Member {
            user: name,
            group: field(2).ok_or("no group")?.to_string(),
        })),
        other => Err(format!("`{other}` lines are not supported")),
    }
}

/// The account commands of one postinst script.
pub fn script_requests(package: &str, script: &str, warnings: &mut Vec<String>) -> Vec<Asked> {
    let mut out = Vec::new();
    for c in script_words::commands(script) {
        for (tool, parse) in [
            (
                "adduser",
                adduser as fn(&[&str]) -> Result<Vec<Request>, String>,
            ),
            ("addgroup", addgroup),
            ("useradd", useradd),
            ("groupadd", groupadd),
        ] {
            let Some(words) = c.invoking(tool) else {
                continue;
            };
            let origin = format!("`{package}` postinst line {}: `{}`", c.line, c.shown());
            let literal: Option<Vec<&str>> = words[1..].iter().map(Word::literal).collect();
            let parsed = match literal {
                Some(args) => parse(&args),
                None => Err("a word depends on the script's run".into()),
            };
            let maker = match tool {
                "useradd" | "groupadd" => Maker::Useradd,
                _ => Maker::Adduser,
            };
            match parsed {
                Ok(requests) => out.extend(requests.into_iter().map(|request| Asked {
                    maker,
                    request,
                    origin: origin.clone(),
                })),
                Err(why) => warnings.push(format!("{origin}: not understood ({why}); not done")),
            }
        }
    }
    out
}

/// Options and positional arguments: `flags` take no value, `valued` take one (`--x v` or
/// `--x=v`); anything else is not understood.
fn options<'a>(
    args: &[&'a str],
    flags: &[&str],
    valued: &[&str],
) -> Result<(BTreeMap<String, String>, Vec<&'a str>), String> {
    let mut opts = BTreeMap::new();
    let mut positional = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        if a.starts_with('-') && a.len() > 1 {
            let (k, inline) = match a.split_once('=') {
                Some((k, v)) if k.starts_with("--") => (k, Some(v)),
                _ => (a, None),
            };
            if flags.contains(&k) && inline.is_none() {
                opts.insert(k.to_string(), String::new());
            } else if valued.contains(&k) {
                let v = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        *args.get(i).ok_or(format!("`{k}` has no value"))?
                    }
                };
                opts.insert(k.to_string(), v.to_string());
            } else {
                return Err(format!("option `{a}`"));
            }
        } else {
            positional.push(a);
        }
        i += 1;
    }
    Ok((opts, positional))
}

fn id_opt(opts: &BTreeMap<String, String>, keys: &[&str]) -> Result<Option<u32>, String> {
    keys.iter()
        .find_map(|k| opts.get(*k))
        .map(|v| v.parse::<u32>().map_err(|_| format!("`{v}` is no id")))
        .transpose()
}

const ADDUSER_FLAGS: [&str; 11] = [
    "--system",
    "--group",
    "--no-create-home",
    "--quiet",
    "-q",
    "--force-badname",
    "--allow-badname",
    "--disabled-password",
    "--disabled-login",
    "--allow-all-names",
    "--no-log",
];
const ADDUSER_VALUED: [&str; 7] = [
    "--home",
    "--shell",
    "--gecos",
    "--comment",
    "--uid",
    "--gid",
    "--ingroup",
];

/// `adduser --system [options] NAME`, or `adduser USER GROUP` (a member).
fn adduser(args: &[&str]) -> Result<Vec<Request>, String> {
    let (o, pos) = options(args, &ADDUSER_FLAGS, &ADDUSER_VALUED)?;
    let system = o.contains_key("--system");
    match (system, pos.as_slice()) {
        (false, [user, group]) if o.keys().all(|k| k == "--quiet" || k == "-q") => {
            Ok(vec![Request::Member {
                user: user.to_string(),
                group: group.to_string(),
            }])
        }
        (false, _) => Err("only system users are made".into()),
        (true, [name]) => {
            if o.contains_key("--group") && o.contains_key("--ingroup") {
                return Err("both --group and --ingroup".into());
            }
            let gid = id_opt(&o, &["--gid"])?;
            let primary = match (o.get("--ingroup"), gid, o.contains_key("--group")) {
                (Some(g), _, _) => Primary::Named(g.clone()),
                (None, Some(g), false) => Primary::Id(g),
                (None, g, true) => Primary::Own(g),
                (None, None, false) => Primary::Id(NOGROUP),
            };
            let home = o.get("--home").cloned();
            let gecos = o
                .get("--gecos")
                .or(o.get("--comment"))
                .map(|g| {
                    if g.contains(',') {
                        g.clone()
                    } else {
                        format!("{g},,,")
                    }
                })
                .unwrap_or_default();
            Ok(vec![Request::User {
                name: name.to_string(),
                uid: id_opt(&o, &["--uid"])?,
                primary,
                gecos,
                create_home: home.is_some() && !o.contains_key("--no-create-home"),
                home: home.unwrap_or_else(|| "/nonexistent".into()),
                shell: o.get("--shell").cloned().unwrap_or_else(|| NOLOGIN.into()),
            }])
        }
        (true, _) => Err("not one name".into()),
    }
}

/// `addgroup --system [--gid N] NAME`, or `addgroup USER GROUP` (a member).
fn addgroup(args: &[&str]) -> Result<Vec<Request>, String> {
    let (o, pos) = options(args, &ADDUSER_FLAGS, &ADDUSER_VALUED)?;
    match (o.contains_key("--system"), pos.as_slice()) {
        (true, [name]) => Ok(vec![Request::Group {
            name: name.to_string(),
            gid: id_opt(&o, &["--gid"])?,
        }]),
        (false, [user, group]) => Ok(vec![Request::Member {
            user: user.to_string(),
            group: group.to_string(),
        }]),
        (false, _) => Err("only system groups are made".into()),
        (true, _) => Err("not one name".into()),
    }
}

/// `groupadd [-r] [-f] [-g N] NAME`.
fn groupadd(args: &[&str]) -> Result<Vec<Request>, String> {
    let (o, pos) = options(args, &["-r", "--system", "-f", "--force"], &["-g", "--gid"])?;
    match pos.as_slice() {
        [name] => Ok(vec![Request::Group {
            name: name.to_string(),
            gid: id_opt(&o, &["-g", "--gid"])?,
        }]),
        _ => Err("not one name".into()),
    }
}

/// `useradd -r [options] NAME` (its own group unless `-N` or `-g`; `-G` memberships).
fn useradd(args: &[&str]) -> Result<Vec<Request>, String> {
    let (o, pos) = options(
        args,
        &[
            "-r",
            "--system",
            "-M",
            "--no-create-home",
            "-m",
            "--create-home",
            "-N",
            "--no-user-group",
            "-U",
            "--user-group",
        ],
        &[
            "-u",
            "--uid",
            "-g",
            "--gid",
            "-d",
            "--home-dir",
            "-s",
            "--shell",
            "-c",
            "--comment",
            "-G",
            "--groups",
        ],
    )?;
    if !(o.contains_key("-r") || o.contains_key("--system")) {
        return Err("only system users are made".into());
    }
    let [name] = pos.as_slice() else {
        return Err("not one name".into());
    };
    let g = o.get("-g").or(o.get("--gid"));
    let primary = match g {
        Some(g) => match g.parse::<u32>() {
            Ok(id) => Primary::Id(id),
            Err(_) => Primary::Named(g.clone()),
        },
        None if o.contains_key("-N") || o.contains_key("--no-user-group") => Primary::Id(NOGROUP),
        None => Primary::Own(None),
    };
    let home = o
        .get("-d")
        .or(o.get("--home-dir"))
        .cloned()
        .unwrap_or_else(|| format!("/home/{name}"));
    let mut out = vec![Request::User {
        name: name.to_string(),
        uid: id_opt(&o, &["-u", "--uid"])?,
        primary,
        gecos: o
            .get("-c")
            .or(o.get("--comment"))
            .cloned()
            .unwrap_or_default(),
        create_home: o.contains_key("-m") || o.contains_key("--create-home"),
        home,
        shell: o
            .get("-s")
            .or(o.get("--shell"))
            .cloned()
            .unwrap_or_else(|| NOLOGIN.into()),
    }];
    for group in o
        .get("-G")
        .or(o.get("--groups"))
        .into_iter()
        .flat_map(|g| g.split(','))
    {
        out.push(Request::Member {
            user: name.to_string(),
            group: group.to_string(),
        });
    }
    Ok(out)
}
