//! A fixture apt repository for the `apt_*` tests: packages built with dpkg-deb (or by hand,
//! for entries dpkg-deb refuses), `Packages` and `Release` written and signed with a throwaway
//! gpg key. `http.rs` serves it. [`apt_fixture`] is the apt client's own (also used by the
//! crate `gpuimg-apt`'s tests, `crates/apt/tests/it`, which take this file, `http.rs`, `cmd.rs`
//! and `fs.rs` by path). Needs `dpkg-deb` and `gpg` (Debian packages `dpkg`, `gpg`);
//! fails loudly without them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpuimg_store::digest::Digest;

use super::cmd::run_ok_bytes;

/// A package to build: control fields beyond Package/Version/Architecture, and files.
pub struct Pkg {
    pub name: &'static str,
    pub version: &'static str,
    pub fields: Vec<(&'static str, &'static str)>,
    pub files: Vec<(&'static str, &'static [u8], u32)>,
    pub symlinks: Vec<(&'static str, &'static str)>,
    pub hardlinks: Vec<(&'static str, &'static str)>,
    /// Maintainer scripts (`postinst`, …) and their text.
    pub scripts: Vec<(&'static str, String)>,
    pub compression: &'static str,
}

pub fn pkg(name: &'static str, version: &'static str) -> Pkg {
    Pkg {
        name,
        version,
        fields: Vec::new(),
        files: Vec::new(),
        symlinks: Vec::new(),
        hardlinks: Vec::new(),
        scripts: Vec::new(),
        compression: "gzip",
    }
}

impl Pkg {
    pub fn field(mut self, k: &'static str, v: &'static str) -> Self {
        self.fields.push((k, v));
        self
    }

    /// A maintainer script (`postinst`) of the package.
    pub fn script(mut self, name: &'static str, text: impl Into<String>) -> Self {
        self.scripts.push((name, text.into()));
        self
    }
}

/// Build `p` into `pool/` under `repo` with dpkg-deb; returns the path relative to `repo`.
pub fn build_deb(repo: &Path, work: &Path, p: &Pkg) -> String {
    let stage = work.join(format!("stage-{}-{}", p.name, p.version));
    std::fs::create_dir_all(stage.join("DEBIAN")).unwrap();
    let mut control = format!(
        "Package: {}\nVersion: {}\nArchitecture: {}\nMaintainer: Test <t@example.invalid>\nDescription: fixture {}\n",
        p.name,
        p.version,
        p.fields
            .iter()
            .find(|(k, _)| *k == "Architecture")
            .map_or("amd64", |(_, v)| v),
        p.name
    );
    for (k, v) in p.fields.iter().filter(|(k, _)| *k != "Architecture") {
        control.push_str(&format!("{k}: {v}\n"));
    }
    std::fs::write(stage.join("DEBIAN/control"), control).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for (name, text) in &p.scripts {
        let f = stage.join("DEBIAN").join(name);
        std::fs::write(&f, text).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for (path, data, mode) in &p.files {
        let f = stage.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, data).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(*mode)).unwrap();
    }
    for (link, target) in &p.symlinks {
        let l = stage.join(link.trim_start_matches('/'));
        std::fs::create_dir_all(l.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, l).unwrap();
    }
    for (link, target) in &p.hardlinks {
        std::fs::hard_link(
            stage.join(target.trim_start_matches('/')),
            stage.join(link.trim_start_matches('/')),
        )
        .unwrap();
    }
    let rel = format!("pool/main/{}_{}_amd64.deb", p.name, p.version);
    std::fs::create_dir_all(repo.join("pool/main")).unwrap();
    run_ok_bytes(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Z", p.compression, "--build"])
            .arg(&stage)
            .arg(repo.join(&rel)),
    );
    rel
}

/// The `Packages` stanza of a built .deb.
pub fn stanza(repo: &Path, rel: &str) -> String {
    let deb = repo.join(rel);
    let control =
        String::from_utf8(run_ok_bytes(Command::new("dpkg-deb").arg("-f").arg(&deb))).unwrap();
    let bytes = std::fs::read(&deb).unwrap();
    format!(
        "{}Filename: {rel}\nSize: {}\nSHA256: {}\n",
        control,
        bytes.len(),
        Digest::of(&bytes).hex()
    )
}

/// A throwaway signing key in its own GNUPGHOME; returns (home, exported public key file).
pub fn gen_key(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let home = dir.join(format!("gnupg-{name}"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    run_ok_bytes(
        Command::new("gpg")
            .env("GNUPGHOME", &home)
            .args(["--batch", "--passphrase", "", "--quick-gen-key"])
            .arg(format!("{name} <{name}@example.invalid>"))
            .args(["ed25519", "sign", "never"]),
    );
    let key = dir.join(format!("{name}.gpg"));
    let out = run_ok_bytes(Command::new("gpg").env("GNUPGHOME", &home).arg("--export"));
    assert!(!out.is_empty(), "gpg exported no key");
    std::fs::write(&key, out).unwrap();
    (home, key)
}

/// Write `dists/<suite>/` with `Packages`, `Packages.gz` and a Release over them; sign it
/// (InRelease and Release.gpg) when `home` is given.
pub fn write_dist(repo: &Path, suite: &str, stanzas: &[String], home: Option<&Path>) {
    let dist = repo.join("dists").join(suite);
    let bin = dist.join("main/binary-amd64");
    std::fs::create_dir_all(&bin).unwrap();
    let packages = stanzas.join("\n");
    std::fs::write(bin.join("Packages"), &packages).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(packages.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    std::fs::write(bin.join("Packages.gz"), &gz).unwrap();
    let mut release = format!(
        "Origin: fixture\nSuite: {suite}\nCodename: {suite}\nArchitectures: amd64\nComponents: main\nSHA256:\n"
    );
    for (name, data) in [
        ("main/binary-amd64/Packages", packages.as_bytes()),
        ("main/binary-amd64/Packages.gz", &gz[..]),
    ] {
        release.push_str(&format!(
            " {} {} {name}\n",
            Digest::of(data).hex(),
            data.len()
        ));
    }
    std::fs::write(dist.join("Release"), &release).unwrap();
    if let Some(home) = home {
        run_ok_bytes(
            Command::new("gpg")
                .env("GNUPGHOME", home)
                .args(["--batch", "--yes", "--clearsign", "-o"])
                .arg(dist.join("InRelease"))
                .arg(dist.join("Release")),
        );
        run_ok_bytes(
            Command::new("gpg")
                .env("GNUPGHOME", home)
                .args(["--batch", "--yes", "-abs", "-o"])
                .arg(dist.join("Release.gpg"))
                .arg(dist.join("Release")),
        );
    }
}

/// A .deb whose data tarball holds `path` verbatim (e.g. `../escape`), built by hand because
/// dpkg-deb refuses such paths.
pub fn evil_deb(repo: &Path, name: &'static str, path: &str) -> String {
    let mut control_tar = tar::Builder::new(Vec::new());
    let control = format!(
        "Package: {name}\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.invalid>\nDescription: evil\n"
    );
    let mut h = tar::Header::new_gnu();
    h.set_size(control.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    control_tar
        .append_data(&mut h, "./control", control.as_bytes())
        .unwrap();
    let control_tar = control_tar.into_inner().unwrap();

    let mut data = Vec::new();
    let body = b"pwned\n";
    let mut h = tar::Header::new_old();
    {
        let old = h.as_old_mut();
        old.name[..path.len()].copy_from_slice(path.as_bytes());
    }
    h.set_size(body.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    data.extend_from_slice(h.as_bytes());
    data.extend_from_slice(body);
    data.resize(512 + 512, 0);
    data.extend_from_slice(&[0u8; 1024]);

    let rel = format!("pool/main/{name}_1.0_amd64.deb");
    let file = std::fs::File::create(repo.join(&rel)).unwrap();
    let mut ar = ar::Builder::new(file);
    for (member, bytes) in [
        ("debian-binary", b"2.0\n".to_vec()),
        ("control.tar", control_tar),
        ("data.tar", data),
    ] {
        let header = ar::Header::new(member.as_bytes().to_vec(), bytes.len() as u64);
        ar.append(&header, &bytes[..]).unwrap();
    }
    rel
}

/// A signed fixture repository served on loopback (see [`signed_repo`]).
pub struct SignedRepo {
    pub url: String,
    /// The public key the releases are signed with.
    pub key: PathBuf,
    _server: super::http::Server,
    _dir: tempfile::TempDir,
}

impl SignedRepo {
    /// Copy the key to `dir/repo.gpg`, the `keyring:` the tests' profiles name.
    pub fn keyring_into(&self, dir: &Path) -> PathBuf {
        let to = dir.join("repo.gpg");
        std::fs::copy(&self.key, &to).unwrap();
        to
    }
}

/// Build each package once (a package listed in several suites is the same file), write each
/// suite's `Packages` and `Release` signed with a fresh key, and serve the repository.
pub fn signed_repo(suites: &[(&str, Vec<&Pkg>)]) -> SignedRepo {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    let work = dir.path().join("work");
    let (home, key) = gen_key(dir.path(), "fixture");
    let mut built: std::collections::HashMap<(&str, &str), String> = Default::default();
    for (suite, packages) in suites {
        let stanzas: Vec<String> = packages
            .iter()
            .map(|p| {
                built
                    .entry((p.name, p.version))
                    .or_insert_with(|| stanza(&root, &build_deb(&root, &work, p)))
                    .clone()
            })
            .collect();
        write_dist(&root, suite, &stanzas, Some(&home));
    }
    let server = super::http::serve(&root);
    SignedRepo {
        url: server.url.clone(),
        key,
        _server: server,
        _dir: dir,
    }
}

/// The fixture repository of the apt client's tests ([`apt_fixture`]): suites `stable`
/// (signed), `unsigned` and `tampered` (a flipped byte in its `Packages.gz`), packages for the
/// solver's cases (alternatives, versioned virtuals, Pre-Depends, Multi-Arch, conflicts), a
/// truncated and a corrupted download, and `evil` with a `../escape` path.
pub struct AptFixture {
    _dir: tempfile::TempDir,
    pub url: String,
    /// The key `stable` and `tampered` are signed with.
    pub key: PathBuf,
    /// A key nothing is signed with.
    pub wrong_key: PathBuf,
    _server: super::http::Server,
}

static FIXTURE: std::sync::OnceLock<AptFixture> = std::sync::OnceLock::new();

/// Built and served once per test binary.
pub fn apt_fixture() -> &'static AptFixture {
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let work = dir.path().join("work");
        let (home, key) = gen_key(dir.path(), "fixture");
        let (_, wrong_key) = gen_key(dir.path(), "other");
        let big: &'static [u8] = Box::leak(vec![7u8; 200_000].into_boxed_slice());
        let mut app = pkg("app", "1.0").field("Pre-Depends", "pre").field(
            "Depends",
            "nonexist | alt-b, virt (>= 2), lib (<< 2), tool:any, x1 | x2",
        );
        app.files = vec![
            ("/usr/bin/app", b"#!/bin/sh\necho app\n", 0o755),
            ("/usr/bin/app-suid", b"suid\n", 0o4755),
            ("/bin/app-legacy", b"legacy\n", 0o755),
            ("/etc/app.conf", b"conf=1\n", 0o644),
        ];
        app.symlinks = vec![("/usr/bin/app-link", "app")];
        app.hardlinks = vec![("/usr/bin/app-hard", "/usr/bin/app")];
        app.compression = "xz";
        let mut pre = pkg("pre", "1.0").field("Essential", "yes");
        pre.files = vec![("/usr/share/pre/pre.txt", b"pre\n", 0o644)];
        pre.compression = "zstd";
        let mut trunc = pkg("trunc", "1.0");
        trunc.files = vec![("/usr/share/trunc/big", big, 0o644)];
        trunc.compression = "none";
        let pkgs = vec![
            app,
            pre,
            pkg("lib", "1.0"),
            pkg("lib", "2.0"),
            pkg("alt-b", "1.0"),
            pkg("prov-old", "1.0").field("Provides", "virt (= 1)"),
            pkg("prov-new", "1.0").field("Provides", "virt (= 2)"),
            pkg("tool", "1.0").field("Multi-Arch", "allowed"),
            pkg("plain", "1.0"),
            pkg("x1", "1.0").field("Conflicts", "pre"),
            pkg("x2", "1.0"),
            pkg("needs-ghost", "1.0").field("Depends", "ghost (>= 1)"),
            pkg("bad-any", "1.0").field("Depends", "plain:any"),
            pkg("clash", "1.0").field("Depends", "c1"),
            pkg("c1", "1.0").field("Conflicts", "app"),
            pkg("tampered", "1.0"),
            trunc,
        ];
        let mut stanzas: Vec<String> = pkgs
            .iter()
            .map(|p| stanza(&root, &build_deb(&root, &work, p)))
            .collect();
        stanzas.push(stanza(&root, &evil_deb(&root, "evil", "../escape")));
        write_dist(&root, "stable", &stanzas, Some(&home));
        write_dist(&root, "unsigned", &stanzas, None);
        write_dist(&root, "tampered", &stanzas, Some(&home));
        let p = root.join("dists/tampered/main/binary-amd64/Packages.gz");
        let mut b = std::fs::read(&p).unwrap();
        let n = b.len();
        b[n - 9] ^= 1;
        std::fs::write(&p, b).unwrap();
        let server = super::http::serve(&root);
        server.faults.lock().unwrap().insert(
            "/pool/main/trunc_1.0_amd64.deb".into(),
            super::http::Fault::Truncate,
        );
        server.faults.lock().unwrap().insert(
            "/pool/main/tampered_1.0_amd64.deb".into(),
            super::http::Fault::Corrupt,
        );
        AptFixture {
            url: server.url.clone(),
            key,
            wrong_key,
            _server: server,
            _dir: dir,
        }
    })
}
