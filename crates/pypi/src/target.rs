//! What the image's Python accepts, from [`ImagePython`] alone (never the build host): the
//! PEP 508 marker environment and the wheel tags, ranked as pip ranks them for that
//! interpreter: `cpXY-cpXY`, `cpXY-abi3` (and older `cp3N-abi3`), `cpXY-none`, then
//! `pyXY`/`py3` pure tags; platforms `manylinux_2_N` for N from the image's glibc down (the
//! legacy `manylinux2014`/`2010`/`1` aliases at 2.17/2.12/2.5), then `linux_<machine>`, then
//! `any`. Never `musllinux` (the images are glibc).
//! Must never consult the host's interpreter, platform or glibc.

use std::collections::HashMap;

use pep440_rs::Version;
use pep508_rs::{MarkerEnvironment, MarkerEnvironmentBuilder};

use crate::ImagePython;

/// The image's interpreter as resolution sees it.
#[derive(Debug, Clone)]
pub struct Target {
    pub markers: MarkerEnvironment,
    /// `python_full_version`, for `Requires-Python`.
    pub python: Version,
    /// Tag triple → rank (lower is preferred).
    ranks: HashMap<(String, String, String), usize>,
    /// What the image accepts, in words, for messages.
    pub accepts: String,
}

impl Target {
    pub fn new(py: &ImagePython) -> Result<Target, String> {
        let (major, minor) = py.version;
        let short = format!("{major}.{minor}");
        let full = if py.full_version.is_empty() {
            short.clone()
        } else {
            py.full_version.clone()
        };
        let machine = py.machine.as_str();
        let markers = MarkerEnvironment::try_from(MarkerEnvironmentBuilder {
            implementation_name: "cpython",
            implementation_version: &full,
            os_name: "posix",
            platform_machine: machine,
            platform_python_implementation: "CPython",
            platform_release: "",
            platform_system: "Linux",
            platform_version: "",
            python_full_version: &full,
            python_version: &short,
            sys_platform: "linux",
        })
        .map_err(|e| format!("the image's Python `{full}`: {e}"))?;
        let python = full
            .parse::<Version>()
            .map_err(|e| format!("the image's Python `{full}`: {e}"))?;
        let platforms = platforms(py.glibc, machine);
        let ranks = ranks(major, minor, &platforms);
        let lowest = platforms
            .iter()
            .rev()
            .find(|p| p.starts_with("manylinux_"))
            .cloned()
            .unwrap_or_default();
        let accepts = format!(
            "cp{major}{minor}, abi3 or pure-Python tags for {} … {lowest} (glibc {}.{}) or any",
            platforms.first().cloned().unwrap_or_default(),
            py.glibc.0,
            py.glibc.1
        );
        Ok(Target {
            markers,
            python,
            ranks,
            accepts,
        })
    }

    /// The best rank of any of `triples` (lower is better); `None` when the image takes none.
    pub fn rank<'a>(
        &self,
        triples: impl Iterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Option<usize> {
        triples
            .filter_map(|(p, a, pl)| {
                self.ranks
                    .get(&(p.to_string(), a.to_string(), pl.to_string()))
                    .copied()
            })
            .min()
    }
}

/// Platform tags for glibc `(2, n)` on `machine`, preferred first.
fn platforms(glibc: (u32, u32), machine: &str) -> Vec<String> {
    let mut out = Vec::new();
    // manylinux starts at glibc 2.17 on aarch64 (there is no manylinux1/2010 for it).
    let floor = if machine == "x86_64" || machine == "i686" {
        5
    } else {
        17
    };
    if glibc.0 == 2 {
        for n in (floor..=glibc.1).rev() {
            out.push(format!("manylinux_2_{n}_{machine}"));
            let legacy = match n {
                17 => Some("manylinux2014"),
                12 => Some("manylinux2010"),
                5 => Some("manylinux1"),
                _ => None,
            };
            if let Some(l) = legacy {
                out.push(format!("{l}_{machine}"));
            }
        }
    }
    out.push(format!("linux_{machine}"));
    out
}

/// packaging's `sys_tags` order for CPython `major.minor` on `platforms`.
fn ranks(major: u32, minor: u32, platforms: &[String]) -> HashMap<(String, String, String), usize> {
    let mut order: Vec<(String, String, String)> = Vec::new();
    let cp = format!("cp{major}{minor}");
    let mut push = |p: &str, a: &str, pl: &str| order.push((p.into(), a.into(), pl.into()));
    for pl in platforms {
        push(&cp, &cp, pl);
    }
    for pl in platforms {
        push(&cp, "abi3", pl);
    }
    for pl in platforms {
        push(&cp, "none", pl);
    }
    for m in (2..minor).rev() {
        for pl in platforms {
            push(&format!("cp{major}{m}"), "abi3", pl);
        }
    }
    let pys: Vec<String> = std::iter::once(format!("py{major}{minor}"))
        .chain(std::iter::once(format!("py{major}")))
        .chain((0..minor).rev().map(|m| format!("py{major}{m}")))
        .collect();
    for py in &pys {
        for pl in platforms {
            push(py, "none", pl);
        }
    }
    push(&cp, "none", "any");
    for py in &pys {
        push(py, "none", "any");
    }
    let mut ranks = HashMap::with_capacity(order.len());
    for (i, t) in order.into_iter().enumerate() {
        ranks.entry(t).or_insert(i);
    }
    ranks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filename::WheelName;

    fn image(glibc: u32, machine: &str) -> ImagePython {
        ImagePython {
            version: (3, 11),
            full_version: "3.11.2".into(),
            interpreter: "/usr/bin/python3.11".into(),
            site_dir: "/usr/local/lib/python3.11/dist-packages".into(),
            scripts_dir: "/usr/local/bin".into(),
            glibc: (2, glibc),
            machine: machine.into(),
        }
    }

    fn rank(t: &Target, file: &str) -> Option<usize> {
        let w = WheelName::parse(file).unwrap();
        t.rank(w.triples())
    }

    #[test]
    fn tags_follow_the_image_not_the_host() {
        let t = Target::new(&image(36, "x86_64")).unwrap();
        let native = rank(
            &t,
            "a-1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        );
        let abi3 = rank(&t, "a-1-cp38-abi3-manylinux_2_28_x86_64.whl");
        let pure = rank(&t, "a-1-py3-none-any.whl");
        assert!(native < abi3 && abi3 < pure, "{native:?} {abi3:?} {pure:?}");
        assert!(rank(&t, "a-1-cp311-cp311-manylinux1_x86_64.whl").is_some());
        for refused in [
            "a-1-cp311-cp311-manylinux_2_39_x86_64.whl",
            "a-1-cp311-cp311-musllinux_1_2_x86_64.whl",
            "a-1-cp311-cp311-manylinux_2_17_aarch64.whl",
            "a-1-cp312-cp312-manylinux_2_17_x86_64.whl",
            "a-1-cp311-cp311-win_amd64.whl",
            "a-1-py2-none-any.whl",
        ] {
            assert_eq!(rank(&t, refused), None, "{refused}");
        }
        let arm = Target::new(&image(36, "aarch64")).unwrap();
        assert!(rank(&arm, "a-1-cp311-cp311-manylinux2014_aarch64.whl").is_some());
        assert_eq!(rank(&arm, "a-1-cp311-cp311-manylinux2014_x86_64.whl"), None);
        assert!(t.accepts.contains("manylinux_2_36_x86_64"), "{}", t.accepts);
    }

    #[test]
    fn markers_are_the_images() {
        let t = Target::new(&image(36, "aarch64")).unwrap();
        let r: pep508_rs::Requirement =
            "x; platform_machine == 'aarch64' and python_version < '3.12' and sys_platform == 'linux'"
                .parse()
                .unwrap();
        assert!(r.evaluate_markers(&t.markers, &[]));
        let r: pep508_rs::Requirement = "x; python_full_version >= '3.11.3'".parse().unwrap();
        assert!(!r.evaluate_markers(&t.markers, &[]));
    }
}
