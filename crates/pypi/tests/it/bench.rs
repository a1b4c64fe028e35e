//! Benchmark and real-index driver for `scripts/bench-pypi-resolve.sh` (ignored by default;
//! timings are printed, never asserted): resolves `$GPUIMG_BENCH_REQS` (space-separated PEP 508
//! strings) from the index `$GPUIMG_BENCH_INDEX` for the bookworm image (CPython 3.11.2, glibc
//! 2.36, x86_64) with the cache at `$GPUIMG_BENCH_CACHE`, offline when `$GPUIMG_BENCH_OFFLINE`
//! is set; prints one `PIN` line per wheel and a `BENCH` line.

use std::path::PathBuf;
use std::time::Instant;

use gpuimg_fetch::observe::Silent;
use gpuimg_pypi::{self as pypi, ImagePython, PythonRequest};
use gpuimg_store::cache::Cache;

#[test]
#[ignore = "benchmark driver, run by scripts/bench-pypi-resolve.sh"]
fn bench_resolve() {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("set {k}"));
    let cache = Cache::open(&PathBuf::from(var("GPUIMG_BENCH_CACHE"))).unwrap();
    let index = var("GPUIMG_BENCH_INDEX");
    let reqs = var("GPUIMG_BENCH_REQS");
    let reqs: Vec<&str> = reqs.split_whitespace().collect();
    let offline = std::env::var_os("GPUIMG_BENCH_OFFLINE").is_some_and(|v| !v.is_empty());
    let image = ImagePython {
        version: (3, 11),
        full_version: "3.11.2".into(),
        interpreter: "/usr/bin/python3.11".into(),
        site_dir: "/usr/local/lib/python3.11/dist-packages".into(),
        scripts_dir: "/usr/local/bin".into(),
        glibc: (2, 36),
        machine: "x86_64".into(),
    };
    let t = Instant::now();
    let req = PythonRequest::from_parts(&reqs, &[("host", &index)]).unwrap();
    let pins = match pypi::resolve(&req, &image, &cache, &mut Silent, offline) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let secs = t.elapsed().as_secs_f64();
    for p in &pins {
        println!("PIN {}=={} {} {}", p.name, p.version, p.filename, p.size);
    }
    println!(
        "BENCH wheels={} resolve_s={secs:.3} offline={offline}",
        pins.len()
    );
    assert!(!pins.is_empty());
}
