//! Tests of `system_units`: Debian bookworm's own postinst lines, unit `[Install]` sections
//! and preset file, on a merged-/usr root.

use std::collections::BTreeMap;
use std::path::Path;

use super::*;

/// bookworm's units (their `[Install]` sections).
const UNITS: &[(&str, &str)] = &[
    ("ssh.service", "[Unit]\nDescription=OpenBSD Secure Shell server\n[Install]\nWantedBy=multi-user.target\nAlias=sshd.service\n"),
    ("ssh.socket", "[Install]\nWantedBy=sockets.target\n"),
    ("networking.service", "[Install]\nWantedBy=multi-user.target\nWantedBy=network-online.target\n\n[Service]\nType=oneshot\n"),
    ("ifupdown-wait-online.service", "[Install]\nWantedBy=network-online.target\n"),
    ("getty@.service", "[Service]\nWantedBy=ignored.target\n[Install]\nWantedBy=getty.target\nDefaultInstance=tty1\n"),
    ("remote-fs.target", "[Install]\nWantedBy=multi-user.target\n"),
    ("systemd-networkd.service", "[Install]\nWantedBy=multi-user.target\nAlso=systemd-networkd.socket\nAlias=dbus-org.freedesktop.network1.service\n\n# comment\nAlso=systemd-network-generator.service\nAlso=systemd-networkd-wait-online.service\n"),
    ("systemd-networkd.socket", "[Install]\nWantedBy=sockets.target\n"),
    ("systemd-network-generator.service", "[Install]\nWantedBy=sysinit.target\n"),
    ("systemd-networkd-wait-online.service", "[Install]\nWantedBy=network-online.target\n"),
    ("debug-shell.service", "[Install]\nWantedBy=sysinit.target\n"),
];

const PRESET: &str = "# Debian's\nenable remote-fs.target\nenable getty@.service\nenable systemd-networkd.service\ndisable debug-shell.service\ndisable systemd-networkd-wait-online.service\ndisable systemd-journal-gatewayd.*\n";

/// The dh_installsystemd block of a postinst, for `unit`.
fn dh_enable(unit: &str) -> String {
    format!("if [ \"$1\" = \"configure\" ] || [ \"$1\" = \"abort-upgrade\" ] ; then\n\tdeb-systemd-helper unmask '{unit}' >/dev/null || true\n\tif deb-systemd-helper --quiet was-enabled '{unit}'; then\n\t\tdeb-systemd-helper enable '{unit}' >/dev/null || true\n\telse\n\t\tdeb-systemd-helper update-state '{unit}' >/dev/null || true\n\tfi\nfi\n")
}

/// dh_installsystemd's block for a `--no-enable` unit.
fn dh_no_enable(unit: &str) -> String {
    format!("\tif deb-systemd-helper debian-installed '{unit}'; then\n\t\tif deb-systemd-helper --quiet was-enabled '{unit}'; then\n\t\t\tdeb-systemd-helper enable '{unit}' >/dev/null || true\n\t\tfi\n\tfi\n\tdeb-systemd-helper update-state '{unit}' >/dev/null || true\n")
}

fn node_root() -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    crate::fixups::create_merged_usr(&root, "amd64").unwrap();
    root.create_dir_all(Path::new("usr/lib/systemd/system"))
        .unwrap();
    for (name, text) in UNITS {
        let p = format!("usr/lib/systemd/system/{name}");
        root.write(Path::new(&p), text.as_bytes(), 0o644).unwrap();
    }
    root.create_dir_all(Path::new("usr/lib/systemd/system-preset"))
        .unwrap();
    root.write(
        Path::new("usr/lib/systemd/system-preset/90-systemd.preset"),
        PRESET.as_bytes(),
        0o644,
    )
    .unwrap();
    (dir, root)
}

fn link_at(root: &Root, p: &str) -> Option<String> {
    root.read_link(Path::new(p))
        .ok()
        .map(|l| l.to_string_lossy().into_owned())
}

fn read(root: &Root, p: &str) -> String {
    String::from_utf8(root.read(Path::new(p), 1 << 20).unwrap()).unwrap()
}

#[test]
fn debian_enables_links_and_state() {
    let (_d, root) = node_root();
    let mut posts = BTreeMap::new();
    posts.insert(
        "openssh-server".to_string(),
        format!("{}{}", dh_enable("ssh.service"), dh_no_enable("ssh.socket")),
    );
    posts.insert(
        "ifupdown".to_string(),
        format!(
            "  addgroup --quiet --system netdev || true\n{}{}",
            dh_enable("networking.service"),
            dh_no_enable("ifupdown-wait-online.service")
        ),
    );
    // systemd's own postinst.
    posts.insert(
        "systemd".to_string(),
        "_systemctl() {\n    if [ -z \"$DPKG_ROOT\" ] && [ -d /run/systemd/system ]; then\n        systemctl \"$@\"\n    fi\n}\nif [ -z \"$2\" ]; then\n    systemctl ${DPKG_ROOT:+--root=\"$DPKG_ROOT\"} enable getty@tty1.service || true\n    systemctl ${DPKG_ROOT:+--root=\"$DPKG_ROOT\"} enable remote-fs.target || true\nfi\n_systemctl try-restart systemd-networkd.service || true\n".to_string(),
    );
    let (done, warnings) = apply(&root, &posts, true).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        done,
        [
            "networking.service enabled",
            "ifupdown-wait-online.service recorded (not enabled)",
            "ssh.service enabled",
            "ssh.socket recorded (not enabled)",
            "getty@tty1.service enabled",
            "remote-fs.target enabled",
        ]
    );
    let e = "etc/systemd/system";
    for (at, to) in [
        ("sshd.service", "/lib/systemd/system/ssh.service"),
        (
            "multi-user.target.wants/ssh.service",
            "/lib/systemd/system/ssh.service",
        ),
        (
            "multi-user.target.wants/networking.service",
            "/lib/systemd/system/networking.service",
        ),
        (
            "network-online.target.wants/networking.service",
            "/lib/systemd/system/networking.service",
        ),
        (
            "getty.target.wants/getty@tty1.service",
            "/lib/systemd/system/getty@.service",
        ),
        (
            "multi-user.target.wants/remote-fs.target",
            "/lib/systemd/system/remote-fs.target",
        ),
    ] {
        assert_eq!(
            link_at(&root, &format!("{e}/{at}")).as_deref(),
            Some(to),
            "{at}"
        );
    }
    assert!(!root.exists(Path::new("etc/systemd/system/sockets.target.wants")));
    assert!(!root.exists(Path::new(
        "etc/systemd/system/network-online.target.wants/ifupdown-wait-online.service"
    )));
    let s = STATE_DIR;
    assert_eq!(
        read(&root, &format!("{s}/ssh.service.dsh-also")),
        "/etc/systemd/system/sshd.service\n/etc/systemd/system/multi-user.target.wants/ssh.service\n"
    );
    assert_eq!(
        read(&root, &format!("{s}/networking.service.dsh-also")),
        "/etc/systemd/system/multi-user.target.wants/networking.service\n/etc/systemd/system/network-online.target.wants/networking.service\n"
    );
    assert_eq!(
        read(&root, &format!("{s}/ssh.socket.dsh-also")),
        "/etc/systemd/system/sockets.target.wants/ssh.socket\n"
    );
    assert_eq!(read(&root, &format!("{s}/sshd.service")), "");
    assert_eq!(
        read(&root, &format!("{s}/multi-user.target.wants/ssh.service")),
        ""
    );
    assert!(!root.exists(Path::new(&format!("{s}/sockets.target.wants/ssh.socket"))));
    // systemctl enable writes no state.
    assert!(!root.exists(Path::new(&format!("{s}/getty@tty1.service.dsh-also"))));
}

#[test]
fn also_and_alias_in_file_order_presets_decide_the_named_unit() {
    let (_d, root) = node_root();
    let mut posts = BTreeMap::new();
    posts.insert(
        "a".to_string(),
        format!(
            "{}{}",
            dh_enable("systemd-networkd.service"),
            dh_enable("debug-shell.service")
        ),
    );
    let (done, _) = apply(&root, &posts, true).unwrap();
    assert_eq!(
        done,
        [
            "systemd-networkd.service enabled",
            "debug-shell.service recorded, disabled by a preset"
        ]
    );
    // deb-systemd-helper's order (research: the same closure by hand in bookworm); the
    // preset's `disable systemd-networkd-wait-online.service` decides only for a named unit.
    assert_eq!(
        read(
            &root,
            &format!("{STATE_DIR}/systemd-networkd.service.dsh-also")
        ),
        "/etc/systemd/system/sockets.target.wants/systemd-networkd.socket\n\
         /etc/systemd/system/dbus-org.freedesktop.network1.service\n\
         /etc/systemd/system/sysinit.target.wants/systemd-network-generator.service\n\
         /etc/systemd/system/network-online.target.wants/systemd-networkd-wait-online.service\n\
         /etc/systemd/system/multi-user.target.wants/systemd-networkd.service\n"
    );
    assert_eq!(
        link_at(
            &root,
            "etc/systemd/system/network-online.target.wants/systemd-networkd-wait-online.service"
        )
        .as_deref(),
        Some("/lib/systemd/system/systemd-networkd-wait-online.service")
    );
    assert!(!root.exists(Path::new(
        "etc/systemd/system/sysinit.target.wants/debug-shell.service"
    )));
    assert_eq!(
        read(&root, &format!("{STATE_DIR}/debug-shell.service.dsh-also")),
        "/etc/systemd/system/sysinit.target.wants/debug-shell.service\n"
    );
}

#[test]
fn without_systemctl_presets_play_no_part() {
    let (_d, root) = node_root();
    let mut posts = BTreeMap::new();
    posts.insert("a".to_string(), dh_enable("debug-shell.service"));
    let (done, _) = apply(&root, &posts, false).unwrap();
    assert_eq!(done, ["debug-shell.service enabled"]);
    assert_eq!(
        link_at(
            &root,
            "etc/systemd/system/sysinit.target.wants/debug-shell.service"
        )
        .as_deref(),
        Some("/lib/systemd/system/debug-shell.service")
    );
}

#[test]
fn missing_units_and_unknown_names_are_said() {
    let (_d, root) = node_root();
    let mut posts = BTreeMap::new();
    posts.insert(
        "p".to_string(),
        "deb-systemd-helper enable 'ghost.service'\nsystemctl enable \"$UNIT\"\n".to_string(),
    );
    let (done, warnings) = apply(&root, &posts, true).unwrap();
    assert!(done.is_empty(), "{done:?}");
    assert_eq!(
        warnings,
        [
            "`p` postinst line 2: `systemctl enable $UNIT`: not understood (unit `$UNIT`); not done",
            "`p` postinst line 1: unit `ghost.service`: no unit file; not enabled",
        ]
    );
}

#[test]
fn an_endless_also_chain_is_refused() {
    let (_d, root) = node_root();
    for i in 0..100 {
        let p = format!("usr/lib/systemd/system/chain{i}.service");
        let text = format!(
            "[Install]\nAlso=chain{}.service\nAlso=chain0.service\n",
            i + 1
        );
        root.write(Path::new(&p), text.as_bytes(), 0o644).unwrap();
    }
    let mut posts = BTreeMap::new();
    posts.insert("p".to_string(), dh_enable("chain0.service"));
    let (done, warnings) = apply(&root, &posts, true).unwrap();
    assert!(done.is_empty(), "{done:?}");
    assert_eq!(
        warnings,
        ["`p` postinst line 4: unit `chain0.service`: more than 64 units through `Also=`; not enabled"]
    );
}

#[test]
fn globs() {
    assert!(glob(
        b"systemd-journal-gatewayd.*",
        b"systemd-journal-gatewayd.socket"
    ));
    assert!(glob(b"*", b""));
    assert!(glob(b"a?c*d", b"abcxxd"));
    assert!(!glob(b"a*b", b"ac"));
    // No blow-up on a hostile pattern.
    let pat = "*a".repeat(40) + "b";
    assert!(!glob(pat.as_bytes(), "a".repeat(200).as_bytes()));
}
