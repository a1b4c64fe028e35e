//! The NVIDIA_REQUIRE_* evaluator against the strings NVIDIA's `nvidia/cuda` images carry.
//!
//! Semantics are libnvidia-container's `dsl_evaluate`: OR over spaces, AND over commas.

use std::collections::BTreeMap;

use gpuimg_selftest::{evaluate_require, requirements, Outcome, RequireFacts};

const BRANDS: [&str; 12] = [
    "unknown",
    "grid",
    "tesla",
    "nvidia",
    "quadro",
    "quadrortx",
    "nvidiartx",
    "vapps",
    "vpc",
    "vcs",
    "vws",
    "cloudgaming",
];

/// NVIDIA's CUDA 13.0 image value: `cuda>=13.0` or one of the listed branches per brand.
fn cuda13_require() -> String {
    let mut s = String::from("cuda>=13.0");
    for branch in [535, 550, 565, 570, 575] {
        for brand in BRANDS {
            s.push_str(&format!(
                " brand={brand},driver>={branch},driver<{}",
                branch + 1
            ));
        }
    }
    s
}

fn facts<'a>(cuda: &'a str, driver: &'a str, brand: &'a str) -> RequireFacts<'a> {
    RequireFacts {
        cuda: Some(cuda),
        driver: Some(driver),
        arch: Some("9.0"),
        brand: Some(brand),
    }
}

#[test]
fn real_cuda13_string() {
    let req = cuda13_require();
    assert!(req.starts_with("cuda>=13.0 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536"));
    assert!(req.ends_with("brand=cloudgaming,driver>=575,driver<576"));
    // The H200 host: driver 580 supports CUDA 13.0.
    assert_eq!(
        evaluate_require(&req, &facts("13.0", "580.159.04", "nvidia")),
        Ok(Outcome::Satisfied)
    );
    // A 535 data-centre driver runs it through cuda-compat (forward compatibility).
    assert_eq!(
        evaluate_require(&req, &facts("12.2", "535.183.01", "tesla")),
        Ok(Outcome::Satisfied)
    );
    assert_eq!(
        evaluate_require(&req, &facts("12.2", "535.183.01", "Tesla")),
        Ok(Outcome::Satisfied)
    );
    // A GeForce card on 535 is not covered; neither is branch 560 on any brand.
    assert_eq!(
        evaluate_require(&req, &facts("12.2", "535.183.01", "geforce")),
        Ok(Outcome::Unsatisfied("brand=cloudgaming".into()))
    );
    assert!(matches!(
        evaluate_require(&req, &facts("12.6", "560.35.03", "tesla")),
        Ok(Outcome::Unsatisfied(_))
    ));
}

#[test]
fn versions_compare_numerically() {
    let f = facts("13.0", "570.26", "tesla");
    assert_eq!(evaluate_require("cuda>=13", &f), Ok(Outcome::Satisfied));
    assert_eq!(evaluate_require("cuda=13.0.0", &f), Ok(Outcome::Satisfied));
    assert_eq!(
        evaluate_require("driver<570.124.06", &f),
        Ok(Outcome::Satisfied)
    );
    assert_eq!(
        evaluate_require("cuda>13.0", &f),
        Ok(Outcome::Unsatisfied("cuda>13.0".into()))
    );
    assert_eq!(
        evaluate_require("arch>=8.0,arch<10.0", &f),
        Ok(Outcome::Satisfied)
    );
    assert_eq!(
        evaluate_require("brand!=geforce", &f),
        Ok(Outcome::Satisfied)
    );
    assert_eq!(evaluate_require("  ", &f), Ok(Outcome::Satisfied));
}

#[test]
fn unknown_facts_satisfy_and_bad_expressions_are_errors() {
    let none = RequireFacts::default();
    assert_eq!(
        evaluate_require("cuda>=99.0", &none),
        Ok(Outcome::Satisfied)
    );
    let f = facts("13.0", "580.159.04", "nvidia");
    for bad in [
        "cuda>>12",
        "gpu>=1",
        "brand>=tesla",
        ">=12",
        "cuda>=",
        "cuda>=12a",
        "cuda=>12",
    ] {
        let e = evaluate_require(bad, &f).unwrap_err();
        assert_eq!(e.to_string(), format!("Invalid expression `{bad}`"));
    }
    // Evaluation stops at the first satisfied OR-term, as in libnvidia-container.
    assert_eq!(
        evaluate_require("cuda>=12 bogus", &f),
        Ok(Outcome::Satisfied)
    );
}

#[test]
fn which_variables_apply() {
    let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let baked = env(&[("NVIDIA_REQUIRE_CUDA", "cuda>=12.4")]);
    for t in ["true", "1", "True", "t"] {
        assert_eq!(
            requirements(&env(&[("NVIDIA_DISABLE_REQUIRE", t)]), &baked),
            None,
            "{t}"
        );
    }
    let r = requirements(&env(&[("NVIDIA_DISABLE_REQUIRE", "false")]), &baked).unwrap();
    assert_eq!(
        r.get("NVIDIA_REQUIRE_CUDA").map(String::as_str),
        Some("cuda>=12.4")
    );
    // The environment wins over the expectation's copy; JETPACK is not evaluated.
    let r = requirements(
        &env(&[
            ("NVIDIA_REQUIRE_CUDA", "cuda>=13.0"),
            ("NVIDIA_REQUIRE_JETPACK", "csv-mounts=all"),
            ("NVIDIA_REQUIRE_ARCH", "arch>=9.0"),
        ]),
        &baked,
    )
    .unwrap();
    assert_eq!(
        r,
        env(&[
            ("NVIDIA_REQUIRE_ARCH", "arch>=9.0"),
            ("NVIDIA_REQUIRE_CUDA", "cuda>=13.0")
        ])
    );
    // CUDA_VERSION without NVIDIA_REQUIRE_CUDA gives cuda>=major.minor.
    let r = requirements(&env(&[("CUDA_VERSION", "12.4.1")]), &BTreeMap::new()).unwrap();
    assert_eq!(r, env(&[("NVIDIA_REQUIRE_CUDA", "cuda>=12.4")]));
}
