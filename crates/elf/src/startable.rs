//! The image's machine rule: every ELF file the image would run or load must be for the
//! platform's machine (or one it runs: 32-bit x86 on x86-64, `machine::runs_on`). Which files those are is decided by path alone: the programs it starts
//! (entrypoint, `cmd`, the self-test), the files of its `PATH` directories, of the loader's
//! directories (`/lib`, `/usr/lib`, `/lib64`, `/usr/lib64`, `/usr/local/lib`, the platform's
//! multiarch directories, the `ld.so.conf` ones), Python extension modules and the libraries
//! beside them (`*.so`, `*.so.*` under `site-packages`, `dist-packages`, `lib-dynload`) and
//! kernel modules (`*.ko`, `*.ko.*` under `/lib/modules`, `/usr/lib/modules`); relocatable
//! objects and core files count only as kernel modules. Every other ELF file is data: GPU code, firmware for other processors, BPF objects, cross toolchains.
//! A symlink in one of those places makes its target one of them; directories are compared
//! after following the image's symlinks (`/bin -> usr/bin`).
//!
//! Pure: the caller hands in the image's ELF heads and symlinks; paths are relative to the
//! root (no leading `/`). Must never touch the file system.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::closure::{normalize, DEFAULT_DIRS};
use super::machine::{runs_on, triplet, Head};

/// How many symlinks one path may pass through (the kernel's limit).
const MAX_LINKS: usize = 40;

/// `PATH` where the image's environment sets none (what container runtimes use).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What the rule is checked over.
#[derive(Debug)]
pub struct Image<'a> {
    /// Every ELF file's head, by path.
    pub elves: &'a BTreeMap<String, Head>,
    /// Every symlink, by path, with its target as stored.
    pub links: &'a BTreeMap<String, String>,
    /// The programs the image starts by path: the entrypoint's (else `cmd`'s) first word when
    /// it names a path, the self-test.
    pub programs: Vec<String>,
    /// The `PATH` directories.
    pub path_dirs: Vec<String>,
    /// The directories `ld.so.conf` and its includes list, and any other the build gives the
    /// loader.
    pub library_dirs: Vec<String>,
}

/// An ELF file the image would run or load whose machine is not the platform's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    /// The path it is run or loaded by (a symlink's, where that is how).
    pub path: String,
    pub head: Head,
}

/// `path` with every symlink of the image followed, in every component.
fn real(links: &BTreeMap<String, String>, path: &str) -> String {
    let mut todo: std::collections::VecDeque<String> =
        path.split('/').map(str::to_string).collect();
    let mut out: Vec<String> = Vec::new();
    let mut hops = 0;
    while let Some(c) = todo.pop_front() {
        match c.as_str() {
            "" | "." => continue,
            ".." => {
                out.pop();
                continue;
            }
            _ => out.push(c),
        }
        let Some(target) = links.get(&out.join("/")) else {
            continue;
        };
        hops += 1;
        if hops > MAX_LINKS {
            return normalize(path);
        }
        out.pop();
        if target.starts_with('/') {
            out.clear();
        }
        for part in target.split('/').rev() {
            todo.push_front(part.to_string());
        }
    }
    out.join("/")
}

fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

fn is_module(real: &str) -> bool {
    let name = split(real).1;
    (real.starts_with("lib/modules/") || real.starts_with("usr/lib/modules/"))
        && (name.ends_with(".ko") || name.contains(".ko."))
}

fn is_python_object(real: &str) -> bool {
    let name = split(real).1;
    let under = ["/site-packages/", "/dist-packages/", "/lib-dynload/"]
        .iter()
        .any(|d| real.contains(d));
    under && (name.ends_with(".so") || name.contains(".so."))
}

/// The ELF files of `image` it would run or load whose machine does not run on `machine`
/// ([`runs_on`]), sorted by path, each real file once.
pub fn foreign(image: &Image, machine: u16) -> Vec<Foreign> {
    let alien = |h: &Head| !runs_on(h.machine, machine);
    if !image.elves.values().any(alien) {
        return Vec::new();
    }
    let links = image.links;
    let reals: RefCell<HashMap<String, String>> = RefCell::default();
    let real_dir = |dir: &str| -> String {
        (reals.borrow_mut().entry(dir.to_string()))
            .or_insert_with(|| real(links, dir))
            .clone()
    };
    let mut loader: Vec<String> = DEFAULT_DIRS.iter().map(|d| d.to_string()).collect();
    loader.push("usr/local/lib".into());
    if let Some(t) = triplet(machine) {
        loader.extend([format!("lib/{t}"), format!("usr/lib/{t}")]);
    }
    let runs: BTreeSet<String> = (image.path_dirs.iter())
        .chain(&loader)
        .chain(&image.library_dirs)
        .map(|d| real_dir(&normalize(d)))
        .collect();
    let programs: BTreeSet<String> = (image.programs.iter())
        .map(|p| real(links, &normalize(p)))
        .collect();
    // Whether the file whose real path is `real` would be run or loaded, by its place.
    let counts = |real: &str, head: &Head| -> bool {
        if is_module(real) {
            return true;
        }
        // Relocatable objects and core dumps are neither run nor loaded outside modules.
        if matches!(head.kind, 1 | 4) {
            return false;
        }
        programs.contains(real) || is_python_object(real) || runs.contains(&real_dir(split(real).0))
    };
    let mut found: BTreeMap<String, Foreign> = BTreeMap::new();
    for (path, head) in image.elves.iter().filter(|(_, h)| alien(h)) {
        let at = format!("{}/{}", real_dir(split(path).0), split(path).1);
        let at = at.trim_start_matches('/').to_string();
        if counts(&at, head) {
            found.entry(at).or_insert(Foreign {
                path: path.clone(),
                head: *head,
            });
        }
    }
    // A symlink in one of those places (or a program named through one) runs its target.
    for link in links.keys() {
        let target = real(links, link);
        let Some(head) = image.elves.get(&target).filter(|h| alien(h)) else {
            continue;
        };
        if found.contains_key(&target) {
            continue;
        }
        let (dir, name) = split(link);
        let at = format!("{}/{name}", real_dir(dir));
        let at = at.trim_start_matches('/');
        if counts(at, head) || programs.contains(&target) {
            found.insert(
                target,
                Foreign {
                    path: link.clone(),
                    head: *head,
                },
            );
        }
    }
    let mut out: Vec<Foreign> = found.into_values().collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The directories a loader configuration file's text lists (`include` lines are left to the
/// caller, which reads every `ld.so.conf.d/*.conf`).
pub fn conf_dirs(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| l.starts_with('/'))
        .map(normalize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: Head = Head {
        machine: 62,
        kind: 3,
    };
    const ARM: Head = Head {
        machine: 183,
        kind: 2,
    };

    fn check(
        files: &[(&str, Head)],
        links: &[(&str, &str)],
        programs: &[&str],
        library_dirs: &[&str],
    ) -> Vec<String> {
        let elves = files.iter().map(|(p, h)| (p.to_string(), *h)).collect();
        let links = links
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        let image = Image {
            elves: &elves,
            links: &links,
            programs: programs.iter().map(|p| p.to_string()).collect(),
            path_dirs: DEFAULT_PATH.split(':').map(str::to_string).collect(),
            library_dirs: library_dirs.iter().map(|p| p.to_string()).collect(),
        };
        foreign(&image, 183).into_iter().map(|f| f.path).collect()
    }

    #[test]
    fn what_runs_or_loads_must_be_the_platforms_and_data_may_be_anything() {
        let riscv = Head {
            machine: 243,
            kind: 2,
        };
        let cuda = Head {
            machine: 190,
            kind: 2,
        };
        let object = Head {
            machine: 62,
            kind: 1,
        };
        let got = check(
            &[
                ("usr/bin/x", X86),
                ("usr/bin/ok", ARM),
                ("usr/lib/x86_64-linux-gnu/libx.so.1", X86),
                ("usr/lib/aarch64-linux-gnu/liby.so.1", X86),
                ("usr/local/cuda/lib64/libz.so", X86),
                ("usr/lib/python3/dist-packages/m/_c.so", X86),
                ("usr/lib/python3.11/lib-dynload/_ssl.so", X86),
                ("usr/lib/modules/6.1/kernel/nvidia.ko", object),
                ("usr/lib/firmware/nvidia/gsp.bin", riscv),
                ("usr/share/gpu/kernel.cubin", cuda),
                ("usr/lib/aarch64-linux-gnu/crt1.o", object),
                ("usr/x86_64-linux-gnu/lib/libc.so.6", X86),
                ("opt/cross/bin/tool", X86),
                ("opt/app/server", X86),
            ],
            &[],
            &["/opt/app/server"],
            &["/usr/local/cuda/lib64"],
        );
        assert_eq!(
            got,
            [
                "opt/app/server",
                "usr/bin/x",
                "usr/lib/aarch64-linux-gnu/liby.so.1",
                "usr/lib/modules/6.1/kernel/nvidia.ko",
                "usr/lib/python3.11/lib-dynload/_ssl.so",
                "usr/lib/python3/dist-packages/m/_c.so",
                "usr/local/cuda/lib64/libz.so",
            ]
        );
    }

    #[test]
    fn symlinks_are_followed_to_the_file_they_run() {
        // `/bin -> usr/bin` (merged /usr), a program named through `/bin`, a link in `PATH`
        // to a file elsewhere, and a data link nothing runs.
        let got = check(
            &[
                ("usr/bin/a", X86),
                ("opt/cross/bin/tool", X86),
                ("opt/cross/bin/other", X86),
                ("opt/app/bin/entry", X86),
                ("usr/lib/aarch64-linux-gnu/libok.so.1", ARM),
            ],
            &[
                ("bin", "usr/bin"),
                ("usr/bin/tool", "../../opt/cross/bin/tool"),
                ("opt/app/run", "bin/entry"),
                ("usr/share/x", "/opt/cross/bin/other"),
                ("lib", "usr/lib"),
                ("lib/aarch64-linux-gnu/libok.so", "libok.so.1"),
            ],
            &["/opt/app/run"],
            &[],
        );
        assert_eq!(got, ["opt/app/bin/entry", "usr/bin/a", "usr/bin/tool"]);
        assert_eq!(
            real(&[("a".to_string(), "a".to_string())].into(), "a/b"),
            "a/b"
        );
    }

    #[test]
    fn thirty_two_bit_x86_runs_on_x86_64() {
        let i386 = Head {
            machine: 3,
            kind: 3,
        };
        let elves = [
            ("usr/lib/i386-linux-gnu/libc.so.6".to_string(), i386),
            ("usr/bin/tool".to_string(), X86),
        ]
        .into();
        let image = Image {
            elves: &elves,
            links: &BTreeMap::new(),
            programs: Vec::new(),
            path_dirs: vec!["/usr/bin".into()],
            library_dirs: vec!["/usr/lib/i386-linux-gnu".into()],
        };
        assert_eq!(foreign(&image, 62), []);
        assert_eq!(foreign(&image, 183).len(), 2);
    }

    #[test]
    fn loader_configuration_lists_directories() {
        assert_eq!(
            conf_dirs(
                "# CUDA\n/usr/local/cuda/lib64\ninclude /etc/ld.so.conf.d/*.conf\n /opt/x/ # y\n"
            ),
            ["usr/local/cuda/lib64", "opt/x"]
        );
    }
}
