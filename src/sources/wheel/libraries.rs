//! The shared objects a wheel installs, read from the wheel itself without installing it:
//! each `lib*.so*` file's and each Python extension module's (`*.so`) image path and ELF
//! facts (class, machine, `DT_SONAME`, `DT_NEEDED`, `DT_RPATH`/`DT_RUNPATH`), the member
//! decompressed as a stream and never held whole. For the one-provider rule, `ld.so.cache`
//! and the check that every library's needs are met. Must never write anything.

use serde::{Deserialize, Serialize};

use super::archive::{Archive, Member};
use super::prepare::{self, Content};
use super::scheme::Scheme;
use super::WheelError;
use crate::elf::capture::Capture;
use crate::elf::SharedObject;
use crate::sources::python::{FetchedWheel, ImagePython};

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

/// Whether a file name is one a shared library has (`lib*.so`, `lib*.so.N…`).
pub fn is_library_name(name: &str) -> bool {
    name.starts_with("lib")
        && (name.ends_with(".so") || name.contains(".so."))
        && !name.ends_with(".py")
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
        let taken = match tap.and_then(LibraryTap::capture) {
            Some(c) => self.archive.elf_facts_from(&self.member, &c)?,
            None => None,
        };
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
/// (`crate::elf::capture`), fed by the layer writer's inflating read
/// (`assemble::ArchivedFile::tap`).
#[derive(Debug, Default)]
pub struct LibraryTap(std::sync::Mutex<Capture>);

impl LibraryTap {
    /// What it took so far (`None` if a feeding thread panicked).
    pub fn capture(&self) -> Option<Capture> {
        self.0.lock().ok().map(|c| c.clone())
    }
}

impl crate::assemble::Tap for LibraryTap {
    fn feed(&self, at: u64, piece: &[u8]) {
        if let Ok(mut c) = self.0.lock() {
            c.feed(at, piece);
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
