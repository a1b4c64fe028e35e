//! A root that boots (`PackagesSpec::system`) from a fixture repository whose packages carry
//! Debian's own postinst lines, unit files, sysusers.d and preset files (bookworm's systemd,
//! udev, openssh-server, ifupdown, nvidia-persistenced, shortened): users and groups with
//! fixed ids, the exact unit links and deb-systemd-helper's state, machine-id and hostname
//! empty, no host keys or seeds; the same bytes from an install replayed from sketches; and
//! `system: false` leaving all of it out.

use std::path::{Path, PathBuf};

use crate::apt_repo::{pkg, signed_repo, Pkg, SignedRepo};
use crate::fixture::Record;
use crate::fs::{read, tree};
use gpuimg_apt::{self as apt, AptOptions, DebianArch, Mirror, PackagesSpec};

const PASSWD_MASTER: &str = "root:*:0:0:root:/root:/bin/bash\ndaemon:*:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n_apt:*:42:65534::/nonexistent:/usr/sbin/nologin\nnobody:*:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
const GROUP_MASTER: &str = "root:*:0:\nadm:*:4:\nshadow:*:42:\nusers:*:100:\nnogroup:*:65534:\n";

/// dh_installsystemd's block (debhelper 13.11.4) for `unit`.
fn dh_enable(unit: &str) -> String {
    format!(
        "# Automatically added by dh_installsystemd/13.11.4\nif [ \"$1\" = \"configure\" ] || [ \"$1\" = \"abort-upgrade\" ] || [ \"$1\" = \"abort-deconfigure\" ] || [ \"$1\" = \"abort-remove\" ] ; then\n\t# The following line should be removed in trixie or trixie+1\n\tdeb-systemd-helper unmask '{unit}' >/dev/null || true\n\n\t# was-enabled defaults to true, so new installations run enable.\n\tif deb-systemd-helper --quiet was-enabled '{unit}'; then\n\t\t# Enables the unit on first installation, creates new\n\t\t# symlinks on upgrades if the unit file has changed.\n\t\tdeb-systemd-helper enable '{unit}' >/dev/null || true\n\telse\n\t\t# Update the statefile to add new symlinks (if any), which need to be\n\t\t# cleaned up on purge. Also remove old symlinks.\n\t\tdeb-systemd-helper update-state '{unit}' >/dev/null || true\n\tfi\nfi\n# End automatically added section\n"
    )
}

/// dh_installsystemd's block for a `--no-enable` unit.
fn dh_no_enable(unit: &str) -> String {
    format!(
        "if [ \"$1\" = \"configure\" ] || [ \"$1\" = \"abort-upgrade\" ] || [ \"$1\" = \"abort-deconfigure\" ] || [ \"$1\" = \"abort-remove\" ] ; then\n\tif deb-systemd-helper debian-installed '{unit}'; then\n\t\t# The following line should be removed in trixie or trixie+1\n\t\tdeb-systemd-helper unmask '{unit}' >/dev/null || true\n\n\t\tif deb-systemd-helper --quiet was-enabled '{unit}'; then\n\t\t\t# Create new symlinks, if any.\n\t\t\tdeb-systemd-helper enable '{unit}' >/dev/null || true\n\t\tfi\n\tfi\n\n\t# Update the statefile to add new symlinks (if any), which need to be cleaned\n\t# up on purge. Also remove old symlinks.\n\tdeb-systemd-helper update-state '{unit}' >/dev/null || true\nfi\n"
    )
}

fn packages() -> Vec<Pkg> {
    let mut base = pkg("base-passwd", "3.6.1");
    base.files = vec![
        (
            "/usr/share/base-passwd/passwd.master",
            PASSWD_MASTER.as_bytes(),
            0o644,
        ),
        (
            "/usr/share/base-passwd/group.master",
            GROUP_MASTER.as_bytes(),
            0o644,
        ),
    ];
    let mut systemd = pkg("systemd", "252.39-1~deb12u2").script(
        "postinst",
        "#!/bin/sh\n\nset -e\n\n_systemctl() {\n    if [ -z \"$DPKG_ROOT\" ] && [ -d /run/systemd/system ]; then\n        systemctl \"$@\"\n    fi\n}\n\n# Enable getty and remote-fs.target by default on new installs\nif [ -z \"$2\" ]; then\n    systemctl ${DPKG_ROOT:+--root=\"$DPKG_ROOT\"} enable getty@tty1.service || true\n    systemctl ${DPKG_ROOT:+--root=\"$DPKG_ROOT\"} enable remote-fs.target || true\nfi\n\n# Create /etc/machine-id\nsystemd-machine-id-setup ${DPKG_ROOT:+--root=\"$DPKG_ROOT\"}\n\n# Automatically added by dh_installsysusers/13.11.4\nif [ \"$1\" = \"configure\" ] || [ \"$1\" = \"abort-upgrade\" ] || [ \"$1\" = \"abort-deconfigure\" ] || [ \"$1\" = \"abort-remove\" ] ; then\n   systemd-sysusers ${DPKG_ROOT:+--root=\"$DPKG_ROOT\"} basic.conf systemd-journal.conf systemd-network.conf\nfi\n",
    );
    systemd.files = vec![
        (
            "/usr/lib/sysusers.d/basic.conf",
            b"# The base-passwd static set\ng adm        4     -\ng users      100   -\nu root       0       - /root                /bin/bash\n",
            0o644,
        ),
        (
            "/usr/lib/sysusers.d/systemd-journal.conf",
            b"g systemd-journal - -\n",
            0o644,
        ),
        (
            "/usr/lib/sysusers.d/systemd-network.conf",
            b"u systemd-network - \"systemd Network Management\"\n",
            0o644,
        ),
        (
            "/lib/systemd/system/getty@.service",
            b"[Unit]\nDescription=Getty on %I\n\n[Service]\nExecStart=-/sbin/agetty -o '-p -- \\\\u' --noclear - $TERM\n\n[Install]\nWantedBy=getty.target\nDefaultInstance=tty1\n",
            0o644,
        ),
        (
            "/lib/systemd/system/remote-fs.target",
            b"[Unit]\nDescription=Remote File Systems\n\n[Install]\nWantedBy=multi-user.target\n",
            0o644,
        ),
        (
            "/lib/systemd/system-preset/90-systemd.preset",
            b"enable remote-fs.target\nenable getty@.service\ndisable debug-shell.service\ndisable systemd-journal-gatewayd.*\n",
            0o644,
        ),
    ];
    // A real alias symlink among the units, as systemd ships them.
    systemd.symlinks = vec![("/lib/systemd/system/autovt@.service", "getty@.service")];
    let mut ssh = pkg("openssh-server", "1:9.2p1-2+deb12u10").script(
        "postinst",
        format!(
            "#!/bin/sh\nset -e\n\nsetup_sshd_user() {{\n\tif ! getent passwd sshd >/dev/null; then\n\t\tadduser --quiet --system --no-create-home --home /run/sshd --shell /usr/sbin/nologin sshd\n\tfi\n}}\n\nif [ \"$action\" = configure ]; then\n\tcreate_keys\n\tsetup_sshd_user\nfi\n{}{}",
            dh_enable("ssh.service"),
            dh_no_enable("ssh.socket")
        ),
    );
    ssh.files = vec![
        (
            "/lib/systemd/system/ssh.service",
            b"[Unit]\nDescription=OpenBSD Secure Shell server\n\n[Service]\nExecStartPre=/usr/sbin/sshd -t\n\n[Install]\nWantedBy=multi-user.target\nAlias=sshd.service\n",
            0o644,
        ),
        (
            "/lib/systemd/system/ssh.socket",
            b"[Socket]\nListenStream=22\n\n[Install]\nWantedBy=sockets.target\n",
            0o644,
        ),
    ];
    let mut nvpd = pkg("nvidia-persistenced", "535.171.04-1~deb12u1").script(
        "postinst",
        format!(
            "#!/bin/sh\nset -e\n\nif [ \"$1\" = \"configure\" ]; then\n     if ! getent passwd nvpd >/dev/null; then\n       # Create ad-hoc system user/group\n       adduser --system --group \\\n               --home /var/run/nvpd/ \\\n               --gecos 'NVIDIA Persistence Daemon' \\\n               --no-create-home \\\n               nvpd\n     fi\nfi\n\n{}",
            dh_enable("nvidia-persistenced.service")
        ),
    );
    nvpd.files = vec![(
        "/lib/systemd/system/nvidia-persistenced.service",
        b"[Unit]\nDescription=NVIDIA Persistence Daemon\n\n[Service]\nType=forking\nExecStart=/usr/bin/nvidia-persistenced --user nvpd\n\n[Install]\nWantedBy=multi-user.target\n",
        0o644,
    )];
    let udev = pkg("udev", "252.39-1~deb12u2").script(
        "postinst",
        "#!/bin/sh\nset -e\ncase \"$1\" in\n    configure)\n    # Add new system groups used by udev rules\n    addgroup --quiet --system input\n    addgroup --quiet --system sgx\n\n    # Make /dev/kvm accessible to kvm group\n    addgroup --quiet --system kvm\n\n    # Make /dev/dri/renderD* accessible to render group\n    addgroup --quiet --system render\n    ;;\nesac\n",
    );
    let mut ifupdown = pkg("ifupdown", "0.8.41").script(
        "postinst",
        format!(
            "#!/bin/sh\nset -e\n\nif [ \"$1\" = configure ]; then\n  addgroup --quiet --system netdev || true\nfi\n{}{}",
            dh_enable("networking.service"),
            dh_no_enable("ifupdown-wait-online.service")
        ),
    );
    ifupdown.files = vec![
        (
            "/lib/systemd/system/networking.service",
            b"[Unit]\nDescription=Raise network interfaces\n\n[Install]\nWantedBy=multi-user.target\nWantedBy=network-online.target\n\n[Service]\nType=oneshot\n",
            0o644,
        ),
        (
            "/lib/systemd/system/ifupdown-wait-online.service",
            b"[Install]\nWantedBy=network-online.target\n",
            0o644,
        ),
    ];
    let mut debug = pkg("debug-shell", "1.0").script("postinst", dh_enable("debug-shell.service"));
    debug.files = vec![(
        "/lib/systemd/system/debug-shell.service",
        b"[Install]\nWantedBy=sysinit.target\n",
        0o644,
    )];
    let odd = pkg("odd", "1.0").script(
        "postinst",
        "#!/bin/sh\nadduser --system --home \"$HOME_OF_ODD\" odd\n",
    );
    vec![base, systemd, ssh, nvpd, udev, ifupdown, debug, odd]
}

const ROOTS: &str =
    "base-passwd, systemd, openssh-server, nvidia-persistenced, udev, ifupdown, debug-shell, odd";

struct Node {
    repo: SignedRepo,
    dir: tempfile::TempDir,
}

fn node() -> Node {
    let pkgs = packages();
    let repo = signed_repo(&[("stable", pkgs.iter().collect())]);
    Node {
        repo,
        dir: tempfile::tempdir().unwrap(),
    }
}

impl Node {
    fn spec(&self, system: bool) -> PackagesSpec {
        PackagesSpec {
            mirror: Mirror::Url(self.repo.url.clone()),
            suite: "stable".into(),
            components: vec!["main".into()],
            keyring: Some(self.repo.keyring_into(self.dir.path())),
            trusted: false,
            essential: false,
            packages: ROOTS.split(", ").map(String::from).collect(),
            repositories: Vec::new(),
            system,
        }
    }

    fn opts(&self) -> AptOptions {
        let mut o = AptOptions::new(self.dir.path().join("cache"));
        o.apt_dir = self.dir.path().join("no-host-apt");
        // 2023-11-14T22:13:20Z: day 19675.
        o.source_date_epoch = 1_700_000_000;
        o
    }

    /// Install into a new directory; with `replay`, every package may come from its sketch.
    fn install(&self, name: &str, system: bool, replay: bool) -> (apt::Installed, PathBuf) {
        let (installed, dest, _) = self.install_saying(name, system, replay);
        (installed, dest)
    }

    /// [`Node::install`], with what the install's finished tasks said.
    fn install_saying(
        &self,
        name: &str,
        system: bool,
        replay: bool,
    ) -> (apt::Installed, PathBuf, Vec<String>) {
        let mut record = Record::default();
        let dest = self.dir.path().join(name);
        std::fs::create_dir(&dest).unwrap();
        let installed = apt::install_replaying(
            &self.spec(system),
            &DebianArch::from_oci("amd64"),
            &self.opts(),
            None,
            &|_| replay,
            &mut |_| Ok(()),
            &dest,
            &mut record,
        )
        .unwrap();
        (installed, dest, record.done)
    }
}

fn link(root: &Path, p: &str) -> String {
    std::fs::read_link(root.join(p))
        .unwrap_or_else(|e| panic!("{p}: {e}"))
        .display()
        .to_string()
}

/// What the system step writes, as `tree` lists it.
fn system_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for d in ["etc/systemd/system", "var/lib/systemd"] {
        out.extend(tree(&root.join(d)).into_iter().map(|l| format!("{d}/{l}")));
    }
    for f in [
        "etc/passwd",
        "etc/group",
        "etc/shadow",
        "etc/gshadow",
        "etc/machine-id",
        "etc/hostname",
    ] {
        out.push(format!("{f}: {}", read(&root.join(f))));
    }
    out
}

#[test]
fn a_booted_root_gets_users_units_and_no_node_state() {
    use std::os::unix::fs::MetadataExt;
    let n = node();
    let (installed, root) = n.install("node", true, false);
    assert_eq!(
        installed.warnings,
        ["`odd` postinst line 2: `adduser --system --home $HOME_OF_ODD odd`: not understood (a word depends on the script's run); not done"]
    );
    // sysusers.d first (explicit ids, then downward from 999), then the postinsts by package
    // name (upward from 100).
    assert_eq!(
        read(&root.join("etc/passwd")),
        "root:x:0:0:root:/root:/bin/bash\n\
         daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
         _apt:x:42:65534::/nonexistent:/usr/sbin/nologin\n\
         nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
         systemd-network:x:998:998:systemd Network Management:/:/usr/sbin/nologin\n\
         nvpd:x:100:102:NVIDIA Persistence Daemon,,,:/var/run/nvpd/:/usr/sbin/nologin\n\
         sshd:x:101:65534::/run/sshd:/usr/sbin/nologin\n"
    );
    assert_eq!(
        read(&root.join("etc/group")),
        "root:x:0:\nadm:x:4:\nshadow:x:42:\nusers:x:100:\nnogroup:x:65534:\n\
         systemd-journal:x:999:\nsystemd-network:x:998:\n\
         netdev:x:101:\nnvpd:x:102:\ninput:x:103:\nsgx:x:104:\nkvm:x:105:\nrender:x:106:\n"
    );
    assert_eq!(
        read(&root.join("etc/shadow")),
        "root:*:19675:0:99999:7:::\n\
         daemon:*:19675:0:99999:7:::\n\
         _apt:*:19675:0:99999:7:::\n\
         nobody:*:19675:0:99999:7:::\n\
         systemd-network:!*:19675::::::\n\
         nvpd:!:19675::::::\n\
         sshd:!:19675::::::\n"
    );
    let gshadow = read(&root.join("etc/gshadow"));
    assert!(gshadow.starts_with("root:*::\nadm:*::\n"), "{gshadow}");
    assert!(gshadow.ends_with("systemd-journal:!*::\nsystemd-network:!*::\nnetdev:!::\nnvpd:!::\ninput:!::\nsgx:!::\nkvm:!::\nrender:!::\n"), "{gshadow}");
    let m = std::fs::metadata(root.join("etc/shadow")).unwrap();
    assert_eq!((m.mode() & 0o7777, m.uid(), m.gid()), (0o640, 0, 42));
    // Links: exactly these, each to the unit file as Debian names it.
    let e = "etc/systemd/system";
    let links: Vec<String> = tree(&root.join(e))
        .into_iter()
        .filter(|l| l.contains(" -> "))
        .map(|l| {
            let (path, rest) = l.split_once(' ').unwrap();
            format!("{path} {}", rest.rsplit_once("-> ").unwrap().1)
        })
        .collect();
    assert_eq!(
        links,
        [
            "getty.target.wants/getty@tty1.service /lib/systemd/system/getty@.service",
            "multi-user.target.wants/networking.service /lib/systemd/system/networking.service",
            "multi-user.target.wants/nvidia-persistenced.service /lib/systemd/system/nvidia-persistenced.service",
            "multi-user.target.wants/remote-fs.target /lib/systemd/system/remote-fs.target",
            "multi-user.target.wants/ssh.service /lib/systemd/system/ssh.service",
            "network-online.target.wants/networking.service /lib/systemd/system/networking.service",
            "sshd.service /lib/systemd/system/ssh.service",
        ]
    );
    assert_eq!(
        link(&root, "etc/systemd/system/sshd.service"),
        "/lib/systemd/system/ssh.service"
    );
    // deb-systemd-helper's state, as bookworm's chroot has it.
    let s = root.join("var/lib/systemd/deb-systemd-helper-enabled");
    assert_eq!(
        read(&s.join("ssh.service.dsh-also")),
        "/etc/systemd/system/sshd.service\n/etc/systemd/system/multi-user.target.wants/ssh.service\n"
    );
    assert_eq!(
        read(&s.join("ssh.socket.dsh-also")),
        "/etc/systemd/system/sockets.target.wants/ssh.socket\n"
    );
    assert_eq!(
        read(&s.join("nvidia-persistenced.service.dsh-also")),
        "/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service\n"
    );
    assert_eq!(
        read(&s.join("debug-shell.service.dsh-also")),
        "/etc/systemd/system/sysinit.target.wants/debug-shell.service\n"
    );
    let mut state: Vec<String> = tree(&s)
        .into_iter()
        .filter(|l| !l.contains(" dir"))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    state.sort();
    assert_eq!(
        state,
        [
            "debug-shell.service.dsh-also",
            "ifupdown-wait-online.service.dsh-also",
            "multi-user.target.wants/networking.service",
            "multi-user.target.wants/nvidia-persistenced.service",
            "multi-user.target.wants/ssh.service",
            "network-online.target.wants/networking.service",
            "networking.service.dsh-also",
            "nvidia-persistenced.service.dsh-also",
            "ssh.service.dsh-also",
            "ssh.socket.dsh-also",
            "sshd.service",
            "sysinit.target.wants/debug-shell.service",
        ]
    );
    // Node-specific state: empty, or never written.
    assert_eq!(
        std::fs::metadata(root.join("etc/machine-id"))
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        std::fs::metadata(root.join("etc/hostname")).unwrap().len(),
        0
    );
    for absent in [
        "etc/ssh/ssh_host_rsa_key",
        "etc/ssh/ssh_host_ecdsa_key",
        "etc/ssh/ssh_host_ed25519_key",
        "var/lib/systemd/random-seed",
        "var/lib/dbus/machine-id",
    ] {
        assert!(
            std::fs::symlink_metadata(root.join(absent)).is_err(),
            "{absent}"
        );
    }
    // What the step wrote belongs to no package.
    assert!(!installed.owners.contains_key("etc/passwd"));
    assert!(!installed
        .owners
        .contains_key("etc/systemd/system/sshd.service"));
    // The same package set gives the same bytes.
    let (_, again) = n.install("node-again", true, false);
    assert_eq!(system_files(&root), system_files(&again));
}

#[test]
fn a_replayed_install_makes_the_same_users_and_units() {
    let n = node();
    let (_, full) = n.install("full", true, false);
    // Every package from its sketch (recorded by the first install).
    let (installed, replayed, said) = n.install_saying("replayed", true, true);
    assert!(
        said.iter()
            .any(|s| s.starts_with("8 packages, 8 of them from sketches")),
        "{said:?}"
    );
    assert!(
        installed.warnings.iter().all(|w| w.starts_with("`odd`")),
        "{:?}",
        installed.warnings
    );
    assert_eq!(system_files(&full), system_files(&replayed));
}

#[test]
fn a_container_root_gets_none_of_it() {
    let n = node();
    let (installed, root) = n.install("container", false, false);
    assert!(installed.warnings.is_empty(), "{:?}", installed.warnings);
    assert_eq!(read(&root.join("etc/passwd")), PASSWD_MASTER);
    assert_eq!(read(&root.join("etc/group")), GROUP_MASTER);
    for absent in [
        "etc/shadow",
        "etc/gshadow",
        "etc/machine-id",
        "etc/hostname",
        "etc/systemd/system",
        "var/lib/systemd",
    ] {
        assert!(
            std::fs::symlink_metadata(root.join(absent)).is_err(),
            "{absent}"
        );
    }
}
