//! Tests of the one-provider rule and the driver-library refusal.

use std::collections::BTreeMap;

use super::*;

const SITE: &str = "usr/local/lib/python3.11/dist-packages";

fn wheel(name: &str, path: &str, soname: &str) -> Library {
    Library {
        path: format!("{SITE}/{path}"),
        soname: soname.into(),
        provider: Provider::Wheel(name.into()),
    }
}

fn deb(name: &str, path: &str, soname: &str) -> Library {
    Library {
        path: path.into(),
        soname: soname.into(),
        provider: Provider::Deb(name.into()),
    }
}

#[test]
fn the_table_parses() {
    assert!(!table().driver.is_empty());
    assert!(is_driver_library("usr/lib/x86_64-linux-gnu/libcuda.so.1"));
    assert!(is_driver_library(
        "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05"
    ));
    assert!(!is_driver_library(
        "usr/lib/x86_64-linux-gnu/libcudart.so.12"
    ));
    assert!(!is_driver_library("usr/local/cuda/lib64/stubs/libcuda.so"));
}

#[test]
fn one_soname_from_two_providers_is_refused_naming_both() {
    let libs = vec![
        deb(
            "libcudart12",
            "usr/lib/x86_64-linux-gnu/libcudart.so.12",
            "libcudart.so.12",
        ),
        wheel(
            "nvidia-cuda-runtime-cu12",
            "nvidia/cuda_runtime/lib/libcudart.so.12",
            "libcudart.so.12",
        ),
    ];
    let e = check_providers(&libs, &BTreeMap::new()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("`libcudart.so.12` is provided twice"),
        "{text}"
    );
    assert!(text.contains("package `libcudart12`"), "{text}");
    assert!(text.contains("wheel `nvidia-cuda-runtime-cu12`"), "{text}");
    // A pick keeps the chosen copy only.
    let picks = BTreeMap::from([(
        "libcudart.so.12".to_string(),
        "nvidia-cuda-runtime-cu12".to_string(),
    )]);
    let kept = check_providers(&libs, &picks).unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        kept[0].provider,
        Provider::Wheel("nvidia-cuda-runtime-cu12".into())
    );
    // A pick of something that does not provide it names what does.
    let bad = BTreeMap::from([("libcudart.so.12".to_string(), "libfoo".to_string())]);
    let e = check_providers(&libs, &bad).unwrap_err().to_string();
    assert!(
        e.contains("package `libcudart12` and wheel `nvidia-cuda-runtime-cu12`"),
        "{e}"
    );
}

#[test]
fn the_same_provider_twice_and_private_copies_pass() {
    let libs = vec![
        wheel(
            "nvidia-cublas",
            "nvidia/cu13/lib/libcublas.so.13",
            "libcublas.so.13",
        ),
        wheel(
            "nvidia-cublas",
            "nvidia/cu13/lib64/libcublas.so.13",
            "libcublas.so.13",
        ),
        wheel(
            "nvidia-cuda-cupti",
            "nvidia/cu13/lib/libcupti.so.13",
            "libcupti.so.13",
        ),
        wheel(
            "triton",
            "triton/backends/nvidia/lib/cupti/libcupti.so.13",
            "libcupti.so.13",
        ),
        wheel("torch", "torch/lib/libgomp.so.1", "libgomp.so.1"),
        deb(
            "libgomp1",
            "usr/lib/x86_64-linux-gnu/libgomp.so.1",
            "libgomp.so.1",
        ),
    ];
    let kept = check_providers(&libs, &BTreeMap::new()).unwrap();
    let paths: Vec<&str> = kept.iter().map(|l| l.path.as_str()).collect();
    assert_eq!(paths.len(), 4, "{paths:?}");
    assert!(!paths
        .iter()
        .any(|p| p.contains("triton") || p.contains("torch")));
    // Directories for ld.so.conf.d: the wheels' with public copies only.
    let wheels: Vec<Library> = libs
        .iter()
        .filter(|l| matches!(l.provider, Provider::Wheel(_)))
        .cloned()
        .collect();
    let found: Vec<&Library> = kept
        .iter()
        .copied()
        .filter(|l| matches!(l.provider, Provider::Wheel(_)))
        .collect();
    assert_eq!(
        loader_directories(&wheels, &found),
        vec![
            format!("{SITE}/nvidia/cu13/lib"),
            format!("{SITE}/nvidia/cu13/lib64")
        ]
    );
}

#[test]
fn driver_libraries_are_refused_but_forward_compat_with_forward() {
    let cuda1 = Provider::Deb("libcuda1".into());
    let e = check_driver_files([("usr/lib/x86_64-linux-gnu/libcuda.so.1", &cuda1)], false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("package `libcuda1`"), "{e}");
    assert!(e.contains("803"), "{e}");
    let compat = Provider::Deb("cuda-compat-12-4".into());
    let path = "usr/local/cuda-12.4/compat/libcuda.so.550.54.15";
    assert!(check_driver_files([(path, &compat)], true).is_ok());
    let e = check_driver_files([(path, &compat)], false).unwrap_err();
    assert!(
        matches!(e, LibraryError::CompatWithoutForward { .. }),
        "{e}"
    );
    // cuda-compat's libcuda outside its directory is the driver's library like any other.
    let e = check_driver_files([("usr/lib/libcuda.so.1", &compat)], true).unwrap_err();
    assert!(matches!(e, LibraryError::DriverLibrary { .. }), "{e}");
}
