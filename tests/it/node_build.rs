//! Issue 38, items 3 and 5, end to end with a fixture driver (seconds): a signed fixture
//! repository offers `nvidia-kernel-dkms`, `nvidia-driver` and `firmware-nvidia-gsp` at two
//! driver versions, the kernel-module source being a tiny module with Debian's `dkms.conf`
//! layout; Debian's real bookworm kernel and headers come from the host's mirror. `gpuimg
//! build` of a host profile pinning one version builds the module in the sandbox and writes the
//! node's two layers. Built again with the same inputs, the module comes from the cache and the
//! image is the same bytes. The driver bumped (and the modules signed with a key made here),
//! only the modules' layer changes; each module then carries a signature naming the
//! certificate, the node holds that certificate at dkms's place, and the labels name the signer.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::apt_repo::{pkg, signed_repo, Pkg};
use crate::common::node::REPOS;
use crate::common::pyindex::sha256_hex;
use crate::common::*;

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The fixture driver `version`: its module source (Debian's layout: `/usr/src/<PACKAGE_NAME>-
/// <version>` with `dkms.conf`), user space and firmware, each an empty package but the source.
fn driver(version: &'static str) -> Vec<Pkg> {
    let deb = leak(format!("{version}-1"));
    let dir = format!("/usr/src/nvidia-current-{version}");
    let source = format!(
        "#include <linux/module.h>\n#include <linux/kernel.h>\n\
         static int __init nv_init(void) {{ pr_info(\"fixture nvidia {version}\\n\"); return 0; }}\n\
         static void __exit nv_exit(void) {{ }}\n\
         module_init(nv_init);\nmodule_exit(nv_exit);\n\
         MODULE_LICENSE(\"GPL\");\nMODULE_VERSION(\"{version}\");\n"
    );
    let conf = format!(
        "PACKAGE_NAME=\"nvidia-current\"\nPACKAGE_VERSION=\"{version}\"\n\
         MAKE[0]=\"make -C /lib/modules/${{kernelver}}/build M=/build ${{parallel_jobs+-j$parallel_jobs}} modules\"\n\
         BUILT_MODULE_NAME[0]=\"nvidia\"\nDEST_MODULE_NAME[0]=\"nvidia-current\"\n\
         BUILD_EXCLUSIVE_CONFIG=\"!CONFIG_PREEMPT_RT\"\n"
    );
    let mut dkms = pkg("nvidia-kernel-dkms", deb);
    dkms.files = vec![
        (
            leak(format!("{dir}/dkms.conf")),
            leak(conf).as_bytes(),
            0o644,
        ),
        (
            leak(format!("{dir}/Makefile")),
            b"obj-m := nvidia.o\n",
            0o644,
        ),
        (
            leak(format!("{dir}/nvidia.c")),
            leak(source).as_bytes(),
            0o644,
        ),
    ];
    let mut packages = vec![dkms, pkg("nvidia-driver", deb)];
    packages.extend(user_space(version, deb));
    packages
}

/// The fixture driver's user space in Debian's layout: each library under
/// `/usr/lib/x86_64-linux-gnu/nvidia/current/` (a shared object with its SONAME, and the
/// SONAME's link), `nvidia-smi` under `/usr/lib/nvidia/current/`, the proprietary module's
/// modprobe configuration under `/etc/nvidia/current/` (reached as `nvidia-<version>`), the
/// `nvidia` alternative's trigger in the form of Debian's (its candidate lines), and the GSP
/// firmware. Debian's own `glx-alternative-nvidia` comes with it.
fn user_space(version: &'static str, deb: &'static str) -> Vec<Pkg> {
    let dir = "/usr/lib/x86_64-linux-gnu/nvidia/current";
    let lib = |package: &'static str, soname: &str| {
        let stem = soname.split(".so").next().unwrap_or(soname);
        let file = leak(format!("{dir}/{stem}.so.{version}"));
        let mut p = pkg(package, deb);
        p.files = vec![(file, shared_object(soname, version), 0o644)];
        p.symlinks = vec![(
            leak(format!("{dir}/{soname}")),
            leak(format!("{stem}.so.{version}")),
        )];
        p.fields = vec![("Depends", leak(format!("nvidia-alternative (= {deb})")))];
        p
    };
    let mut cuda = lib("libcuda1", "libcuda.so.1");
    cuda.symlinks
        .push((leak(format!("{dir}/libcuda.so")), "libcuda.so.1"));
    let mut smi = pkg("nvidia-smi", deb);
    smi.files = vec![("/usr/lib/nvidia/current/nvidia-smi", b"#!/bin/sh\n", 0o755)];
    let mut support = pkg("nvidia-kernel-support", deb);
    support.files = vec![(
        "/etc/nvidia/current/nvidia-modprobe.conf",
        b"install nvidia modprobe -i nvidia-current $CMDLINE_OPTS\n",
        0o644,
    )];
    support.symlinks = vec![(leak(format!("/etc/nvidia/nvidia-{version}")), "current")];
    let trigger = format!(
        "#!/bin/sh\nset -e\nTRIPLETS=\"/ /x86_64-linux-gnu/\"\nadd_slave()\n{{\n\tprefix=\"nvidia--\"\n}}\n\
         if [ \"$1\" = \"triggered\" ]; then\n\tslaves=\"\n\
         \t\t$(add_multiarch_slave /usr/lib \"\" libcuda.so.1 /usr/lib nvidia/current/)\n\
         \t\t$(add_multiarch_slave /usr/lib \"\" libcuda.so /usr/lib nvidia/current/)\n\
         \t\t$(add_multiarch_slave /usr/lib \"\" libnvidia-ml.so.1 /usr/lib nvidia/current/)\n\
         \t\t$(add_multiarch_slave /usr/lib \"\" libnvidia-ptxjitcompiler.so.1 /usr/lib nvidia/current/)\n\
         \t\t$(add_slave /usr/bin/nvidia-smi nvidia-smi /usr/lib/nvidia/current/nvidia-smi)\n\"\n\
         \tkmod_slaves=\"\n\
         \t\t$(add_slave /etc/nvidia/nvidia-modprobe.conf nvidia-modprobe.conf /etc/nvidia/nvidia-{version}/nvidia-modprobe.conf)\n\"\n\
         \tupdate-alternatives --install /usr/lib/nvidia/nvidia nvidia /usr/lib/nvidia/current 535 $slaves $kmod_slaves\nfi\n"
    );
    let mut alternative = pkg("nvidia-alternative", deb);
    alternative.files = vec![
        ("/DEBIAN/postinst", leak(trigger).as_bytes(), 0o755),
        ("/usr/lib/nvidia/current/.keep", b"", 0o644),
    ];
    alternative.fields = vec![("Depends", "glx-alternative-nvidia")];
    let mut gsp = pkg("firmware-nvidia-gsp", deb);
    gsp.files = vec![(
        leak(format!("/lib/firmware/nvidia/{version}/gsp_ga10x.bin")),
        b"fw",
        0o644,
    )];
    vec![
        cuda,
        lib("libnvidia-ptxjitcompiler1", "libnvidia-ptxjitcompiler.so.1"),
        lib("libnvidia-ml1", "libnvidia-ml.so.1"),
        lib("libnvidia-cfg1", "libnvidia-cfg.so.1"),
        smi,
        support,
        alternative,
        gsp,
    ]
}

/// A shared object whose SONAME is `soname`, saying `version`.
fn shared_object(soname: &str, version: &str) -> &'static [u8] {
    require("gcc");
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("lib.c");
    std::fs::write(
        &c,
        format!("const char *fixture_version = \"{version}\";\n"),
    )
    .unwrap();
    let out = dir.path().join("lib.so");
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-O0", "-nostdlib"])
            .arg(format!("-Wl,-soname,{soname}"))
            .arg("-o")
            .arg(&out)
            .arg(&c),
    );
    Box::leak(std::fs::read(&out).unwrap().into_boxed_slice())
}

fn profile(sb: &Sandbox, name: &str, url: &str, host: &str) -> std::path::PathBuf {
    let p = sb.join(format!("{name}.yaml"));
    std::fs::write(
        &p,
        format!(
            "kind: host\nname: node/fixture\n{REPOS}      - {{url: {url}, suite: stable, components: [main], keyring: repo.gpg}}\nhost:\n  gpus: [H100]\n  kernel: \"6.1\"\n  kernel_module: proprietary\n{host}"
        ),
    )
    .unwrap();
    p
}

/// `gpuimg build` of `profile` into `oci:<sandbox>/<out>`: what it said on stderr.
fn build(sb: &Sandbox, profile: &Path, out: &str) -> String {
    let o = run(sb
        .gpuimg()
        .arg("build")
        .arg(profile)
        .arg("-o")
        .arg(format!("oci:{}", sb.join(out).display())));
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    stderr
}

/// The image at `oci:<sandbox>/<out>`: its manifest's sha256 and each layer's component and
/// digest.
fn manifest(sb: &Sandbox, out: &str) -> (String, BTreeMap<String, String>) {
    let raw = run_ok_bytes(
        Command::new("skopeo")
            .args(["inspect", "--raw"])
            .arg(format!("oci:{}:latest", sb.join(out).display())),
    );
    let m: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    let layers = (m["layers"].as_array().unwrap().iter())
        .map(|l| {
            (
                l["annotations"]["io.gpuimg.component"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                l["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (sha256_hex(&raw), layers)
}

#[test]
fn a_node_is_cached_rebuilt_reproducibly_bumped_in_one_layer_and_signed() {
    require("openssl");
    let old = driver("535.900.01");
    let new = driver("535.901.01");
    // NVIDIA's fabric manager of the newer driver, as NVIDIA's repository names it.
    let mut fabric = pkg("nvidia-fabricmanager-535", "535.901.01-1");
    fabric.files = vec![("/usr/bin/nv-fabricmanager", b"#!/bin/sh\n", 0o755)];
    let repo = signed_repo(&[(
        "stable",
        old.iter().chain(new.iter()).chain([&fabric]).collect(),
    )]);
    let sb = Sandbox::new();
    repo.keyring_into(sb.path());

    let a = profile(&sb, "a", &repo.url, "  driver: \"535.900.01\"\n");
    let stderr = build(&sb, &a, "first");
    assert!(stderr.contains("nvidia built and checked"), "{stderr}");
    let first = manifest(&sb, "first");
    for c in ["kernel", "nvidia-driver", "os", "metadata", "files"] {
        assert!(first.1.contains_key(c), "no `{c}` layer: {:?}", first.1);
    }
    let labels = |out: &str| -> serde_json::Value {
        let c = run_ok_bytes(
            Command::new("skopeo")
                .args(["inspect", "--config"])
                .arg(format!("oci:{}:latest", sb.join(out).display())),
        );
        serde_json::from_slice::<serde_json::Value>(&c).unwrap()["config"]["Labels"].clone()
    };
    let l = labels("first");
    assert_eq!(l["org.gpuimg.node.driver"], "535.900.01", "{l}");
    assert_eq!(l["org.gpuimg.node.signer"], "unsigned", "{l}");
    let abi = l["org.gpuimg.node.kernel"].as_str().unwrap().to_string();

    // The same inputs again: the module from the cache, the same image.
    let stderr = build(&sb, &a, "again");
    assert!(stderr.contains("nvidia from the cache"), "{stderr}");
    assert_eq!(manifest(&sb, "again"), first);

    // The driver bumped and the modules signed: the kernel's layer is the same blob.
    let keys = sb.join("keys");
    std::fs::create_dir(&keys).unwrap();
    run_ok(
        Command::new("openssl")
            .args(["req", "-new", "-x509", "-newkey", "rsa:2048", "-nodes"])
            .args(["-days", "3650", "-subj", "/CN=fixture node signing/"])
            .args(["-keyout", "key.pem", "-out", "cert.pem"])
            .current_dir(&keys),
    );
    let b = profile(
        &sb,
        "b",
        &repo.url,
        "  driver: \"535.901.01\"\n  system: hgx-h100-8\n  signing: {key: keys/key.pem, certificate: keys/cert.pem}\n",
    );
    let stderr = build(&sb, &b, "bumped");
    let (d1, d2) = (&first.1, manifest(&sb, "bumped").1);
    // The driver's layers change, and what the package database and alternatives record
    // (`metadata`); nothing else does.
    let changed: Vec<&String> = d1.keys().filter(|c| d1.get(*c) != d2.get(*c)).collect();
    assert_eq!(
        changed,
        ["files", "metadata", "nvidia-driver", "sbom"],
        "{d1:?}\n{d2:?}"
    );
    // Signing gives the same bytes each time (no signing time), and the bump (its unchanged
    // packages replayed from their sketches) gives the same image as a cold build in an empty
    // cache (every package unpacked, the module compiled again).
    let o = run(sb
        .gpuimg_with_cache(&sb.join("cold-cache"))
        .arg("build")
        .arg(&b)
        .arg("-o")
        .arg(format!("oci:{}", sb.join("bumped-cold").display())));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(manifest(&sb, "bumped-cold").1, d2);
    let l = labels("bumped");
    assert_eq!(l["org.gpuimg.node.driver"], "535.901.01", "{l}");
    let signer = l["org.gpuimg.node.signer"].as_str().unwrap();
    assert!(
        signer.starts_with("fixture node signing (serial "),
        "{signer}"
    );
    assert!(
        stderr.contains("signed by fixture node signing"),
        "{stderr}"
    );

    let rootfs = umoci_unpack(&sb.join("bumped"), &sb.join("bundle"));
    // The `nvidia` alternative, as its trigger would register it, then the `glx` one (Debian's
    // own trigger read): the libraries, `nvidia-smi` and the modprobe configuration.
    let link = |p: &str| {
        std::fs::read_link(rootfs.join(p))
            .unwrap()
            .display()
            .to_string()
    };
    assert_eq!(
        link("usr/lib/x86_64-linux-gnu/libcuda.so.1"),
        "/etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu"
    );
    assert_eq!(
        link("etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu"),
        "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1"
    );
    assert_eq!(
        link("usr/bin/nvidia-smi"),
        "/etc/alternatives/nvidia--nvidia-smi"
    );
    assert_eq!(
        link("etc/modprobe.d/nvidia.conf"),
        "/etc/alternatives/glx--nvidia-modprobe.conf"
    );
    // `modprobe nvidia` in the node resolves to the built module (the image's own kmod and
    // configuration, in the unpacked tree).
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
    assert_eq!(
        modprobe("nvidia-current").trim(),
        format!("insmod /lib/modules/{abi}/updates/dkms/nvidia-current.ko")
    );
    // An NVSwitch system: the fabric manager of exactly the driver's version.
    assert!(rootfs.join("usr/bin/nv-fabricmanager").is_file());
    // What the skipped maintainer scripts would do for a booted system: the persistence
    // daemon's user, sshd's, the units enabled, nothing node-specific.
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    for user in ["nvpd:", "sshd:", "systemd-network:"] {
        assert!(
            passwd.lines().any(|l| l.starts_with(user)),
            "no {user} in {passwd}"
        );
    }
    for (unit, want) in [
        (
            "multi-user.target.wants/nvidia-persistenced.service",
            "/lib/systemd/system/nvidia-persistenced.service",
        ),
        (
            "multi-user.target.wants/ssh.service",
            "/lib/systemd/system/ssh.service",
        ),
        ("sshd.service", "/lib/systemd/system/ssh.service"),
        (
            "cloud-init.target.wants/cloud-init.service",
            "/lib/systemd/system/cloud-init.service",
        ),
    ] {
        assert_eq!(link(&format!("etc/systemd/system/{unit}")), want, "{unit}");
    }
    assert_eq!(std::fs::read(rootfs.join("etc/machine-id")).unwrap(), b"");
    let host_keys: Vec<_> = std::fs::read_dir(rootfs.join("etc/ssh"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("ssh_host_"))
        .collect();
    assert!(
        host_keys.is_empty(),
        "SSH host keys in a reproducible image"
    );
    assert!(!rootfs.join("var/lib/systemd/random-seed").exists());
    // The loader finds the driver's libraries through the alternative.
    let cache = run_ok(
        Command::new("chroot")
            .arg(&rootfs)
            .args(["/sbin/ldconfig", "-p"]),
    );
    assert!(
        cache.contains("libcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1"),
        "{cache}"
    );
    let ko = std::fs::read(rootfs.join(format!(
        "usr/lib/modules/{abi}/updates/dkms/nvidia-current.ko"
    )))
    .unwrap();
    let module = gpuimg_kmod::Module::read("nvidia-current.ko", &ko).unwrap();
    assert_eq!(module.modinfo.get("version"), Some("535.901.01"));
    let sig = module.signature.expect("the module is not signed");
    assert_eq!(sig.signer.as_deref(), Some("fixture node signing"));
    assert_eq!(sig.hash, "sha256");
    // The node's expectation, what `gpuimg-selftest --host` holds a booted node to.
    let expect: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rootfs.join("etc/gpuimg/expect.json")).unwrap())
            .unwrap();
    let n = &expect["node"];
    assert_eq!(n["kernel_abi"], abi.as_str(), "{expect}");
    assert_eq!(n["driver"], "535.901.01", "{expect}");
    assert_eq!(n["flavour"], "proprietary", "{expect}");
    assert_eq!(
        n["modules"],
        serde_json::json!(["nvidia-current"]),
        "{expect}"
    );
    assert_eq!(n["signer"]["serial"], sig.key_id.as_str(), "{expect}");
    // The certificate enrolled on the node is the one given, as DER.
    let der = run_ok_bytes(
        Command::new("openssl")
            .args(["x509", "-in", "cert.pem", "-outform", "DER"])
            .current_dir(&keys),
    );
    assert_eq!(
        std::fs::read(rootfs.join("var/lib/dkms/mok.pub")).unwrap(),
        der
    );
    let serial = run_ok(
        Command::new("openssl")
            .args(["x509", "-in", "cert.pem", "-noout", "-serial"])
            .current_dir(&keys),
    );
    let serial = serial.trim().trim_start_matches("serial=").to_lowercase();
    assert!(
        sig.key_id.trim_start_matches('0') == serial.trim_start_matches('0'),
        "{} vs {serial}",
        sig.key_id
    );
    assert!(signer.contains(&sig.key_id), "{signer}");
    // The key never reaches what the signing touched, nor the cache.
    let key = std::fs::read(keys.join("key.pem")).unwrap();
    let needle = &key[40..104];
    let mut touched = walk(&rootfs.join("var"));
    touched.extend(walk(&rootfs.join(format!("usr/lib/modules/{abi}/updates"))));
    // (The downloads are the repositories' bytes, never written from the build.)
    for e in std::fs::read_dir(sb.join("cache")).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if !n.starts_with("debs-") && !n.starts_with("indexes-") && e.path().is_dir() {
            touched.extend(walk(&e.path()));
        }
    }
    for f in touched {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "{} holds the key",
            f.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            out.extend(walk(&p));
        } else if meta.is_file() {
            out.push(p);
        }
    }
    out
}
