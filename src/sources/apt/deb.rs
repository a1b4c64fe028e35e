//! Reading a `.deb`: the `ar` container, `control.tar.*` and `data.tar.*` (gz, xz, zst or
//! plain).
//!
//! Must never write anywhere: it hands the data tarball to the unpacker as a stream.

use std::collections::BTreeMap;
use std::io::{BufReader, Read};
use std::path::Path;

use super::AptError;

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

/// Control files (scripts, md5sums, conffiles) are read into memory: at most this much in all.
const MAX_CONTROL_BYTES: u64 = 64 << 20;

fn decoder<'a, R: Read + 'a>(member: &str, r: R) -> Result<Box<dyn Read + 'a>, String> {
    Ok(match member.rsplit_once('.') {
        Some((_, "tar")) => Box::new(r),
        Some((_, "gz")) => Box::new(flate2::read::GzDecoder::new(r)),
        Some((_, "xz")) => Box::new(liblzma::read::XzDecoder::new(r)),
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
            let mut files = BTreeMap::new();
            let mut control_bytes = 0u64;
            let mut tar = tar::Archive::new(decoder(&name, &mut entry).map_err(bad)?);
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
                    .take(MAX_CONTROL_BYTES + 1 - control_bytes)
                    .read_to_end(&mut buf)
                    .map_err(|e| bad(format!("bad `{name}`: {e}")))?;
                control_bytes += buf.len() as u64;
                if control_bytes > MAX_CONTROL_BYTES {
                    return Err(bad(format!(
                        "`{name}` holds more than {MAX_CONTROL_BYTES} bytes of control files"
                    )));
                }
                files.insert(fname, (mode, buf));
            }
            if !files.contains_key("control") {
                return Err(bad("no `control` file".into()));
            }
            control = Some(ControlFiles { files });
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
