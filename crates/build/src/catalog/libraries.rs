//! NVIDIA's CUDA wheels and the libraries of each the self-test loads: the embedded table
//! `catalog/cuda-libraries.yaml` (wheel name → CUDA major, directory, library key, soname,
//! version call, self-test level), and the lookup that turns a wheel into those entries.
//! Data only: never decides compatibility and never reads an image.

use std::sync::OnceLock;

use serde::Deserialize;

use gpuimg_expect::{SelftestLevel, VersionCall};

const TABLE_FILE: &str = "catalog/cuda-libraries.yaml";
const TABLE_TEXT: &str = include_str!("../../../../catalog/cuda-libraries.yaml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    #[allow(dead_code)]
    source: Vec<String>,
    wheels: Vec<WheelRecord>,
    #[serde(default)]
    debs: Vec<DebRecord>,
}

/// A Debian package that carries CUDA libraries (`deb` may hold `*`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DebRecord {
    pub deb: String,
    /// `None`: the package is built per CUDA line and its version says which
    /// (`2.21.5-1+cuda12.4`).
    #[serde(default)]
    pub cuda_major: Option<u32>,
    pub dir: String,
    pub libraries: Vec<LibraryRecord>,
}

/// One NVIDIA wheel and the libraries of it the self-test checks.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelRecord {
    /// The distribution name, normalised (`nvidia-cuda-runtime-cu12`).
    pub wheel: String,
    pub cuda_major: u32,
    /// Relative to the site directory (`nvidia/cuda_runtime/lib`).
    pub dir: String,
    pub libraries: Vec<LibraryRecord>,
}

/// One library of a wheel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LibraryRecord {
    /// `cudart`, `cublaslt`, …
    pub key: String,
    /// `libcudart.so.12`; `{major}` stands for the wheel version's first field.
    pub soname: String,
    pub call: VersionCall,
    pub level: SelftestLevel,
    /// Libraries of the same directory it loads at run time (same placeholders as `soname`).
    #[serde(default)]
    pub companions: Vec<String>,
}

/// A library of a locked wheel, resolved for that wheel's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelLibrary {
    pub key: String,
    pub soname: String,
    /// Relative to the site directory.
    pub dir: String,
    pub cuda_major: u32,
    pub call: VersionCall,
    pub level: SelftestLevel,
    pub companions: Vec<String>,
}

/// Why the embedded table could not be read (a build defect: the table is compiled in).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{TABLE_FILE}: {0}")]
pub struct LibraryTableError(String);

fn table() -> Result<&'static Table, LibraryTableError> {
    static TABLE: OnceLock<Result<Table, String>> = OnceLock::new();
    TABLE
        .get_or_init(|| serde_saphyr::from_str(TABLE_TEXT).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| LibraryTableError(e.clone()))
}

/// Every wheel the table knows, in load order.
pub fn cuda_wheels() -> Result<&'static [WheelRecord], LibraryTableError> {
    Ok(&table()?.wheels)
}

/// The libraries the self-test checks for wheel `name` (normalised) at `version`, in load
/// order; empty for a wheel the table does not list. The position of the wheel in the table
/// is returned too, so a caller can order several wheels' libraries for loading.
pub fn wheel_libraries(
    name: &str,
    version: &str,
) -> Result<Option<(usize, Vec<WheelLibrary>)>, LibraryTableError> {
    let wheels = cuda_wheels()?;
    let Some((rank, w)) = wheels.iter().enumerate().find(|(_, w)| w.wheel == name) else {
        return Ok(None);
    };
    let mut fields = version.split('.');
    let major = fields.next().unwrap_or(version);
    let minor = fields.next().unwrap_or("0");
    let fill = |s: &str| s.replace("{major}", major).replace("{minor}", minor);
    let libs = w
        .libraries
        .iter()
        .map(|l| WheelLibrary {
            key: l.key.clone(),
            soname: fill(&l.soname),
            dir: w.dir.clone(),
            cuda_major: w.cuda_major,
            call: l.call,
            level: l.level,
            companions: l.companions.iter().map(|c| fill(c)).collect(),
        })
        .collect();
    Ok(Some((rank, libs)))
}

/// The libraries the Debian package `name` at `version` (its upstream release, `11.8.89`;
/// `debian_version` the whole version, for a `+cudaX.Y` suffix) carries on `debian_arch`, as
/// the table's `debs` list them: their directory filled in; `None` when the table has no
/// record of the package, no directory for the architecture, or no CUDA major for it.
pub fn deb_libraries(
    name: &str,
    version: &str,
    debian_version: &str,
    debian_arch: &str,
) -> Result<Option<Vec<WheelLibrary>>, LibraryTableError> {
    let Some(d) = table()?
        .debs
        .iter()
        .find(|d| crate::glob::glob_match(&d.deb, name))
    else {
        return Ok(None);
    };
    let Some(cuda_major) = d.cuda_major.or_else(|| cuda_line(debian_version)) else {
        return Ok(None);
    };
    let (multiarch, target) = match debian_arch {
        "amd64" => ("x86_64-linux-gnu", "x86_64-linux"),
        "arm64" => ("aarch64-linux-gnu", "sbsa-linux"),
        _ => return Ok(None),
    };
    let mut fields = version.split('.');
    let major = fields.next().unwrap_or(version);
    let minor = fields.next().unwrap_or("0");
    let fill = |s: &str| {
        s.replace("{major}", major)
            .replace("{minor}", minor)
            .replace("{multiarch}", multiarch)
            .replace("{target}", target)
    };
    Ok(Some(
        d.libraries
            .iter()
            .map(|l| WheelLibrary {
                key: l.key.clone(),
                soname: fill(&l.soname),
                dir: fill(&d.dir),
                cuda_major,
                call: l.call,
                level: l.level,
                companions: l.companions.iter().map(|c| fill(c)).collect(),
            })
            .collect(),
    ))
}

/// The CUDA major a package version says it was built for (`2.21.5-1+cuda12.4` → 12).
pub fn cuda_line(debian_version: &str) -> Option<u32> {
    let rest = &debian_version[debian_version.rfind("+cuda")? + 5..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_reads_and_names_each_wheel_once() {
        let wheels = cuda_wheels().unwrap();
        let mut names: Vec<&str> = wheels.iter().map(|w| w.wheel.as_str()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a wheel listed twice");
        for w in wheels {
            assert!(
                !w.dir.starts_with('/') && !w.dir.contains(".."),
                "{}",
                w.wheel
            );
            assert!(!w.libraries.is_empty(), "{}", w.wheel);
        }
        let sources = include_str!("../../../../catalog/sources.yaml");
        for s in &table().unwrap().source {
            assert!(sources.contains(&format!("id: {s},")), "unknown source {s}");
        }
    }

    #[test]
    fn a_debian_package_maps_to_its_libraries_in_its_own_directory() {
        let libs = deb_libraries(
            "libcudart11.0",
            "11.8.89",
            "11.8.89~11.8.0-5~deb12u1",
            "amd64",
        )
        .unwrap()
        .unwrap();
        assert_eq!(libs[0].soname, "libcudart.so.11.0");
        assert_eq!(libs[0].dir, "/usr/lib/x86_64-linux-gnu");
        assert_eq!(libs[0].cuda_major, 11);
        let nccl = deb_libraries("libnccl2", "2.21.5", "2.21.5-1+cuda12.4", "amd64")
            .unwrap()
            .unwrap();
        assert_eq!(
            (nccl[0].soname.as_str(), nccl[0].cuda_major),
            ("libnccl.so.2", 12)
        );
        assert_eq!(
            deb_libraries("libnccl2", "2.21.5", "2.21.5-1", "amd64").unwrap(),
            None
        );
        let libs = deb_libraries("cuda-cudart-12-4", "12.4.127", "12.4.127-1", "arm64")
            .unwrap()
            .unwrap();
        assert_eq!(libs[0].soname, "libcudart.so.12");
        assert_eq!(libs[0].dir, "/usr/local/cuda-12.4/targets/sbsa-linux/lib");
        let libs = deb_libraries("cuda-nvrtc-12-4", "12.4.127", "12.4.127-1", "amd64")
            .unwrap()
            .unwrap();
        assert_eq!(libs[0].companions, ["libnvrtc-builtins.so.12.4"]);
        assert_eq!(
            deb_libraries("cuda-nvrtc-dev-12-4", "12.4.127", "12.4.127-1", "amd64").unwrap(),
            None
        );
        assert_eq!(
            deb_libraries(
                "libcufft10",
                "11.1.1",
                "11.1.1+~10.9.0.58~11.8.0-5~deb12u1",
                "amd64"
            )
            .unwrap(),
            None
        );
        assert_eq!(
            deb_libraries("libc6", "2.36", "2.36-9", "amd64").unwrap(),
            None
        );
        for d in &table().unwrap().debs {
            assert!(d.dir.starts_with('/') && !d.dir.contains(".."), "{}", d.deb);
        }
    }

    #[test]
    fn a_wheel_maps_to_its_libraries_in_load_order() {
        let (_, libs) = wheel_libraries("nvidia-cuda-runtime-cu12", "12.4.127")
            .unwrap()
            .unwrap();
        assert_eq!(libs.len(), 1);
        assert_eq!(libs[0].soname, "libcudart.so.12");
        assert_eq!(libs[0].dir, "nvidia/cuda_runtime/lib");
        assert_eq!(libs[0].call, VersionCall::CudaRuntimeGetVersion);
        let (_, cudnn) = wheel_libraries("nvidia-cudnn-cu13", "9.19.0.56")
            .unwrap()
            .unwrap();
        assert_eq!(cudnn[0].soname, "libcudnn.so.9");
        let (_, nvrtc) = wheel_libraries("nvidia-cuda-nvrtc-cu12", "12.4.127")
            .unwrap()
            .unwrap();
        assert_eq!(nvrtc[0].companions, ["libnvrtc-builtins.so.12.4"]);
        let (rank_lt, cublas) = wheel_libraries("nvidia-cublas", "13.1.0.3")
            .unwrap()
            .unwrap();
        assert_eq!(
            cublas.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(),
            ["cublaslt", "cublas"]
        );
        let (rank_jit, _) = wheel_libraries("nvidia-nvjitlink", "13.0.88")
            .unwrap()
            .unwrap();
        let (rank_sp, _) = wheel_libraries("nvidia-cusparse", "12.6.3.3")
            .unwrap()
            .unwrap();
        assert!(rank_jit < rank_sp && rank_jit < rank_lt);
        assert_eq!(wheel_libraries("requests", "2.32.3").unwrap(), None);
    }
}
