//! Target `tarball`: a root filesystem tarball (plain, gzip, zstd; xz refused) indexed by
//! `gpuimg_assemble::assemble(Input::Rootfs)`, as `base.rootfs` reads it.
//!
//! Seeds are ustar, GNU and PAX tarballs of a small rootfs made by GNU tar
//! (tests/fuzz/corpus/tarball/). Mutations rewrite header fields through `tar_model` (hostile
//! names and links, lying sizes, PAX and GNU long names, huge owners), then sometimes raw bytes,
//! then pick a compression. Properties: an error names the tarball; an accepted tree's paths are
//! relative, without `.`, `..` or empty components; its symlinks resolve inside the root; its
//! hard links name a file of the tree; every file's data span lies inside the tarball; special
//! files appear only when allowed.

use arbitrary::{Result, Unstructured};
use gpuimg_assemble::{assemble, DataSource, EntryKind, Input};

use crate::fuzz::harness::{files, work_dir, Target, Verdict};
use crate::fuzz::mutate::havoc;
use crate::fuzz::tar_model::{self, Compression};

pub static TARGET: Target = Target {
    name: "tarball",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 3_000,
};

fn seeds() -> Vec<Vec<u8>> {
    files("corpus", "tarball")
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

/// The plain tar inside a seed.
pub fn plain(seed: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    let ok = if seed.starts_with(&[0x1f, 0x8b]) {
        flate2::read::MultiGzDecoder::new(seed)
            .read_to_end(&mut out)
            .is_ok()
    } else if seed.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        zstd::stream::read::Decoder::new(seed)
            .and_then(|mut d| d.read_to_end(&mut out))
            .is_ok()
    } else {
        return seed.to_vec();
    };
    if ok {
        out
    } else {
        seed.to_vec()
    }
}

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let seed = plain(&seeds[u.choose_index(seeds.len())?]);
    let paths: Vec<Vec<u8>> = tar_model::PATHS.iter().map(|p| p.to_vec()).collect();
    let mut tar = tar_model::mutate(u, &seed, 8, &paths)?;
    if u.ratio(1, 4)? {
        havoc(
            u,
            &mut tar,
            4,
            &[b"ustar\0", b"ustar  \0", b"././@LongLink"],
            seeds,
        )?;
    }
    let z = match u.int_in_range(0..=9u8)? {
        0..=5 => Compression::None,
        6 | 7 => Compression::Gzip,
        8 => Compression::Zstd,
        _ => Compression::Xz,
    };
    Ok(z.apply(&tar))
}

/// Does `target`, written in a symlink at `link`, resolve inside the root?
fn resolves_inside(link: &str, target: &str) -> bool {
    let mut stack: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        let mut s: Vec<&str> = link.split('/').collect();
        s.pop();
        s
    };
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if stack.pop().is_none() {
                    return false;
                }
            }
            c => stack.push(c),
        }
    }
    true
}

fn check(input: &[u8]) -> Verdict {
    let dir = work_dir("tarball");
    let path = dir.join("rootfs.tar");
    let scratch = dir.join("scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::write(&path, input).map_err(|e| format!("cannot write the input: {e}"))?;
    let allow_special = input.len().is_multiple_of(2);
    let r = assemble(
        &Input::Rootfs {
            path: &path,
            allow_special,
        },
        &scratch,
    );
    let tree = match r {
        Err(e) => {
            let s = e.to_string();
            let p = path.display().to_string();
            return if s.contains(&p) {
                Ok("refused")
            } else {
                Err(format!("error does not name the tarball: {s}"))
            };
        }
        Ok(t) => t,
    };
    for e in tree.iter() {
        let p = &e.path;
        if p.is_empty()
            || p.starts_with('/')
            || p.split('/').any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(format!("accepted entry path `{p}`"));
        }
        match &e.kind {
            EntryKind::Symlink { target } if !resolves_inside(p, target) => {
                return Err(format!(
                    "accepted symlink `{p}` -> `{target}` leaving the root"
                ));
            }
            EntryKind::Hardlink { target }
                if !matches!(
                    tree.get(target).map(|t| &t.kind),
                    Some(EntryKind::File { .. })
                ) =>
            {
                return Err(format!("hard link `{p}` => `{target}` names no file"));
            }
            EntryKind::File {
                size,
                data:
                    DataSource::TarSpan {
                        tarball, offset, ..
                    },
            } => {
                let len = std::fs::metadata(tarball.as_path()).map_or(0, |m| m.len());
                if offset.checked_add(*size).is_none_or(|end| end > len) {
                    return Err(format!(
                        "`{p}`: data at {offset}+{size} lies outside the {len}-byte tarball"
                    ));
                }
            }
            EntryKind::CharDevice { .. } | EntryKind::BlockDevice { .. } | EntryKind::Fifo
                if !allow_special =>
            {
                return Err(format!(
                    "special file `{p}` accepted without allow-special-files"
                ));
            }
            _ => {}
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok("indexed")
}
