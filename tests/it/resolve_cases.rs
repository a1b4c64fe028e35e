//! Table-driven resolver cases, each resting on one fact of the catalog (its source id in
//! `fact`): compatible and incompatible pairs across GPUs, CUDA, driver, kernel, module flavour,
//! Python and frameworks, and the warnings of minor-version compatibility.

use std::path::Path;

use gpuimg_build::catalog::Catalog;
use gpuimg_build::resolve::{resolve, Component, ResolveError};

enum Expect {
    /// Resolves to these exact components (others may be present).
    Yes(&'static [(&'static str, &'static str)]),
    /// Resolves with this driver range (and kernel range, when given).
    Host(&'static str, Option<&'static str>),
    /// Resolves and warns with text containing this.
    Warn(&'static str),
    /// Resolves with this kernel-module flavour (`open`, `proprietary`, `any`).
    Module(&'static str),
    /// Says "no"; the explanation contains each of these.
    No(&'static [&'static str]),
}
use Expect::*;

struct Case {
    fact: &'static str,
    profile: &'static str,
    expect: Expect,
}

const fn c(fact: &'static str, profile: &'static str, expect: Expect) -> Case {
    Case {
        fact,
        profile,
        expect,
    }
}

const CASES: &[Case] = &[
    // CUDA release ↔ its own driver minimum (compat: strict), Table 3 of the CUDA release notes.
    c("nv-ctk-rn-13.2.2", "compat: strict\nstack: {cuda: '12.4'}", Host(">=550.54.15", None)),
    c("nv-ctk-rn-13.2.2", "compat: strict\nstack: {cuda: '=12.8.0'}", Host(">=570.26", None)),
    c("nv-ctk-rn-13.2.2", "compat: strict\nstack: {cuda: '12.8'}", Host(">=570.124.06", None)),
    c("nv-ctk-rn-13.2.2", "compat: strict\nstack: {cuda: '13.0'}", Host(">=580.95.05", None)),
    c("nv-ctk-rn-13.2.2", "compat: strict\nstack: {cuda: '11.8'}", Host(">=520.61.05", None)),
    c("nv-ctk-rn-13.2.2", "compat: strict\nstack: {cuda: '13.2'}", Host(">=595.71.05", None)),
    c("nv-ctk-rn-13.2.2", "compat: strict\nhost: {driver: '<550.54.15'}\nstack: {cuda: '12.4'}", Yes(&[("cuda", "12.4.0")])),
    c("nv-ctk-rn-13.2.2", "compat: strict\nhost: {driver: '<550.54'}\nstack: {cuda: '12.4'}", No(&["CUDA 12.4.0 needs driver >= 550.54.14", "nv-ctk-rn-13.2.2"])),
    c("nv-ctk-rn-13.2.2", "compat: strict\nstack: {cuda: '=12.3.2'}", No(&["not known", "(unverified)"])),
    // Minor-version compatibility: the family floor, with warnings.
    c("nv-compat-minor", "stack: {cuda: '12.4'}", Host(">=525.60.13", None)),
    c("nv-compat-minor", "stack: {cuda: '12.4'}", Warn("minor-version compatibility")),
    c("nv-compat-minor", "stack: {cuda: '13.0'}", Host(">=580.65.06", None)),
    // The 11.x floor is 450.80.02, but the catalog's branch table starts at R470.
    c("nv-compat-minor", "stack: {cuda: '11.8'}", Host(">=470", None)),
    c("nv-compat-minor", "compat: strict\nstack: {cuda: '=11.0.2'}", Host(">=470", None)),
    c("nv-compat-minor", "host: {driver: '<550'}\nstack: {cuda: '12.8'}", Host(">=525.60.13,<550", None)),
    c("nv-compat-minor", "host: {driver: '<580'}\nstack: {cuda: '13'}", No(&["580.65.06", "nv-compat-minor", "host.driver is `<580`"])),
    c("nv-compat-minor", "stack: {cuda: '=12.3.2'}", Warn("Unverified fact decides part of this answer: CUDA 12.3.2's own driver minimum is not known")),
    // Forward compatibility: long-term branches on data-center GPUs only.
    c("nv-compat-forward", "compat: forward\nhost: {gpus: [H100], driver: '<580'}\nstack: {cuda: '13.0'}", Host(">=535,<536", None)),
    c("nv-compat-forward", "compat: forward\nhost: {gpus: [RTX 4090], driver: '<580'}\nstack: {cuda: '13.0'}", No(&["580.65.06"])),
    c("nv-compat-forward", "compat: forward\nhost: {gpus: [H100]}\nstack: {cuda: '13.0'}", Host(">=535,<536 || >=580.65.06", None)),
    c("nv-compat-forward", "compat: forward\nhost: {gpus: [H100]}\nstack: {cuda: '13.0'}", Warn("forward compatibility (cuda-compat)")),
    // GPU ↔ CUDA: compute capabilities each release can target.
    c("llvm-clang-cuda", "host: {gpus: [B200]}\nstack: {cuda: '12.4'}", No(&["B200 is sm_100", "cannot target B200"])),
    c("llvm-clang-cuda", "host: {gpus: [B200]}\nstack: {cuda: '12.8'}", Yes(&[("cuda", "12.8.1")])),
    c("llvm-clang-cuda", "host: {gpus: [B300]}\nstack: {cuda: '12.8'}", No(&["sm_103"])),
    c("llvm-clang-cuda", "host: {gpus: [B300]}\nstack: {cuda: '12.9'}", Yes(&[("cuda", "12.9.1")])),
    c("nv-dc-arch-matrix", "host: {gpus: [K80]}\nstack: {cuda: '12'}", No(&["K80 is sm_37"])),
    c("nv-dc-arch-matrix", "host: {gpus: [K80]}\nstack: {cuda: '11'}", Yes(&[("cuda", "11.8.0")])),
    c("nv-forum-current-releases", "compat: strict\nhost: {gpus: [K80]}\nstack: {cuda: '11'}", Yes(&[("cuda", "11.4.4")])),
    c("nv-forum-current-releases", "host: {gpus: [K80]}\nstack: {cuda: '11'}", Host(">=470,<471", None)),
    c("nv-dc-arch-matrix", "host: {gpus: [V100]}\nstack: {cuda: '13'}", No(&["V100 is sm_70", "cannot target V100"])),
    c("nv-dc-arch-matrix", "host: {gpus: [V100]}\nstack: {cuda: '12'}", Host(">=525.60.13,<581", None)),
    c("nv-dc-arch-matrix", "host: {gpus: [P100]}\nstack: {cuda: '12.9'}", Yes(&[("cuda", "12.9.1")])),
    c("llvm-clang-cuda", "platform: linux/arm64\nhost: {gpus: [GB10]}\nstack: {cuda: '12.8'}", No(&["sm_121"])),
    c("llvm-clang-cuda", "platform: linux/arm64\nhost: {gpus: [GB10]}\nstack: {cuda: '12.9'}", Yes(&[("cuda", "12.9.1")])),
    c("nv-curanddx-rn", "host: {gpus: ['10.1']}\nstack: {cuda: '13.0'}", No(&["sm_101 is supported from CUDA 12.8 to 12.9"])),
    c("nv-curanddx-rn", "host: {gpus: ['10.1']}\nstack: {cuda: '12.9'}", Yes(&[("cuda", "12.9.1")])),
    c("nv-curanddx-rn", "host: {gpus: ['11.0']}\nstack: {cuda: '12.9'}", No(&["sm_110"])),
    c("nv-curanddx-rn", "host: {gpus: ['11.0']}\nstack: {cuda: '13.0'}", Yes(&[("cuda", "13.0.2")])),
    c("nv-forum-crovella", "host: {gpus: [H100]}\nstack: {cuda: '11.8'}", Yes(&[("cuda", "11.8.0")])),
    c("nv-forum-crovella", "host: {gpus: [H100]}\nstack: {cuda: '11.7'}", No(&["CUDA 11.7.1 compiles for sm_35..sm_87", "H100 is sm_90"])),
    c("nv-forum-crovella", "host: {gpus: [A10]}\nstack: {cuda: '11.0'}", No(&["CUDA 11.0.3 compiles for sm_35..sm_80", "A10 is sm_86"])),
    c("nv-forum-crovella", "host: {gpus: [A10]}\nstack: {cuda: '11.1'}", Yes(&[("cuda", "11.1.1")])),
    // Driver branches ↔ GPUs.
    c("nv-kmittman-590", "host: {gpus: [V100], driver: '>=590'}", No(&["V100's last driver branch is R580"])),
    c("nv-kmittman-590", "host: {gpus: [T4], driver: '>=590'}\nstack: {cuda: '13'}", Yes(&[("cuda", "13.5.0")])),
    c("driver-dmesg-580-legacy", "host: {gpus: [P100], driver: '595'}", No(&["R580"])),
    c("driver-dmesg-580-legacy", "host: {gpus: ['6.1'], driver: '>=590'}", No(&["drive only compute capability >= 7.5"])),
    c("nv-gpuop-b200", "host: {gpus: [B200]}\nstack: {cuda: '12.8'}", Host(">=570.133.20", None)),
    c("nv-gpuop-b200", "host: {gpus: [B200], driver: '<570.133'}\nstack: {cuda: '12.8'}", No(&["B200 needs driver >= 570.133.20"])),
    // Kernel-module flavours.
    c("nv-gpuop-gh200", "platform: linux/arm64\nhost: {gpus: [GH200], kernel_module: proprietary}\nstack: {cuda: '12.4'}", No(&["GH200 is driven by the open kernel module only"])),
    c("nv-cuda-legacy-gpus", "host: {gpus: [V100], kernel_module: open}", No(&["V100 is driven by the proprietary kernel module only"])),
    c("nv-blog-open-modules", "host: {gpus: [V100, B200]}", No(&["no kernel-module flavour drives every listed GPU"])),
    c("nv-ogkm", "host: {gpus: [H200], kernel_module: open}\nstack: {cuda: '12.4'}", Host(">=550.40.65", None)),
    c("nv-ogkm", "host: {gpus: [H200]}\nstack: {cuda: '12.4'}", Host(">=525.60.13", None)),
    // A GPU whose first driver no source gives is never "any driver": strict admits only the
    // releases known to drive it, minor and forward say it is unknown when the answer reaches below.
    c("nv-ogkm", "host: {gpus: [H200], driver: '<535'}\nstack: {cuda: '12.4'}", Warn("Unverified fact decides part of this answer: H200's first driver is not known; the first release known to drive it is 550.40.65, the first open kernel module that lists it")),
    c("nv-ogkm", "host: {gpus: [H200], driver: '<535'}\nstack: {cuda: '12.4'}", Module("proprietary")),
    c("nv-ogkm", "host: {gpus: [H200]}\nstack: {cuda: '12.4'}", Module("any")),
    c("nv-ogkm", "compat: forward\nhost: {gpus: [H200], driver: '<535'}\nstack: {cuda: '12.4'}", Warn("H200's first driver is not known")),
    c("nv-ogkm", "compat: strict\nhost: {gpus: [H200], driver: '<535'}\nstack: {cuda: '12.4'}", No(&["H200's first driver is not known; the first release known to drive it is 550.40.65", "compat is strict", "host.driver is `<535`"])),
    c("nv-ogkm", "compat: strict\nhost: {gpus: [H200], driver: '<535'}", No(&["H200's first driver is not known", "(unverified)"])),
    c("nv-ogkm", "compat: strict\nhost: {gpus: [H200]}\nstack: {cuda: '12.4'}", Host(">=550.54.15", None)),
    c("nv-ogkm", "compat: strict\nhost: {gpus: [L40S]}\nstack: {cuda: '12.0'}", Host(">=535.43.09", None)),
    c("nv-dc-arch-matrix", "compat: strict\nhost: {gpus: [V100]}\nstack: {cuda: '12'}", Host(">=580,<581", None)),
    c("nv-dc-arch-matrix", "host: {gpus: [V100]}\nstack: {cuda: '12'}", Warn("V100's first driver is not known; the first release known to drive it is R580, its last branch")),
    c("nv-cuda-gpus", "compat: strict\nplatform: linux/arm64\nhost: {gpus: [GB10]}\nstack: {cuda: '12.9'}", No(&["GB10's first driver is not known", "compat: strict cannot be met on GB10"])),
    c("nv-cuda-gpus", "platform: linux/arm64\nhost: {gpus: [GB10]}\nstack: {cuda: '12.9'}", Warn("GB10's first driver is not known [nv-cuda-gpus] (unverified)")),
    // Grace superchips come only in arm64 hosts (issue 37): an amd64 image (the default) is a no.
    c("nv-gh200", "host: {gpus: [GH200]}\nstack: {cuda: '12.4'}", No(&["GH200 comes only in arm64 hosts [nv-gh200]", "platform is `linux/amd64` [profile]", "so GH200 cannot run an image for linux/amd64"])),
    c("nv-gh200", "platform: linux/arm64\nhost: {gpus: [GH200]}\nstack: {cuda: '12.4'}", Yes(&[("cuda", "12.4.1")])),
    c("nv-gb200", "platform: linux/amd64\nhost: {gpus: [H100, GB200]}", No(&["GB200 comes only in arm64 hosts [nv-gb200]", "so GB200 cannot run an image for linux/amd64"])),
    c("nv-gb200", "platform: linux/arm64\nhost: {gpus: [H100, GB200]}", Module("open")),
    c("nv-gb300", "host: {gpus: [GB300]}\nstack: {pytorch: '2.15'}", No(&["GB300 comes only in arm64 hosts [nv-gb300]"])),
    c("nv-dgx-spark", "host: {gpus: [DGX Spark]}", No(&["GB10 comes only in arm64 hosts [nv-dgx-spark]"])),
    c("nv-dgx-spark", "platform: linux/arm64\nhost: {gpus: [DGX Spark]}", Module("any")),
    // Minimum kernel per branch (open-gpu-kernel-modules README).
    c("nv-ogkm", "host: {gpus: [H200], kernel: '<4'}\nstack: {cuda: '12.4'}", Host(">=525.60.13,<555", Some(">=3.10,<4"))),
    c("nv-ogkm", "host: {gpus: [H200], kernel: '<4'}\nstack: {cuda: '13.0'}", No(&["need Linux >= 4.15", "host.kernel is `<4`"])),
    c("nv-ogkm", "host: {kernel: '>=6'}\nstack: {cuda: '13.0'}", Host(">=580.65.06", Some(">=6"))),
    c("nv-ogkm", "host: {gpus: [H100]}\nstack: {cuda: '12.4'}", Host(">=525.60.13", Some(">=3.10"))),
    // PyTorch wheels: compiled compute capabilities, Python versions, pins.
    c("pt-release-md", "host: {gpus: [V100]}\nstack: {pytorch: '2.11'}", Yes(&[("pytorch", "2.11.0"), ("cuda", "12.6.3")])),
    c("wheel-inspection", "host: {gpus: [V100]}\nstack: {pytorch: '=2.15.0'}", No(&["V100 is sm_70", "cannot run on V100"])),
    c("pt-pr-164471", "host: {gpus: [P100]}\nstack: {pytorch: '2.9'}", Yes(&[("pytorch", "2.9.1"), ("cuda", "12.6.3")])),
    // The variant the package index serves by default comes first (2.0.1's is cu117, 2.14.1's
    // cu130 although cu132 exists): a plain `torch==X` installs that one.
    c("wheel-inspection", "host: {gpus: [K80]}\nstack: {pytorch: '2.0'}", Yes(&[("pytorch", "2.0.1"), ("cuda", "11.7.1")])),
    c("pypi", "host: {gpus: [H100]}\nstack: {pytorch: '2.14'}", Yes(&[("pytorch", "2.14.1"), ("cuda", "13.0.2")])),
    c("pypi", "host: {gpus: [H100]}\nstack: {pytorch: '2.14', cuda: '13.2'}", Yes(&[("pytorch", "2.14.1"), ("cuda", "13.2.2")])),
    c("wheel-inspection", "host: {gpus: [K80]}\nstack: {pytorch: '2.1'}", No(&["K80 is sm_37"])),
    c("nv-cuda-binary-compat", "host: {gpus: [L4]}\nstack: {pytorch: '2.11'}", Yes(&[("pytorch", "2.11.0"), ("cuda", "13.0.2")])),
    c("nv-cuda-binary-compat", "platform: linux/arm64\nhost: {gpus: [GB10]}\nstack: {pytorch: '2.11'}", Yes(&[("pytorch", "2.11.0")])),
    c("llvm-clang-cuda", "host: {gpus: [B300]}\nstack: {pytorch: '2.7'}", No(&["B300"])),
    c("pypi", "stack: {python: '3.8', pytorch: '2.6'}", No(&["pytorch 2.6.0 has wheels for Python 3.9"])),
    c("pypi", "stack: {python: '3.8', pytorch: '*'}", Yes(&[("pytorch", "2.4.1"), ("python", "3.8")])),
    c("pypi", "stack: {python: '3.9', pytorch: '*'}", Yes(&[("pytorch", "2.8.0")])),
    c("pypi", "host: {gpus: [H100]}\nstack: {python: '3.14', pytorch: '*'}", Yes(&[("pytorch", "2.15.0")])),
    c("pypi", "stack: {pytorch: '2.5'}", Yes(&[("pytorch", "2.5.1"), ("cuda", "12.4.1"), ("cudnn", "9.1.0.70"), ("nccl", "2.21.5"), ("python", "3.13")])),
    c("pypi", "stack: {pytorch: '2.5', cudnn: '8'}", No(&["pins cuDNN 9.1.0.70", "stack.cudnn is `8`"])),
    c("pt-release-md", "stack: {pytorch: '2.5', cuda: '12.1'}", Yes(&[("cuda", "12.1.1")])),
    c("pt-release-md", "stack: {pytorch: '2.5', cuda: '12.6'}", No(&["is built for CUDA 12.4", "stack.cuda is `12.6`"])),
    // TensorFlow.
    c("pypi", "stack: {tensorflow: '2.15'}", Yes(&[("cuda", "12.2.2"), ("cudnn", "8.9.4.25"), ("nccl", "2.16.5"), ("python", "3.11")])),
    c("tf-source-md", "stack: {tensorflow: '2.14', python: '3.12'}", No(&["tensorflow 2.14.0 has wheels for Python 3.9, 3.10, 3.11"])),
    c("tf-source-md", "host: {gpus: [B200]}\nstack: {tensorflow: '2.14'}", No(&["cannot target B200"])),
    // JAX.
    c("jax-install-md", "host: {gpus: [P100]}\nstack: {jax: '0.6'}", Yes(&[("jax", "0.6.2")])),
    c("jax-install-md", "host: {gpus: [P100]}\nstack: {jax: '0.10'}", Yes(&[("jax", "0.10.2"), ("cuda", "12.9.1")])),
    c("jax-install-md", "host: {gpus: [K80]}\nstack: {jax: '0.10'}", No(&["needs compute capability >= 5.2"])),
    c("jax-install-md", "host: {driver: '<580'}\nstack: {jax: '0.10'}", Yes(&[("cuda", "12.9.1")])),
    // cuDNN support matrix.
    c("cudnn-matrix-9.10.2", "host: {gpus: ['12.0']}\nstack: {cuda: '12.8', cudnn: '9.10'}", Host(">=570.26", None)),
    c("cudnn-matrix-9.5.1", "host: {gpus: [B200]}\nstack: {cuda: '12.8', cudnn: '9.5'}", No(&["cuDNN 9.5.1 has no build for CUDA 12.8"])),
    c("cudnn-matrix-9.17.0", "host: {gpus: [V100]}\nstack: {cuda: '12', cudnn: '9.17.0'}", No(&["cannot run on V100"])),
    c("cudnn-matrix-8.9.5", "stack: {cuda: '12.4', cudnn: '8.9.5'}", No(&["cuDNN 8.9.5 has no build for CUDA 12.4"])),
    c("cudnn-matrix-8.9.5", "stack: {cuda: '12.2', cudnn: '8.9.5'}", Yes(&[("cudnn", "8.9.5"), ("cuda", "12.2.2")])),
    // NCCL wheels.
    c("pypi", "stack: {cuda: '13', nccl: '2.21'}", No(&["NCCL 2.21.5 is built for CUDA 11, 12"])),
    c("nccl-blackwell-secondary", "host: {gpus: [B200]}\nstack: {cuda: '12.8', nccl: '2.21.5'}", No(&["supports compute capability up to 9.0", "(unverified)"])),
    // A profile without stack/host keys is a plain image.
    c("gpuimg-h200-measured", "platform: linux/amd64", Yes(&[])),
];

fn run(case: &Case, catalog: &Catalog) -> Result<(), String> {
    let text = format!("name: t\n{}\n", case.profile);
    let profile = gpuimg_build::profile::parse(&text, "case.yaml", Path::new("."), &|_| None)
        .map_err(|e| e.to_string())?;
    let got = resolve(&profile, catalog);
    match (&case.expect, got) {
        (Yes(want), Ok(r)) => {
            for (comp, v) in *want {
                let comp: Component = comp.parse().map_err(|e: String| e)?;
                let have = r.version(comp).map(|x| x.to_string());
                if have.as_deref() != Some(*v) {
                    return Err(format!(
                        "{comp}: want {v}, got {have:?} (all: {:?})",
                        r.components
                    ));
                }
            }
            if want.is_empty() && !r.is_empty() {
                return Err(format!("want an empty resolution, got {r:?}"));
            }
            Ok(())
        }
        (Host(d, k), Ok(r)) => {
            if r.host.driver.to_string() != *d {
                return Err(format!("driver: want {d}, got {}", r.host.driver));
            }
            if let Some(k) = k {
                if r.host.kernel.to_string() != *k {
                    return Err(format!("kernel: want {k}, got {}", r.host.kernel));
                }
            }
            Ok(())
        }
        (Module(m), Ok(r)) => {
            let have = format!("{:?}", r.host.kernel_module).to_lowercase();
            match have == *m {
                true => Ok(()),
                false => Err(format!("kernel module: want {m}, got {have}")),
            }
        }
        (Warn(w), Ok(r)) => match r.warnings.iter().any(|x| x.contains(w)) {
            true => Ok(()),
            false => Err(format!("no warning containing {w:?}: {:?}", r.warnings)),
        },
        (No(parts), Err(ResolveError::Incompatible(e))) => {
            let text = e.to_string();
            match parts.iter().find(|p| !text.contains(*p)) {
                None => Ok(()),
                Some(p) => Err(format!("explanation lacks {p:?}:\n{text}")),
            }
        }
        (No(_), Ok(r)) => Err(format!(
            "want no, got {:?} driver {}",
            r.components, r.host.driver
        )),
        (_, Err(e)) => Err(format!("want yes, got: {e}")),
    }
}

#[test]
fn table_of_facts() {
    let catalog = Catalog::embedded().unwrap();
    assert!(CASES.len() >= 60, "{} cases", CASES.len());
    let mut failures = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        assert!(
            catalog.source(case.fact).is_some(),
            "case {i} cites unknown source {}",
            case.fact
        );
        if let Err(e) = run(case, &catalog) {
            failures.push(format!(
                "case {i} [{}] `{}`: {e}",
                case.fact,
                case.profile.replace('\n', " ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

/// Issue 34, item 2: a hint is printed only when following it works. Every hint every "no"
/// case prints is applied to that case's profile, exactly as printed, and the profile must then
/// resolve.
#[test]
fn every_hint_the_cases_print_works_when_followed() {
    let catalog = Catalog::embedded().unwrap();
    let mut followed = 0;
    let mut failures = Vec::new();
    for case in CASES.iter().filter(|c| matches!(c.expect, No(_))) {
        let text = format!("name: t\n{}\n", case.profile);
        let profile = gpuimg_build::profile::parse(&text, "case.yaml", Path::new("."), &|_| None)
            .unwrap_or_else(|e| panic!("{}: {e}", case.profile));
        let Err(ResolveError::Incompatible(e)) = resolve(&profile, &catalog) else {
            continue;
        };
        for hint in &e.suggestions {
            let mut p = profile.clone();
            follow(&mut p, hint);
            followed += 1;
            if let Err(err) = resolve(&p, &catalog) {
                failures.push(format!(
                    "`{}` hint `{hint}`: {err}",
                    case.profile.replace('\n', " ")
                ));
            }
        }
    }
    assert!(followed >= 20, "only {followed} hints followed");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Apply a printed hint (`` `KEY: VALUE` would work ``, ``leaving `GPU` out of host.gpus``)
/// to `p`; a hint of another shape fails the test, so each new kind is followed here too.
fn follow(p: &mut gpuimg_build::profile::Profile, hint: &str) {
    use gpuimg_build::profile::{CompatMode, KernelModule, Located};
    if let Some(rest) = hint.strip_prefix("leaving `") {
        let gpu = rest.split('`').next().unwrap_or_default();
        let gpu = gpu.strip_prefix("compute capability ").unwrap_or(gpu);
        let before = p.host.gpus.len();
        p.host.gpus.retain(|g| g.value != gpu);
        assert_eq!(
            p.host.gpus.len() + 1,
            before,
            "hint `{hint}` names no listed GPU"
        );
        return;
    }
    let stated = hint
        .strip_prefix('`')
        .and_then(|h| h.split_once('`'))
        .map(|(s, _)| s)
        .unwrap_or_else(|| panic!("a hint this test cannot follow: `{hint}`"));
    let (key, value) = stated
        .split_once(": ")
        .unwrap_or_else(|| panic!("a hint this test cannot follow: `{hint}`"));
    let value = value.trim_matches('"').to_string();
    let set = Some(Located::synthetic(value.clone()));
    match key {
        "compat" => {
            p.compat = match value.as_str() {
                "strict" => CompatMode::Strict,
                "minor" => CompatMode::Minor,
                "forward" => CompatMode::Forward,
                v => panic!("hint `{hint}`: compat `{v}`"),
            }
        }
        "host.driver" => p.host.driver = set,
        "host.kernel" => p.host.kernel = set,
        "host.kernel_module" => {
            assert_eq!(value, "any", "{hint}");
            p.host.kernel_module = KernelModule::Any;
        }
        "stack.cuda" => p.stack.cuda = set,
        "stack.cudnn" => p.stack.cudnn = set,
        "stack.nccl" => p.stack.nccl = set,
        "stack.python" => p.stack.python = set,
        "stack.pytorch" => p.stack.pytorch = set,
        "stack.tensorflow" => p.stack.tensorflow = set,
        "stack.jax" => p.stack.jax = set,
        "platform" => {
            let (os, arch) = value
                .split_once('/')
                .unwrap_or_else(|| panic!("hint `{hint}`: platform `{value}`"));
            p.platform.os = os.to_string();
            p.platform.architecture = arch.to_string();
            p.platform.variant = None;
        }
        k => panic!("hint `{hint}` sets `{k}`, which this test cannot follow"),
    }
}
