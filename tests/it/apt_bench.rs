//! Benchmark driver for `scripts/bench-apt.sh` (ignored by default; timings are printed, never
//! asserted): the `Essential: yes` set of the host's bookworm mirror, resolved and installed
//! into `$GPUIMG_BENCH_DEST` with the cache at `$GPUIMG_BENCH_CACHE`.

use std::path::PathBuf;
use std::time::Instant;

use gpuimg_apt::{self as apt, AptOptions};
use gpuimg_build::plan::source_specs;
use gpuimg_build::profile::{self, Base};
use gpuimg_fetch::observe::Silent;

#[test]
#[ignore = "benchmark driver, run by scripts/bench-apt.sh"]
fn bench_essential_install() {
    let var = |k: &str| PathBuf::from(std::env::var(k).unwrap_or_else(|_| panic!("set {k}")));
    let (cache, dest) = (var("GPUIMG_BENCH_CACHE"), var("GPUIMG_BENCH_DEST"));
    let yaml =
        "name: bench\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    essential: true\n";
    let p = profile::parse(yaml, "bench.yaml", std::path::Path::new("."), &|_| None).unwrap();
    let Base::Apt(spec) = p.base else {
        panic!("no apt base")
    };
    let (spec, arch) = (
        source_specs::apt_packages(&spec, std::path::Path::new(".")),
        source_specs::architecture(&p.platform),
    );
    let opts = AptOptions::new(&cache);
    std::fs::create_dir_all(&dest).unwrap();
    let t = Instant::now();
    let locked = apt::resolve(&spec, &arch.debian(), &opts, &mut Silent).unwrap();
    let resolve_s = t.elapsed().as_secs_f64();
    let installed = apt::install(
        &spec,
        &arch.debian(),
        &opts,
        Some(&locked),
        &dest,
        &mut Silent,
    )
    .unwrap();
    let total_s = t.elapsed().as_secs_f64();
    let bytes: u64 = locked.iter().map(|p| p.size).sum();
    println!(
        "BENCH packages={} deb_bytes={} resolve_s={resolve_s:.3} total_s={total_s:.3}",
        locked.len(),
        bytes
    );
    for p in &installed.packages {
        println!("PKG {} {}", p.name, p.version);
    }
    assert!(!installed.packages.is_empty());
}
