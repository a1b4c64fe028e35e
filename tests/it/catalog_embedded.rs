//! The embedded catalog loads and holds together: references resolve, no duplicate versions,
//! versions parse; overlays add and replace records; broken overlays fail with the file named.

use gpuimg_build::catalog::{Catalog, CatalogError, DriverFloor};

#[test]
fn embedded_catalog_is_valid() {
    let c = Catalog::embedded().expect("embedded catalog must load and validate");
    assert!(c.gpus.len() >= 15, "{} GPUs", c.gpus.len());
    assert!(c.cuda.len() >= 50, "{} CUDA releases", c.cuda.len());
    assert!(c.pytorch.len() >= 14);
    assert!(
        !c.tensorflow.is_empty() && !c.jax.is_empty() && !c.cudnn.is_empty() && !c.nccl.is_empty()
    );
    // Newest first, no duplicates.
    for w in c.cuda.windows(2) {
        assert!(
            w[0].version > w[1].version,
            "{} then {}",
            w[0].version,
            w[1].version
        );
    }
    for w in c.pytorch.windows(2) {
        assert!(w[0].version > w[1].version);
    }
    for w in c.drivers.windows(2) {
        assert!(w[0].branch < w[1].branch);
    }
}

#[test]
fn known_facts_are_encoded() {
    let c = Catalog::embedded().unwrap();
    // nv-ctk-rn-13.2.2: CUDA 12.4.1 needs >= 550.54.15; 12.8.0 needs >= 570.26.
    let t = c
        .cuda
        .iter()
        .find(|t| t.version.to_string() == "12.4.1")
        .unwrap();
    assert_eq!(t.driver.as_ref().unwrap().to_string(), "550.54.15");
    let t = c
        .cuda
        .iter()
        .find(|t| t.version.to_string() == "12.8.0")
        .unwrap();
    assert_eq!(t.driver.as_ref().unwrap().to_string(), "570.26");
    // nv-cuda-legacy-gpus: V100 is 7.0; aliases resolve case-insensitively.
    assert_eq!(c.gpu("tesla v100").unwrap().cc.to_string(), "7.0");
    assert_eq!(c.gpu("h100-sxm5-80gb").unwrap().name, "H100");
    // Unverified facts stay marked (compat-facts: 12.3.2 driver unknown, A10G cc inferred).
    let t = c
        .cuda
        .iter()
        .find(|t| t.version.to_string() == "12.3.2")
        .unwrap();
    assert!(t.driver.is_none() && t.unverified.contains(&"driver".to_string()));
    assert!(c
        .gpu("A10G")
        .unwrap()
        .unverified
        .contains(&"cc".to_string()));
    // Every source cited exists.
    assert!(c.source("nv-compat-minor").is_some());
}

#[test]
fn closest_gpu_name_is_suggested() {
    let c = Catalog::embedded().unwrap();
    assert!(c.gpu("H1000").is_none());
    assert_eq!(c.closest_gpu("H1000"), Some("H100"));
    assert_eq!(c.closest_gpu("A100x"), Some("A100"));
}

#[test]
fn overlay_adds_and_replaces_records() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("site.yaml");
    std::fs::write(
        &p,
        "sources:\n- {id: site, url: 'https://example.invalid/notes'}\n\
         gpus:\n- {name: H100, cc: '9.0', arch: hopper, datacenter: true, modules: [open], min_driver: unknown, source: [site]}\n\
         - {name: Site GPU, cc: '9.0', arch: hopper, datacenter: true, modules: [open], min_driver: '560', source: [site]}\n",
    )
    .unwrap();
    let c = Catalog::load_exactly(&[p]).unwrap();
    assert_eq!(
        c.gpu("H100").unwrap().modules.len(),
        1,
        "overlay replaced H100"
    );
    assert!(c.gpu("site gpu").is_some(), "overlay added a GPU");
}

#[test]
fn broken_overlays_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.yaml");
    std::fs::write(&p, "gpus:\n- {name: X, cc: 'nine', arch: a, datacenter: true, modules: [open], source: [nv-cuda-gpus]}\n").unwrap();
    let e = Catalog::load_exactly(std::slice::from_ref(&p)).unwrap_err();
    assert!(matches!(e, CatalogError::Parse { .. }), "{e}");
    assert!(e.to_string().contains("bad.yaml"), "{e}");

    std::fs::write(&p, "gpus:\n- {name: X, cc: '9.0', arch: a, datacenter: true, modules: [open], source: [nowhere]}\n").unwrap();
    let e = Catalog::load_exactly(&[p]).unwrap_err().to_string();
    assert!(e.contains("unknown source `nowhere`"), "{e}");
}

/// A GPU's first driver is a version or `unknown`, said so; a record with neither would read as
/// "any driver drives it" and is refused, the file and the GPU named.
#[test]
fn an_overlay_gpu_must_state_its_first_driver() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("site.yaml");
    std::fs::write(&p, "gpus:\n- {name: X, cc: '9.0', arch: hopper, datacenter: true, modules: [open], source: [nv-cuda-gpus]}\n").unwrap();
    let e = Catalog::load_exactly(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("GPU X states no `min_driver` (its first driver, or `unknown`)"),
        "{e}"
    );

    std::fs::write(&p, "gpus:\n- {name: X, cc: '9.0', arch: hopper, datacenter: true, modules: [open], min_driver: soon, source: [nv-cuda-gpus]}\n").unwrap();
    let e = Catalog::load_exactly(std::slice::from_ref(&p)).unwrap_err();
    assert!(matches!(e, CatalogError::Parse { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("`min_driver` is a version or `unknown`"),
        "{e}"
    );

    std::fs::write(&p, "gpus:\n- {name: X, cc: '9.0', arch: hopper, datacenter: true, modules: [open], min_driver: unknown, source: [nv-cuda-gpus]}\n").unwrap();
    let c = Catalog::load_exactly(&[p]).expect("`unknown` is a stated first driver");
    assert_eq!(
        c.gpu("X").and_then(|g| g.min_driver.clone()),
        Some(DriverFloor::Unknown)
    );
}

/// Issue 37, item 4: the Grace superchips state their hosts' CPU, each with its own source;
/// an overlay may state one for its GPU, and one naming an unknown architecture is refused.
#[test]
fn grace_gpus_state_an_arm64_cpu_and_overlays_may_too() {
    let c = Catalog::embedded().unwrap();
    for (gpu, source) in [
        ("GH200", "nv-gh200"),
        ("GB200", "nv-gb200"),
        ("GB300", "nv-gb300"),
        ("DGX Spark", "nv-dgx-spark"),
    ] {
        let cpu = c.gpu(gpu).and_then(|g| g.cpu.clone());
        let cpu = cpu.unwrap_or_else(|| panic!("{gpu} states no cpu"));
        assert_eq!(
            (cpu.arch.as_str(), cpu.source.as_slice()),
            ("arm64", &[source.to_string()][..])
        );
        assert!(c.source(source).is_some(), "{source}");
    }
    assert!(c.gpu("H100").unwrap().cpu.is_none());

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("site.yaml");
    std::fs::write(
        &p,
        "sources:\n- {id: site, url: 'https://example.invalid/notes'}\n\
         gpus:\n- {name: Site SoC, cc: '9.0', arch: hopper, datacenter: true, modules: [open], min_driver: unknown, cpu: {arch: arm64, source: [site]}, source: [site]}\n",
    )
    .unwrap();
    let c = Catalog::load_exactly(std::slice::from_ref(&p)).unwrap();
    assert_eq!(
        c.gpu("site soc")
            .and_then(|g| g.cpu.clone())
            .map(|c| c.arch),
        Some("arm64".into())
    );
    std::fs::write(
        &p,
        "gpus:\n- {name: X, cc: '9.0', arch: hopper, datacenter: true, modules: [open], min_driver: unknown, cpu: {arch: aarch64, source: [nv-gh200]}, source: [nv-cuda-gpus]}\n",
    )
    .unwrap();
    let e = Catalog::load_exactly(&[p]).unwrap_err().to_string();
    assert!(
        e.contains("GPU X: `cpu.arch: aarch64` is not one of amd64, arm64"),
        "{e}"
    );
}
