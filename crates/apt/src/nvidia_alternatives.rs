//! The `nvidia` and `glx` alternatives of Debian's NVIDIA driver, registered as the triggers of
//! `nvidia-alternative` and `glx-alternative-nvidia` would register them on a headless node,
//! done natively. Those triggers compute their slaves in shell: each candidate is a literal
//! `$(add_slave LINK NAME PATH)` or `$(add_multiarch_slave DIR SUB FILE SRCDIR SRCSUB …)` line
//! of a `name="…"` block of the postinst (the driver's version baked into its paths), kept when
//! its `PATH` is a file (links followed) and its `LINK`'s directory exists. This reads those
//! blocks from the installed postinsts as data and applies that rule to the root; the choice
//! between the blocks is the scripts' own, written here:
//! - `nvidia` (`/usr/lib/nvidia/nvidia`): `current` at the script's priority with the
//!   proprietary module's configuration (`kmod_slaves`), `current-open` at one less with the
//!   open one's (`kmod_open_slaves`), each registered when its configuration is there (the
//!   proprietary one also when neither is); the `libnvidia-ml.so` slave only with `nvml.h`.
//! - then `glx` (`/usr/lib/glx`), headless ("cudaonly": the `nvidia` alternative's
//!   `libcuda.so` is there and no X or GL library is): `/usr/lib/nvidia` with the kernel
//!   configuration (`/etc/modprobe.d/nvidia.conf`, `/etc/modules-load.d/nvidia.conf`, the
//!   nouveau blacklist) and `libnvidia-cfg.so.1`. An X or GL driver among the packages is
//!   refused here (a node is headless).
//!
//! Auto mode: the highest priority's links are written (`LINK -> /etc/alternatives/NAME ->
//! PATH`), and dpkg's state (`/var/lib/dpkg/alternatives/NAME`) lists every registered choice.
//!
//! Must never run package code, follow a link out of the root, or write a link over a file a
//! package shipped.

use std::collections::BTreeMap;
use std::path::Path;

use crate::AptError;
use gpuimg_store::confined::Root;

/// Where the alternatives' candidates live: what a replayed install must keep (see
/// `fixups::reads`).
pub const READS: [&str; 5] = [
    "/usr/lib/nvidia/",
    "/etc/nvidia/",
    "/usr/include/nvml.h",
    "/usr/lib/mesa-diverted/",
    "/usr/lib/xorg/modules/",
];

/// Whether `path` is one of the candidates' places (`READS`, and each triplet's `nvidia/`).
pub fn reads(path: &str) -> bool {
    READS.iter().any(|p| path.starts_with(p))
        || path
            .strip_prefix("/usr/lib/")
            .and_then(|r| r.split_once('/'))
            .is_some_and(|(_, rest)| rest.starts_with("nvidia/") || rest.starts_with("libcuda"))
}

/// One slave (or master): its link, its name under `/etc/alternatives`, its target.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slave {
    link: String,
    name: String,
    path: String,
}

/// A postinst's candidate blocks, as written.
struct Script {
    triplets: Vec<String>,
    prefix: String,
    blocks: BTreeMap<String, Vec<String>>,
}

impl Script {
    fn parse(text: &str) -> Script {
        let mut triplets = Vec::new();
        let mut prefix = String::new();
        let mut blocks: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut open: Option<String> = None;
        for line in text.lines() {
            let t = line.trim();
            if let Some(name) = &open {
                if t == "\"" {
                    open = None;
                } else {
                    blocks.entry(name.clone()).or_default().push(t.to_string());
                }
                continue;
            }
            if let Some(v) = t.strip_prefix("TRIPLETS=\"") {
                triplets = v
                    .trim_end_matches('"')
                    .split_whitespace()
                    .map(str::to_string)
                    .collect();
            } else if let Some(v) = t.strip_prefix("prefix=\"") {
                // `add_slave`'s own (the first); `add_multiarch_slave` passes its `$6`.
                if prefix.is_empty() && !v.starts_with('$') {
                    prefix = v.trim_end_matches('"').to_string();
                }
            } else if let Some((name, rest)) = t.split_once("=\"") {
                let simple =
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !simple {
                    continue;
                }
                if rest.is_empty() {
                    open = Some(name.to_string());
                } else if let Some(one) = rest.strip_suffix('"') {
                    blocks.insert(name.to_string(), vec![one.to_string()]);
                }
            }
        }
        Script {
            triplets,
            prefix,
            blocks,
        }
    }

    /// The candidates of block `name` that the root has (`$var` lines expand other blocks).
    fn slaves(&self, root: &Root, name: &str, depth: usize) -> Vec<Slave> {
        let mut out = Vec::new();
        for line in self.blocks.get(name).into_iter().flatten() {
            if let Some(var) = line.strip_prefix('$').filter(|v| !v.starts_with('(')) {
                if depth < 4 {
                    out.extend(self.slaves(root, var, depth + 1));
                }
                continue;
            }
            let Some(call) = line.strip_prefix("$(").and_then(|l| l.strip_suffix(')')) else {
                continue;
            };
            let words: Vec<&str> = call
                .split_whitespace()
                .map(|w| if w == "\"\"" { "" } else { w })
                .collect();
            match words.as_slice() {
                ["add_slave", link, name, path] => {
                    out.extend(self.keep(root, link, name, path));
                }
                ["add_multiarch_slave", args @ ..] if args.len() >= 4 => {
                    out.extend(self.multiarch(root, args));
                }
                ["search_multiarch_slave", library, vendor @ ..] => {
                    // The vendor's copy where there is one, else mesa's diverted copy.
                    let with_vendor: Vec<Slave> = vendor
                        .first()
                        .map(|v| {
                            let sub = format!("{v}/");
                            self.multiarch(root, &["/usr/lib", "", library, "/usr/lib", &sub])
                        })
                        .unwrap_or_default();
                    if with_vendor.is_empty() {
                        out.extend(self.multiarch(
                            root,
                            &["/usr/lib", "", library, "/usr/lib/mesa-diverted", ""],
                        ));
                    } else {
                        out.extend(with_vendor);
                    }
                }
                _ => {}
            }
        }
        out
    }

    fn multiarch(&self, root: &Root, a: &[&str]) -> Vec<Slave> {
        let (dir, sub, file, src_dir) = (a[0], a[1], a[2], a[3]);
        let src_sub = a.get(4).copied().unwrap_or("");
        let prefix = a.get(5).copied().unwrap_or("");
        let src_file = a.get(6).copied().unwrap_or(file);
        let mut out = Vec::new();
        for t in &self.triplets {
            let bare = t.trim_end_matches('/').trim_start_matches('/');
            let suffix = if bare.is_empty() {
                String::new()
            } else {
                format!("-{bare}")
            };
            out.extend(self.keep(
                root,
                &format!("{dir}{t}{sub}{file}"),
                &format!("{prefix}{file}{suffix}"),
                &format!("{src_dir}{t}{src_sub}{src_file}"),
            ));
        }
        out
    }

    /// `add_slave`'s rule: the target a file (links followed), the link's directory there.
    fn keep(&self, root: &Root, link: &str, name: &str, path: &str) -> Option<Slave> {
        let plain =
            |s: &str| s.starts_with('/') && !s.contains(['$', '"', '\'', '`']) && !s.contains("..");
        if !plain(link) || !plain(path) || name.contains(['/', '$']) {
            return None;
        }
        let is_file = matches!(root.metadata(Path::new(path)), Ok(Some(m)) if m.is_regular());
        let dir = Path::new(link).parent()?;
        let dir_there = matches!(root.metadata(dir), Ok(Some(m)) if m.is_directory());
        (is_file && dir_there).then(|| Slave {
            link: link.to_string(),
            name: format!("{}{name}", self.prefix),
            path: path.to_string(),
        })
    }

    /// The number after `update-alternatives --install MASTER NAME PATH` in the script.
    fn priority(text: &str, master_path: &str) -> Option<i64> {
        text.lines().find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let i = w.iter().position(|x| *x == "--install")?;
            (w.get(i + 3) == Some(&master_path))
                .then(|| w.get(i + 4)?.parse().ok())
                .flatten()
        })
    }
}

/// One alternative's registered choices: (path, priority, slaves).
struct Alternative {
    link: String,
    name: String,
    choices: Vec<(String, i64, Vec<Slave>)>,
}

/// Register the `nvidia` and `glx` alternatives where their packages are installed; returns a
/// line per alternative.
pub fn apply(root: &Root, postinsts: &BTreeMap<String, String>) -> Result<Vec<String>, AptError> {
    let mut done = Vec::new();
    if let Some(text) = postinsts.get("nvidia-alternative") {
        let s = Script::parse(text);
        let prio = Script::priority(text, "/usr/lib/nvidia/current").unwrap_or(0);
        let slaves = s.slaves(root, "slaves", 0);
        let conf = s.slaves(root, "conf_slaves", 0);
        let kmod = s.slaves(root, "kmod_slaves", 0);
        let kmod_open = s.slaves(root, "kmod_open_slaves", 0);
        let nvml = if root.exists(Path::new("/usr/include/nvml.h")) {
            s.slaves(root, "libnvidia_ml_so_slave", 0)
        } else {
            Vec::new()
        };
        let with = |k: &[Slave]| -> Vec<Slave> { [&slaves[..], &conf[..], k, &nvml[..]].concat() };
        let mut choices = Vec::new();
        if !slaves.is_empty() && (!kmod.is_empty() || kmod_open.is_empty()) {
            choices.push(("/usr/lib/nvidia/current".to_string(), prio, with(&kmod)));
        }
        if !slaves.is_empty() && !kmod_open.is_empty() {
            choices.push((
                "/usr/lib/nvidia/current-open".to_string(),
                prio - 1,
                with(&kmod_open),
            ));
        }
        if !choices.is_empty() {
            done.push(register(
                root,
                Alternative {
                    link: "/usr/lib/nvidia/nvidia".into(),
                    name: "nvidia".into(),
                    choices,
                },
            )?);
        }
    }
    if let Some(text) = postinsts.get("glx-alternative-nvidia") {
        let s = Script::parse(text);
        let with_x = [
            s.slaves(root, "libGL_nvidia_enabler", 0),
            s.slaves(root, "xorg_enabler", 0),
        ]
        .concat();
        if let Some(x) = with_x.first() {
            return Err(AptError::InvalidDeb {
                package: "glx-alternative-nvidia".into(),
                message: format!(
                    "`{}` makes the `glx` alternative an X or GL one, which gpuimg does not register: a node is headless; remove what brings it",
                    x.path
                ),
            });
        }
        if !s.slaves(root, "cuda_enabler", 0).is_empty() {
            let prio = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("prio=")?.parse().ok())
                .unwrap_or(100);
            let slaves = [
                "kernel_auto_slaves",
                "libGL_mesa_slaves",
                "libEGL_mesa_slaves",
                "misc_slaves",
            ]
            .iter()
            .flat_map(|b| s.slaves(root, b, 0))
            .collect();
            done.push(register(
                root,
                Alternative {
                    link: "/usr/lib/glx".into(),
                    name: "glx".into(),
                    choices: vec![("/usr/lib/nvidia".into(), prio, slaves)],
                },
            )?);
        }
    }
    Ok(done)
}

/// Write `alt`'s links for its highest-priority choice and dpkg's state of every choice.
fn register(root: &Root, alt: Alternative) -> Result<String, AptError> {
    let Some(best) = alt.choices.iter().max_by_key(|c| c.1) else {
        return Ok(String::new());
    };
    let master = Slave {
        link: alt.link.clone(),
        name: alt.name.clone(),
        path: best.0.clone(),
    };
    root.create_dir_all(Path::new("etc/alternatives"))
        .map_err(AptError::staged("create", "etc/alternatives"))?;
    for s in std::iter::once(&master).chain(best.2.iter()) {
        let at = format!("etc/alternatives/{}", s.name);
        root.remove_non_dir(Path::new(&at))
            .map_err(AptError::staged("replace", &at))?;
        root.symlink(Path::new(&s.path), Path::new(&at))
            .map_err(AptError::staged("create", &at))?;
        let link = Path::new(&s.link);
        let shipped = matches!(root.symlink_metadata(link), Ok(Some(m)) if !m.is_link());
        if shipped {
            continue;
        }
        root.remove_non_dir(link)
            .map_err(AptError::staged("replace", &s.link))?;
        if let Some(p) = link.parent() {
            root.create_dir_all(p)
                .map_err(AptError::staged("create", &s.link))?;
        }
        root.symlink(Path::new(&format!("/{at}")), link)
            .map_err(AptError::staged("create", &s.link))?;
    }
    // dpkg's state: auto, the master link, each slave's name and link (sorted by name), then
    // each choice with its priority and its slaves' targets ("" where it has none).
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    for (_, _, slaves) in &alt.choices {
        for s in slaves {
            names.insert(&s.name, &s.link);
        }
    }
    let mut state = format!("auto\n{}\n", alt.link);
    for (name, link) in &names {
        state.push_str(&format!("{name}\n{link}\n"));
    }
    state.push('\n');
    for (path, prio, slaves) in &alt.choices {
        state.push_str(&format!("{path}\n{prio}\n"));
        for name in names.keys() {
            let target = slaves
                .iter()
                .find(|s| s.name == *name)
                .map_or("", |s| &s.path);
            state.push_str(&format!("{target}\n"));
        }
    }
    state.push('\n');
    let file = format!("var/lib/dpkg/alternatives/{}", alt.name);
    root.create_dir_all(Path::new("var/lib/dpkg/alternatives"))
        .map_err(AptError::staged("create", "var/lib/dpkg/alternatives"))?;
    root.write(Path::new(&file), state.as_bytes(), 0o644)
        .map_err(AptError::staged("write", &file))?;
    Ok(format!(
        "{} -> {} with {} slaves (alternative `{}`, as its trigger would)",
        alt.link,
        best.0,
        best.2.len(),
        alt.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trigger in the form of `nvidia-alternative`'s (written for this test, same syntax).
    const NVIDIA: &str = r#"#!/bin/sh
TRIPLETS="/ /x86_64-linux-gnu/"
add_slave()
{
	prefix="nvidia--"
}
add_multiarch_slave()
{
	prefix="$6"
}
if [ "$1" = "triggered" ]; then
	slaves="
		$(add_multiarch_slave /usr/lib "" libcuda.so.1 /usr/lib nvidia/current/)
		$(add_multiarch_slave /usr/lib "" libGLX_nvidia.so.0 /usr/lib nvidia/current/)
		$(add_slave /usr/bin/nvidia-smi nvidia-smi /usr/lib/nvidia/current/nvidia-smi)
"
	conf_slaves="
		$(add_multiarch_slave /usr/lib nvidia/ libnvidia-cfg.so.1 /usr/lib nvidia/current/)
"
	kmod_slaves="
		$(add_slave /etc/nvidia/nvidia-modprobe.conf nvidia-modprobe.conf /etc/nvidia/nvidia-9.1/nvidia-modprobe.conf)
"
	kmod_open_slaves="
		$(add_slave /etc/nvidia/nvidia-modprobe.conf nvidia-modprobe.conf /etc/nvidia/9.1-open/nvidia-modprobe.conf)
"
	update-alternatives --install /usr/lib/nvidia/nvidia nvidia /usr/lib/nvidia/current 535 $slaves $conf_slaves $kmod_slaves
	update-alternatives --install /usr/lib/nvidia/nvidia nvidia /usr/lib/nvidia/current-open $((535 - 1)) $slaves
fi
"#;

    /// A trigger in the form of `glx-alternative-nvidia`'s.
    const GLX: &str = r#"TRIPLETS="/ /x86_64-linux-gnu/"
	prefix="glx--"
	libGL_nvidia_enabler="
		$(add_multiarch_slave /usr/lib "" libGL.so.1 /usr/lib nvidia/)
"
	xorg_enabler="
		$(add_slave /usr/lib/xorg/modules/drivers/nvidia_drv.so nvidia_drv.so /usr/lib/nvidia/nvidia_drv.so)
"
	cuda_enabler="
		$(add_multiarch_slave /usr/lib "" libcuda.so /usr/lib)
"
	kernel_manual_slaves="
		$(add_slave /etc/modprobe.d/nvidia.conf nvidia-modprobe.conf /etc/nvidia/nvidia-modprobe.conf)
"
	kernel_auto_slaves="
		$kernel_manual_slaves
		$(add_slave /etc/modules-load.d/nvidia.conf nvidia-load.conf /etc/nvidia/nvidia-load.conf)
"
	libGL_mesa_slaves="
		$(search_multiarch_slave libGL.so.1)
"
	misc_slaves="
		$(add_multiarch_slave /usr/lib "" libnvidia-cfg.so.1 /usr/lib nvidia/)
"
	prio=100
"#;

    fn file(root: &Root, p: &str) {
        root.create_dir_all(Path::new(p).parent().unwrap()).unwrap();
        root.write(Path::new(p), b"x", 0o644).unwrap();
    }

    fn link(root: &Root, p: &str) -> String {
        root.read_link(Path::new(p))
            .unwrap_or_else(|e| panic!("{p}: {e}"))
            .display()
            .to_string()
    }

    #[test]
    fn a_headless_driver_gets_the_nvidia_then_the_glx_alternative() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        for p in [
            "usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1",
            "usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-cfg.so.1",
            "usr/lib/nvidia/current/nvidia-smi",
            "etc/nvidia/nvidia-9.1/nvidia-modprobe.conf",
            "etc/modprobe.d/other.conf",
            "etc/modules-load.d/other.conf",
            "usr/bin/true",
        ] {
            file(&root, p);
        }
        // `libcuda.so` is one of the nvidia alternative's own slaves in Debian's trigger;
        // here the test stands in for it.
        root.symlink(
            Path::new("nvidia/current/libcuda.so.1"),
            Path::new("usr/lib/x86_64-linux-gnu/libcuda.so"),
        )
        .unwrap();
        let scripts: BTreeMap<String, String> = [
            ("nvidia-alternative".to_string(), NVIDIA.to_string()),
            ("glx-alternative-nvidia".to_string(), GLX.to_string()),
        ]
        .into();
        let done = apply(&root, &scripts).unwrap();
        assert_eq!(done.len(), 2, "{done:?}");
        // The nvidia alternative: current at 535, the slaves whose targets exist.
        assert_eq!(
            link(&root, "usr/lib/nvidia/nvidia"),
            "/etc/alternatives/nvidia"
        );
        assert_eq!(
            link(&root, "etc/alternatives/nvidia"),
            "/usr/lib/nvidia/current"
        );
        assert_eq!(
            link(&root, "usr/lib/x86_64-linux-gnu/libcuda.so.1"),
            "/etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu"
        );
        assert_eq!(
            link(
                &root,
                "etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu"
            ),
            "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1"
        );
        assert_eq!(
            link(&root, "usr/bin/nvidia-smi"),
            "/etc/alternatives/nvidia--nvidia-smi"
        );
        assert_eq!(
            link(&root, "etc/alternatives/nvidia--nvidia-modprobe.conf"),
            "/etc/nvidia/nvidia-9.1/nvidia-modprobe.conf"
        );
        assert!(
            !root.exists(Path::new("usr/lib/libcuda.so.1")),
            "no triplet, no target"
        );
        assert!(!root.exists(Path::new(
            "etc/alternatives/nvidia--libGLX_nvidia.so.0-x86_64-linux-gnu"
        )));
        let state = String::from_utf8(
            root.read(Path::new("var/lib/dpkg/alternatives/nvidia"), 1 << 20)
                .unwrap(),
        )
        .unwrap();
        assert!(
            state.starts_with(
                "auto\n/usr/lib/nvidia/nvidia\nnvidia--libcuda.so.1-x86_64-linux-gnu\n"
            ),
            "{state}"
        );
        assert!(
            state.contains("\n/usr/lib/nvidia/current\n535\n"),
            "{state}"
        );
        assert!(
            !state.contains("current-open"),
            "no open configuration: {state}"
        );
        // The glx alternative, headless: the modprobe configuration through both.
        assert_eq!(link(&root, "usr/lib/glx"), "/etc/alternatives/glx");
        assert_eq!(
            link(&root, "etc/modprobe.d/nvidia.conf"),
            "/etc/alternatives/glx--nvidia-modprobe.conf"
        );
        assert_eq!(
            link(&root, "etc/alternatives/glx--nvidia-modprobe.conf"),
            "/etc/nvidia/nvidia-modprobe.conf"
        );
        // The chain resolves inside the root to the proprietary module's configuration.
        assert_eq!(
            root.read(Path::new("etc/modprobe.d/nvidia.conf"), 16)
                .unwrap(),
            b"x"
        );
    }

    #[test]
    fn an_x_driver_on_a_node_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        file(&root, "usr/lib/nvidia/nvidia_drv.so");
        file(&root, "usr/lib/xorg/modules/drivers/other");
        let scripts: BTreeMap<String, String> =
            [("glx-alternative-nvidia".to_string(), GLX.to_string())].into();
        let e = apply(&root, &scripts).unwrap_err().to_string();
        assert!(e.contains("nvidia_drv.so"), "{e}");
    }

    #[test]
    fn the_places_a_replay_must_keep() {
        assert!(reads(
            "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1"
        ));
        assert!(reads("/usr/lib/nvidia/current/nvidia-smi"));
        assert!(reads("/etc/nvidia/current/nvidia-modprobe.conf"));
        assert!(!reads("/usr/lib/x86_64-linux-gnu/libc.so.6"));
    }
}
