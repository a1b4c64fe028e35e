//! Reading a `.deb`: the `ar` container, `control.tar.*` and `data.tar.*` (gz, xz, zst or
//! plain).
//!
//! Must never write anywhere: it hands the data tarball to the unpacker as a stream.

use std::collections::BTreeMap;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::AptError;

/// The control members of a package (`control`, `md5sums`, `conffiles`, scripts...), by name.
pub struct ControlFiles {
    pub files: BTreeMap<String, (u32, Vec<u8>)>,
}

impl ControlFiles {
    pub fn text(&self, name: &str) -> Option<String> {
        self.files
            .get(name)
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
    }
}

/// Most bytes the control members may hold once decompressed (real ones are at most a few MiB
/// of `md5sums`): a small archive can expand without bound, and these are kept in memory.
pub const CONTROL_LIMIT: u64 = 16 << 20;

fn decoder<'a, R: Read + 'a>(member: &str, r: R) -> Result<Box<dyn Read + 'a>, String> {
    Ok(match member.rsplit_once('.') {
        Some((_, "tar")) => Box::new(r),
        Some((_, "gz")) => Box::new(flate2::read::GzDecoder::new(r)),
        // The package's sha256 is checked against the signed index before a byte of it is
        // read: xz's own CRC64 of the data would check nothing more.
        Some((_, "xz")) => Box::new(liblzma::bufread::XzDecoder::new_stream(
            std::io::BufReader::with_capacity(1 << 16, r),
            liblzma::stream::Stream::new_stream_decoder(u64::MAX, liblzma::stream::IGNORE_CHECK)
                .map_err(|e| e.to_string())?,
        )),
        Some((_, "zst")) => Box::new(zstd::Decoder::new(r).map_err(|e| e.to_string())?),
        _ => return Err(format!("unsupported member `{member}`")),
    })
}

/// Open `path`, read its control members, and pass the decompressed data tarball to `data`.
pub fn read_deb<T>(
    package: &str,
    path: &Path,
    data: impl FnOnce(&ControlFiles, &mut dyn Read) -> Result<T, AptError>,
) -> Result<(ControlFiles, T), AptError> {
    let bad = |message: String| AptError::InvalidDeb {
        package: package.to_string(),
        message,
    };
    let file = fs_err::File::open(path).map_err(AptError::io(path))?;
    let mut ar = ar::Archive::new(BufReader::with_capacity(1 << 20, file));
    let mut control: Option<ControlFiles> = None;
    let mut seen_binary = false;
    while let Some(entry) = ar.next_entry() {
        let mut entry = entry.map_err(|e| bad(format!("bad ar archive: {e}")))?;
        let name = String::from_utf8_lossy(entry.header().identifier())
            .trim_end_matches('/')
            .to_string();
        if name == "debian-binary" {
            let mut v = String::new();
            (&mut entry)
                .take(64)
                .read_to_string(&mut v)
                .map_err(|e| bad(e.to_string()))?;
            if !v.starts_with("2.") {
                return Err(bad(format!("unsupported format `{}`", v.trim())));
            }
            seen_binary = true;
        } else if name.starts_with("control.tar") {
            control = Some(control_member(&name, &mut entry, &bad)?);
        } else if name.starts_with("data.tar") {
            let (Some(c), true) = (control, seen_binary) else {
                return Err(bad("`data.tar` before `control.tar`".into()));
            };
            let mut r = decoder(&name, &mut entry).map_err(bad)?;
            let t = data(&c, &mut r)?;
            return Ok((c, t));
        }
    }
    Err(bad("no `data.tar` member".into()))
}

/// Parse one `control.tar.*` member: its regular files, at most [`CONTROL_LIMIT`] bytes.
fn control_member(
    name: &str,
    entry: &mut dyn Read,
    bad: &dyn Fn(String) -> AptError,
) -> Result<ControlFiles, AptError> {
    let mut files = BTreeMap::new();
    let mut held = 0u64;
    let mut tar = tar::Archive::new(decoder(name, entry).map_err(bad)?);
    for e in tar.entries().map_err(|e| bad(e.to_string()))? {
        let mut e = e.map_err(|e| bad(format!("bad `{name}`: {e}")))?;
        if !e.header().entry_type().is_file() {
            continue;
        }
        let p = e.path().map_err(|e| bad(e.to_string()))?;
        let Some(fname) = p.file_name().and_then(|f| f.to_str()).map(str::to_string) else {
            continue;
        };
        let mode = e.header().mode().unwrap_or(0o644);
        let mut buf = Vec::new();
        (&mut e)
            .take(CONTROL_LIMIT + 1 - held)
            .read_to_end(&mut buf)
            .map_err(|e| bad(format!("bad `{name}`: {e}")))?;
        // Each member also costs its name and header.
        held += 512 + buf.len() as u64;
        if held > CONTROL_LIMIT {
            return Err(bad(format!(
                "`{name}` holds more than {} MiB",
                CONTROL_LIMIT >> 20
            )));
        }
        files.insert(fname, (mode, buf));
    }
    if !files.contains_key("control") {
        return Err(bad("no `control` file".into()));
    }
    Ok(ControlFiles { files })
}

/// Only the control members of the package at `path` (its data is never decompressed).
pub fn read_control(package: &str, path: &Path) -> Result<ControlFiles, AptError> {
    let bad = |message: String| AptError::InvalidDeb {
        package: package.to_string(),
        message,
    };
    let file = fs_err::File::open(path).map_err(AptError::io(path))?;
    let mut ar = ar::Archive::new(BufReader::with_capacity(64 << 10, file));
    while let Some(entry) = ar.next_entry() {
        let mut entry = entry.map_err(|e| bad(format!("bad ar archive: {e}")))?;
        let name = String::from_utf8_lossy(entry.header().identifier())
            .trim_end_matches('/')
            .to_string();
        if name.starts_with("control.tar") {
            return control_member(&name, &mut entry, &bad);
        }
    }
    Err(bad("no `control.tar` member".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{decode_in_order, Decoded, DECODED_LIMIT};

    /// A zstd frame of `header` then zeros, `total` bytes once decompressed: raw and RLE blocks
    /// of 128 KiB, 4 bytes of input each (a decompression bomb).
    fn zstd_zeros(header: &[u8], total: u64) -> Vec<u8> {
        let block = |size: u64, kind: u64, last: bool| {
            let v = u64::from(last) | (kind << 1) | (size << 3);
            [v as u8, (v >> 8) as u8, (v >> 16) as u8]
        };
        let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3];
        let mut left = total - header.len() as u64;
        out.extend_from_slice(&block(header.len() as u64, 0, false));
        out.extend_from_slice(header);
        while left > 0 {
            let n = left.min(128 << 10);
            left -= n;
            out.extend_from_slice(&block(n, 1, left == 0));
            out.push(0);
        }
        out
    }

    /// A tar header for a regular file `path` of `size` bytes.
    fn tar_header(path: &str, size: u64) -> Vec<u8> {
        let mut h = tar::Header::new_ustar();
        h.set_path(path).unwrap();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_cksum();
        h.as_bytes().to_vec()
    }

    fn plain_tar(path: &str, data: &[u8]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, path, data).unwrap();
        b.into_inner().unwrap()
    }

    fn deb(dir: &Path, members: &[(&str, Vec<u8>)]) -> std::path::PathBuf {
        let p = dir.join("bomb.deb");
        let mut ar = ar::Builder::new(std::fs::File::create(&p).unwrap());
        for (name, data) in members {
            let h = ar::Header::new(name.as_bytes().to_vec(), data.len() as u64);
            ar.append(&h, &data[..]).unwrap();
        }
        p
    }

    fn control() -> Vec<u8> {
        plain_tar(
            "./control",
            b"Package: bomb\nVersion: 1\nArchitecture: all\n",
        )
    }

    #[test]
    fn control_members_that_expand_past_the_limit_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        // 3 GiB in one member, and (each under the limit) many members adding up past it.
        let one = zstd_zeros(&tar_header("./control", 3 << 30), (3 << 30) + 1536);
        let mut many = tar::Builder::new(Vec::new());
        for i in 0..40 {
            let mut h = tar::Header::new_ustar();
            h.set_size(1 << 19);
            h.set_mode(0o644);
            h.set_cksum();
            many.append_data(&mut h, format!("./f{i}"), &vec![b'x'; 1 << 19][..])
                .unwrap();
        }
        let many = many.into_inner().unwrap();
        for (member, data) in [("control.tar.zst", one), ("control.tar", many)] {
            let p = deb(
                dir.path(),
                &[("debian-binary", b"2.0\n".to_vec()), (member, data)],
            );
            let e = read_deb("bomb", &p, |_, _| Ok(())).err().unwrap();
            assert!(
                e.to_string().contains("holds more than 16 MiB"),
                "{member}: {e}"
            );
        }
    }

    #[test]
    fn data_that_expands_past_the_limit_is_streamed_not_held() {
        let dir = tempfile::tempdir().unwrap();
        let size = DECODED_LIMIT + (1 << 20);
        let data = zstd_zeros(&tar_header("./big", size), size + 1536);
        let p = deb(
            dir.path(),
            &[
                ("debian-binary", b"2.0\n".to_vec()),
                ("control.tar", control()),
                ("data.tar.zst", data),
            ],
        );
        let items = [("bomb".to_string(), p.clone(), 1)];
        let mut streamed = false;
        decode_in_order(&items, &[], 2, |_, d| {
            streamed = matches!(d?, Decoded::Stream);
            Ok(())
        })
        .unwrap();
        assert!(streamed, "a {size}-byte data tarball was held in memory");
    }
}
