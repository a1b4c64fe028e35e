//! Signed packages that try to make gpuimg write or read outside its staging root: links in
//! the package data (`./etc`, `./var/lib/dpkg`, `./var/lib/dpkg/info`, the CA and ld.so.conf
//! directories, `/etc/alternatives`) pointing at a real host directory, by absolute path and
//! by climbing; links that make the fix-ups read a host file. Each case is built through the
//! CLI with both resolvers (`openat2` and the userspace walk): the host directory is never
//! touched, no host byte reaches the image, and both resolvers give the same outcome.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;

const SECRET: &str = "HOST-SECRET-4711";

/// One entry of a hand-built package's data tarball.
enum E {
    File(&'static str, &'static str, u32),
    Dir(&'static str),
    Link(&'static str, String),
}

/// A tar member: (path, data, mode, symlink target, is a directory).
type Member = (String, Vec<u8>, u32, Option<String>, bool);

/// A .deb built by hand (dpkg-deb refuses some of these layouts), with control scripts.
fn deb(repo: &Path, name: &str, suite: &str, entries: &[E], scripts: &[(&str, &str)]) -> String {
    let tarball = |items: Vec<Member>| {
        let mut b = tar::Builder::new(Vec::new());
        for (path, data, mode, link, dir) in items {
            let mut h = tar::Header::new_gnu();
            h.set_mode(mode);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            if let Some(l) = link {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, &path, l).unwrap();
            } else if dir {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, &path, std::io::empty()).unwrap();
            } else {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(data.len() as u64);
                b.append_data(&mut h, &path, &data[..]).unwrap();
            }
        }
        b.into_inner().unwrap()
    };
    let control = format!(
        "Package: {name}\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.invalid>\nDescription: confinement case\n"
    );
    let mut citems = vec![(
        "./control".to_string(),
        control.into_bytes(),
        0o644,
        None,
        false,
    )];
    for (n, text) in scripts {
        citems.push((
            format!("./{n}"),
            text.as_bytes().to_vec(),
            0o755,
            None,
            false,
        ));
    }
    let mut ditems = vec![("./".to_string(), Vec::new(), 0o755, None, true)];
    let mut dirs = std::collections::BTreeSet::new();
    for e in entries {
        // Every parent directory comes first, as in packages dpkg-deb builds.
        let (E::File(p, ..) | E::Dir(p) | E::Link(p, _)) = e;
        let parts: Vec<&str> = p.trim_start_matches('/').split('/').collect();
        for i in 1..parts.len() {
            let d = parts[..i].join("/");
            if dirs.insert(d.clone()) {
                ditems.push((format!("./{d}/"), Vec::new(), 0o755, None, true));
            }
        }
        if let E::Dir(p) = e {
            if !dirs.insert(p.trim_start_matches('/').to_string()) {
                continue;
            }
        }
        ditems.push(match e {
            E::File(p, data, mode) => (
                format!(".{p}"),
                data.as_bytes().to_vec(),
                *mode,
                None,
                false,
            ),
            E::Dir(p) => (format!(".{p}/"), Vec::new(), 0o755, None, true),
            E::Link(p, t) => (format!(".{p}"), Vec::new(), 0o777, Some(t.clone()), false),
        });
    }
    let rel = format!("pool/main/{name}_1.0_{suite}_amd64.deb");
    std::fs::create_dir_all(repo.join("pool/main")).unwrap();
    let file = std::fs::File::create(repo.join(&rel)).unwrap();
    let mut ar = ar::Builder::new(file);
    for (member, bytes) in [
        ("debian-binary", b"2.0\n".to_vec()),
        ("control.tar", tarball(citems)),
        ("data.tar", tarball(ditems)),
    ] {
        let header = ar::Header::new(member.as_bytes().to_vec(), bytes.len() as u64);
        ar.append(&header, &bytes[..]).unwrap();
    }
    rel
}

struct Fixture {
    _dir: tempfile::TempDir,
    url: String,
    key: PathBuf,
    /// The "host" directory every hostile link points at.
    host: PathBuf,
    _server: Server,
}

/// The packages of one suite: (name, entries, scripts).
type Suite = (
    &'static str,
    Vec<(&'static str, Vec<E>, Vec<(&'static str, &'static str)>)>,
);

fn suites(host: &Path) -> Vec<Suite> {
    let h = host.display().to_string();
    let climb = |p: &str| format!("../../../../../../../../../..{h}/{p}");
    let passwd = || {
        (
            "base-passwd",
            vec![
                E::Dir("/usr/share/base-passwd"),
                E::File(
                    "/usr/share/base-passwd/passwd.master",
                    "root:x:0:0::/root:/bin/sh\n",
                    0o644,
                ),
                E::File("/usr/share/base-passwd/group.master", "root:x:0:\n", 0o644),
            ],
            vec![],
        )
    };
    let script = ("postinst", "#!/bin/sh\nexit 0\n");
    vec![
        (
            "etc-abs",
            vec![
                passwd(),
                ("evil", vec![E::Link("/etc", format!("{h}/etc"))], vec![]),
            ],
        ),
        (
            "etc-climb",
            vec![
                passwd(),
                ("evil", vec![E::Link("/etc", climb("etc"))], vec![]),
            ],
        ),
        (
            "dpkg-abs",
            vec![(
                "evil",
                vec![
                    E::Dir("/var"),
                    E::Dir("/var/lib"),
                    E::Link("/var/lib/dpkg", format!("{h}/dpkg")),
                ],
                vec![script],
            )],
        ),
        (
            "info-climb",
            vec![(
                "evil",
                vec![
                    E::Dir("/var"),
                    E::Dir("/var/lib"),
                    E::Dir("/var/lib/dpkg"),
                    E::Link("/var/lib/dpkg/info", climb("dpkg/info")),
                ],
                vec![script, ("preinst", "#!/bin/sh\n")],
            )],
        ),
        (
            "info-abs",
            vec![(
                "evil",
                vec![
                    E::Dir("/var"),
                    E::Dir("/var/lib"),
                    E::Dir("/var/lib/dpkg"),
                    E::Link("/var/lib/dpkg/info", format!("{h}/dpkg/info")),
                ],
                vec![script],
            )],
        ),
        (
            "read-passwd",
            vec![(
                "base-passwd",
                vec![
                    E::Dir("/usr/share/base-passwd"),
                    E::Link(
                        "/usr/share/base-passwd/passwd.master",
                        format!("{h}/secret"),
                    ),
                    E::Link(
                        "/usr/share/base-passwd/group.master",
                        format!("{h}/../host/secret"),
                    ),
                ],
                vec![],
            )],
        ),
        (
            "read-climb",
            vec![(
                "base-passwd",
                vec![
                    E::Dir("/usr/share/base-passwd"),
                    E::Link("/usr/share/base-passwd/passwd.master", climb("secret")),
                ],
                vec![],
            )],
        ),
        (
            "caps",
            vec![(
                "iputils-ping",
                vec![E::Dir("/bin"), E::File("/bin/ping", "\x7fELF ping", 0o755)],
                vec![(
                    "postinst",
                    "#!/bin/sh\nif command -v setcap > /dev/null; then\n    if setcap cap_net_raw+ep /bin/ping; then\n        chmod u-s /bin/ping\n    fi\nfi\n",
                )],
            )],
        ),
        (
            "etc-inside",
            vec![
                passwd(),
                (
                    "evil",
                    vec![
                        E::Dir("/srv/etc"),
                        E::Link("/etc", "/srv/../srv/etc".into()),
                    ],
                    vec![],
                ),
            ],
        ),
        (
            "read-certs",
            vec![(
                "ca-certificates",
                vec![
                    E::Dir("/usr/share"),
                    E::Link("/usr/share/ca-certificates", format!("{h}/certs")),
                ],
                vec![],
            )],
        ),
        (
            "read-ldconf",
            vec![(
                "evil",
                vec![
                    E::Dir("/etc"),
                    E::Link("/etc/ld.so.conf.d", format!("{h}/ld")),
                    E::Link("/etc/ld.so.conf", format!("{h}/ld/evil.conf")),
                ],
                vec![],
            )],
        ),
        (
            "alternatives",
            vec![(
                "evil",
                vec![
                    E::Dir("/etc"),
                    E::Link("/etc/alternatives", format!("{h}/alt")),
                    E::Dir("/usr/bin"),
                    E::File("/usr/bin/x.real", "#!/bin/sh\n", 0o755),
                ],
                vec![(
                    "postinst",
                    "#!/bin/sh\nupdate-alternatives --install /usr/bin/x x /usr/bin/x.real 10\n",
                )],
            )],
        ),
    ]
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

fn fixture() -> &'static Fixture {
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let host = dir.path().join("host");
        for d in ["etc", "dpkg/info", "certs", "ld", "alt"] {
            std::fs::create_dir_all(host.join(d)).unwrap();
        }
        std::fs::write(host.join("secret"), format!("{SECRET}\n")).unwrap();
        std::fs::write(host.join("certs/evil.crt"), format!("{SECRET}\n")).unwrap();
        std::fs::write(host.join("ld/evil.conf"), format!("/{SECRET}\n")).unwrap();
        let (home, key) = gen_key(dir.path(), "confine");
        for (suite, pkgs) in suites(&host) {
            let stanzas: Vec<String> = pkgs
                .iter()
                .map(|(name, entries, scripts)| {
                    // The package keeps its real name (fix-ups key on it); its file is unique.
                    stanza(&repo, &deb(&repo, name, suite, entries, scripts))
                })
                .collect();
            write_dist(&repo, suite, &stanzas, Some(&home));
        }
        let server = serve(&repo);
        Fixture {
            url: server.url.clone(),
            key,
            host,
            _server: server,
            _dir: dir,
        }
    })
}

/// Build suite `suite` with one resolver; returns (exit code, stderr, manifest digest).
fn build(suite: &str, packages: &str, userspace: bool) -> (i32, String, Option<String>, PathBuf) {
    let f = fixture();
    let t = Sandbox::new();
    std::fs::copy(&f.key, t.path().join("repo.gpg")).unwrap();
    write(
        &t.path().join("p.yaml"),
        &format!(
            "name: confine\nbase:\n  apt:\n    mirror: ${{REPO}}\n    suite: {suite}\n    packages: [{packages}]\n    keyring: repo.gpg\n"
        ),
    );
    let mut c = t.gpuimg();
    c.env("REPO", &f.url)
        .env("SOURCE_DATE_EPOCH", "0")
        .arg("build")
        .arg(t.path().join("p.yaml"))
        .arg("-o")
        .arg(t.path().join("out"))
        .arg("--json");
    if userspace {
        c.env("GPUIMG_RESOLVER", "userspace");
    }
    let out = run(&mut c);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let digest = out
        .status
        .success()
        .then(|| manifest_digest(&String::from_utf8_lossy(&out.stdout)));
    let dir = t.keep();
    (out.status.code().unwrap_or(-1), stderr, digest, dir)
}

/// Every byte of every layer of the image at `out`, decompressed.
fn layer_bytes(out: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(out.join("blobs/sha256"))
        .unwrap()
        .flatten()
    {
        let b = std::fs::read(e.path()).unwrap();
        if b.starts_with(&[0x1f, 0x8b]) {
            let mut d = flate2::read::MultiGzDecoder::new(&b[..]);
            std::io::Read::read_to_end(&mut d, &mut all).unwrap();
        } else {
            all.extend_from_slice(&b);
        }
    }
    all
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// `stderr` with temporary paths (which differ between runs) replaced by `[TEMP]`.
fn without_temp_paths(stderr: &str) -> String {
    stderr
        .split(' ')
        .map(|w| if w.contains("/tmp/") { "[TEMP]" } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

fn check(suite: &str, packages: &str) -> Vec<(i32, String)> {
    let f = fixture();
    let before = tree(&f.host);
    let mut outcomes = Vec::new();
    for userspace in [false, true] {
        let (code, stderr, digest, dir) = build(suite, packages, userspace);
        assert_eq!(
            tree(&f.host),
            before,
            "`{suite}` changed the host directory:\n{stderr}"
        );
        assert!(code == 0 || code == 2, "`{suite}` exited {code}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        if code == 0 {
            let bytes = layer_bytes(&dir.join("out"));
            assert!(
                !contains(&bytes, SECRET),
                "`{suite}`: a host file reached the image"
            );
        } else {
            assert_eq!(stderr.trim().lines().count(), 1, "not one line: {stderr}");
            assert!(stderr.starts_with("error: "), "{stderr}");
        }
        outcomes.push((code, digest.unwrap_or_else(|| without_temp_paths(&stderr))));
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(
        outcomes[0], outcomes[1],
        "`{suite}`: openat2 and the userspace walk disagree"
    );
    outcomes
}

#[test]
fn etc_linked_to_the_host_gets_no_passwd_written_there() {
    for suite in ["etc-abs", "etc-climb"] {
        let o = check(suite, "base-passwd, evil");
        // /etc resolves inside the root and does not exist there: the fix-up cannot write.
        assert_eq!(o[0].0, 2, "{o:?}");
        assert!(o[0].1.contains("/etc"), "{o:?}");
    }
}

#[test]
fn dpkg_database_linked_to_the_host_is_written_nowhere_outside() {
    for suite in ["dpkg-abs", "info-climb", "info-abs"] {
        let o = check(suite, "evil");
        assert_eq!(o[0].0, 2, "{suite}: {o:?}");
        assert!(o[0].1.contains("/var/lib/dpkg"), "{o:?}");
    }
}

#[test]
fn fixups_never_read_a_host_file() {
    for (suite, pkgs) in [
        ("read-passwd", "base-passwd"),
        ("read-certs", "ca-certificates"),
        ("read-ldconf", "evil"),
    ] {
        let o = check(suite, pkgs);
        // The links resolve inside the root, to nothing: the fix-ups skip them.
        assert_eq!(o[0].0, 0, "{suite}: {o:?}");
    }
    // A link that climbs above the root is refused when the tree is checked.
    let o = check("read-climb", "base-passwd");
    assert_eq!(o[0].0, 2, "{o:?}");
    assert!(o[0].1.contains("escapes the root"), "{o:?}");
    assert!(o[0].1.contains("the apt packages"), "{o:?}");
}

#[test]
fn links_that_stay_inside_are_followed_as_in_a_container() {
    let f = fixture();
    let before = tree(&f.host);
    let (code, stderr, _, dir) = build("etc-inside", "base-passwd, evil", false);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(tree(&f.host), before);
    // /etc -> /srv/etc: the fix-up wrote /srv/etc/passwd inside the image.
    let bytes = layer_bytes(&dir.join("out"));
    assert!(contains(&bytes, "srv/etc/passwd"));
    assert!(contains(&bytes, "root:x:0:0::/root:/bin/sh"));
    let _ = std::fs::remove_dir_all(&dir);
    check("etc-inside", "base-passwd, evil");
}

#[test]
fn alternatives_linked_to_the_host_are_refused() {
    let o = check("alternatives", "evil");
    assert_eq!(o[0].0, 2, "{o:?}");
    assert!(o[0].1.contains("/etc/alternatives"), "{o:?}");
}

#[test]
fn setcap_in_a_postinst_becomes_a_capability_in_the_layer() {
    let (code, stderr, _, dir) = build("caps", "iputils-ping", false);
    assert_eq!(code, 0, "{stderr}");
    let found: Vec<(String, String)> = layer_xattrs(&dir.join("out"))
        .into_iter()
        .filter(|(_, name, _)| name == "security.capability")
        .map(|(path, _, value)| (path, hex::encode(value)))
        .collect();
    // /bin is a link to usr/bin under merged-/usr: the file lives at usr/bin/ping.
    assert_eq!(
        found,
        [(
            "usr/bin/ping".to_string(),
            "0100000200200000000000000000000000000000".to_string()
        )]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
