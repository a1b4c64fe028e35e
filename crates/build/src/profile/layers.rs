//! `layers:`: checks of the profile's component overrides (names, packages, duplicates).
//!
//! Turns `layers: {NAME: {deb: [pkg, …]}}` (or `{wheel: [dist, …]}`) into [`Layer`]s in the
//! order written. Every failure
//! points at the offending key or value. Which component a package lands in otherwise is the
//! plan's business (`plan::components`), not the profile's.

use super::schema::LayersSpec;
use super::{Located, ProfileError};

/// Layer names gpuimg itself uses after the package layers.
pub const RESERVED_LAYER_NAMES: &[&str] = &["base", "metadata", "files", "selftest", "expect"];

/// One `layers:` entry: a component name and the apt packages or the wheels it takes (one
/// kind per layer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub name: Located<String>,
    pub deb: Vec<Located<String>>,
    /// Wheel names, normalised (PEP 503), with the position written.
    pub wheel: Vec<Located<String>>,
}

/// PEP 503's normalised name: lowercase, runs of `-`, `_` and `.` as one `-`.
fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// A Debian package name: `[a-z0-9][a-z0-9+.-]*`.
fn is_package_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"+.-".contains(&c))
}

pub(super) fn validate(
    spec: &LayersSpec,
    file: &str,
    apt_base: bool,
    python: bool,
) -> Result<Vec<Layer>, ProfileError> {
    let err = |at: &Located<String>, key: &str, m: String| ProfileError::invalid(file, at, key, m);
    let mut seen: Vec<&Located<String>> = Vec::new();
    let mut seen_wheels: Vec<Located<String>> = Vec::new();
    let mut out = Vec::new();
    for (name, layer) in &spec.0 {
        let n = name.value.as_str();
        let key = format!("layers.{}", n.escape_debug());
        if n.is_empty() {
            return Err(err(name, "layers", "a layer name is empty".into()));
        }
        if !n
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(err(
                name,
                "layers",
                format!(
                    "`{}` is not a layer name: use lowercase letters, digits and `-`",
                    n.escape_debug()
                ),
            ));
        }
        if RESERVED_LAYER_NAMES.contains(&n) {
            return Err(err(
                name,
                "layers",
                format!("`{n}` is a layer gpuimg makes itself; choose another name"),
            ));
        }
        if !layer.wheel.is_empty() {
            if !layer.deb.is_empty() {
                return Err(err(
                    name,
                    &key,
                    "takes apt packages or wheels, not both: make two layers".into(),
                ));
            }
            if !python {
                return Err(err(
                    name,
                    &key,
                    "`wheel:` packages need `python:`; this profile has none".into(),
                ));
            }
            let key = format!("{key}.wheel");
            let mut wheels: Vec<Located<String>> = Vec::new();
            for w in &layer.wheel {
                let ok = !w.value.is_empty()
                    && w.value
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
                if !ok {
                    return Err(err(
                        w,
                        &key,
                        format!(
                            "`{}` is not a distribution name (letters, digits, `- _ .`; no globs)",
                            w.value.escape_debug()
                        ),
                    ));
                }
                let n = Located {
                    value: normalize(&w.value),
                    ..w.clone()
                };
                if let Some(first) = seen_wheels.iter().find(|s| s.value == n.value) {
                    return Err(err(
                        w,
                        &key,
                        format!(
                            "`{}` is listed twice (first at {}:{}); a wheel goes to one layer",
                            w.value, first.line, first.column
                        ),
                    ));
                }
                seen_wheels.push(n.clone());
                wheels.push(n);
            }
            out.push(Layer {
                name: name.clone(),
                deb: Vec::new(),
                wheel: wheels,
            });
            continue;
        }
        if layer.deb.is_empty() {
            return Err(err(
                name,
                &key,
                "lists no packages (`deb: [...]` or `wheel: [...]`)".into(),
            ));
        }
        if !apt_base {
            return Err(err(
                name,
                &key,
                "`deb:` packages need `base.apt`; this profile has no apt base".into(),
            ));
        }
        let key = format!("{key}.deb");
        for d in &layer.deb {
            if d.value.is_empty() {
                return Err(err(d, &key, "a package name is empty".into()));
            }
            if !is_package_name(&d.value) {
                return Err(err(
                    d,
                    &key,
                    format!(
                        "`{}` is not a package name (lowercase letters, digits, `+ - .`; no globs)",
                        d.value.escape_debug()
                    ),
                ));
            }
            if let Some(first) = seen.iter().find(|s| s.value == d.value) {
                return Err(err(
                    d,
                    &key,
                    format!(
                        "`{}` is listed twice (first at {}:{}); a package goes to one layer",
                        d.value, first.line, first.column
                    ),
                ));
            }
            seen.push(d);
        }
        out.push(Layer {
            name: name.clone(),
            deb: layer.deb.clone(),
            wheel: Vec::new(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn load(s: &str) -> Result<Vec<super::Layer>, String> {
        let text = format!("name: x\nbase:\n  apt: {{suite: bookworm}}\n{s}");
        super::super::parse(&text, "p.yaml", Path::new("/nonexistent"), &|_| None)
            .map(|p| p.layers)
            .map_err(|e| e.to_string())
    }

    fn names(layers: &[super::Layer]) -> Vec<(&str, Vec<&str>)> {
        layers
            .iter()
            .map(|l| {
                let debs = l.deb.iter().map(|d| d.value.as_str()).collect();
                (l.name.value.as_str(), debs)
            })
            .collect()
    }

    #[test]
    fn layers_keep_the_order_written_and_positions() {
        let l = load("layers:\n  tools: {deb: [xz-utils, zstd]}\n  os:\n    deb: [libfoo1]\n  a-1: {deb: [g++-12]}\n").unwrap();
        assert_eq!(
            names(&l),
            [
                ("tools", vec!["xz-utils", "zstd"]),
                ("os", vec!["libfoo1"]),
                ("a-1", vec!["g++-12"])
            ]
        );
        assert_eq!((l[0].name.line, l[0].name.column), (5, 3));
        assert_eq!((l[1].deb[0].line, l[1].deb[0].column), (7, 11));
    }

    #[test]
    fn absent_or_empty_layers_are_none() {
        assert!(load("").unwrap().is_empty());
        assert!(load("layers:\n").unwrap().is_empty());
        assert!(load("layers: {}\n").unwrap().is_empty());
    }

    #[test]
    fn wheel_layers_are_normalised_and_need_python() {
        let text = "name: x\nbase:\n  apt: {suite: bookworm}\npython: {packages: [torch]}\nlayers:\n  ml: {wheel: [Torch, triton_x]}\n";
        let dir = tempfile::tempdir().unwrap();
        let p = super::super::parse(text, "p.yaml", dir.path(), &|_| None).unwrap();
        let names: Vec<&str> = p.layers[0].wheel.iter().map(|w| w.value.as_str()).collect();
        assert_eq!(names, ["torch", "triton-x"]);
        assert!(p.layers[0].deb.is_empty());
        for (layers, want) in [
            (
                "  ml: {wheel: [torch]}\n",
                "p.yaml:5:3: layers.ml: `wheel:` packages need `python:`; this profile has none",
            ),
            (
                "  ml: {wheel: [torch], deb: [zstd]}\n",
                "p.yaml:5:3: layers.ml: takes apt packages or wheels, not both: make two layers",
            ),
        ] {
            assert_eq!(load(&format!("layers:\n{layers}")).unwrap_err(), want);
        }
        let twice = "name: x\nbase:\n  apt: {suite: bookworm}\npython: {packages: [torch]}\nlayers:\n  ml: {wheel: [torch, Torch]}\n";
        let e = super::super::parse(twice, "p.yaml", dir.path(), &|_| None).unwrap_err();
        assert!(e.to_string().contains("`Torch` is listed twice"), "{e}");
    }

    #[test]
    fn bad_layers_point_at_the_value() {
        let cases = [
            (
                "layers:\n  tools: {deb: [xz-utils]}\n  more: {deb: [zstd, xz-utils]}\n",
                "p.yaml:6:22: layers.more.deb: `xz-utils` is listed twice (first at 5:17); a package goes to one layer",
            ),
            (
                "layers:\n  tools: {deb: [zstd, zstd]}\n",
                "p.yaml:5:23: layers.tools.deb: `zstd` is listed twice (first at 5:17); a package goes to one layer",
            ),
            (
                "layers:\n  Tools: {deb: [zstd]}\n",
                "p.yaml:5:3: layers: `Tools` is not a layer name: use lowercase letters, digits and `-`",
            ),
            (
                "layers:\n  my_tools: {deb: [zstd]}\n",
                "p.yaml:5:3: layers: `my_tools` is not a layer name: use lowercase letters, digits and `-`",
            ),
            (
                "layers:\n  \"\": {deb: [zstd]}\n",
                "p.yaml:5:3: layers: a layer name is empty",
            ),
            (
                "layers:\n  tools: {deb: [\"\"]}\n",
                "p.yaml:5:17: layers.tools.deb: a package name is empty",
            ),
            (
                "layers:\n  tools: {deb: [\"xz-*\"]}\n",
                "p.yaml:5:17: layers.tools.deb: `xz-*` is not a package name (lowercase letters, digits, `+ - .`; no globs)",
            ),
            (
                "layers:\n  metadata: {deb: [zstd]}\n",
                "p.yaml:5:3: layers: `metadata` is a layer gpuimg makes itself; choose another name",
            ),
            (
                "layers:\n  tools: {}\n",
                "p.yaml:5:3: layers.tools: lists no packages (`deb: [...]` or `wheel: [...]`)",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(load(text).unwrap_err(), want, "{text}");
        }
    }

    #[test]
    fn unknown_keys_and_shapes_are_refused() {
        let e = load("layers:\n  tools: {deb: [zstd], whl: [x]}\n").unwrap_err();
        assert!(e.starts_with("p.yaml:5:24: Unknown field `whl`"), "{e}");
        let e = load("layers: [tools]\n").unwrap_err();
        assert!(
            e.starts_with("p.yaml:4:9: layers: Invalid type: sequence"),
            "{e}"
        );
        let e = load("layers:\n  tools: {deb: [zstd]}\n  tools: {deb: [xz-utils]}\n").unwrap_err();
        assert!(e.contains("Duplicate key `tools`"), "{e}");
    }

    #[test]
    fn the_template_example_parses() {
        let template = include_str!("../../../../templates/profile.yaml");
        let mut text = String::new();
        let mut inside = false;
        for line in template.lines() {
            inside = (inside || line.starts_with("# layers:")) && !line.is_empty();
            text.push_str(if inside { &line[2..] } else { line });
            text.push('\n');
        }
        // The template's live `python:` section resolves its context: its own directory.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../templates");
        let p = super::super::parse(&text, "t.yaml", &dir, &|_| None).unwrap();
        assert_eq!(
            names(&p.layers),
            [("tools", vec!["xz-utils", "zstd"]), ("os", vec!["libfoo1"])]
        );
    }

    #[test]
    fn deb_layers_need_an_apt_base() {
        let e = super::super::parse(
            "name: x\nlayers:\n  tools: {deb: [zstd]}\n",
            "p.yaml",
            Path::new("/nonexistent"),
            &|_| None,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.yaml:3:3: layers.tools: `deb:` packages need `base.apt`; this profile has no apt base"
        );
    }
}
