//! Target `deb`: a `.deb` as `base.apt` installs it: the `ar` container, `control.tar.*` and
//! `data.tar.*` (gz, xz, zstd, plain) through `read_deb`, decoded ahead in memory
//! (`decode_in_order`, as with parallel jobs) and streamed (as with one job), each unpacked
//! into its own root by `unpack` through `confined::Root`.
//!
//! Seeds are real packages built by dpkg-deb (tests/fuzz/corpus/deb/). Mutations work on the
//! members: the control file's fields, both tarballs through `tar_model` (paths and links
//! aimed at a canary directory beside the root, never at the host's own files), member names
//! and order, compression, zstd decompression bombs, and raw bytes of the archive. Properties:
//! nothing outside the root changes; errors name the package; listed paths are absolute
//! without `..`; the in-memory and streaming paths unpack the same tree when both succeed.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Result, Unstructured};
use gpuimg_apt::parsers::{decode_in_order, paragraphs, read_deb, unpack, Decoded};
use gpuimg_apt::AptError;
use gpuimg_store::confined::Root;

use crate::fuzz::harness::{files, work_dir, Target, Verdict};
use crate::fuzz::mutate::{havoc, ByteOp};
use crate::fuzz::tar_model::{self, Compression};

pub static TARGET: Target = Target {
    name: "deb",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 1_000,
};

fn seeds() -> Vec<Vec<u8>> {
    files("corpus", "deb").into_iter().map(|(_, b)| b).collect()
}

/// Where each check unpacks: `<work>/a/root`, `<work>/b/root`, with `<work>/*/outside` beside.
fn work() -> &'static Path {
    static W: OnceLock<PathBuf> = OnceLock::new();
    W.get_or_init(|| work_dir("deb"))
}

/// Entry paths and link targets: climbing, absolute (only toward the canary directory), and
/// the names a root filesystem has.
fn paths() -> &'static [Vec<u8>] {
    static P: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    P.get_or_init(|| {
        let outside = work().join("a/outside").display().to_string();
        let mut v: Vec<Vec<u8>> = [
            "",
            ".",
            "./",
            "..",
            "../outside",
            "../../outside",
            "./../outside/x",
            "a/../../x",
            "a/./b",
            "a//b",
            "/",
            "usr",
            "usr/",
            "./usr/bin/x",
            "usr/lib",
            "lib",
            "bin",
            "etc",
            "etc/x",
            "var/lib/dpkg/info",
            "x",
            "x/y",
            "x\0y",
            "\u{ff}",
            "a\nb",
            " ",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        v.push(outside.clone().into_bytes());
        v.push(format!("{outside}/x").into_bytes());
        v.push(format!("/../..{outside}").into_bytes());
        v
    })
}

const MEMBERS: &[&str] = &[
    "debian-binary",
    "control.tar",
    "control.tar.gz",
    "control.tar.xz",
    "control.tar.zst",
    "data.tar",
    "data.tar.gz",
    "data.tar.xz",
    "data.tar.zst",
    "data.tar.bz2",
    "_gpgorigin",
    "control.tar.gz/",
    "",
];

const CONTROL_DICT: &[&[u8]] = &[
    b"Package: ",
    b"Version: ",
    b"Architecture: ",
    b"Depends: ",
    b"Multi-Arch: same\n",
    b"Conffiles:\n",
    b"\n ",
    b"\n\n",
    b": ",
    b"\0",
    b"\xff",
    b"\r\n",
    b"2.0\n",
    b"3.0\n",
];

#[derive(Debug, Arbitrary)]
enum DebOp {
    ControlFile,
    ControlTar,
    DataTar,
    Rename { member: usize, name: usize },
    Remove { member: usize },
    Duplicate { member: usize },
    Swap { a: usize, b: usize },
    Compress { control: bool, how: Compression },
    Version(Vec<u8>),
}

/// A package as members, the tarballs decompressed.
struct Deb {
    members: Vec<(String, Vec<u8>)>,
}

fn decompress(name: &str, b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let r: Box<dyn Read + '_> = match name.rsplit_once('.').map(|x| x.1) {
        Some("gz") => Box::new(flate2::read::GzDecoder::new(b)),
        Some("xz") => Box::new(liblzma::read::XzDecoder::new(b)),
        Some("zst") => Box::new(zstd::stream::read::Decoder::new(b).ok()?),
        _ => Box::new(b),
    };
    r.take(1 << 20).read_to_end(&mut out).ok()?;
    Some(out)
}

fn parse_ar(b: &[u8]) -> Deb {
    let mut members = Vec::new();
    let mut a = ar::Archive::new(b);
    while let Some(Ok(mut e)) = a.next_entry() {
        let name = String::from_utf8_lossy(e.header().identifier()).into_owned();
        let mut data = Vec::new();
        if e.read_to_end(&mut data).is_err() {
            break;
        }
        members.push((name, data));
    }
    Deb { members }
}

/// `ar` as dpkg writes it (common format, names up to 16 bytes, sizes in decimal).
fn build_ar(d: &Deb) -> Vec<u8> {
    let mut out = b"!<arch>\n".to_vec();
    for (name, data) in &d.members {
        let h = format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            name,
            0,
            0,
            0,
            "100644",
            data.len()
        );
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    out
}

fn member(d: &Deb, prefix: &str) -> Option<usize> {
    d.members.iter().position(|(n, _)| n.starts_with(prefix))
}

/// Rewrite a compressed tar member through `edit` on its plain tar (kept compressed alike).
fn edit_tar(
    d: &mut Deb,
    prefix: &str,
    edit: impl FnOnce(Vec<u8>) -> Result<Vec<u8>>,
) -> Result<()> {
    let Some(i) = member(d, prefix) else {
        return Ok(());
    };
    let name = d.members[i].0.clone();
    let Some(plain) = decompress(&name, &d.members[i].1) else {
        return Ok(());
    };
    let tar = edit(plain)?;
    let z = match name.rsplit_once('.').map(|x| x.1) {
        Some("gz") => Compression::Gzip,
        Some("xz") => Compression::Xz,
        Some("zst") => Compression::Zstd,
        _ => Compression::None,
    };
    d.members[i].1 = z.apply(&tar);
    Ok(())
}

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let mut d = parse_ar(&seeds[u.choose_index(seeds.len())?]);
    for _ in 0..u.int_in_range(1..=4)? {
        let op: DebOp = u.arbitrary()?;
        let n = d.members.len().max(1);
        match op {
            DebOp::ControlFile => edit_tar(&mut d, "control.tar", |t| {
                let mut es = tar_model::parse(&t);
                if let Some(e) = es
                    .iter_mut()
                    .find(|e| e.header[..12] == *b"./control\0\0\0")
                {
                    havoc(u, &mut e.data, 6, CONTROL_DICT, &[])?;
                    tar_model::set_number(&mut e.header[124..136], e.data.len() as u64);
                    tar_model::fix_checksum(&mut e.header);
                }
                Ok(tar_model::build(&es, 2))
            })?,
            DebOp::ControlTar => edit_tar(&mut d, "control.tar", |t| {
                tar_model::mutate(u, &t, 4, paths())
            })?,
            DebOp::DataTar => {
                edit_tar(&mut d, "data.tar", |t| tar_model::mutate(u, &t, 8, paths()))?
            }
            DebOp::Rename { member, name } => {
                if !d.members.is_empty() {
                    d.members[member % n].0 = MEMBERS[name % MEMBERS.len()].to_string();
                }
            }
            DebOp::Remove { member } => {
                if !d.members.is_empty() {
                    d.members.remove(member % n);
                }
            }
            DebOp::Duplicate { member } => {
                if !d.members.is_empty() {
                    let m = d.members[member % n].clone();
                    d.members.insert(member % n, m);
                }
            }
            DebOp::Swap { a, b } => {
                if !d.members.is_empty() {
                    d.members.swap(a % n, b % n);
                }
            }
            DebOp::Compress { control, how } => {
                let prefix = if control { "control.tar" } else { "data.tar" };
                if let Some(i) = member(&d, prefix) {
                    if let Some(plain) = decompress(&d.members[i].0, &d.members[i].1) {
                        d.members[i] = (format!("{prefix}{}", how.suffix()), how.apply(&plain));
                    }
                }
            }
            DebOp::Version(v) => {
                if let Some(i) = member(&d, "debian-binary") {
                    d.members[i].1 = v;
                }
            }
        }
    }
    // Rarely (each costs a few hundred MiB of decompression), a member that decompresses to
    // 3 GiB: one header claiming all of it, then zeros, 100 KB of zstd.
    if u.ratio(1, 50)? {
        let control: bool = u.arbitrary()?;
        let (prefix, path) = if control {
            ("control.tar", "./control")
        } else {
            ("data.tar", "./usr/share/bomb")
        };
        let size = 3u64 << 30;
        let h = tar_model::header(b'0', path.as_bytes(), b"", size, 0o644);
        let bomb = tar_model::zstd_bomb(&h, 512 + size + 1024);
        match member(&d, prefix) {
            Some(i) => d.members[i] = (format!("{prefix}.zst"), bomb),
            None => d.members.push((format!("{prefix}.zst"), bomb)),
        }
    }
    let mut out = build_ar(&d);
    if u.ratio(1, 8)? {
        let op: ByteOp = u.arbitrary()?;
        op.apply(&mut out, &[b"!<arch>\n", b"`\n", b"data.tar.xz"], seeds);
    }
    Ok(out)
}

/// A reader that fails past `left` bytes: the streamed unpack may not fill the disk.
struct Capped<'a> {
    inner: &'a mut dyn Read,
    left: u64,
}

impl Read for Capped<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other(
                "the fuzz target's 8 MiB unpack budget",
            ));
        }
        let n = buf.len().min(self.left as usize);
        let got = self.inner.read(&mut buf[..n])?;
        self.left -= got as u64;
        Ok(got)
    }
}

fn capped(inner: &mut dyn Read) -> Capped<'_> {
    Capped {
        inner,
        left: 8 << 20,
    }
}

/// Every path under `root`, with what a package can set on it, never following links.
fn listing(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            let rel = p
                .strip_prefix(root)
                .map_or_else(|_| p.clone(), Path::to_path_buf);
            let what = if m.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&p).ok())
            } else if m.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else {
                let data = std::fs::read(&p).unwrap_or_default();
                format!(
                    "file {} {}",
                    data.len(),
                    gpuimg_store::digest::Digest::of(&data).hex()
                )
            };
            out.insert(
                rel.display().to_string(),
                format!("{what} {:o} {}:{}", m.mode(), m.uid(), m.gid()),
            );
        }
    }
    out
}

/// A fresh `<work>/<side>/{root, outside/canary}`.
fn prepare(side: &str) -> std::result::Result<PathBuf, String> {
    let base = work().join(side);
    let _ = std::fs::remove_dir_all(&base);
    let io = |e: std::io::Error| format!("cannot prepare `{}`: {e}", base.display());
    std::fs::create_dir_all(base.join("root")).map_err(io)?;
    std::fs::create_dir_all(base.join("outside")).map_err(io)?;
    std::fs::write(base.join("outside/canary"), b"canary\n").map_err(io)?;
    Ok(base)
}

/// Nothing but `root` may have changed under `base`.
fn contained(base: &Path) -> std::result::Result<(), String> {
    let mut names: Vec<String> = std::fs::read_dir(base)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    if names != ["outside", "root"] {
        return Err(format!("`{}` now holds {names:?}", base.display()));
    }
    let outside = listing(&base.join("outside"));
    let canary: Vec<&String> = outside.keys().collect();
    let data = std::fs::read(base.join("outside/canary")).unwrap_or_default();
    if canary != ["canary"] || data != b"canary\n" {
        return Err(format!("the unpack wrote outside its root: {outside:?}"));
    }
    Ok(())
}

fn typed(e: &AptError) -> std::result::Result<(), String> {
    let s = e.to_string();
    match e {
        AptError::InvalidDeb { .. } | AptError::UnsafePath { .. } | AptError::Unpack { .. }
            if s.contains("`fuzz`") =>
        {
            Ok(())
        }
        other => Err(format!("unexpected error: {other}")),
    }
}

fn listed_ok(paths: &[String]) -> std::result::Result<(), String> {
    for p in paths {
        if !p.starts_with('/') || p.split('/').any(|c| c == "..") {
            return Err(format!("listed path `{p}`"));
        }
    }
    Ok(())
}

fn check(input: &[u8]) -> Verdict {
    let deb = work().join("fuzz.deb");
    std::fs::write(&deb, input).map_err(|e| format!("cannot write the input: {e}"))?;

    // As with parallel jobs: decoded ahead in memory (streamed when too large).
    let a = prepare("a")?;
    let root_a = Root::open(&a.join("root")).map_err(|e| format!("cannot open the root: {e}"))?;
    let items = [("fuzz".to_string(), deb.clone(), input.len() as u64)];
    let mut listed_a = Vec::new();
    let ra = decode_in_order(&items, &[], 2, |_, decoded| {
        let u = match decoded? {
            Decoded::Memory(control, data) => {
                if let Some(t) = control.text("control") {
                    let _ = paragraphs(&t).count();
                }
                unpack(&root_a, "fuzz", &mut &data[..])?
            }
            Decoded::Stream => {
                read_deb("fuzz", &deb, |_, r| unpack(&root_a, "fuzz", &mut capped(r)))?.1
            }
            Decoded::Control(_) => {
                return Err(gpuimg_apt::AptError::InvalidDeb {
                    package: "fuzz".into(),
                    message: "only the control members were decoded, though the data was asked for"
                        .into(),
                })
            }
        };
        listed_a = u.paths;
        Ok(())
    });
    contained(&a)?;

    // As with one job: the data tarball streamed into the unpacker.
    let b = prepare("b")?;
    let root_b = Root::open(&b.join("root")).map_err(|e| format!("cannot open the root: {e}"))?;
    let rb = read_deb("fuzz", &deb, |_, r| unpack(&root_b, "fuzz", &mut capped(r)));
    contained(&b)?;

    match (&ra, &rb) {
        (Ok(()), Ok((_, ub))) => {
            listed_ok(&listed_a)?;
            listed_ok(&ub.paths)?;
            if listed_a != ub.paths {
                return Err("in-memory and streamed unpacks list different paths".into());
            }
            let (ta, tb) = (listing(&a.join("root")), listing(&b.join("root")));
            if ta != tb {
                return Err(format!(
                    "in-memory and streamed unpacks differ:\n{ta:?}\n{tb:?}"
                ));
            }
            Ok("unpacked")
        }
        _ => {
            if let Err(e) = &ra {
                typed(e)?;
            }
            if let Err(e) = &rb {
                typed(e)?;
            }
            Ok(if ra.is_ok() || rb.is_ok() {
                "unpacked by one path only"
            } else {
                "refused"
            })
        }
    }
}
