//! Trust stamps: what the cache learnt about a file when it last checked it, together with the
//! file identity (dev, inode, size, mtime, ctime) the file had at that moment.
//!
//! The one rule every stamped bucket of the cache follows (layer blobs and records, listings,
//! control fields, resolutions, sketches, downloaded debs and indexes): an entry whose identity still equals its stamp is used as
//! stamped, without re-hashing; any other entry (no stamp, unreadable stamp, or any identity
//! field changed) is verified in full and stamped again, or treated as a miss and removed.
//! Writing a file, `chmod`, `chown`, linking, unlinking and renaming all move ctime, and no
//! user tool can set ctime back, so a rewrite that restores mtime is still seen. The one
//! change not seen is one within the same timestamp tick as the stamp itself (git's "racily
//! clean" case); `gpuimg cache verify` checks everything regardless of stamps.
//! Stamps are only ever a cache of a verification: deleting them costs one full check.

use std::io::{self, Write};
use std::path::Path;

use crate::staging::Staged;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::digest::Digest;

/// (dev, inode, size, mtime ns, ctime ns) of a file, as `assemble` keys source files.
pub type Identity = [u64; 5];

/// Index of the size within an [`Identity`].
const SIZE: usize = 2;
/// Index of the ctime within an [`Identity`].
const CTIME: usize = 4;

/// The identity of the file behind `meta`.
pub fn identity(meta: &std::fs::Metadata) -> Identity {
    crate::file_identity::identity(meta)
}

/// The size recorded in an identity.
pub fn size_of(id: &Identity) -> u64 {
    id[SIZE]
}

/// True when `now` differs from `then` in ctime alone (a link or unlink of the same inode,
/// content, size and mtime unchanged).
pub fn only_ctime_moved(then: &Identity, now: &Identity) -> bool {
    then[..CTIME] == now[..CTIME]
}

/// What a verified blob is known to be. `size` always; the layer facts for layer blobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobFacts {
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_id: Option<Digest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncompressed_size: Option<u64>,
}

impl BlobFacts {
    /// Facts about a blob that is not a layer (a download).
    pub fn sized(size: u64) -> Self {
        BlobFacts {
            size,
            diff_id: None,
            uncompressed_size: None,
        }
    }
}

/// What a record's stamp knows: the sha256 of the record's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordFacts {
    pub sha256: Digest,
}

#[derive(Serialize, Deserialize)]
struct Stamp<F> {
    identity: Identity,
    #[serde(flatten)]
    facts: F,
}

/// The stamp at `path`, if there is one and it parses. Anything else reads as "no stamp",
/// which only ever leads to a full check.
pub fn read_stamp<F: DeserializeOwned>(path: &Path) -> Option<(Identity, F)> {
    let bytes = std::fs::read(path).ok()?;
    let s: Stamp<F> = serde_json::from_slice(&bytes).ok()?;
    Some((s.identity, s.facts))
}

/// Write a stamp atomically through `tmp` (a fresh temp file on the same file system).
pub fn write_stamp<F: Serialize>(
    mut tmp: Staged,
    path: &Path,
    identity: Identity,
    facts: &F,
) -> io::Result<()> {
    // One write: `to_writer` on the unbuffered file would make one syscall per JSON token.
    let bytes = serde_json::to_vec(&Stamp { identity, facts }).map_err(io::Error::other)?;
    tmp.write_all(&bytes)?;
    tmp.flush()?;
    tmp.persist(path)?;
    Ok(())
}

/// Open a cache entry for reading without following a symlink: `Ok(None)` when absent,
/// `InvalidData` when a symlink or anything but a regular file stands there.
pub fn open_entry(path: &Path) -> io::Result<Option<(std::fs::File, std::fs::Metadata)>> {
    open_entry_with(path, rustix::fs::OFlags::empty())
}

/// [`open_entry`] for a check that is no use of the entry (`gpuimg cache verify`): reading it
/// leaves its access time, the downloads' last use, as it was. Where `O_NOATIME` is refused
/// (the caller neither owns the file nor is privileged), it is opened as usual.
pub fn open_entry_unused(path: &Path) -> io::Result<Option<(std::fs::File, std::fs::Metadata)>> {
    match open_entry_with(path, rustix::fs::OFlags::NOATIME) {
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::PERM.raw_os_error()) => {
            open_entry(path)
        }
        r => r,
    }
}

fn open_entry_with(
    path: &Path,
    extra: rustix::fs::OFlags,
) -> io::Result<Option<(std::fs::File, std::fs::Metadata)>> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK | extra;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // ELOOP: a symlink where an entry belongs; the caller reports it as bad.
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "is a symlink"))
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "is not a regular file",
        ));
    }
    Ok(Some((file, meta)))
}

/// Remove a file if present; a missing file is not an error.
pub fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Remove the file at `path` only while it is still the inode that was checked (dev, inode):
/// a fresh copy another build renamed into place meanwhile is left alone.
pub fn remove_checked(path: &Path, checked: &Identity) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.dev() == checked[0] && m.ino() == checked[1] => remove_if_present(path),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trip_and_garbage_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let facts = BlobFacts {
            size: 3,
            diff_id: Some(Digest::of(b"x")),
            uncompressed_size: Some(9),
        };
        let tmp = Staged::file(dir.path(), "t", 0o644).unwrap();
        write_stamp(tmp, &p, [1, 2, 3, 4, 5], &facts).unwrap();
        assert_eq!(read_stamp::<BlobFacts>(&p), Some(([1, 2, 3, 4, 5], facts)));
        for junk in [
            &b""[..],
            b"{",
            b"[1,2]",
            b"{\"identity\":[1,2,3],\"size\":1}",
        ] {
            std::fs::write(&p, junk).unwrap();
            assert_eq!(read_stamp::<BlobFacts>(&p), None, "{junk:?}");
        }
    }

    #[test]
    fn ctime_alone() {
        assert!(only_ctime_moved(&[1, 2, 3, 4, 5], &[1, 2, 3, 4, 6]));
        assert!(!only_ctime_moved(&[1, 2, 3, 4, 5], &[1, 2, 3, 7, 6]));
        assert!(!only_ctime_moved(&[1, 2, 3, 4, 5], &[1, 9, 3, 4, 5]));
    }
}
