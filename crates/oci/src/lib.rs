//! `gpuimg-oci`: everything of a build that speaks OCI. A `Tree` becomes a compressed,
//! content-addressed layer blob ([`layer`]: [`layer::write_layer`], or [`layer::LayerStream`] for
//! trees appended one after another); the blobs and the stated config become the config,
//! manifest and index JSON ([`image`]: [`image::build_image`], the one entry from layers to an
//! image); that image goes on disk as a layout, an oci-archive or a docker-archive
//! ([`export::export`]) or to a registry ([`registry::push`]); image names, tags and references
//! are parsed by [`mod@reference`] alone. Inside, data flows one way: `layer` → `image` → `export`
//! or `registry`; `reference` is a leaf. The image config and [`image::Platform`] a profile states
//! are plain data here ([`image::ConfigSpec`]); the root package's `profile` fills them.
//!
//! Depends on `gpuimg-assemble` (the trees), `gpuimg-deflate`, `gpuimg-fetch` (the registry's
//! transport and progress) and `gpuimg-store` (digests, the cache, staging). Must never read a
//! profile, resolve or fetch packages, or decide what goes into an image: the root package's
//! plan decides, these stages write exactly what they are handed, the same bytes for the same
//! inputs whatever the thread count or the cache held.

pub mod export;
pub mod image;
pub mod layer;
pub mod reference;
pub mod registry;
