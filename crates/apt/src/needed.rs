//! Which entries of the replayed packages a build must write: those the metadata steps or the
//! packages unpacked in full can observe, and nothing else.
//!
//! A replayed package's layer is cached, so its entries matter only where something else
//! looks: a file a metadata step reads (kept in the sketch), a library `ld.so.cache` indexes,
//! a path a maintainer script names, what the metadata steps write under, and every
//! directory and symlink on the way to one of those or to any entry of a package unpacked in
//! full (whose directories' owners and modes its own layer copies). Everything else — most
//! directories and symlinks of a cached component — is left out of the root; the dpkg
//! database still lists it.
//!
//! The plan simulates the unpack over the entries' headers alone (paths resolved through the
//! merged-/usr links and the packages' own symlinks, inside the root, as `confined` does).
//! Where that simulation could differ from the unpack — one path shipped as a directory by
//! one package and as something else by another, a symlink shipped with two targets, a
//! symlink loop — there is no plan, and every entry is written, as a full replay does.
//! Must never read or write the file system.

use std::collections::{HashMap, HashSet};

use crate::ldcache;
use crate::sketch::Kind;

/// One entry of a package, as the plan needs it.
pub struct Op<'a> {
    /// The path as dpkg lists it (`/usr/bin/ls`; `/` for the root).
    pub listed: String,
    pub kind: Kind,
    /// A symlink's target.
    pub link: Option<&'a [u8]>,
    /// Something reads it: a file whose bytes the sketch keeps, a library whose facts it
    /// keeps.
    pub read: bool,
}

/// One package's entries, in tarball order.
pub struct Package<'a> {
    pub ops: Vec<Op<'a>>,
    /// Written from its sketch (otherwise unpacked in full: all its entries are observed).
    pub replayed: bool,
}

/// Listed paths the metadata steps write or create under (with their parents), and whose
/// existing entries they look at: everything at or below these.
const METADATA_TREES: [&str; 20] = [
    "/var/lib/dpkg",
    "/etc/alternatives",
    "/etc/ssl/certs",
    "/etc/ld.so.conf.d",
    // A booted root's (`system.rs`): units and their aliases, presets, sysusers.d, the links
    // and deb-systemd-helper's state.
    "/etc/systemd/system",
    "/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/etc/systemd/system-preset",
    "/lib/systemd/system-preset",
    "/usr/lib/systemd/system-preset",
    "/etc/sysusers.d",
    "/lib/sysusers.d",
    "/usr/lib/sysusers.d",
    "/var/lib/systemd/deb-systemd-helper-enabled",
    // The NVIDIA driver's alternatives (`nvidia_alternatives.rs`): their candidates and the
    // directories their links go to.
    "/etc/nvidia",
    "/etc/modprobe.d",
    "/etc/modules-load.d",
    "/usr/lib/nvidia",
    "/usr/lib/x86_64-linux-gnu/nvidia",
    "/usr/lib/glx",
];

/// Files the metadata steps write where no package shipped one (their directories must be the
/// packages' own).
const METADATA_FILES: [&str; 18] = [
    "/etc/passwd",
    "/etc/group",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/machine-id",
    "/etc/hostname",
    "/root/.profile",
    "/root/.bashrc",
    "/etc/profile",
    "/etc/nsswitch.conf",
    "/etc/motd",
    "/etc/ca-certificates.conf",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/usr/share/ca-certificates",
    // Links of the `nvidia` alternative outside its trees (their directories must be there).
    "/usr/bin/nvidia-smi",
    "/usr/share/man/man1/nvidia-smi.1.gz",
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File,
    /// A symlink; `fixed`: a merged-/usr link (a directory shipped over it stays a link).
    Link {
        target: Vec<u8>,
        fixed: bool,
    },
}

/// The simulated root: real path (`/usr/bin`) → what is there.
struct Model {
    nodes: HashMap<String, Node>,
}

/// Most symlinks one resolution follows (the kernel's limit).
const MAX_HOPS: usize = 40;

impl Model {
    /// Resolve `path` inside the root; the last component is followed only with
    /// `follow_last`. Every real directory passed and every symlink followed goes to `trace`.
    /// `None` on a symlink loop or a target that is not UTF-8.
    fn walk(&self, path: &str, follow_last: bool, trace: &mut Vec<String>) -> Option<String> {
        let mut cur: Vec<String> = Vec::new();
        let mut todo: Vec<String> = components(path).rev().map(str::to_string).collect();
        let mut hops = 0;
        while let Some(c) = todo.pop() {
            if c == ".." {
                cur.pop();
                continue;
            }
            cur.push(c);
            let here = join(&cur);
            let last = todo.is_empty();
            if let Some(Node::Link { target, .. }) = self.nodes.get(&here) {
                if !last || follow_last {
                    hops += 1;
                    if hops > MAX_HOPS {
                        return None;
                    }
                    trace.push(here);
                    cur.pop();
                    let t = std::str::from_utf8(target).ok()?;
                    if t.starts_with('/') {
                        cur.clear();
                    }
                    todo.extend(components(t).rev().map(str::to_string));
                    continue;
                }
            }
            if !last {
                trace.push(here);
            }
        }
        Some(join(&cur))
    }
}

fn components(p: &str) -> impl DoubleEndedIterator<Item = &str> {
    p.split('/').filter(|c| !c.is_empty() && *c != ".")
}

fn join(parts: &[String]) -> String {
    if parts.is_empty() {
        return "/".to_string();
    }
    let mut s = String::new();
    for p in parts {
        s.push('/');
        s.push_str(p);
    }
    s
}

/// The real parent directories of `real` (`/a/b/c` → `/a/b`, `/a`).
fn ancestors(real: &str) -> impl Iterator<Item = &str> {
    let mut p = real;
    std::iter::from_fn(move || {
        let i = p.rfind('/')?;
        p = &p[..i];
        (!p.is_empty()).then_some(p)
    })
}

/// For each package, for each of its entries: whether to write it. `None`: write everything
/// (see the module doc). `merged`: the merged-/usr links (`bin` for `bin -> usr/bin`);
/// `script_paths`: the absolute paths the maintainer scripts name.
pub fn plan(
    packages: &[Package<'_>],
    merged: &[&str],
    script_paths: &HashSet<&str>,
) -> Option<Vec<Vec<bool>>> {
    let mut model = Model {
        nodes: HashMap::new(),
    };
    model.nodes.insert("/usr".into(), Node::Dir);
    for d in merged {
        model.nodes.insert(format!("/usr/{d}"), Node::Dir);
        model.nodes.insert(
            format!("/{d}"),
            Node::Link {
                target: format!("usr/{d}").into_bytes(),
                fixed: true,
            },
        );
    }
    // The unpack, simulated in order: where each entry really lands.
    let mut real: Vec<Vec<String>> = Vec::with_capacity(packages.len());
    for p in packages {
        let mut here = Vec::with_capacity(p.ops.len());
        for op in &p.ops {
            let (parent, name) = op.listed.rsplit_once('/').unwrap_or(("", &op.listed));
            if name.is_empty() {
                here.push("/".to_string());
                continue;
            }
            let at = match model.walk(parent, true, &mut Vec::new())? {
                p if p == "/" => format!("/{name}"),
                p => format!("{p}/{name}"),
            };
            let new = match op.kind {
                Kind::Dir => Node::Dir,
                Kind::File | Kind::HardLink => Node::File,
                Kind::Symlink => Node::Link {
                    target: op.link?.to_vec(),
                    fixed: false,
                },
                Kind::Other => {
                    here.push(at);
                    continue;
                }
            };
            match (model.nodes.get(&at), &new) {
                (None, _) => {
                    model.nodes.insert(at.clone(), new);
                }
                (Some(Node::Dir), Node::Dir) | (Some(Node::File), Node::File) => {}
                (Some(Node::Link { fixed: true, .. }), Node::Dir) => {}
                (Some(Node::Link { target, .. }), Node::Link { target: t, .. }) if target == t => {}
                _ => return None,
            }
            here.push(at);
        }
        real.push(here);
    }
    // What is observed, then everything on the way to it.
    let trees: Vec<String> = METADATA_TREES
        .iter()
        .filter_map(|t| model.walk(t, true, &mut Vec::new()))
        .collect();
    let under = |r: &str| {
        trees.iter().any(|t| {
            r == t
                || r.strip_prefix(t.as_str())
                    .is_some_and(|s| s.starts_with('/'))
        })
    };
    let mut by_real: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    let mut todo: Vec<String> = Vec::new();
    for (i, (p, reals)) in packages.iter().zip(&real).enumerate() {
        for (j, (op, r)) in p.ops.iter().zip(reals).enumerate() {
            by_real.entry(r.as_str()).or_default().push((i, j));
            let name = op.listed.rsplit('/').next().unwrap_or("");
            if !p.replayed || op.read || ldcache::is_candidate(name) || under(r) {
                todo.push(r.clone());
            }
        }
    }
    for path in script_paths.iter().copied().chain(METADATA_FILES) {
        for follow in [false, true] {
            let mut trace = Vec::new();
            todo.push(model.walk(path, follow, &mut trace)?);
            todo.extend(trace);
        }
    }
    let mut needed: HashSet<String> = HashSet::new();
    while let Some(r) = todo.pop() {
        if needed.contains(&r) {
            continue;
        }
        todo.extend(ancestors(&r).map(str::to_string));
        if let Some(Node::Link { .. }) = model.nodes.get(&r) {
            let mut trace = Vec::new();
            todo.push(model.walk(&r, true, &mut trace)?);
            todo.extend(trace);
        }
        for &(i, j) in by_real.get(r.as_str()).into_iter().flatten() {
            let listed = &packages[i].ops[j].listed;
            let parent = listed.rsplit_once('/').map_or("", |(p, _)| p);
            let mut trace = Vec::new();
            model.walk(parent, true, &mut trace)?;
            todo.extend(trace);
        }
        needed.insert(r);
    }
    Some(
        packages
            .iter()
            .zip(&real)
            .map(|(p, reals)| {
                reals
                    .iter()
                    .map(|r| !p.replayed || r == "/" || needed.contains(r))
                    .collect()
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(listed: &str, kind: Kind, link: Option<&'static str>, read: bool) -> Op<'static> {
        Op {
            listed: listed.into(),
            kind,
            link: link.map(str::as_bytes),
            read,
        }
    }

    fn dir(p: &str) -> Op<'static> {
        op(p, Kind::Dir, None, false)
    }

    fn file(p: &str) -> Op<'static> {
        op(p, Kind::File, None, false)
    }

    #[test]
    fn only_what_something_observes_is_written() {
        let replayed = Package {
            replayed: true,
            ops: vec![
                dir("/"),
                dir("/usr"),
                dir("/usr/share"),
                dir("/usr/share/doc"),
                dir("/usr/share/doc/a"),
                file("/usr/share/doc/a/copyright"),
                dir("/lib"),
                dir("/lib/x86_64-linux-gnu"),
                op("/lib/x86_64-linux-gnu/liba.so.1", Kind::File, None, true),
                op(
                    "/lib/x86_64-linux-gnu/liba.so",
                    Kind::Symlink,
                    Some("liba.so.1"),
                    false,
                ),
                dir("/usr/share/a"),
                op(
                    "/usr/share/a/link",
                    Kind::Symlink,
                    Some("/usr/share/doc/a"),
                    false,
                ),
                dir("/var"),
                dir("/var/lib"),
                dir("/var/lib/dpkg"),
                dir("/usr/share/b"),
                op("/usr/share/b/docs", Kind::Symlink, Some("../doc/a"), false),
            ],
        };
        let full = Package {
            replayed: false,
            ops: vec![
                dir("/"),
                dir("/usr"),
                dir("/usr/share"),
                dir("/usr/share/b"),
                // Written through the replayed package's symlink, into its directory.
                file("/usr/share/b/docs/notes"),
            ],
        };
        let plan = plan(
            &[replayed, full],
            &["bin", "lib"],
            &HashSet::from(["/usr/share/a/tool"]),
        )
        .unwrap();
        let written: Vec<&str> = [
            "/",
            "/usr",
            "/usr/share",
            "/usr/share/doc",
            "/usr/share/doc/a",
            "/lib",
            "/lib/x86_64-linux-gnu",
            "/lib/x86_64-linux-gnu/liba.so.1",
            "/lib/x86_64-linux-gnu/liba.so",
            "/usr/share/a",
            "/var",
            "/var/lib",
            "/var/lib/dpkg",
            "/usr/share/b",
            "/usr/share/b/docs",
        ]
        .to_vec();
        let replayed_ops = [
            "/",
            "/usr",
            "/usr/share",
            "/usr/share/doc",
            "/usr/share/doc/a",
            "/usr/share/doc/a/copyright",
            "/lib",
            "/lib/x86_64-linux-gnu",
            "/lib/x86_64-linux-gnu/liba.so.1",
            "/lib/x86_64-linux-gnu/liba.so",
            "/usr/share/a",
            "/usr/share/a/link",
            "/var",
            "/var/lib",
            "/var/lib/dpkg",
            "/usr/share/b",
            "/usr/share/b/docs",
        ];
        for (path, yes) in replayed_ops.iter().zip(&plan[0]) {
            assert_eq!(*yes, written.contains(path), "{path}");
        }
        assert!(
            plan[1].iter().all(|&w| w),
            "a full package is written whole"
        );
    }

    #[test]
    fn a_directory_shipped_as_a_symlink_elsewhere_means_no_plan() {
        let a = Package {
            replayed: true,
            ops: vec![
                dir("/"),
                dir("/opt"),
                op("/opt/x", Kind::Symlink, Some("y"), false),
            ],
        };
        let b = Package {
            replayed: false,
            ops: vec![dir("/"), dir("/opt"), dir("/opt/x")],
        };
        assert!(plan(&[a, b], &["bin"], &HashSet::new()).is_none());
        let loop_ = Package {
            replayed: false,
            ops: vec![
                op("/a", Kind::Symlink, Some("b"), false),
                op("/b", Kind::Symlink, Some("a"), false),
                file("/a/x"),
            ],
        };
        assert!(plan(&[loop_], &[], &HashSet::new()).is_none());
    }

    #[test]
    fn aliases_through_merged_usr_share_one_decision() {
        // The same file reached as /lib/... and /usr/lib/...: both entries are written when the
        // full package's is, in order, so the last one wins as in a full unpack.
        let a = Package {
            replayed: true,
            ops: vec![dir("/lib"), file("/lib/x")],
        };
        let b = Package {
            replayed: false,
            ops: vec![dir("/usr/lib"), file("/usr/lib/x")],
        };
        let c = Package {
            replayed: true,
            ops: vec![dir("/lib"), file("/lib/x"), file("/lib/y")],
        };
        let plan = plan(&[a, b, c], &["lib"], &HashSet::new()).unwrap();
        assert_eq!(plan[0], vec![true, true]);
        assert_eq!(plan[2], vec![true, true, false]);
    }
}
