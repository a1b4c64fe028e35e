//! The v1 profile keys (every one documented in `templates/profile.yaml`) as serde types.
//!
//! Unknown keys are errors (`deny_unknown_fields`). Values that later stages must point back
//! at carry their position (`Located`). This file only describes shapes; checks that need more
//! than one key, or the file system, live in `validate.rs`.

use serde::{Deserialize, Serialize};

use super::Located;
/// Owned by `expect` (the self-test reads them without knowing about profiles).
pub use gpuimg_expect::{KernelModule, OnFailure, SelftestLevel};
/// `config`: owned by `gpuimg-oci` (the image's plain data); the deserializer here fills it.
pub use gpuimg_oci::image::ConfigSpec;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    /// `container` (the default) or `host`: a node's kernel, NVIDIA driver and module.
    #[serde(default)]
    pub kind: Option<Located<ProfileKind>>,
    pub name: Located<String>,
    /// Directory every `files.src` must lie in (default: the profile's directory).
    #[serde(default)]
    pub context: Option<Located<String>>,
    #[serde(default)]
    pub platform: Option<Located<String>>,
    /// Several platforms: one manifest each, in one image index.
    #[serde(default)]
    pub platforms: Option<Located<Vec<String>>>,
    #[serde(default)]
    pub base: Option<Located<BaseSpec>>,
    #[serde(default)]
    pub host: HostSpec,
    #[serde(default)]
    pub stack: StackSpec,
    #[serde(default)]
    pub compat: CompatMode,
    #[serde(default)]
    pub files: Vec<Located<FileSpec>>,
    #[serde(default)]
    pub strip: Vec<StripClass>,
    #[serde(default)]
    pub selftest: SelftestSpec,
    #[serde(default)]
    pub config: ConfigSpec,
    /// Packages assigned to a named component layer, overriding the fixed table.
    #[serde(default)]
    pub layers: LayersSpec,
    /// Python packages from a package index, installed into the image's interpreter.
    #[serde(default)]
    pub python: Option<Located<PythonSpec>>,
    /// SONAME → the package or wheel whose copy the loader finds, where two provide it.
    #[serde(default)]
    pub libraries: std::collections::BTreeMap<String, String>,
    /// Where each pinned CUDA library comes from: NVIDIA's wheels (the default) or the base's
    /// apt repositories.
    #[serde(default)]
    pub providers: ProvidersSpec,
}

/// `providers`: per stack component (`cuda`, `cudnn`, `nccl`), `wheel` or `apt`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProvidersSpec {
    #[serde(default)]
    pub cuda: Option<Located<ProviderKind>>,
    #[serde(default)]
    pub cudnn: Option<Located<ProviderKind>>,
    #[serde(default)]
    pub nccl: Option<Located<ProviderKind>>,
}

/// What installs a stack component's libraries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// NVIDIA's wheels from the Python index, into the image's Python.
    #[default]
    Wheel,
    /// Debian packages from the base's apt repositories (Debian's own, or a vendor repository
    /// such as NVIDIA's configured with its keyring).
    Apt,
}

/// `python`: wheels from a package index (requirements are PEP 508 strings, checked when the
/// profile loads and parsed by `gpuimg-pypi`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PythonSpec {
    /// PEP 508 requirement strings (`requests>=2.31`, `torch[opt]; platform_machine == "x86_64"`).
    #[serde(default)]
    pub packages: Vec<Located<String>>,
    /// A requirements file (pip's format; `--hash` enforced; `-r`/`-c` inside the context).
    #[serde(default)]
    pub requirements: Option<Located<String>>,
    /// The index's URL (PEP 503/691 simple API); default: the host's configuration.
    #[serde(default)]
    pub index: Option<Located<String>>,
    /// Further indexes, searched before `index`: `URL` or `NAME=URL`.
    #[serde(default, rename = "extra-indexes")]
    pub extra_indexes: Vec<Located<String>>,
    /// Directories of wheels (or pages linking to wheels) searched beside the indexes.
    #[serde(default, rename = "find-links")]
    pub find_links: Vec<Located<String>>,
    /// Write deterministic `.pyc` files for the installed packages.
    #[serde(default)]
    pub compile: bool,
}

/// `layers`: component name → what it takes, in the order written (a new name's layer goes
/// after `packages` in this order). Keys keep their position for messages.
#[derive(Debug, Clone, Default)]
pub struct LayersSpec(pub Vec<(Located<String>, LayerSpec)>);

/// `layers.NAME`: the inputs one component takes: apt packages or Python wheels.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LayerSpec {
    /// apt package names (exact, no globs).
    #[serde(default)]
    pub deb: Vec<Located<String>>,
    /// Python distribution names (exact; compared normalised).
    #[serde(default)]
    pub wheel: Vec<Located<String>>,
}

impl<'de> Deserialize<'de> for LayersSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = LayersSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a mapping of layer names")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<LayersSpec, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = map.next_key::<Located<String>>()? {
                    out.push((k, map.next_value()?));
                }
                Ok(LayersSpec(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl Serialize for LayersSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(&k.value, v)?;
        }
        m.end()
    }
}

/// `base`: exactly one of `rootfs` or `apt`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BaseSpec {
    #[serde(default)]
    pub rootfs: Option<Located<String>>,
    #[serde(default)]
    pub apt: Option<AptSpec>,
    /// Allow device nodes, fifos and sockets from the root filesystem (refused by default).
    #[serde(default, rename = "allow-special-files")]
    pub allow_special_files: bool,
}

/// `base.apt`: packages from apt repositories.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AptSpec {
    #[serde(default = "default_mirror")]
    pub mirror: Located<String>,
    pub suite: Located<String>,
    #[serde(default = "default_components")]
    pub components: Vec<String>,
    #[serde(default)]
    pub packages: Vec<Located<String>>,
    /// Keyring file for the main mirror (default: the host's trusted keyrings).
    #[serde(default)]
    pub keyring: Option<Located<String>>,
    /// Skip signature checks (prints a warning on every build).
    #[serde(default)]
    pub trusted: bool,
    /// Also install the `Priority: required` / `Essential: yes` set.
    #[serde(default)]
    pub essential: bool,
    /// Further repositories beside the main one (vendor repositories).
    #[serde(default)]
    pub repositories: Vec<Located<AptRepoSpec>>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AptRepoSpec {
    pub url: Located<String>,
    /// A suite name, or a flat repository path ending in `/`.
    pub suite: Located<String>,
    #[serde(default)]
    pub components: Vec<String>,
    #[serde(default)]
    pub keyring: Option<Located<String>>,
    #[serde(default)]
    pub trusted: bool,
}

fn default_mirror() -> Located<String> {
    Located::synthetic("host".to_string())
}

fn default_components() -> Vec<String> {
    vec!["main".to_string()]
}

/// `host`: what the instance must provide.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// `from: node.yaml`: a container profile takes every host fact from a host profile (its
    /// resolved kernel, driver, flavour and GPUs), relative to this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Located<String>>,
    #[serde(default)]
    pub gpus: Vec<Located<String>>,
    #[serde(default)]
    pub driver: Option<Located<String>>,
    #[serde(default)]
    pub kernel: Option<Located<String>>,
    #[serde(default)]
    pub kernel_module: KernelModule,
    /// `system: hgx-h100-8`: the GPU system, where its form factor decides what a node needs
    /// (NVSwitch: the fabric manager). A catalog name (`catalog/systems.yaml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Located<String>>,
    /// `signing: {key: FILE, certificate: FILE}`: sign the node's built modules with the user's
    /// key (host profiles only); paths are relative to the profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing: Option<Located<SigningSpec>>,
}

/// `host.signing`: the key the node's modules are signed with and its X.509 certificate (PEM or
/// DER), as the kernel's `scripts/sign-file` takes them.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SigningSpec {
    pub key: Located<String>,
    pub certificate: Located<String>,
}

/// `stack`: pinned or ranged component versions, resolved later.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StackSpec {
    #[serde(default)]
    pub cuda: Option<Located<String>>,
    #[serde(default)]
    pub cudnn: Option<Located<String>>,
    #[serde(default)]
    pub nccl: Option<Located<String>>,
    #[serde(default)]
    pub python: Option<Located<String>>,
    #[serde(default)]
    pub pytorch: Option<Located<String>>,
    #[serde(default)]
    pub tensorflow: Option<Located<String>>,
    #[serde(default)]
    pub jax: Option<Located<String>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompatMode {
    Strict,
    #[default]
    Minor,
    Forward,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    pub src: Located<String>,
    pub dst: Located<String>,
    #[serde(default)]
    pub mode: Option<Located<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StripClass {
    Docs,
    Man,
    Locales,
    StaticLibs,
    Headers,
    DebugSymbols,
    BuildFiles,
    PythonCaches,
    Tests,
    TypeStubs,
    OtherGpuBackends,
    /// Accepted, refused at build until the ELF closure exists.
    UnusedLibraries,
    /// The fatbin entries of modifiable libraries that the profile's GPUs cannot select.
    DeviceCode,
}

impl StripClass {
    /// The profile's name of the class (`static-libs`).
    pub fn name(self) -> &'static str {
        match self {
            StripClass::Docs => "docs",
            StripClass::Man => "man",
            StripClass::Locales => "locales",
            StripClass::StaticLibs => "static-libs",
            StripClass::Headers => "headers",
            StripClass::DebugSymbols => "debug-symbols",
            StripClass::BuildFiles => "build-files",
            StripClass::PythonCaches => "python-caches",
            StripClass::Tests => "tests",
            StripClass::TypeStubs => "type-stubs",
            StripClass::OtherGpuBackends => "other-gpu-backends",
            StripClass::UnusedLibraries => "unused-libraries",
            StripClass::DeviceCode => "device-code",
        }
    }

    /// The class a profile's name spells.
    pub fn from_name(name: &str) -> Option<StripClass> {
        use StripClass::*;
        [
            Docs,
            Man,
            Locales,
            StaticLibs,
            Headers,
            DebugSymbols,
            BuildFiles,
            PythonCaches,
            Tests,
            TypeStubs,
            OtherGpuBackends,
            UnusedLibraries,
            DeviceCode,
        ]
        .into_iter()
        .find(|c| c.name() == name)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SelftestSpec {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub level: SelftestLevel,
    #[serde(default, rename = "on-failure")]
    pub on_failure: OnFailure,
    /// Path of the `gpuimg-selftest` binary, or one per platform (default: beside the running
    /// `gpuimg`).
    #[serde(default)]
    pub binary: Option<Located<SelftestBinarySpec>>,
    /// Bandwidth floors overriding the catalog defaults, in GB/s.
    #[serde(default)]
    pub floors: BandwidthFloors,
    /// Minimum number of GPUs the host must show.
    #[serde(default, rename = "min-gpus")]
    pub min_gpus: Option<u32>,
}

impl Default for SelftestSpec {
    fn default() -> Self {
        SelftestSpec {
            enabled: true,
            level: SelftestLevel::default(),
            on_failure: OnFailure::default(),
            binary: None,
            floors: BandwidthFloors::default(),
            min_gpus: None,
        }
    }
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BandwidthFloors {
    /// Host↔device floor in GB/s.
    #[serde(default, rename = "host-device-gbps")]
    pub host_device_gbps: Option<f64>,
    /// Device-to-device floor as a fraction of the catalog peak (0..1).
    #[serde(default, rename = "device-device-fraction")]
    pub device_device_fraction: Option<f64>,
}

/// `selftest.binary`: one path, or a path per platform (`{linux/arm64: PATH}`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum SelftestBinarySpec {
    One(String),
    PerPlatform(std::collections::BTreeMap<String, String>),
}

impl SelftestBinarySpec {
    /// The path given for `platform` (`os/arch[/variant]`): the one path, or that platform's.
    pub fn for_platform(&self, platform: &str) -> Option<&str> {
        match self {
            SelftestBinarySpec::One(p) => Some(p),
            SelftestBinarySpec::PerPlatform(m) => m.get(platform).map(String::as_str),
        }
    }
}

/// What a profile builds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileKind {
    /// A container image (the GPU stack, Python, the self-test).
    #[default]
    Container,
    /// A node: its kernel, the NVIDIA driver and the module built for exactly that kernel.
    Host,
}
