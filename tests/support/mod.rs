//! A fixture apt repository for the `apt_*` tests: packages built with dpkg-deb, `Packages` and
//! `Release` written, signed with a throwaway gpg key, served over loopback HTTP.
//! Needs `dpkg-deb` and `gpg` (Debian packages `dpkg`, `gpg`); fails loudly without them.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use gpuimg::digest::Digest;

pub fn sh(cmd: &mut Command) -> Vec<u8> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("failed to run {cmd:?} (is it installed?): {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A package to build: control fields beyond Package/Version/Architecture, and files.
pub struct Pkg {
    pub name: &'static str,
    pub version: &'static str,
    pub fields: Vec<(&'static str, &'static str)>,
    pub files: Vec<(&'static str, &'static [u8], u32)>,
    pub symlinks: Vec<(&'static str, &'static str)>,
    pub hardlinks: Vec<(&'static str, &'static str)>,
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
        compression: "gzip",
    }
}

impl Pkg {
    pub fn field(mut self, k: &'static str, v: &'static str) -> Self {
        self.fields.push((k, v));
        self
    }
}

/// How the server misbehaves for one path.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Send the full Content-Length header but only half the body, then close.
    Truncate,
    /// Flip one byte of the body.
    Corrupt,
    /// The body, then the file again and again forever; no Content-Length (ends at close).
    Endless,
    /// The same endless body, chunked.
    EndlessChunked,
    /// The same endless body, announced with a Content-Length of 10 GB.
    HugeLength,
    /// `n` extra bytes after the body, announced honestly in Content-Length.
    Long(usize),
    /// `n` extra bytes after the body, no Content-Length.
    LongUnannounced(usize),
    /// The body less its last `n` bytes, announced honestly (the server has a shorter file).
    ShortBy(usize),
    /// The full Content-Length, then only the first `n` bytes, then close.
    CloseAfter(usize),
    /// Headers at once, then the body one byte every `ms` milliseconds.
    Drip(u64),
    /// The response head itself one byte every `ms` milliseconds.
    DripHeaders(u64),
    /// Read the request, answer nothing for `ms` milliseconds, then close.
    Hang(u64),
    /// Answer every request with this status.
    Status(u16),
    /// Answer the first `n` requests with `status`, then serve the file.
    StatusFirst(u16, usize),
}

pub struct Server {
    pub url: String,
    pub faults: Arc<Mutex<HashMap<String, Fault>>>,
    pub hits: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Make `path` (e.g. `/dists/s/InRelease`) misbehave.
    pub fn fault(&self, path: &str, f: Fault) {
        self.faults.lock().unwrap().insert(path.to_string(), f);
    }

    /// How many requests `path` got.
    pub fn hits_of(&self, path: &str) -> usize {
        self.hits
            .lock()
            .unwrap()
            .iter()
            .filter(|p| *p == path)
            .count()
    }
}

fn status_line(code: u16) -> String {
    let reason = match code {
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

/// Write `body`, then the file again and again until the client goes away; chunked or not.
fn endless(stream: &mut impl Write, body: &[u8], chunked: bool) {
    let unit: Vec<u8> = if body.is_empty() {
        vec![b'A'; 65536]
    } else {
        body.repeat(65536 / body.len() + 1)
    };
    let frame = |data: &[u8]| -> Vec<u8> {
        if !chunked {
            return data.to_vec();
        }
        let mut c = format!("{:x}\r\n", data.len()).into_bytes();
        c.extend_from_slice(data);
        c.extend_from_slice(b"\r\n");
        c
    };
    if !body.is_empty() && stream.write_all(&frame(body)).is_err() {
        return;
    }
    let chunk = frame(&unit);
    while stream.write_all(&chunk).is_ok() {}
}

/// Write `body`, then `extra` newlines.
fn padded(stream: &mut impl Write, body: &[u8], extra: usize) {
    let pad = vec![b'\n'; 65536];
    let mut left = extra;
    let mut ok = stream.write_all(body).is_ok();
    while ok && left > 0 {
        let n = left.min(pad.len());
        ok = stream.write_all(&pad[..n]).is_ok();
        left -= n;
    }
}

fn respond(stream: &mut std::net::TcpStream, mut body: Vec<u8>, fault: Option<Fault>, nth: usize) {
    let ok = |len: &str| format!("HTTP/1.1 200 OK\r\n{len}Connection: close\r\n\r\n");
    let len = body.len();
    let cl = |n: usize| format!("Content-Length: {n}\r\n");
    let sleep = |ms: u64| std::thread::sleep(std::time::Duration::from_millis(ms));
    match fault {
        None | Some(Fault::Corrupt) => {
            if fault.is_some() {
                body[len / 2] ^= 0x55;
            }
            let _ = stream.write_all(ok(&cl(len)).as_bytes());
            let _ = stream.write_all(&body);
        }
        Some(Fault::Truncate) => {
            let _ = stream.write_all(ok(&cl(len)).as_bytes());
            let _ = stream.write_all(&body[..len / 2]);
        }
        Some(Fault::CloseAfter(n)) => {
            let _ = stream.write_all(ok(&cl(len)).as_bytes());
            let _ = stream.write_all(&body[..n.min(len)]);
        }
        Some(Fault::ShortBy(n)) => {
            let keep = len.saturating_sub(n);
            let _ = stream.write_all(ok(&cl(keep)).as_bytes());
            let _ = stream.write_all(&body[..keep]);
        }
        Some(Fault::Long(n)) => {
            let _ = stream.write_all(ok(&cl(len + n)).as_bytes());
            padded(stream, &body, n);
        }
        Some(Fault::LongUnannounced(n)) => {
            let _ = stream.write_all(ok("").as_bytes());
            padded(stream, &body, n);
        }
        Some(Fault::Endless) => {
            let _ = stream.write_all(ok("").as_bytes());
            endless(stream, &body, false);
        }
        Some(Fault::EndlessChunked) => {
            let _ = stream.write_all(ok("Transfer-Encoding: chunked\r\n").as_bytes());
            endless(stream, &body, true);
        }
        Some(Fault::HugeLength) => {
            let _ = stream.write_all(ok("Content-Length: 10000000000\r\n").as_bytes());
            endless(stream, &body, false);
        }
        Some(Fault::Drip(ms)) => {
            let _ = stream.write_all(ok(&cl(len)).as_bytes());
            for b in &body {
                sleep(ms);
                if stream.write_all(&[*b]).is_err() {
                    return;
                }
            }
        }
        Some(Fault::DripHeaders(ms)) => {
            let head = ok(&cl(len));
            for b in head.as_bytes() {
                if stream.write_all(&[*b]).is_err() {
                    return;
                }
                sleep(ms);
            }
            let _ = stream.write_all(&body);
        }
        Some(Fault::Hang(ms)) => sleep(ms),
        Some(Fault::Status(code)) => {
            let _ = stream.write_all(status_line(code).as_bytes());
        }
        Some(Fault::StatusFirst(code, n)) => {
            if nth <= n {
                let _ = stream.write_all(status_line(code).as_bytes());
            } else {
                respond(stream, body, None, nth);
            }
        }
    }
}

/// Serve `root` on a loopback port until the process ends.
pub fn serve(root: &Path) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let faults: Arc<Mutex<HashMap<String, Fault>>> = Arc::default();
    let hits: Arc<Mutex<Vec<String>>> = Arc::default();
    let (root, f2, h2) = (root.to_path_buf(), faults.clone(), hits.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (root, faults, hits) = (root.clone(), f2.clone(), h2.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).is_err() {
                    return;
                }
                loop {
                    let mut l = String::new();
                    if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                        break;
                    }
                }
                let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
                let nth = {
                    let mut h = hits.lock().unwrap();
                    h.push(path.clone());
                    h.iter().filter(|p| **p == path).count()
                };
                let fault = faults.lock().unwrap().get(&path).copied();
                let file = root.join(path.trim_start_matches('/'));
                match std::fs::read(&file) {
                    Ok(body) => respond(&mut stream, body, fault, nth),
                    // A fault on a path with no file still answers (e.g. a status storm).
                    Err(_) if matches!(fault, Some(Fault::Status(_) | Fault::Hang(_))) => {
                        respond(&mut stream, Vec::new(), fault, nth)
                    }
                    Err(_) => {
                        let _ = stream.write_all(status_line(404).as_bytes());
                    }
                }
            });
        }
    });
    Server { url, faults, hits }
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
    sh(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Z", p.compression, "--build"])
        .arg(&stage)
        .arg(repo.join(&rel)));
    rel
}

/// The `Packages` stanza of a built .deb.
pub fn stanza(repo: &Path, rel: &str) -> String {
    let deb = repo.join(rel);
    let control = String::from_utf8(sh(Command::new("dpkg-deb").arg("-f").arg(&deb))).unwrap();
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
    sh(Command::new("gpg")
        .env("GNUPGHOME", &home)
        .args(["--batch", "--passphrase", "", "--quick-gen-key"])
        .arg(format!("{name} <{name}@example.invalid>"))
        .args(["ed25519", "sign", "never"]));
    let key = dir.join(format!("{name}.gpg"));
    let out = sh(Command::new("gpg").env("GNUPGHOME", &home).arg("--export"));
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
        sh(Command::new("gpg")
            .env("GNUPGHOME", home)
            .args(["--batch", "--yes", "--clearsign", "-o"])
            .arg(dist.join("InRelease"))
            .arg(dist.join("Release")));
        sh(Command::new("gpg")
            .env("GNUPGHOME", home)
            .args(["--batch", "--yes", "-abs", "-o"])
            .arg(dist.join("Release.gpg"))
            .arg(dist.join("Release")));
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

/// Read a whole file as a string (test helper).
pub fn read(p: &Path) -> String {
    let mut s = String::new();
    std::fs::File::open(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .read_to_string(&mut s)
        .unwrap();
    s
}

/// Every path under `root` with its type, mode, owner and content digest, sorted.
pub fn tree(root: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let what = if m.file_type().is_symlink() {
                format!("-> {}", std::fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                "dir".into()
            } else {
                gpuimg::digest::Digest::of(&std::fs::read(&p).unwrap()).to_string()
            };
            out.push(format!(
                "{rel} {:o} {}:{} {what}",
                m.mode(),
                m.uid(),
                m.gid()
            ));
        }
    }
    out.sort();
    out
}
