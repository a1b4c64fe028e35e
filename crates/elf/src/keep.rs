//! `data/dlopen.yaml`: the shared objects programs load by name with `dlopen` (no `DT_NEEDED`
//! shows them, so the ELF closure counts them as roots), the optional plugins whose missing
//! needs are expected, and the library names the container runtime binds in from the host
//! (the NVIDIA driver's, provided at run time). Data only.

use std::sync::OnceLock;

use serde::Deserialize;

/// The table's text, for the keys of what it decides.
pub const TABLE_TEXT: &str = include_str!("../../../data/dlopen.yaml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    keep: Vec<String>,
    optional: Vec<String>,
    host: Vec<String>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| match serde_saphyr::from_str(TABLE_TEXT) {
        Ok(t) => t,
        // Compiled in and parsed by a unit test: a bad table never ships.
        Err(e) => panic!("data/dlopen.yaml does not parse: {e}"),
    })
}

/// `*` matches any run of characters, `/` included.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob(rest, &tail[i..]))
        }
    }
}

/// Whether the file at `path` (no leading `/`) is loaded by name at run time.
pub fn is_dlopened(path: &str) -> bool {
    table().keep.iter().any(|g| glob(g, path))
}

/// Whether the object at `path` is a plugin loaded only where the site provides what it
/// needs: its missing needs are not reported.
pub fn is_optional(path: &str) -> bool {
    table().optional.iter().any(|g| glob(g, path))
}

/// Whether a file named `name` may be a Python extension module: Python imports any `*.so`
/// of a package directory (`lib`-prefixed ones too: Triton's `_C/libtriton.so`), so in a site
/// directory such a file counts as used.
pub fn is_importable(name: &str) -> bool {
    name.ends_with(".so")
}

/// Whether a needed library `name` is the host's, bound in by the container runtime.
pub fn is_host_library(name: &str) -> bool {
    table().host.iter().any(|g| glob(g, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_globs_match() {
        let t = table();
        assert!(!t.keep.is_empty() && !t.host.is_empty());
        assert!(is_dlopened(
            "usr/local/lib/python3.11/dist-packages/nvidia/cudnn/lib/libcudnn_ops.so.9"
        ));
        assert!(!is_host_library("libcudart.so.12"));
        assert!(is_host_library("libnvidia-ml.so.1"));
        assert!(is_host_library("libcuda.so.1"));
        assert!(is_optional(
            "usr/local/lib/python3.11/dist-packages/nvidia/nvshmem/lib/nvshmem_transport_ucx.so.6"
        ));
        assert!(is_optional(
            "usr/local/lib/python3.11/dist-packages/nvidia/cufile/lib/libcufile_rdma.so.1"
        ));
        assert!(is_importable("libtriton.so") && !is_importable("libcusolverMg.so.12"));
    }
}
