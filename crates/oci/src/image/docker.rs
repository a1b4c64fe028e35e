//! The two JSON files a docker-archive adds to an OCI layout: `manifest.json` (what `docker
//! load` and `podman load` read: the config, the repository tags and the layers, by their
//! paths in the archive) and the legacy `repositories` (name → tag → top layer).
//!
//! The blobs keep the OCI layout's paths (`blobs/sha256/<hex>`), as docker 25 writes them.
//! No file I/O.

use std::collections::BTreeMap;

use serde::Serialize;

use gpuimg_store::canonical_json::to_canonical;
use gpuimg_store::digest::Digest;

/// `manifest.json` and `repositories`.
#[derive(Debug, Clone)]
pub struct DockerJson {
    pub manifest: Vec<u8>,
    pub repositories: Vec<u8>,
}

#[derive(Serialize)]
struct Entry {
    #[serde(rename = "Config")]
    config: String,
    #[serde(rename = "RepoTags")]
    repo_tags: Vec<String>,
    #[serde(rename = "Layers")]
    layers: Vec<String>,
}

fn blob_path(d: &Digest) -> String {
    format!("blobs/sha256/{}", d.hex())
}

/// The files for the image `name:tag` with `config` and `layers` (blob digests, base first;
/// `top` is the last layer's diff_id, which `repositories` names).
pub fn docker_json(
    name: &str,
    tag: &str,
    config: &Digest,
    layers: &[&Digest],
    top: Option<&Digest>,
) -> Result<DockerJson, serde_json::Error> {
    let entry = Entry {
        config: blob_path(config),
        repo_tags: vec![format!("{name}:{tag}")],
        layers: layers.iter().map(|d| blob_path(d)).collect(),
    };
    let (manifest, _) = to_canonical(&vec![entry])?;
    let mut repos: BTreeMap<&str, BTreeMap<&str, String>> = BTreeMap::new();
    if let Some(top) = top {
        repos.entry(name).or_default().insert(tag, top.hex());
    }
    let (repositories, _) = to_canonical(&repos)?;
    Ok(DockerJson {
        manifest,
        repositories,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_json_names_config_tags_and_layers_by_path() {
        let c: Digest = format!("sha256:{}", "c".repeat(64)).parse().unwrap();
        let l: Digest = format!("sha256:{}", "1".repeat(64)).parse().unwrap();
        let d: Digest = format!("sha256:{}", "d".repeat(64)).parse().unwrap();
        let j = docker_json("a/b", "v1", &c, &[&l], Some(&d)).unwrap();
        let m: serde_json::Value = serde_json::from_slice(&j.manifest).unwrap();
        assert_eq!(m[0]["Config"], format!("blobs/sha256/{}", "c".repeat(64)));
        assert_eq!(m[0]["RepoTags"][0], "a/b:v1");
        assert_eq!(
            m[0]["Layers"][0],
            format!("blobs/sha256/{}", "1".repeat(64))
        );
        let r: serde_json::Value = serde_json::from_slice(&j.repositories).unwrap();
        assert_eq!(r["a/b"]["v1"], "d".repeat(64));
    }
}
