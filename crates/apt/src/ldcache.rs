//! Native `/etc/ld.so.cache` generation (glibc's "glibc-ld.so.cache1.1" format), so libraries
//! in non-default directories (CUDA's, `/etc/ld.so.conf.d/*.conf`) resolve without running
//! `ldconfig` in the image.
//!
//! Reads only below the image root; entries are keyed by SONAME, sorted the way the dynamic
//! loader's binary search expects. Must never follow a symlink out of the root.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::path::Path;

use crate::unpack::ElfFacts;
use crate::AptError;
use gpuimg_elf::{self as elf, SharedObject};
use gpuimg_store::confined::Root;

/// Configuration files are small; larger ones are ignored.
const MAX_CONF: u64 = 1 << 20;
/// Shared objects are read whole for their dynamic section; larger ones are not indexed.
const MAX_LIBRARY: u64 = 4 << 30;

const FLAG_ELF_LIBC6: i32 = 0x0003;
const FLAG_X8664_LIB64: i32 = 0x0300;
const FLAG_AARCH64_LIB64: i32 = 0x0a00;

/// Directories to index, in order: `/etc/ld.so.conf` (with `include` globs of `*.conf`), then
/// the multiarch and default trusted directories.
fn directories(root: &Root, triplet: &str) -> Vec<String> {
    let mut dirs = Vec::new();
    let conf = root.metadata(Path::new("etc/ld.so.conf"));
    if conf.is_ok_and(|m| m.is_some_and(|m| m.is_regular())) {
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
    let Ok(bytes) = root.read(Path::new(rel), MAX_CONF) else {
        return;
    };
    read_conf_text(root, &String::from_utf8_lossy(&bytes), dirs, depth);
}

fn read_conf_text(root: &Root, text: &str, dirs: &mut Vec<String>, depth: u32) {
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(pattern) = line.strip_prefix("include") {
            let pattern = pattern.trim().trim_start_matches('/');
            let (dir, glob) = pattern.rsplit_once('/').unwrap_or(("", pattern));
            let suffix = glob.strip_prefix('*').unwrap_or(glob);
            let mut names: Vec<String> = root
                .read_dir(Path::new(dir))
                .into_iter()
                .flatten()
                .filter_map(|(n, _)| n.into_string().ok())
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

/// Whether `ld.so.cache` could index a file at `path` (by its name: `lib*.so*`, `ld-*`), in
/// whichever directory the configuration names. A replayed package keeps these files' ELF
/// facts (`sketch`), so this must match every name [`write_ld_cache`] reads.
pub fn is_candidate(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("lib") && name.contains(".so") || name.starts_with("ld-")
}

/// Whether `ld.so.cache`'s configuration (`/etc/ld.so.conf`, its includes) may live at `path`:
/// a replay keeps these files' bytes.
pub fn reads(path: &str) -> bool {
    path.starts_with("/etc/ld.so.conf")
}

/// The ELF facts of the file at `p` (following symlinks inside the root), as the index reads
/// them.
pub fn facts(root: &Root, p: &Path) -> Option<SharedObject> {
    elf::parse(&root.read(p, MAX_LIBRARY).ok()?)
}

/// Index the image's libraries and write `etc/ld.so.cache`; returns the entries (SONAME,
/// path as indexed, with a leading `/`) in the cache's order. `placeholders`: files a replay
/// left empty, by (device, inode), with the facts of the real file. `extra`: libraries of
/// layers above this root (image path without a leading `/`, facts), indexed where a
/// configured directory holds them, as if they lay in the root.
pub fn write_ld_cache(
    root: &Root,
    debian_arch: &str,
    placeholders: &ElfFacts,
    extra: &[(String, SharedObject)],
) -> Result<Vec<(String, String)>, AptError> {
    let (triplet, machine, flags) = match debian_arch {
        "amd64" => ("x86_64-linux-gnu", 62u16, FLAG_ELF_LIBC6 | FLAG_X8664_LIB64),
        "arm64" => (
            "aarch64-linux-gnu",
            183,
            FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64,
        ),
        _ => return Ok(Vec::new()),
    };
    let mut seen_dirs = BTreeSet::new();
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut seen_keys = BTreeSet::new();
    let mut extra_dirs = BTreeSet::new();
    for dir in directories(root, triplet) {
        let dir = dir.trim_end_matches('/').to_string();
        // The later layers' libraries in this directory.
        let later: Vec<(&str, &SharedObject)> = extra
            .iter()
            .filter_map(|(p, so)| {
                let (d, name) = p.rsplit_once('/')?;
                (d == dir.trim_start_matches('/')).then_some((name, so))
            })
            .collect();
        if !later.is_empty() && extra_dirs.insert(dir.clone()) {
            for (name, so) in later {
                if !so.is_64 || so.machine != machine || !is_candidate(name) {
                    continue;
                }
                let key = so.soname.clone().unwrap_or_else(|| name.to_string());
                if key == name && seen_keys.insert((key.clone(), dir.clone())) {
                    entries.push((key, format!("{dir}/{name}")));
                }
            }
        }
        // The same directory reached twice (`/lib` is `/usr/lib` under merged-/usr) is
        // indexed once.
        let Ok(Some(m)) = root.metadata(Path::new(&dir)) else {
            continue;
        };
        if !m.is_directory() || !seen_dirs.insert((m.dev, m.ino)) {
            continue;
        }
        let Ok(listing) = root.read_dir(Path::new(&dir)) else {
            continue;
        };
        let names: Vec<String> = listing
            .into_iter()
            .filter_map(|(n, _)| n.into_string().ok())
            .filter(|n| is_candidate(n))
            .collect();
        let dir = dir.as_str();
        for name in names {
            // A final symlink is followed, inside the root.
            let path = format!("{dir}/{name}");
            let placeholder = match root.metadata(Path::new(&path)) {
                Ok(Some(m)) => placeholders.get(&(m.dev, m.ino)),
                _ => None,
            };
            let so = match placeholder {
                Some(so) => so.clone(),
                None => facts(root, Path::new(&path)),
            };
            let Some(so) = so else {
                continue;
            };
            if !so.is_64 || so.machine != machine {
                continue;
            }
            let key = so.soname.unwrap_or_else(|| name.clone());
            if key != name {
                continue;
            }
            if seen_keys.insert((key.clone(), dir.to_string())) {
                entries.push((key, format!("{dir}/{name}")));
            }
        }
    }
    // Descending in libcmp order (the loader's binary search), stable for equal keys.
    entries.sort_by(|a, b| libcmp(&b.0, &a.0));
    let data = encode(&entries, flags);
    root.create_dir_all(Path::new("etc"))
        .map_err(AptError::staged("create", "etc"))?;
    root.write(Path::new("etc/ld.so.cache"), &data, 0o644)
        .map_err(AptError::staged("write", "etc/ld.so.cache"))?;
    Ok(entries)
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
