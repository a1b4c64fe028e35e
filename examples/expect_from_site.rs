//! Writes a format 2 expectation for the NVIDIA wheels installed in a site-packages directory
//! (their `*.dist-info/METADATA` names and versions, mapped through the catalog's CUDA library
//! table exactly as `gpuimg build` maps an image's locked wheels), so the self-test's library
//! checks can run against a host's own Python environment, e.g. a GPU host's torch install:
//! `cargo run --release --example expect_from_site -- SITE_DIR [--device-code sm_80,sm_90
//! --device-code-source TEXT] [--level full] > expect.json`

use std::path::Path;
use std::process::ExitCode;

use gpuimg_expect::{DeviceCode, Expectation, SelftestLevel};

/// `(normalised name, version)` of every distribution installed in `site`, sorted.
fn installed(site: &Path) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for entry in fs_err::read_dir(site).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let dir = entry.file_name().to_string_lossy().into_owned();
        if !dir.ends_with(".dist-info") {
            continue;
        }
        let Ok(meta) = fs_err::read_to_string(entry.path().join("METADATA")) else {
            continue;
        };
        let field = |k: &str| {
            meta.lines()
                .take_while(|l| !l.is_empty())
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.trim().to_string())
        };
        if let (Some(name), Some(version)) = (field("Name:"), field("Version:")) {
            let name = name.to_ascii_lowercase().replace(['_', '.'], "-");
            out.push((name, version));
        }
    }
    out.sort();
    Ok(out)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(site) = args.first() else {
        eprintln!("usage: expect_from_site SITE_DIR [--device-code T,T --device-code-source TEXT] [--level full]");
        return ExitCode::from(2);
    };
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let wheels = match installed(Path::new(site)) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {site}: {e}");
            return ExitCode::from(2);
        }
    };
    let site_abs = fs_err::canonicalize(site)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| site.clone());
    let pairs = wheels.iter().map(|(n, v)| (n.as_str(), v.as_str()));
    let libraries = match gpuimg_build::plan::wheel_library_expectations(&site_abs, pairs) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(3);
        }
    };
    let device_code = match value("--device-code") {
        None => None,
        Some(list) => {
            let targets: Result<Vec<_>, _> = list
                .split([',', ' '])
                .filter(|t| !t.is_empty())
                .map(str::parse)
                .collect();
            match targets {
                Ok(targets) => Some(DeviceCode {
                    targets,
                    source: value("--device-code-source")
                        .cloned()
                        .unwrap_or_else(|| "given on the command line".into()),
                    ptx_bytes: None,
                }),
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            }
        }
    };
    let e = Expectation {
        image: Some(format!("site-packages {site_abs}")),
        libraries,
        device_code,
        level: match value("--level").map(String::as_str) {
            Some("full") => SelftestLevel::Full,
            _ => SelftestLevel::Quick,
        },
        ..Expectation::default()
    };
    if let Err(err) = e.validate() {
        eprintln!("error: {err}");
        return ExitCode::from(3);
    }
    print!("{}", e.to_json());
    ExitCode::SUCCESS
}
