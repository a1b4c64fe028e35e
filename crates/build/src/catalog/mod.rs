//! Stage `catalog`: the compatibility facts the resolver reasons with.
//!
//! Owns the embedded catalog (`catalog/*.yaml`, compiled in), user overlays (`--catalog FILE`,
//! `$XDG_CONFIG_HOME/gpuimg/catalog.d/*.yaml`) that add or replace records, validation, and
//! lookups (GPU by name or alias, closest name, cuDNN record for a pinned version).
//! Must never decide compatibility: that is `resolve`'s job.

mod debs;
mod device_code;
mod error;
mod libraries;
mod lookup;
mod merge;
mod records;
mod strip_table;
mod validate;
mod wheels;

use std::path::{Path, PathBuf};

pub use debs::StackPackages;
pub use device_code::DeviceCode;
pub use error::CatalogError;
pub use libraries::{
    cuda_line, cuda_wheels, deb_libraries, wheel_libraries, LibraryRecord, LibraryTableError,
    WheelLibrary, WheelRecord,
};
pub use records::{
    BranchKind, CatalogFile, CcSupport, CudaComponents, CudaFamily, CudaRelease, CudnnBuild,
    CudnnRelease, DriverBranch, DriverFloor, Gpu, GpuCpu, JaxRelease, JaxVariant,
    ModuleBuildFailure, ModuleFlavour, NcclRelease, PythonRelease, PytorchRelease, PytorchVariant,
    Source, StackDebs, StackWheels, System, TensorflowRelease,
};
pub use strip_table::{
    strip_table, strip_table_text, FileTerms, GpuFile, PackageKind, PackageStrip, StripTableError,
};
pub use wheels::{CudaConstraints, StackRequirements};

/// The embedded catalog files, in merge order.
const EMBEDDED: &[(&str, &str)] = &[
    (
        "catalog/sources.yaml",
        include_str!("../../../../catalog/sources.yaml"),
    ),
    (
        "catalog/cuda.yaml",
        include_str!("../../../../catalog/cuda.yaml"),
    ),
    (
        "catalog/cuda-components.yaml",
        include_str!("../../../../catalog/cuda-components.yaml"),
    ),
    (
        "catalog/gpus.yaml",
        include_str!("../../../../catalog/gpus.yaml"),
    ),
    (
        "catalog/drivers.yaml",
        include_str!("../../../../catalog/drivers.yaml"),
    ),
    (
        "catalog/python.yaml",
        include_str!("../../../../catalog/python.yaml"),
    ),
    (
        "catalog/pytorch.yaml",
        include_str!("../../../../catalog/pytorch.yaml"),
    ),
    (
        "catalog/tensorflow.yaml",
        include_str!("../../../../catalog/tensorflow.yaml"),
    ),
    (
        "catalog/jax.yaml",
        include_str!("../../../../catalog/jax.yaml"),
    ),
    (
        "catalog/cudnn.yaml",
        include_str!("../../../../catalog/cudnn.yaml"),
    ),
    (
        "catalog/nccl.yaml",
        include_str!("../../../../catalog/nccl.yaml"),
    ),
    (
        "catalog/wheels.yaml",
        include_str!("../../../../catalog/wheels.yaml"),
    ),
    (
        "catalog/debs.yaml",
        include_str!("../../../../catalog/debs.yaml"),
    ),
    (
        "catalog/module-builds.yaml",
        include_str!("../../../../catalog/module-builds.yaml"),
    ),
    (
        "catalog/systems.yaml",
        include_str!("../../../../catalog/systems.yaml"),
    ),
];

/// The merged, validated catalog. Release lists are sorted newest first.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub sources: Vec<Source>,
    pub cuda_families: Vec<CudaFamily>,
    pub compute_capabilities: Vec<CcSupport>,
    pub cuda: Vec<CudaRelease>,
    pub gpus: Vec<Gpu>,
    /// Sorted oldest branch first.
    pub drivers: Vec<DriverBranch>,
    pub python: Vec<PythonRelease>,
    pub pytorch: Vec<PytorchRelease>,
    pub tensorflow: Vec<TensorflowRelease>,
    pub jax: Vec<JaxRelease>,
    pub cudnn: Vec<CudnnRelease>,
    pub nccl: Vec<NcclRelease>,
    pub stack_wheels: Vec<StackWheels>,
    pub stack_debs: Vec<StackDebs>,
    /// Each CUDA toolkit release's component wheel versions (`wheels.rs`).
    pub cuda_components: Vec<CudaComponents>,
    /// Module source × kernel pairs known not to compile (`module-builds.yaml`).
    pub module_build_failures: Vec<ModuleBuildFailure>,
    /// GPU systems whose form factor matters to a node (`systems.yaml`).
    pub systems: Vec<System>,
    /// Where each overlay came from, in merge order (empty: embedded only).
    pub overlays: Vec<PathBuf>,
}

impl Catalog {
    /// The embedded catalog, then the overlays in `config_dir/catalog.d` (gpuimg's config
    /// directory, which the CLI's settings choose), then `overlays` in order.
    pub fn load(config_dir: Option<&Path>, overlays: &[PathBuf]) -> Result<Catalog, CatalogError> {
        let mut paths = match config_dir {
            Some(d) => config_dir_overlays(d)?,
            None => vec![],
        };
        paths.extend(overlays.iter().cloned());
        Catalog::load_exactly(&paths)
    }

    /// The embedded catalog and exactly these overlays (no config directory).
    pub fn load_exactly(overlays: &[PathBuf]) -> Result<Catalog, CatalogError> {
        let mut files = Vec::new();
        for (name, text) in EMBEDDED {
            files.push((name.to_string(), parse(name, text)?));
        }
        for path in overlays {
            let text = fs_err::read_to_string(path).map_err(|source| CatalogError::Read {
                path: path.display().to_string(),
                source,
            })?;
            let name = path.display().to_string();
            files.push((name.clone(), parse(&name, &text)?));
        }
        let mut catalog = merge::merge(files)?;
        catalog.overlays = overlays.to_vec();
        validate::validate(&catalog)?;
        Ok(catalog)
    }

    /// The embedded catalog alone.
    pub fn embedded() -> Result<Catalog, CatalogError> {
        Catalog::load_exactly(&[])
    }
}

fn parse(name: &str, text: &str) -> Result<CatalogFile, CatalogError> {
    serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line() as usize, l.column() as usize))
            .unwrap_or((1, 1));
        let message = e.without_snippet().to_string();
        let message = message.lines().next().unwrap_or("").trim().to_string();
        CatalogError::Parse {
            file: name.to_string(),
            line,
            column,
            message,
        }
    })
}

/// `config_dir/catalog.d/*.yaml`, sorted by name.
fn config_dir_overlays(config_dir: &Path) -> Result<Vec<PathBuf>, CatalogError> {
    let dir = config_dir.join("catalog.d");
    if !dir.is_dir() {
        return Ok(vec![]);
    }
    let mut out = Vec::new();
    for entry in fs_err::read_dir(&dir).map_err(|source| CatalogError::Read {
        path: dir.display().to_string(),
        source,
    })? {
        let entry = entry.map_err(|source| CatalogError::Read {
            path: dir.display().to_string(),
            source,
        })?;
        let p = entry.path();
        if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}
