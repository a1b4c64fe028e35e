//! Stage `image`: the OCI config, manifest and index for a set of layers, as canonical JSON.
//!
//! Owns every piece of OCI JSON the builder writes (with oci-spec's types) and the annotation
//! names gpuimg uses. Must never read or write files: `export` puts the bytes on disk.

mod config_spec;
mod docker;
mod index;
mod platform;
mod time;

use std::collections::{BTreeMap, HashMap};

use oci_spec::image::{
    ConfigBuilder, DescriptorBuilder, HistoryBuilder, ImageConfigurationBuilder, ImageIndexBuilder,
    ImageManifestBuilder, MediaType, RootFsBuilder,
};

pub use config_spec::ConfigSpec;
pub use docker::DockerJson;
pub use index::{build_index, IndexJson};
pub use platform::Platform;
pub use time::rfc3339;

use crate::layer::LayerBlob;
use gpuimg_store::canonical_json::to_canonical;
use gpuimg_store::digest::Digest;

pub mod annotations;
pub(crate) mod referrer;

pub use annotations::{ANN_COMPONENT, ANN_LAYER_SIZES, ANN_REF_NAME, ANN_UNCOMPRESSED_SIZE};

/// A layer with the component it carries.
#[derive(Debug, Clone)]
pub struct ImageLayer {
    pub component: String,
    pub blob: LayerBlob,
}

/// Everything the image needs besides its layers.
#[derive(Debug, Clone)]
pub struct ImageSpec<'a> {
    pub name: &'a str,
    pub tag: &'a str,
    pub platform: &'a Platform,
    pub config: &'a ConfigSpec,
    /// Extra environment (e.g. resolved CUDA variables), merged under the profile's own.
    pub extra_env: BTreeMap<String, String>,
    /// Manifest annotations (component versions, self-test digest).
    pub annotations: BTreeMap<String, String>,
    /// Overrides the profile's entrypoint (the self-test wrapper).
    pub entrypoint: Option<Vec<String>>,
    pub epoch: u64,
}

/// The media type of the manifest [`build_image`] writes.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The media type of an image index (the OCI layout's, a referrers index).
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

/// The JSON blobs of one image.
#[derive(Debug, Clone)]
pub struct ImageJson {
    pub config: (Digest, Vec<u8>),
    pub manifest: (Digest, Vec<u8>),
    pub index: Vec<u8>,
    /// What a docker-archive adds (`manifest.json`, `repositories`).
    pub docker: DockerJson,
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("Failed to build OCI `{what}`: {message}")]
    Spec { what: &'static str, message: String },
}

fn spec_err(what: &'static str) -> impl Fn(oci_spec::OciSpecError) -> ImageError {
    move |e| ImageError::Spec {
        what,
        message: e.to_string(),
    }
}

fn json_err(what: &'static str) -> impl Fn(serde_json::Error) -> ImageError {
    move |e| ImageError::Spec {
        what,
        message: e.to_string(),
    }
}

fn oci_digest(d: &Digest) -> Result<oci_spec::image::Digest, ImageError> {
    d.to_string()
        .parse()
        .map_err(|e: oci_spec::OciSpecError| ImageError::Spec {
            what: "digest",
            message: e.to_string(),
        })
}

/// Build config, manifest and index for `layers`, in order (base first).
pub fn build_image(spec: &ImageSpec<'_>, layers: &[ImageLayer]) -> Result<ImageJson, ImageError> {
    let created = rfc3339(spec.epoch);

    let mut env: BTreeMap<String, String> = spec.extra_env.clone();
    env.entry("PATH".into()).or_insert_with(|| {
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string()
    });
    for (k, v) in &spec.config.env {
        env.insert(k.clone(), v.clone());
    }
    let env: Vec<String> = env.into_iter().map(|(k, v)| format!("{k}={v}")).collect();

    let mut cfg = ConfigBuilder::default().env(env);
    if let Some(ep) = spec.entrypoint.as_ref().or(spec.config.entrypoint.as_ref()) {
        cfg = cfg.entrypoint(ep.clone());
    }
    if let Some(cmd) = &spec.config.cmd {
        cfg = cfg.cmd(cmd.clone());
    }
    if let Some(w) = &spec.config.workdir {
        cfg = cfg.working_dir(w.clone());
    }
    if let Some(u) = &spec.config.user {
        cfg = cfg.user(u.clone());
    }
    if !spec.config.labels.is_empty() {
        let labels: HashMap<String, String> = spec.config.labels.clone().into_iter().collect();
        cfg = cfg.labels(labels);
    }
    let cfg = cfg.build().map_err(spec_err("config"))?;

    let diff_ids = layers
        .iter()
        .map(|l| l.blob.diff_id.to_string())
        .collect::<Vec<_>>();
    let rootfs = RootFsBuilder::default()
        .typ("layers")
        .diff_ids(diff_ids)
        .build()
        .map_err(spec_err("rootfs"))?;
    let history = layers
        .iter()
        .map(|l| {
            HistoryBuilder::default()
                .created(created.clone())
                .created_by(format!("gpuimg: {}", l.component))
                .build()
                .map_err(spec_err("history"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut image_cfg = ImageConfigurationBuilder::default()
        .created(created.clone())
        .architecture(spec.platform.architecture.as_str())
        .os(spec.platform.os.as_str())
        .config(cfg)
        .rootfs(rootfs)
        .history(history);
    if let Some(v) = &spec.platform.variant {
        image_cfg = image_cfg.variant(v.clone());
    }
    let image_cfg = image_cfg.build().map_err(spec_err("image configuration"))?;
    let (config_bytes, config_digest) = to_canonical(&image_cfg).map_err(json_err("config"))?;

    let layer_descs = layers
        .iter()
        .map(|l| {
            let mut ann = HashMap::new();
            ann.insert(ANN_COMPONENT.to_string(), l.component.clone());
            ann.insert(
                ANN_UNCOMPRESSED_SIZE.to_string(),
                l.blob.uncompressed_size.to_string(),
            );
            let (sizes, _) = to_canonical(&l.blob.sizes).map_err(json_err("layer sizes"))?;
            ann.insert(
                ANN_LAYER_SIZES.to_string(),
                String::from_utf8_lossy(&sizes).into_owned(),
            );
            DescriptorBuilder::default()
                .media_type(MediaType::Other(
                    l.blob.compression.media_type().to_string(),
                ))
                .digest(oci_digest(&l.blob.digest)?)
                .size(l.blob.size)
                .annotations(ann)
                .build()
                .map_err(spec_err("layer descriptor"))
        })
        .collect::<Result<Vec<_>, ImageError>>()?;
    let config_desc = DescriptorBuilder::default()
        .media_type(MediaType::ImageConfig)
        .digest(oci_digest(&config_digest)?)
        .size(config_bytes.len() as u64)
        .build()
        .map_err(spec_err("config descriptor"))?;

    let mut annotations: HashMap<String, String> = spec.annotations.clone().into_iter().collect();
    annotations.insert(annotations::ANN_CREATED.into(), created);
    annotations.insert(annotations::ANN_TITLE.into(), spec.name.to_string());
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(config_desc)
        .layers(layer_descs)
        .annotations(annotations)
        .build()
        .map_err(spec_err("manifest"))?;
    let (manifest_bytes, manifest_digest) =
        to_canonical(&manifest).map_err(json_err("manifest"))?;

    let platform = index::oci_platform(spec.platform)?;
    let mut ref_ann = HashMap::new();
    ref_ann.insert(ANN_REF_NAME.to_string(), spec.tag.to_string());
    let manifest_desc = DescriptorBuilder::default()
        .media_type(MediaType::ImageManifest)
        .digest(oci_digest(&manifest_digest)?)
        .size(manifest_bytes.len() as u64)
        .platform(platform)
        .annotations(ref_ann)
        .build()
        .map_err(spec_err("manifest descriptor"))?;
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![manifest_desc])
        .build()
        .map_err(spec_err("index"))?;
    let (index_bytes, _) = to_canonical(&index).map_err(json_err("index"))?;

    let blobs: Vec<&Digest> = layers.iter().map(|l| &l.blob.digest).collect();
    let docker = docker::docker_json(
        spec.name,
        spec.tag,
        &config_digest,
        &blobs,
        layers.last().map(|l| &l.blob.diff_id),
    )
    .map_err(json_err("docker manifest.json"))?;
    Ok(ImageJson {
        docker,
        config: (config_digest, config_bytes),
        manifest: (manifest_digest, manifest_bytes),
        index: index_bytes,
    })
}
