//! Which component layer each Python wheel goes to: the fixed table in
//! `data/wheel-components.yaml` (patterns over normalised wheel names: NVIDIA's CUDA
//! libraries, cuDNN, NCCL, the frameworks), the profile's `layers: {NAME: {wheel: [...]}}`,
//! and `python-packages` for the rest.
//! Architecture Invariant: a wheel's component depends only on its own name (and the
//! profile's explicit overrides), never on which other wheels an image carries.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use super::components::{glob_match, is_component_name};
use super::PYTHON_PACKAGES;

const TABLE_FILE: &str = "data/wheel-components.yaml";
const TABLE_TEXT: &str = include_str!("../../../../data/wheel-components.yaml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    components: Vec<TableComponent>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableComponent {
    name: String,
    wheels: Vec<String>,
}

/// The table, checked: names `[a-z0-9-]+` once each, `python-packages` last.
fn table() -> &'static TableFile {
    static TABLE: OnceLock<TableFile> = OnceLock::new();
    TABLE.get_or_init(|| {
        let t: TableFile = match serde_saphyr::from_str(TABLE_TEXT) {
            Ok(t) => t,
            // Compiled in and checked by this module's tests: a bad one never ships.
            Err(e) => panic!("{TABLE_FILE} does not parse: {e}"),
        };
        let mut seen = Vec::new();
        for c in &t.components {
            assert!(is_component_name(&c.name), "{TABLE_FILE}: `{}`", c.name);
            assert!(!seen.contains(&&c.name), "{TABLE_FILE}: `{}` twice", c.name);
            seen.push(&c.name);
        }
        assert_eq!(
            t.components.last().map(|c| c.name.as_str()),
            Some(PYTHON_PACKAGES),
            "{TABLE_FILE}: `{PYTHON_PACKAGES}` must be last"
        );
        t
    })
}

/// The table's wheel components in layer order.
pub fn table_order() -> Vec<&'static str> {
    table().components.iter().map(|c| c.name.as_str()).collect()
}

/// The component of the wheel `name` (normalised) by the table alone.
pub fn component_of(name: &str) -> &'static str {
    table()
        .components
        .iter()
        .find(|c| c.wheels.iter().any(|g| glob_match(g, name)))
        .map_or(PYTHON_PACKAGES, |c| c.name.as_str())
}

/// Every wheel's component and the components' order: the table's, then the profile's new
/// names in the order written. `overrides`: component → wheel names (normalised), as written.
pub fn assign<'a>(
    wheels: impl IntoIterator<Item = &'a str>,
    overrides: &[(String, Vec<String>)],
) -> (Vec<String>, BTreeMap<String, String>) {
    let mut order: Vec<String> = table_order().into_iter().map(str::to_string).collect();
    let mut forced: BTreeMap<&str, &str> = BTreeMap::new();
    for (component, names) in overrides {
        if !order.contains(component) {
            order.push(component.clone());
        }
        for n in names {
            forced.entry(n.as_str()).or_insert(component.as_str());
        }
    }
    let by_wheel = wheels
        .into_iter()
        .map(|w| {
            let c = forced.get(w).copied().unwrap_or_else(|| component_of(w));
            (w.to_string(), c.to_string())
        })
        .collect();
    (order, by_wheel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_wheels_go_to_their_components_with_or_without_a_cuda_suffix() {
        for (w, c) in [
            ("nvidia-cuda-runtime-cu12", "cuda-runtime"),
            ("nvidia-cuda-runtime", "cuda-runtime"),
            ("nvidia-cuda-nvrtc-cu12", "cuda-runtime"),
            ("nvidia-nvjitlink", "cuda-runtime"),
            ("cuda-toolkit", "cuda-runtime"),
            ("nvidia-cublas", "cuda-math"),
            ("nvidia-cublas-cu12", "cuda-math"),
            ("nvidia-cusparselt-cu13", "cuda-math"),
            ("nvidia-cudnn-cu13", "cudnn"),
            ("nvidia-nccl-cu12", "nccl"),
            ("nvidia-nvshmem-cu13", "nccl"),
            ("torch", "framework"),
            ("triton", "framework"),
            ("jax-cuda12-plugin", "framework"),
            ("numpy", "python-packages"),
            ("torchvision", "python-packages"),
        ] {
            assert_eq!(component_of(w), c, "{w}");
        }
        assert_eq!(
            table_order(),
            [
                "cuda-runtime",
                "cuda-math",
                "cudnn",
                "nccl",
                "framework",
                "python-packages"
            ]
        );
    }

    #[test]
    fn the_profile_moves_wheels_and_adds_components_at_the_end() {
        let (order, by) = assign(
            ["numpy", "torch", "pillow"],
            &[
                ("framework".into(), vec!["numpy".into()]),
                ("imaging".into(), vec!["pillow".into()]),
            ],
        );
        assert_eq!(order.last().map(String::as_str), Some("imaging"));
        assert_eq!(by["numpy"], "framework");
        assert_eq!(by["pillow"], "imaging");
        assert_eq!(by["torch"], "framework");
    }
}
