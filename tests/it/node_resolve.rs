//! Issue 38, item 1: a host profile (`kind: host`) resolves kernel × NVIDIA driver × module
//! flavour × GPUs against what its apt repositories offer (Debian bookworm from the build host's
//! mirror, with `contrib`, `non-free` and `non-free-firmware`, and `bookworm-security` through
//! `url: host`), fact by fact: the open module's source is older in -security than the
//! proprietary one, and the whole driver follows its module (user space and GSP firmware at the
//! module's exact version); a pre-Turing GPU gets the proprietary module; the open module on
//! V100, a Blackwell GPU on Debian's branch, a kernel ABI the repositories lack and a real-time
//! kernel (refused by the module source's own `dkms.conf`) are "no"s citing their sources, and so
//! is a kernel × module source the catalog knows not to compile; a host profile for arm64 or
//! with container keys is refused in one line.
//! The versions compared are read from the indexes, never written here.

use std::process::Command;

use crate::common::node::{resolved_build_root, REPOS};
use crate::common::*;

fn resolve(sb: &Sandbox, name: &str, host: &str) -> (Option<i32>, serde_json::Value) {
    let p = sb.join(format!("{name}.yaml"));
    std::fs::write(
        &p,
        format!("kind: host\nname: node/{name}\n{REPOS}host:\n{host}"),
    )
    .unwrap();
    let out = run(sb.gpuimg().args(["resolve", "--json"]).arg(&p));
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{name}: no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

/// The newest Debian version of `package` the private apt (the same host sources, with the
/// same components) offers, read independently of gpuimg.
fn apt_candidate(sb: &Sandbox, package: &str) -> String {
    let dir = sb.join("apt");
    let sources = sb.join("sources");
    std::fs::create_dir_all(&sources).unwrap();
    if !sources.join("debian.sources").exists() {
        // The host's own entries for bookworm and bookworm-security, with every component.
        let host = std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources").unwrap();
        let text: String = host
            .lines()
            .map(|l| {
                if l.starts_with("Components:") {
                    "Components: main contrib non-free non-free-firmware".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(sources.join("debian.sources"), text + "\n").unwrap();
        run_ok(Command::new("bash").arg("-c").arg(format!(
            ". {}/scripts/private-apt.sh; private_apt {} amd64 -- {}; apt-get \"${{apt_opts[@]}}\" -qq update",
            env!("CARGO_MANIFEST_DIR"),
            dir.display(),
            sources.display()
        )));
    }
    let out = run_ok(Command::new("bash").arg("-c").arg(format!(
        ". {}/scripts/private-apt.sh; private_apt {} amd64 -- {}; apt-cache \"${{apt_opts[@]}}\" policy {package}",
        env!("CARGO_MANIFEST_DIR"),
        dir.display(),
        sources.display()
    )));
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Candidate: "))
        .unwrap_or_else(|| panic!("no candidate for {package}: {out}"))
        .to_string()
}

#[test]
fn a_host_profile_resolves_kernel_driver_and_flavour_from_the_repositories() {
    let sb = Sandbox::new();
    // The open module's source: the whole driver at its version, whatever -security has newer.
    let open_src = apt_candidate(&sb, "nvidia-open-kernel-dkms");
    let proprietary_src = apt_candidate(&sb, "nvidia-kernel-dkms");
    let (code, v) = resolve(&sb, "open", "  gpus: [H100]\n  kernel_module: open\n");
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["node"]["flavour"], "open");
    assert_eq!(v["node"]["source_version"], open_src.as_str(), "{v}");
    let (code, v) = resolve(
        &sb,
        "proprietary",
        "  gpus: [H100]\n  kernel_module: proprietary\n",
    );
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["node"]["source_version"], proprietary_src.as_str(), "{v}");
    // V100 with `any`: the proprietary module (the only one that drives it).
    let (code, v) = resolve(&sb, "v100", "  gpus: [V100]\n");
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["node"]["flavour"], "proprietary");
    // A kernel version pin: the newest 6.1 cloud kernel, whose image and headers exist.
    let (code, v) = resolve(&sb, "k61", "  gpus: [H100]\n  kernel: \"6.1\"\n");
    assert_eq!(code, Some(0), "{v}");
    let abi = v["node"]["kernel_abi"].as_str().unwrap();
    assert!(
        abi.starts_with("6.1.0-") && abi.ends_with("-cloud-amd64"),
        "{v}"
    );
    assert_eq!(
        v["node"]["kernel_version"],
        apt_candidate(&sb, &format!("linux-image-{abi}")).as_str()
    );
}

#[test]
fn a_host_profile_that_cannot_be_built_is_a_no_citing_the_facts() {
    let sb = Sandbox::new();
    let fact = |v: &serde_json::Value| {
        v["reasons"][0]["facts"][0]["fact"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let (code, v) = resolve(&sb, "v100open", "  gpus: [V100]\n  kernel_module: open\n");
    assert_eq!(code, Some(1), "{v}");
    assert!(
        fact(&v).contains("V100 is driven by the proprietary module only"),
        "{v}"
    );
    let (code, v) = resolve(&sb, "b200", "  gpus: [B200]\n");
    assert_eq!(code, Some(1), "{v}");
    let facts = v["reasons"].to_string();
    assert!(facts.contains("B200 needs driver 570"), "{v}");
    assert!(
        facts.contains("B200 is driven by the open module only"),
        "{v}"
    );
    let (code, v) = resolve(
        &sb,
        "abi",
        "  gpus: [H100]\n  kernel: \"6.1.0-999-cloud-amd64\"\n",
    );
    assert_eq!(code, Some(1), "{v}");
    assert!(
        v["reasons"].to_string().contains("no such `linux-image-"),
        "{v}"
    );
    // A real-time kernel: the module source's own dkms.conf refuses it.
    apt_candidate(&sb, "linux-image-rt-amd64");
    let rt = run_ok(Command::new("bash").arg("-c").arg(format!(
        ". {}/scripts/private-apt.sh; private_apt {} amd64 -- {}; apt-cache \"${{apt_opts[@]}}\" pkgnames linux-image- | grep -E '^linux-image-[0-9].*-rt-amd64$' | sort -V | tail -1",
        env!("CARGO_MANIFEST_DIR"),
        sb.join("apt").display(),
        sb.join("sources").display()
    )));
    let rt = rt.trim().trim_start_matches("linux-image-");
    let (code, v) = resolve(&sb, "rt", &format!("  gpus: [H100]\n  kernel: \"{rt}\"\n"));
    assert_eq!(code, Some(1), "{v}");
    let facts = v["reasons"].to_string();
    assert!(
        facts.contains("is a real-time kernel")
            && facts.contains("BUILD_EXCLUSIVE_CONFIG")
            && facts.contains("dkms.conf"),
        "{v}"
    );
    // An HGX H100 8-GPU board (NVSwitch): Debian has no fabric manager, a "no" naming it.
    let (code, v) = resolve(
        &sb,
        "hgx",
        "  gpus: [H100]\n  system: HGX H100 8-GPU\n  kernel_module: proprietary\n",
    );
    assert_eq!(code, Some(1), "{v}");
    let facts = v["reasons"].to_string();
    assert!(
        facts.contains("nvidia-fabricmanager-535")
            && facts.contains("NVSwitch")
            && facts.contains("nv-fm-guide"),
        "{v}"
    );
    let (code, v) = resolve(&sb, "branch", "  gpus: [H100]\n  driver: \"550\"\n");
    assert_eq!(code, Some(1), "{v}");
    assert!(
        v["reasons"].to_string().contains("`host.driver` is `550`"),
        "{v}"
    );

    // Locking a node is not there yet: one line saying so, exit 2, nothing written.
    let (code, _) = resolve(&sb, "open", "  gpus: [H100]\n");
    assert_eq!(code, Some(0));
    let p = sb.join("open.yaml");
    for args in [&["lock"][..], &["build", "--locked"][..]] {
        let out = run(sb.gpuimg().args(args).arg(&p).current_dir(sb.path()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("not supported yet"), "{stderr}");
    }
    assert!(!sb.join("open.lock.json").exists() && !sb.join("out").exists());

    // Refused in one line, exit 2: a host profile for arm64, or one with container keys.
    for (name, text, says) in [
        (
            "arm",
            format!("kind: host\nname: node/arm\nplatform: linux/arm64\n{REPOS}"),
            "amd64 node only",
        ),
        (
            "py",
            format!("kind: host\nname: node/py\n{REPOS}python: {{packages: []}}\n"),
            "`python:` belongs to a container profile",
        ),
    ] {
        let p = sb.join(format!("{name}.yaml"));
        std::fs::write(&p, text).unwrap();
        let out = run(sb.gpuimg().arg("resolve").arg(&p));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says) && stderr.contains(":1:"), "{stderr}");
    }
}

/// Issue 38, item 1's "sourced known failures": Debian's open 535.261.03 source does not compile
/// against bookworm-security's newest 6.1 cloud kernel (its `pci_resize_resource` takes a fourth
/// argument), so pinning that kernel with the open module is a "no" at resolve time citing the
/// catalog's sources, not a compile failure minutes into a build; with `kernel_module: any` the
/// node gets the proprietary module on that newest kernel, and says why.
#[test]
fn a_known_module_build_failure_is_a_no_at_resolve_time_and_any_gives_way() {
    let sb = Sandbox::new();
    let (code, v) = resolve(&sb, "any", "  gpus: [H100]\n  kernel: \"6.1\"\n");
    assert_eq!(code, Some(0), "{v}");
    let newest = v["node"]["kernel_abi"].as_str().unwrap().to_string();
    assert_eq!(
        v["node"]["kernel_version"],
        apt_candidate(&sb, &format!("linux-image-{newest}")).as_str()
    );
    assert_eq!(v["node"]["flavour"], "proprietary", "{v}");
    let passed = v["node"]["passed_over"].to_string();
    assert!(
        passed.contains("`kernel_module: any`: the proprietary module builds for")
            && passed.contains("does not compile")
            && passed.contains("gpuimg-node-build-measured"),
        "{v}"
    );
    let (code, v) = resolve(
        &sb,
        "open",
        &format!("  gpus: [H100]\n  kernel: \"{newest}\"\n  kernel_module: open\n"),
    );
    assert_eq!(code, Some(1), "{v}");
    let facts = v["reasons"][0]["facts"].to_string();
    for says in [
        "`nvidia-open-kernel-dkms` 535.261.03 does not compile against Linux",
        "pci_resize_resource",
        "gpuimg-node-build-measured",
        "nv-ogkm-1272",
        "flatcar-4205",
        newest.as_str(),
    ] {
        assert!(facts.contains(says), "{says}: {v}");
    }
}

/// Issue 38, item 2's input: the build root of the resolved node, installed as data from the
/// same repositories: the compiler, `make`, the headers of exactly the resolved kernel and the
/// module source at exactly the resolved version, with its `dkms.conf`; no maintainer script
/// ran (dkms built nothing: no `.ko` anywhere).
#[test]
fn the_build_root_holds_the_resolved_kernels_headers_and_module_source() {
    let sb = Sandbox::new();
    let (node, root) = resolved_build_root(
        &sb,
        "root",
        "  gpus: [H100]\n  kernel: \"6.1\"\n  kernel_module: open\n",
    );
    let headers = root.join(format!("usr/src/linux-headers-{}", node.kernel_abi));
    assert!(headers.join("Makefile").is_file(), "{}", headers.display());
    assert!(headers.join("Module.symvers").is_file());
    for tool in ["usr/bin/make", "usr/bin/gcc", "usr/bin/sh", "usr/bin/kmod"] {
        assert!(root.join(tool).exists(), "{tool}");
    }
    let src = std::fs::read_dir(root.join("usr/src"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|d| d.join("dkms.conf").is_file())
        .expect("the module source with its dkms.conf");
    let conf = std::fs::read_to_string(src.join("dkms.conf")).unwrap();
    assert!(
        conf.contains(&format!("PACKAGE_VERSION=\"{}\"", node.driver)),
        "{conf}"
    );
    let ko = walk(&root)
        .into_iter()
        .find(|f| f.extension().is_some_and(|e| e == "ko"));
    assert!(ko.is_none(), "a module was built: {ko:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Issue 38, items 3 to 5, end to end: `gpuimg build` of a host profile builds Debian's
/// proprietary NVIDIA module (535.309.01 from bookworm-security; the open 535.261.03 source does
/// not compile against the newest 6.1 kernel) in the sandbox for bookworm's newest 6.1 cloud
/// kernel, checks it against that kernel, and writes the node's layer: the kernel at
/// `/boot/vmlinuz-<abi>` and `/usr/lib/modules/<abi>/vmlinuz`, the modules under dkms's names in
/// `updates/dkms/` (each an x86-64 ELF whose `vermagic` names the kernel), `modules.dep` listing
/// them (those two in a layer of their own), and labels naming the kernel, driver, flavour and
/// source.
#[test]
fn a_host_profile_builds_the_node_kernel_and_its_nvidia_module() {
    let sb = Sandbox::new();
    let p = sb.join("node.yaml");
    std::fs::write(
        &p,
        format!("kind: host\nname: node/h100\n{REPOS}host:\n  gpus: [H100]\n  kernel: \"6.1\"\n  kernel_module: proprietary\n"),
    )
    .unwrap();
    let (_, resolved) = resolve(
        &sb,
        "node",
        "  gpus: [H100]\n  kernel: \"6.1\"\n  kernel_module: proprietary\n",
    );
    let abi = resolved["node"]["kernel_abi"].as_str().unwrap().to_string();
    let driver = resolved["node"]["driver"].as_str().unwrap().to_string();
    let out = sb.join("out");
    let built: serde_json::Value = serde_json::from_slice(&run_ok_bytes(
        sb.gpuimg()
            .args(["build", "--json"])
            .arg(&p)
            .arg("-o")
            .arg(format!("oci:{}", out.display())),
    ))
    .unwrap();
    // The kernel and the driver's user space in their component layers, the built modules in
    // `files` (a driver bump rewrites the driver's layers only: `node_build.rs`).
    let components: Vec<&str> = (built["layers"].as_array().unwrap().iter())
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    for c in [
        "os",
        "kernel",
        "nvidia-driver",
        "packages",
        "metadata",
        "files",
    ] {
        assert!(components.contains(&c), "no `{c}` layer: {built}");
    }
    let config = run_ok_bytes(
        Command::new("skopeo")
            .args(["inspect", "--config"])
            .arg(format!("oci:{}:latest", out.display())),
    );
    let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["org.gpuimg.node.kernel"], abi.as_str(), "{labels}");
    assert_eq!(
        labels["org.gpuimg.node.driver"],
        driver.as_str(),
        "{labels}"
    );
    assert_eq!(labels["org.gpuimg.node.module-flavour"], "proprietary");
    let bundle = sb.join("bundle");
    let rootfs = umoci_unpack(&out, &bundle);
    let m = rootfs.join(format!("usr/lib/modules/{abi}"));
    assert_eq!(
        std::fs::read(m.join("vmlinuz")).unwrap(),
        std::fs::read(rootfs.join(format!("boot/vmlinuz-{abi}"))).unwrap()
    );
    let dep = std::fs::read_to_string(m.join("modules.dep")).unwrap();
    for name in [
        "nvidia-current",
        "nvidia-current-modeset",
        "nvidia-current-drm",
        "nvidia-current-uvm",
    ] {
        let ko = m.join(format!("updates/dkms/{name}.ko"));
        let bytes = std::fs::read(&ko).unwrap_or_else(|e| panic!("{}: {e}", ko.display()));
        let module = gpuimg_kmod::Module::read(name, &bytes).unwrap();
        if name == "nvidia-current" {
            assert_eq!(module.modinfo.get("version"), Some(driver.as_str()));
        }
        assert!(
            module
                .vermagic()
                .is_some_and(|v| v.starts_with(&format!("{abi} "))),
            "{name}"
        );
        assert!(
            dep.contains(&format!("updates/dkms/{name}.ko:")),
            "{name} not in modules.dep"
        );
    }
    // Debian's `nvidia` and `glx` alternatives, as their triggers would register them: `modprobe
    // nvidia` in the node (its own kmod and configuration) loads the built module, and the
    // loader finds the driver's libraries at the module's version.
    let modprobe = |name: &str| {
        run_ok(Command::new("chroot").arg(&rootfs).args([
            "/sbin/modprobe",
            "--show-depends",
            "-S",
            &abi,
            name,
        ]))
    };
    assert_eq!(
        modprobe("nvidia").trim(),
        "install modprobe -i nvidia-current $CMDLINE_OPTS"
    );
    assert!(modprobe("nvidia-current").contains(&format!(
        "insmod /lib/modules/{abi}/updates/dkms/nvidia-current.ko"
    )),);
    let cache = run_ok(
        Command::new("chroot")
            .arg(&rootfs)
            .args(["/sbin/ldconfig", "-p"]),
    );
    for soname in [
        "libcuda.so.1",
        "libnvidia-ml.so.1",
        "libnvidia-ptxjitcompiler.so.1",
    ] {
        assert!(
            cache.contains(soname),
            "{soname} not in ld.so.cache: {cache}"
        );
    }
    let libcuda =
        std::fs::canonicalize(rootfs.join("usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1"))
            .unwrap();
    assert!(
        libcuda.ends_with(format!("libcuda.so.{driver}")),
        "{}",
        libcuda.display()
    );
    assert_eq!(
        std::fs::read_link(rootfs.join("usr/lib/x86_64-linux-gnu/libcuda.so.1")).unwrap(),
        std::path::Path::new("/etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu")
    );
    assert!(rootfs
        .join(format!("usr/lib/firmware/nvidia/{driver}"))
        .is_dir());
    // Built again: the module from the cache, every layer the same (a replayed install).
    let again = sb.join("again");
    let rebuilt: serde_json::Value = serde_json::from_slice(&run_ok_bytes(
        sb.gpuimg()
            .args(["build", "--json"])
            .arg(&p)
            .arg("-o")
            .arg(format!("oci:{}", again.display())),
    ))
    .unwrap();
    assert_eq!(rebuilt["manifest_digest"], built["manifest_digest"]);
}

/// Issue 39, item 4: a container profile takes its host facts from a host profile
/// (`host: {from: node.yaml}`): the node's exact driver, flavour, kernel and GPUs become its
/// expectation, and its stack is resolved against that driver (R535 runs CUDA 12 at most: CUDA
/// 13 is a "no" saying so). `host.from` beside the container's own host facts is refused.
#[test]
fn a_container_takes_its_host_facts_from_the_node() {
    let sb = Sandbox::new();
    let (code, node) = resolve(
        &sb,
        "node",
        "  gpus: [H100]\n  kernel: \"6.1\"\n  kernel_module: proprietary\n",
    );
    assert_eq!(code, Some(0), "{node}");
    let driver = node["node"]["driver"].as_str().unwrap().to_string();
    let container = |name: &str, rest: &str| {
        let p = sb.join(format!("{name}.yaml"));
        std::fs::write(
            &p,
            format!("name: app/{name}\nbase:\n  apt:\n    mirror: host\n    suite: bookworm\n    packages: [libc6]\n{rest}"),
        )
        .unwrap();
        let out = run(sb.gpuimg().args(["resolve", "--json"]).arg(&p));
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        (
            out.status.code(),
            v,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, v, err) = container("cuda12", "host: {from: node.yaml}\nstack: {cuda: \"12\"}\n");
    assert_eq!(code, Some(0), "{v} {err}");
    assert!(
        v.to_string().contains(&format!("={driver}")),
        "the node's driver is not the container's: {v}"
    );
    let (code, v, err) = container("cuda13", "host: {from: node.yaml}\nstack: {cuda: \"13\"}\n");
    assert_eq!(code, Some(1), "{v} {err}");
    let reasons = v["reasons"].to_string();
    assert!(reasons.contains(&format!("={driver}")), "{v}");
    assert!(reasons.contains("CUDA 13"), "{v}");
    // One truth: the container's own host facts beside `from` are refused, naming the key.
    let (code, _, err) = container(
        "both",
        "host: {from: node.yaml, gpus: [H100]}\nstack: {cuda: \"12\"}\n",
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("host.from") && err.contains("host.gpus"),
        "{err}"
    );
}
