//! Every annotation name gpuimg writes, in one place: on layer descriptors, on the manifest and
//! on the index. Stages that compute values (the plan, from the resolution and the self-test)
//! take the names from here.

/// Layer descriptor: which component the layer holds.
pub const ANN_COMPONENT: &str = "io.gpuimg.component";
/// Layer descriptor: the uncompressed (tar) size in bytes.
pub const ANN_UNCOMPRESSED_SIZE: &str = "io.gpuimg.uncompressed-size";
/// Layer descriptor: where the layer's file bytes went (`layer::LayerSizes` as canonical
/// JSON: per owner before stripping and as stored, per strip class removed, stored once as
/// hard links), for `gpuimg inspect --sizes`.
pub const ANN_LAYER_SIZES: &str = "io.gpuimg.layer.sizes";
/// Index: the tag, on the manifest descriptor.
pub const ANN_REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Manifest: `SOURCE_DATE_EPOCH` as RFC 3339.
pub const ANN_CREATED: &str = "org.opencontainers.image.created";
/// Manifest: the profile's `name`; on the SBOM referrer's layer: the document's file name.
pub const ANN_TITLE: &str = "org.opencontainers.image.title";
/// Manifest: the resolved stack in words (`cuda 12.4.1, python 3.11`).
pub const ANN_DESCRIPTION: &str = "org.opencontainers.image.description";
/// Manifest: sha256 of the baked-in self-test binary.
pub const ANN_SELFTEST_SHA256: &str = "io.gpuimg.selftest.sha256";
/// Manifest: prefix of each resolved component's version (`io.gpuimg.stack.cuda`), and with
/// `.variant` appended its variant.
pub const ANN_STACK_PREFIX: &str = "io.gpuimg.stack.";
/// Manifest: the host driver range the stack needs.
pub const ANN_HOST_DRIVER: &str = "io.gpuimg.host.driver";
/// Manifest: the host kernel range.
pub const ANN_HOST_KERNEL: &str = "io.gpuimg.host.kernel";
/// Manifest: the kernel module flavour (`open`, `proprietary`, `any`).
pub const ANN_HOST_KERNEL_MODULE: &str = "io.gpuimg.host.kernel-module";
/// Manifest: the GPUs the image targets, comma-separated.
pub const ANN_HOST_GPUS: &str = "io.gpuimg.host.gpus";
/// Manifest: their compute capabilities, comma-separated.
pub const ANN_COMPUTE_CAPABILITIES: &str = "io.gpuimg.compute-capabilities";
/// Each CUDA library wheel's locked version: `io.gpuimg.cuda-library.nvidia-cublas-cu12`.
pub const ANN_CUDA_LIBRARY_PREFIX: &str = "io.gpuimg.cuda-library.";
/// The compute capabilities the framework's device code covers (`sm_75,sm_80,…`), from the
/// catalog's record of the installed variant.
pub const ANN_DEVICE_CODE_SM: &str = "io.gpuimg.device-code.sm";
/// The highest PTX target of that device code, when it has one.
pub const ANN_DEVICE_CODE_PTX: &str = "io.gpuimg.device-code.ptx";
/// With `strip: [device-code]`: the compute capabilities the device code was pruned for
/// (`9.0,10.0`); the SM and PTX annotations then say what is left.
pub const ANN_DEVICE_CODE_PRUNED_FOR: &str = "io.gpuimg.device-code.pruned-for";
/// The catalog sources of the SM list (and `unverified` when the catalog marks it so).
pub const ANN_DEVICE_CODE_SOURCE: &str = "io.gpuimg.device-code.source";
