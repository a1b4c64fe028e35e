//! The self-test components: the `gpuimg-selftest` binary (its own layer, identical in every
//! image that carries it) and `/etc/gpuimg/expect.json` built from the resolution.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::BuildOptions;
use crate::assemble::{DataSource, Entry, EntryKind, Tree};
use crate::digest::{hash_reader, Digest};
use crate::expect::{Expectation, HostFacts, BINARY_PATH, DEFAULT_PATH};
use crate::profile::Profile;
use crate::resolve::Resolution;

/// Manifest annotation: sha256 of the baked-in self-test binary.
pub const ANN_SELFTEST_SHA256: &str = "io.gpuimg.selftest.sha256";

#[derive(Debug, thiserror::Error)]
pub enum SelftestLayerError {
    #[error("The self-test binary `{path}` was not found (build it with `cargo build --bins`, or set `selftest.binary`, or `selftest.enabled: false`)")]
    Missing { path: String },
    #[error("Failed to read the self-test binary `{path}`: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub struct SelftestComponents {
    pub binary_tree: Tree,
    pub expect_tree: Tree,
    pub binary_sha256: Digest,
}

fn binary_path(profile: &Profile, opts: &BuildOptions) -> PathBuf {
    if let Some(p) = &opts.selftest_binary {
        return p.clone();
    }
    if let Some(p) = &profile.selftest.binary {
        return crate::profile::resolve_path(&profile.dir, &p.value);
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("gpuimg-selftest")))
        .unwrap_or_else(|| PathBuf::from("gpuimg-selftest"))
}

fn root_entry(path: &str, kind: EntryKind, mode: u32) -> Entry {
    Entry {
        path: path.to_string(),
        kind,
        mode,
        uid: 0,
        gid: 0,
    }
}

pub fn selftest_components(
    profile: &Profile,
    opts: &BuildOptions,
) -> Result<SelftestComponents, SelftestLayerError> {
    let bin = binary_path(profile, opts);
    let read_err = |source| SelftestLayerError::Read {
        path: bin.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(&bin).map_err(|_| SelftestLayerError::Missing {
        path: bin.display().to_string(),
    })?;
    let (sha, _) = hash_reader(std::io::BufReader::new(
        fs_err::File::open(&bin).map_err(read_err)?,
    ))
    .map_err(read_err)?;

    let mut binary_tree = Tree::new("selftest");
    binary_tree.insert(root_entry(
        BINARY_PATH.trim_start_matches('/'),
        EntryKind::File {
            size: meta.len(),
            data: DataSource::file(bin.clone(), &meta),
        },
        0o755,
    ));
    binary_tree.add_missing_parents();

    let json = expectation(profile, opts.resolution.as_ref()).to_json();
    let mut expect_tree = Tree::new("expect");
    expect_tree.insert(root_entry(
        DEFAULT_PATH.trim_start_matches('/'),
        EntryKind::File {
            size: json.len() as u64,
            data: DataSource::Bytes(Arc::new(json.into_bytes())),
        },
        0o644,
    ));
    expect_tree.add_missing_parents();
    Ok(SelftestComponents {
        binary_tree,
        expect_tree,
        binary_sha256: sha,
    })
}

/// The expectation an image built from `profile` with `resolution` carries (also what
/// `gpuimg verify-host` checks): host ranges, GPUs and peaks from the resolution, the image's
/// final `NVIDIA_REQUIRE_*`/`CUDA_VERSION` environment, the profile's `selftest` settings.
pub fn expectation(profile: &Profile, res: Option<&Resolution>) -> Expectation {
    let mut image_env: BTreeMap<String, String> =
        res.map(Resolution::image_env).unwrap_or_default();
    image_env.extend(profile.config.env.clone());
    let nvidia_require = image_env
        .iter()
        .filter(|(k, _)| {
            k.starts_with("NVIDIA_REQUIRE_")
                || *k == "NVIDIA_DISABLE_REQUIRE"
                || *k == "CUDA_VERSION"
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let facts = HostFacts {
        image: Some(profile.name.to_string()),
        driver_range: res.map(|r| r.host.driver.to_string()),
        kernel_range: res.map(|r| r.host.kernel.to_string()),
        module: res
            .map(|r| r.host.kernel_module)
            .unwrap_or(profile.host.kernel_module),
        cuda_driver_floor: res.and_then(|r| r.cuda_driver_floor.as_ref().map(|v| v.to_string())),
        gpus: res
            .map(|r| r.host.gpus.iter().map(|g| g.name.clone()).collect())
            .unwrap_or_default(),
        compute_capabilities: res
            .map(|r| {
                let ccs: std::collections::BTreeSet<String> = r
                    .host
                    .gpus
                    .iter()
                    .map(|g| g.compute_capability.to_string())
                    .collect();
                ccs.into_iter().collect()
            })
            .unwrap_or_default(),
        peak_bandwidth_gbps: res
            .map(|r| {
                r.host
                    .gpus
                    .iter()
                    .filter_map(|g| g.peak_bandwidth_gbps.map(|b| (g.name.clone(), b)))
                    .collect()
            })
            .unwrap_or_default(),
        nvidia_require,
    };
    Expectation::new(facts, &profile.selftest)
}
