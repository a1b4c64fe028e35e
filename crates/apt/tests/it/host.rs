//! `base.apt` against the build host's own configured Debian mirror (`mirror: host`): resolve,
//! install into a directory, then run the image's python3 in a chroot, list it with dpkg-query
//! and resolve a library moved out of the default paths through the generated ld.so.cache.
//! Needs root (chroot, chown), network access to the host's mirror, and dpkg-query.

use std::path::Path;
use std::process::Command;

use crate::cmd::run_ok;
use crate::fs::tree;
use gpuimg_apt::{self as apt, AptOptions, DebianArch, Mirror, PackagesSpec};
use gpuimg_fetch::observe::Silent;

/// `packages` from the host's bookworm sources (`mirror: host`), for amd64.
fn spec(packages: &str) -> (PackagesSpec, DebianArch) {
    let spec = PackagesSpec {
        mirror: Mirror::Host,
        suite: "bookworm".to_string(),
        components: vec!["main".to_string()],
        keyring: None,
        trusted: false,
        essential: false,
        packages: packages.split(", ").map(String::from).collect(),
        repositories: Vec::new(),
        system: false,
    };
    (spec, DebianArch::from_oci("amd64"))
}

#[test]
fn host_mirror_python_image() {
    let (spec, arch) = spec("base-files, base-passwd, libc6, python3-minimal, ca-certificates");
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("apt-host-cache");
    let opts = AptOptions::new(&cache);
    let dest = tempfile::tempdir().unwrap();
    let locked = apt::resolve(&spec, &arch, &opts, &mut Silent).unwrap();
    let names: Vec<&str> = locked.iter().map(|p| p.name.as_str()).collect();
    assert!(locked
        .iter()
        .all(|p| p.repository.starts_with("host:bookworm")));
    for want in ["base-files", "libc6", "python3.11-minimal", "zlib1g"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let installed =
        apt::install(&spec, &arch, &opts, Some(&locked), dest.path(), &mut Silent).unwrap();
    assert_eq!(installed.packages, locked);
    let root = dest.path();

    // python3 runs and computes.
    let out =
        run_ok(
            Command::new("chroot")
                .arg(root)
                .args(["/usr/bin/python3", "-c", "print(6*7)"]),
        );
    assert_eq!(out.trim(), "42");

    // dpkg sees exactly the resolved set.
    let out = run_ok(
        Command::new("dpkg-query")
            .arg(format!(
                "--admindir={}",
                root.join("var/lib/dpkg").display()
            ))
            .args(["-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n"]),
    );
    let mut listed: Vec<String> = out.lines().map(|l| l.trim().to_string()).collect();
    listed.sort();
    let mut expected: Vec<String> = locked
        .iter()
        .map(|p| format!("{} {} ii", p.name, p.version))
        .collect();
    expected.sort();
    assert_eq!(listed, expected);

    // dpkg finds nothing to complain about.
    let audit = run_ok(
        Command::new("dpkg")
            .arg(format!(
                "--admindir={}",
                root.join("var/lib/dpkg").display()
            ))
            .arg("--audit"),
    );
    assert_eq!(audit, "");

    // The same lock with an emptied cache gives the same tree.
    let cache2 = tempfile::tempdir().unwrap();
    let dest2 = tempfile::tempdir().unwrap();
    apt::install(
        &spec,
        &arch,
        &AptOptions::new(cache2.path()),
        Some(&locked),
        dest2.path(),
        &mut Silent,
    )
    .unwrap();
    assert_eq!(tree(root), tree(dest2.path()));

    // base-passwd's masters became /etc/passwd; merged-/usr links are in place.
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
    assert!(passwd.starts_with("root:*:0:0:root:/root:"), "{passwd}");
    assert_eq!(
        std::fs::read_link(root.join("bin")).unwrap(),
        Path::new("usr/bin")
    );
    assert!(root.join("etc/ssl/certs/ca-certificates.crt").is_file());

    // Move zlib out of the default paths; python3 links it, so it only starts if the
    // regenerated ld.so.cache points at the new place.
    let multi = root.join("usr/lib/x86_64-linux-gnu");
    let custom = root.join("opt/zlib/lib");
    std::fs::create_dir_all(&custom).unwrap();
    for e in std::fs::read_dir(&multi).unwrap().flatten() {
        let n = e.file_name().into_string().unwrap();
        if n.starts_with("libz.so") {
            std::fs::rename(e.path(), custom.join(&n)).unwrap();
        }
    }
    std::fs::create_dir_all(root.join("etc/ld.so.conf.d")).unwrap();
    std::fs::write(root.join("etc/ld.so.conf.d/zlib.conf"), "/opt/zlib/lib\n").unwrap();
    std::fs::remove_file(root.join("etc/ld.so.cache")).unwrap();
    let fail = Command::new("chroot")
        .arg(root)
        .args(["/usr/bin/python3", "-c", "print(1)"])
        .output()
        .unwrap();
    assert!(
        !fail.status.success(),
        "python3 ran without libz in a known path"
    );
    let confined = gpuimg_store::confined::Root::open(root).unwrap();
    apt::write_ld_cache(&confined, arch.as_str(), &Default::default(), &[]).unwrap();
    let out = run_ok(Command::new("chroot").arg(root).args([
        "/usr/bin/python3",
        "-c",
        "import zlib; print(zlib.crc32(b'gpuimg'))",
    ]));
    assert_eq!(out.trim(), format!("{}", crc32(b"gpuimg")));
    // glibc's own reader of the cache (the host's ldconfig) sees the entry too.
    let out = run_ok(
        Command::new("ldconfig")
            .arg("-C")
            .arg(root.join("etc/ld.so.cache"))
            .arg("-p"),
    );
    assert!(
        out.contains("libz.so.1 (libc6,x86-64) => /opt/zlib/lib/libz.so.1"),
        "{out}"
    );
}

/// Plain CRC-32 (IEEE), to check python's answer independently.
fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A root that boots from the host's bookworm: Debian's own systemd, udev, openssh-server and
/// ifupdown, their postinsts read natively. Their users and groups get fixed ids and pass the
/// shadow suite's own checks (`pwck`, `grpck`); the host's `systemctl --root` (systemd 252, as
/// bookworm's) sees exactly the units their postinsts enable; nothing node-specific is left.
#[test]
fn host_mirror_node_users_and_units() {
    let (mut spec, arch) = spec("base-passwd, base-files, systemd, udev, openssh-server, ifupdown");
    spec.system = true;
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("apt-host-cache");
    let mut opts = AptOptions::new(&cache);
    opts.source_date_epoch = 1_700_000_000;
    let dest = tempfile::tempdir().unwrap();
    let root = dest.path();
    let installed = apt::install(&spec, &arch, &opts, None, root, &mut Silent).unwrap();
    assert!(installed.warnings.is_empty(), "{:?}", installed.warnings);
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
    let group = std::fs::read_to_string(root.join("etc/group")).unwrap();
    // base-passwd's static set, then sysusers.d's (downward from 999: the same ids as
    // systemd-sysusers gives in bookworm), then the postinsts' by package name (upward from
    // 100: ifupdown's netdev, openssh-client's _ssh, openssh-server's sshd, udev's four).
    assert!(
        passwd.ends_with(
            "\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
             systemd-network:x:998:998:systemd Network Management:/:/usr/sbin/nologin\n\
             sshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n"
        ),
        "{passwd}"
    );
    assert!(
        group.ends_with(
            "\nusers:x:100:\nnogroup:x:65534:\nsystemd-journal:x:999:\nsystemd-network:x:998:\n\
             netdev:x:101:\n_ssh:x:102:\ninput:x:103:\nsgx:x:104:\nkvm:x:105:\nrender:x:106:\n"
        ),
        "{group}"
    );
    for (file, cmd) in [("passwd", "pwck"), ("group", "grpck")] {
        let out = Command::new(cmd)
            .args(["-r", "-q", "-R"])
            .arg(root)
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "{cmd} on /etc/{file}: {out:?}"
        );
    }
    let enabled = |unit: &str| {
        let out = Command::new("systemctl")
            .arg(format!("--root={}", root.display()))
            .args(["is-enabled", unit])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    for (unit, want) in [
        ("ssh.service", "enabled"),
        ("sshd.service", "alias"),
        ("ssh.socket", "disabled"),
        ("networking.service", "enabled"),
        ("ifupdown-wait-online.service", "disabled"),
        ("getty@tty1.service", "enabled"),
        ("remote-fs.target", "enabled"),
        ("systemd-pstore.service", "enabled"),
        ("systemd-networkd.service", "disabled"),
    ] {
        assert_eq!(enabled(unit), want, "{unit}");
    }
    assert_eq!(std::fs::read(root.join("etc/machine-id")).unwrap(), b"");
    assert!(!root.join("etc/ssh/ssh_host_ed25519_key").exists());
    assert!(!root.join("var/lib/systemd/random-seed").exists());
}
