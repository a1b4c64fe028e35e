//! Tests of `system_users`: Debian's own postinst and sysusers.d lines (bookworm's systemd,
//! udev, openssh, ifupdown, nvidia-persistenced, dbus) on base-passwd's masters.

use std::collections::BTreeMap;
use std::path::Path;

use super::*;

/// base-passwd's masters (their first and last lines).
const PASSWD: &str = "root:*:0:0:root:/root:/bin/bash\ndaemon:*:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n_apt:*:42:65534::/nonexistent:/usr/sbin/nologin\nnobody:*:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
const GROUP: &str = "root:*:0:\ndaemon:*:1:\nshadow:*:42:\nusers:*:100:\nnogroup:*:65534:\n";

fn root_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    for (p, text) in files {
        let p = Path::new(p);
        root.create_dir_all(p.parent().unwrap()).unwrap();
        root.write(p, text.as_bytes(), 0o644).unwrap();
    }
    (dir, root)
}

fn read(root: &Root, p: &str) -> String {
    String::from_utf8(root.read(Path::new(p), 1 << 20).unwrap()).unwrap()
}

fn scripts(s: &[(&str, &str)]) -> BTreeMap<String, String> {
    s.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn debian_node_accounts_get_fixed_ids() {
    let (_d, root) = root_with(&[
        ("etc/passwd", PASSWD),
        ("etc/group", GROUP),
        (
            "usr/lib/sysusers.d/basic.conf",
            "# base-passwd's\ng adm        4     -\nu root       0       - /root                /bin/bash\n",
        ),
        ("usr/lib/sysusers.d/systemd-journal.conf", "g systemd-journal - -\n"),
        (
            "usr/lib/sysusers.d/systemd-network.conf",
            "u systemd-network - \"systemd Network Management\"\n",
        ),
    ]);
    let posts = scripts(&[
        ("ifupdown", "if [ \"$1\" = configure ]; then\n  addgroup --quiet --system netdev || true\nfi\n"),
        (
            "nvidia-persistenced",
            "     if ! getent passwd nvpd >/dev/null; then\n       adduser --system --group \\\n               --home /var/run/nvpd/ \\\n               --gecos 'NVIDIA Persistence Daemon' \\\n               --no-create-home \\\n               nvpd\n     fi\n",
        ),
        ("openssh-client", "\tif ! getent group _ssh >/dev/null; then\n\t\taddgroup --system --quiet --force-badname _ssh\n\tfi\n"),
        (
            "openssh-server",
            "\tif ! getent passwd sshd >/dev/null; then\n\t\tadduser --quiet --system --no-create-home --home /run/sshd --shell /usr/sbin/nologin sshd\n\tfi\n",
        ),
        ("passwd", "\t\tgroupadd -g 42 shadow || (\n    cat <<EOF\nGroup ID 42 has been allocated\nEOF\n    exit 1\n  )\n"),
        (
            "udev",
            "    addgroup --quiet --system input\n    addgroup --quiet --system sgx\n    addgroup --quiet --system kvm\n    addgroup --quiet --system render\n",
        ),
    ]);
    // 2023-11-14: day 19675.
    let (done, warnings) = apply(&root, &posts, 1_700_000_000).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        read(&root, "etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\n\
         daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
         _apt:x:42:65534::/nonexistent:/usr/sbin/nologin\n\
         nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
         systemd-network:x:998:998:systemd Network Management:/:/usr/sbin/nologin\n\
         nvpd:x:100:102:NVIDIA Persistence Daemon,,,:/var/run/nvpd/:/usr/sbin/nologin\n\
         sshd:x:101:65534::/run/sshd:/usr/sbin/nologin\n"
    );
    assert_eq!(
        read(&root, "etc/group"),
        "root:x:0:\ndaemon:x:1:\nshadow:x:42:\nusers:x:100:\nnogroup:x:65534:\n\
         adm:x:4:\nsystemd-journal:x:999:\nsystemd-network:x:998:\n\
         netdev:x:101:\nnvpd:x:102:\n_ssh:x:103:\ninput:x:104:\nsgx:x:105:\nkvm:x:106:\nrender:x:107:\n"
    );
    let shadow = read(&root, "etc/shadow");
    assert!(
        shadow.starts_with("root:*:19675:0:99999:7:::\n"),
        "{shadow}"
    );
    assert!(
        shadow.contains("\nsystemd-network:!*:19675::::::\n"),
        "{shadow}"
    );
    assert!(
        shadow.ends_with("\nnvpd:!:19675::::::\nsshd:!:19675::::::\n"),
        "{shadow}"
    );
    let gshadow = read(&root, "etc/gshadow");
    assert!(gshadow.starts_with("root:*::\n"), "{gshadow}");
    assert!(gshadow.contains("\nsystemd-journal:!*::\n"), "{gshadow}");
    assert!(gshadow.ends_with("\nkvm:!::\nrender:!::\n"), "{gshadow}");
    let m = root.metadata(Path::new("etc/shadow")).unwrap().unwrap();
    assert_eq!((m.mode & 0o7777, m.gid), (0o640, 42));
    assert!(
        done.contains(&"user nvpd (100:102)".to_string()),
        "{done:?}"
    );
    // No home for --no-create-home.
    assert!(!root.exists(Path::new("var/run/nvpd")));
    // The same inputs give the same bytes.
    let (_d2, again) = root_with(&[
        ("etc/passwd", PASSWD),
        ("etc/group", GROUP),
        ("usr/lib/sysusers.d/systemd-journal.conf", "g systemd-journal - -\n"),
        (
            "usr/lib/sysusers.d/systemd-network.conf",
            "u systemd-network - \"systemd Network Management\"\n",
        ),
        (
            "usr/lib/sysusers.d/basic.conf",
            "# base-passwd's\ng adm        4     -\nu root       0       - /root                /bin/bash\n",
        ),
    ]);
    apply(&again, &posts, 1_700_000_000).unwrap();
    for f in ["etc/passwd", "etc/group", "etc/shadow", "etc/gshadow"] {
        assert_eq!(read(&root, f), read(&again, f), "{f}");
    }
}

#[test]
fn explicit_ids_first_members_and_homes() {
    let (_d, root) = root_with(&[("etc/passwd", PASSWD), ("etc/group", GROUP)]);
    let posts = scripts(&[
        // Asks first for what a later package fixes the id of.
        ("a", "adduser --system --group --home /var/lib/a a\n"),
        ("b", "useradd -r -u 100 -d /srv/b -m -G users b\naddgroup --system --gid 101 bgroup\nadduser b bgroup\n"),
    ]);
    let (_, warnings) = apply(&root, &posts, 0).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let passwd = read(&root, "etc/passwd");
    assert!(
        passwd.contains("\na:x:101:102::/var/lib/a:/usr/sbin/nologin\n"),
        "{passwd}"
    );
    assert!(
        passwd.contains("\nb:x:100:103::/srv/b:/usr/sbin/nologin\n"),
        "{passwd}"
    );
    let group = read(&root, "etc/group");
    assert!(group.contains("\nusers:x:100:b\n"), "{group}");
    assert!(group.contains("\nbgroup:x:101:b\n"), "{group}");
    let home = root.metadata(Path::new("var/lib/a")).unwrap().unwrap();
    assert_eq!((home.uid, home.gid), (101, 102));
    assert!(root.exists(Path::new("srv/b")));
    let shadow = read(&root, "etc/shadow");
    assert!(shadow.contains("\nb:!:0:0:99999:7:::\n"), "{shadow}");
}

#[test]
fn lines_not_understood_are_named_and_skipped() {
    let (_d, root) = root_with(&[
        ("etc/passwd", PASSWD),
        ("etc/group", GROUP),
        (
            "usr/lib/sysusers.d/x.conf",
            "r - 500-900\nu from-file /etc/x\n",
        ),
    ]);
    let posts = scripts(&[
        // dbus-system-bus-common's: the name through a variable assigned once (understood).
        (
            "dbus-system-bus-common",
            "MESSAGEUSER=messagebus\nif [ \"$1\" = configure ]; then\n    in_sysroot adduser --system \\\n            --quiet \\\n            --home /nonexistent \\\n            --no-create-home \\\n            --disabled-password \\\n            --group \"$MESSAGEUSER\"\nfi\n",
        ),
        ("odd", "adduser --system \"$1\"\nadduser --system --frobnicate x\nadduser alice\n"),
    ]);
    let (_, warnings) = apply(&root, &posts, 0).unwrap();
    assert_eq!(
        warnings,
        [
            "`/usr/lib/sysusers.d/x.conf` line 1: `r - 500-900`: `r` lines are not supported; not done",
            "`/usr/lib/sysusers.d/x.conf` line 2: `u from-file /etc/x`: an id taken from a file's owner is not supported; not done",
            "`odd` postinst line 1: `adduser --system $1`: not understood (a word depends on the script's run); not done",
            "`odd` postinst line 2: `adduser --system --frobnicate x`: not understood (option `--frobnicate`); not done",
            "`odd` postinst line 3: `adduser alice`: not understood (only system users are made); not done",
        ]
    );
    let passwd = read(&root, "etc/passwd");
    assert!(
        passwd.ends_with("\nmessagebus:x:100:101::/nonexistent:/usr/sbin/nologin\n"),
        "{passwd}"
    );
    assert!(
        !passwd.contains("alice") && !passwd.contains("\nx:"),
        "{passwd}"
    );
}
