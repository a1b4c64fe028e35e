//! Native `/etc/ld.so.cache` generation (glibc's "glibc-ld.so.cache1.1" format), so libraries
//! in non-default directories (CUDA's, `/etc/ld.so.conf.d/*.conf`) resolve without running
//! `ldconfig` in the image.
//!
//! Reads only below the image root; entries are keyed by SONAME, sorted the way the dynamic
//! loader's binary search expects. Must never follow a symlink out of the root.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::path::Path;

use super::elf;
use super::unpack::Root;
use super::AptError;

const FLAG_ELF_LIBC6: i32 = 0x0003;
const FLAG_X8664_LIB64: i32 = 0x0300;
const FLAG_AARCH64_LIB64: i32 = 0x0a00;

/// Directories to index, in order: `/etc/ld.so.conf` (with `include` globs of `*.conf`), then
/// the multiarch and default trusted directories.
fn directories(root: &Root, triplet: &str) -> Vec<String> {
    let mut dirs = Vec::new();
    let conf = root.resolve(&["etc".into(), "ld.so.conf".into()]);
    if conf.is_ok_and(|p| p.is_file()) {
        read_conf(root, "etc/ld.so.conf", &mut dirs, 0);
    } else {
        // Debian's ld.so.conf (from libc-bin) is exactly this include.
        read_conf_text(root, "include /etc/ld.so.conf.d/*.conf", &mut dirs, 0);
    }
    for d in [
        format!("/usr/local/lib/{triplet}"),
        "/usr/local/lib".to_string(),
        format!("/lib/{triplet}"),
        format!("/usr/lib/{triplet}"),
        "/lib".to_string(),
        "/usr/lib".to_string(),
        "/lib64".to_string(),
        "/usr/lib64".to_string(),
    ] {
        dirs.push(d);
    }
    dirs
}

fn read_conf(root: &Root, rel: &str, dirs: &mut Vec<String>, depth: u32) {
    if depth > 8 {
        return;
    }
    let parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    let Ok(path) = root.resolve(&parts) else {
        return;
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    read_conf_text(root, &text, dirs, depth);
}

fn read_conf_text(root: &Root, text: &str, dirs: &mut Vec<String>, depth: u32) {
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(pattern) = line.strip_prefix("include") {
            let pattern = pattern.trim().trim_start_matches('/');
            let (dir, glob) = pattern.rsplit_once('/').unwrap_or(("", pattern));
            let suffix = glob.strip_prefix('*').unwrap_or(glob);
            let dparts: Vec<String> = dir.split('/').map(str::to_string).collect();
            let Ok(dpath) = root.resolve(&dparts) else {
                continue;
            };
            let mut names: Vec<String> = std::fs::read_dir(dpath)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.ends_with(suffix))
                .collect();
            names.sort();
            for n in names {
                read_conf(root, &format!("{dir}/{n}"), dirs, depth + 1);
            }
        } else if line.starts_with('/') {
            dirs.push(line.to_string());
        }
    }
}

/// glibc's `_dl_cache_libcmp`: digit runs compare numerically.
fn libcmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() {
        if a[i].is_ascii_digit() {
            if j >= b.len() || !b[j].is_ascii_digit() {
                return Ordering::Greater;
            }
            let (mut va, mut vb) = (0u64, 0u64);
            while i < a.len() && a[i].is_ascii_digit() {
                va = va.saturating_mul(10).saturating_add(u64::from(a[i] - b'0'));
                i += 1;
            }
            while j < b.len() && b[j].is_ascii_digit() {
                vb = vb.saturating_mul(10).saturating_add(u64::from(b[j] - b'0'));
                j += 1;
            }
            if va != vb {
                return va.cmp(&vb);
            }
        } else if j < b.len() && b[j].is_ascii_digit() {
            return Ordering::Less;
        } else if j >= b.len() || a[i] != b[j] {
            return a[i].cmp(b.get(j).unwrap_or(&0));
        } else {
            i += 1;
            j += 1;
        }
    }
    if j < b.len() {
        Ordering::Less
    } else {
        Ordering::Equal
    }
}

/// Index the image's libraries and write `etc/ld.so.cache`; returns the number of entries.
pub fn write_ld_cache(root_dir: &Path, debian_arch: &str) -> Result<usize, AptError> {
    let (triplet, machine, flags) = match debian_arch {
        "amd64" => ("x86_64-linux-gnu", 62u16, FLAG_ELF_LIBC6 | FLAG_X8664_LIB64),
        "arm64" => (
            "aarch64-linux-gnu",
            183,
            FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64,
        ),
        _ => return Ok(0),
    };
    let root = Root::new(root_dir);
    let mut seen_dirs = BTreeSet::new();
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut seen_keys = BTreeSet::new();
    for dir in directories(&root, triplet) {
        let parts: Vec<String> = dir.split('/').map(str::to_string).collect();
        let Ok(real) = root.resolve(&parts) else {
            continue;
        };
        let Ok(canon) = real.canonicalize() else {
            continue;
        };
        if !canon.starts_with(root_dir.canonicalize().map_err(AptError::io(root_dir))?)
            || !seen_dirs.insert(canon.clone())
        {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&canon) else {
            continue;
        };
        let mut names: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("lib") && n.contains(".so") || n.starts_with("ld-"))
            .collect();
        names.sort();
        for name in names {
            let mut p = parts.clone();
            p.push(name.clone());
            let Ok(file) = root.resolve(&p) else { continue };
            // Follow a final symlink inside the root.
            let target = match std::fs::symlink_metadata(&file) {
                Ok(m) if m.file_type().is_symlink() => {
                    let Ok(t) = std::fs::read_link(&file) else {
                        continue;
                    };
                    let mut tp = if t.is_absolute() {
                        Vec::new()
                    } else {
                        parts.clone()
                    };
                    tp.extend(t.iter().map(|c| c.to_string_lossy().into_owned()));
                    tp.push(".".into());
                    match root.resolve(&tp) {
                        Ok(r) => r,
                        Err(_) => continue,
                    }
                }
                Ok(_) => file,
                Err(_) => continue,
            };
            let Ok(bytes) = read_head(&target) else {
                continue;
            };
            let Some(so) = elf::parse(&bytes) else {
                continue;
            };
            if !so.is_64 || so.machine != machine {
                continue;
            }
            let key = so.soname.unwrap_or_else(|| name.clone());
            if key != name {
                continue;
            }
            let dir = dir.trim_end_matches('/');
            if seen_keys.insert((key.clone(), dir.to_string())) {
                entries.push((key, format!("{dir}/{name}")));
            }
        }
    }
    // Descending in libcmp order (the loader's binary search), stable for equal keys.
    entries.sort_by(|a, b| libcmp(&b.0, &a.0));
    let data = encode(&entries, flags);
    let out = root_dir.join("etc/ld.so.cache");
    if let Some(parent) = out.parent() {
        fs_err::create_dir_all(parent).map_err(AptError::io(parent))?;
    }
    fs_err::write(&out, data).map_err(AptError::io(&out))?;
    Ok(entries.len())
}

/// Read enough of a file for its ELF headers and dynamic section.
fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a file"));
    }
    std::fs::read(path)
}

fn encode(entries: &[(String, String)], flags: i32) -> Vec<u8> {
    const HEADER: usize = 48;
    const ENTRY: usize = 24;
    let strings_at = HEADER + ENTRY * entries.len();
    let mut strings: Vec<u8> = Vec::new();
    let mut table: Vec<u8> = Vec::new();
    for (key, value) in entries {
        let k = strings_at + strings.len();
        strings.extend_from_slice(key.as_bytes());
        strings.push(0);
        let v = strings_at + strings.len();
        strings.extend_from_slice(value.as_bytes());
        strings.push(0);
        table.extend_from_slice(&flags.to_le_bytes());
        table.extend_from_slice(&(k as u32).to_le_bytes());
        table.extend_from_slice(&(v as u32).to_le_bytes());
        table.extend_from_slice(&0u32.to_le_bytes());
        table.extend_from_slice(&0u64.to_le_bytes());
    }
    let mut out = Vec::with_capacity(strings_at + strings.len());
    out.extend_from_slice(b"glibc-ld.so.cache");
    out.extend_from_slice(b"1.1");
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    out.extend_from_slice(&(strings.len() as u32).to_le_bytes());
    out.push(2); // flags: little endian
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&0u32.to_le_bytes()); // no extension section
    out.extend_from_slice(&[0u8; 12]);
    out.extend_from_slice(&table);
    out.extend_from_slice(&strings);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libcmp_is_numeric_on_digit_runs() {
        assert_eq!(libcmp("libc.so.6", "libc.so.6"), Ordering::Equal);
        assert_eq!(libcmp("libfoo.so.10", "libfoo.so.9"), Ordering::Greater);
        assert_eq!(libcmp("liba.so", "libb.so"), Ordering::Less);
        assert_eq!(libcmp("libx.so", "libx.so.1"), Ordering::Less);
    }
}
