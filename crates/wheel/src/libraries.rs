//! The shared objects a wheel installs, read from the wheel itself without installing it:
//! each `lib*.so*` file's and each Python extension module's (`*.so`) image path and ELF
//! facts (class, machine, `DT_SONAME`, `DT_NEEDED`, `DT_RPATH`/`DT_RUNPATH`), the member
//! decompressed as a stream and never held whole. For the one-provider rule, `ld.so.cache`
//! and the check that every library's needs are met. Must never write anything.

use serde::{Deserialize, Serialize};

use crate::archive::{Archive, Member};
use crate::prepare::{self, Content};
use crate::scheme::Scheme;
use crate::WheelError;
use gpuimg_elf::capture::Capture;
use gpuimg_elf::SharedObject;
use gpuimg_pypi::FetchedWheel;
use gpuimg_pypi::ImagePython;

/// One shared library a wheel installs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WheelLibrary {
    /// The image path, without a leading `/`
    /// (`usr/local/lib/python3.11/dist-packages/nvidia/cuda_runtime/lib/libcudart.so.12`).
    pub path: String,
    /// Its ELF facts; `None` when the file is not a shared object gpuimg reads.
    pub elf: Option<SharedObject>,
    /// A Python extension module (`_C.cpython-311-x86_64-linux-gnu.so`), not a library the
    /// loader indexes: neither in `ld.so.cache` nor under the one-provider rule.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub module: bool,
}

impl WheelLibrary {
    /// The name the loader finds it by: its `DT_SONAME`, else its file name.
    pub fn soname(&self) -> &str {
        self.elf
            .as_ref()
            .and_then(|e| e.soname.as_deref())
            .unwrap_or_else(|| file_name(&self.path))
    }
}

/// The last component of `path`.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether a file name is one a shared library has (`lib*.so`, `lib*.so.N…`): the rule
/// `elf::reach` judges libraries by.
pub fn is_library_name(name: &str) -> bool {
    gpuimg_elf::reach::is_library_name(name)
}

/// Whether a file name is a Python extension module's (`*.so` that is no `lib*` library).
pub fn is_module_name(name: &str) -> bool {
    name.ends_with(".so") && !is_library_name(name)
}

/// One shared object of a wheel still to be read: reading it inflates the member up to its
/// dynamic section, so a caller may spread the reads of one wheel over several threads.
#[derive(Debug, Clone)]
pub struct LibraryRead {
    archive: Archive,
    member: Member,
    path: String,
    module: bool,
}

impl LibraryRead {
    /// Its image path and ELF facts.
    pub fn read(&self) -> Result<WheelLibrary, WheelError> {
        self.read_with(None)
    }

    /// [`LibraryRead::read`], from what `tap` took of the file as its layer was written when
    /// that says it (only the string table is read from the wheel then, usually near the
    /// file's start); else from the wheel.
    pub fn read_with(&self, tap: Option<&LibraryTap>) -> Result<WheelLibrary, WheelError> {
        let capture = tap.and_then(|t| t.0.lock().ok());
        let taken = match capture.as_deref() {
            Some(c) => self.archive.elf_facts_from(&self.member, c)?,
            None => None,
        };
        drop(capture);
        let elf = match taken {
            Some(elf) => elf,
            None => self.archive.elf_facts(&self.member)?,
        };
        Ok(WheelLibrary {
            path: self.path.clone(),
            elf,
            module: self.module,
        })
    }

    /// The names its tap is found under in [`Taps`]: its wheel's and its member's.
    pub fn tap_key(&self) -> (String, String) {
        (self.archive.label.clone(), self.member.name.clone())
    }
}

/// What a wheel's shared object showed of itself while its layer was written: its ELF parts
/// (`gpuimg_elf::capture`), fed by the layer writer's inflating read
/// (`gpuimg_assemble::ArchivedFile::tap`). The taps of a build hold at most `MAX_HELD` bytes
/// together: a capture that would pass it gives up, and its library is read from its wheel.
#[derive(Debug, Default)]
pub struct LibraryTap(std::sync::Mutex<Capture>);

/// Bytes all taps may hold at once. A real library's parts are a few KB (its dynamic section,
/// and the names `patchelf` moved behind it); a wheel of thousands of members whose headers
/// claim parts of a MiB each must not grow the build's memory with them.
pub const MAX_HELD: u64 = 64 << 20;

/// Bytes the live taps hold.
static HELD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl LibraryTap {
    /// What it took so far (`None` if a feeding thread panicked).
    pub fn capture(&self) -> Option<Capture> {
        self.0.lock().ok().map(|c| c.clone())
    }
}

impl gpuimg_assemble::Tap for LibraryTap {
    fn feed(&self, at: u64, piece: &[u8]) {
        use std::sync::atomic::Ordering::Relaxed;
        let Ok(mut c) = self.0.lock() else {
            return;
        };
        let before = c.held();
        c.feed(at, piece);
        let after = c.held();
        if after > before {
            let grew = after - before;
            if HELD.fetch_add(grew, Relaxed).saturating_add(grew) > MAX_HELD {
                HELD.fetch_sub(after, Relaxed);
                c.give_up();
            }
        }
    }
}

impl Drop for LibraryTap {
    fn drop(&mut self) {
        if let Ok(c) = self.0.get_mut() {
            HELD.fetch_sub(c.held(), std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The taps of the shared objects a wheel install left in their wheels, by the wheel's and
/// the member's names (two wheels may install the same path).
pub type Taps = std::collections::BTreeMap<(String, String), std::sync::Arc<LibraryTap>>;

/// The shared libraries and extension modules `wheel` installs for `python`, each to be read
/// on its own (biggest first); the caller sorts what they read by path.
pub fn library_reads(
    wheel: &FetchedWheel,
    python: &ImagePython,
) -> Result<Vec<LibraryRead>, WheelError> {
    let scheme = Scheme::of(python).map_err(WheelError::Scheme)?;
    let prepared = prepare::prepare(wheel, &scheme)?;
    let mut out = Vec::new();
    for item in &prepared.items {
        let Content::Member(m) = &item.content else {
            continue;
        };
        let name = file_name(&item.dest);
        let module = is_module_name(name);
        if !module && !is_library_name(name) {
            continue;
        }
        out.push(LibraryRead {
            archive: prepared.archive.clone(),
            member: m.clone(),
            path: item.dest.clone(),
            module,
        });
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.member.size));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuimg_assemble::Tap;

    /// A 64-bit ELF whose one program header is a dynamic section of `dynamic` zero bytes at
    /// offset 4096 (its first entry `DT_NULL`: a shared object without names).
    fn with_dynamic(dynamic: usize) -> Vec<u8> {
        let mut b = gpuimg_elf::test_elf64(1, 4096 + dynamic);
        b[64..68].copy_from_slice(&2u32.to_le_bytes());
        b[72..80].copy_from_slice(&4096u64.to_le_bytes());
        b[96..104].copy_from_slice(&(dynamic as u64).to_le_bytes());
        b
    }

    #[test]
    fn the_taps_together_hold_at_most_their_cap() {
        // Only this test makes taps in this process: what they hold is all that is held.
        let start = HELD.load(std::sync::atomic::Ordering::Relaxed);
        let bytes = with_dynamic(gpuimg_elf::MAX_STREAM_PART as usize);
        let len = bytes.len() as u64;
        let mut none = |_: u64, _: u64| -> Option<Vec<u8>> { None };
        let n = (MAX_HELD / gpuimg_elf::MAX_STREAM_PART) as usize + 8;
        let taps: Vec<LibraryTap> = (0..n).map(|_| LibraryTap::default()).collect();
        for t in &taps {
            for (i, p) in bytes.chunks(256 << 10).enumerate() {
                t.feed((i * (256 << 10)) as u64, p);
            }
        }
        let held: u64 = taps.iter().map(|t| t.capture().unwrap().held()).sum();
        assert!(held <= MAX_HELD, "{held} bytes held");
        let answered = taps
            .iter()
            .filter(|t| t.capture().unwrap().finish(len, &mut none).is_some())
            .count();
        // The first ones answer; those past the cap leave it to the caller.
        assert!(answered > 0 && answered < n, "{answered} of {n} answered");
        let first = taps[0]
            .capture()
            .unwrap()
            .finish(len, &mut none)
            .unwrap()
            .unwrap();
        assert_eq!((first.is_64, first.machine, first.soname), (true, 62, None));
        drop(taps);
        assert_eq!(HELD.load(std::sync::atomic::Ordering::Relaxed), start);
    }
}
