//! Records: small JSON files in a record bucket (`layers-v2/<key>.json`,
//! `listings-v1/<diff_id>.json`), each with a stamp (`trust-v2/<bucket>/<key>.json`) holding
//! its file identity and the sha256 of its bytes, written when the record is written.
//!
//! A record reads as trusted only while both still match, so editing the JSON by any means
//! (which moves its ctime and usually its size and mtime) makes the next user check what it
//! says in full. The cache does not know what a record means; its user does the checking.

use std::io::{self, Read};
use std::path::PathBuf;

use super::trust::{self, Identity, RecordFacts};
use super::{Bucket, Cache, Shape};
use crate::digest::Digest;

/// Records are small; anything larger is not one of ours.
const MAX_RECORD: u64 = 32 << 20;

/// A record as read: its bytes, and whether its stamp vouches for them.
#[derive(Debug, Clone)]
pub struct RecordRead {
    pub bytes: Vec<u8>,
    /// The file's identity and content still equal the stamp's.
    pub trusted: bool,
    identity: Identity,
}

impl Cache {
    pub(super) fn record_path(&self, bucket: Bucket, key: &Digest) -> PathBuf {
        debug_assert_eq!(bucket.shape(), Shape::Records, "{bucket:?}");
        self.dir(bucket).join(format!("{}.json", key.hex()))
    }

    fn record_stamp_path(&self, bucket: Bucket, key: &Digest) -> PathBuf {
        self.stamp_dir(bucket).join(format!("{}.json", key.hex()))
    }

    /// How a record is named in messages: `layers-v2/<hex>.json`.
    pub fn record_name(bucket: Bucket, key: &Digest) -> String {
        format!("{}/{}.json", bucket.dir(), key.hex())
    }

    /// Read the record `key` in `bucket`. `Ok(None)` when there is none. A record that is not
    /// a regular file or is oversized is an `InvalidData` error (the caller heals it).
    pub fn read_record(&self, bucket: Bucket, key: &Digest) -> io::Result<Option<RecordRead>> {
        let path = self.record_path(bucket, key);
        let Some((file, meta)) = trust::open_entry(&path)? else {
            return Ok(None);
        };
        if meta.len() > MAX_RECORD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("is not a record file ({} bytes)", meta.len()),
            ));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(MAX_RECORD).read_to_end(&mut bytes)?;
        let identity = trust::identity(&meta);
        let trusted = trust::read_stamp::<RecordFacts>(&self.record_stamp_path(bucket, key))
            .is_some_and(|(id, f)| id == identity && f.sha256 == Digest::of(&bytes));
        Ok(Some(RecordRead {
            bytes,
            trusted,
            identity,
        }))
    }

    /// Whether a record `key` is present in `bucket` (nothing is read or checked).
    pub fn has_record(&self, bucket: Bucket, key: &Digest) -> bool {
        self.record_path(bucket, key).symlink_metadata().is_ok()
    }

    /// Store a JSON record atomically and stamp it.
    pub fn put_record<T: serde::Serialize>(
        &self,
        bucket: Bucket,
        key: &Digest,
        value: &T,
    ) -> io::Result<()> {
        use std::io::Write;
        let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
        let mut tmp = self.temp_file("record")?;
        tmp.write_all(&bytes)?;
        let path = self.record_path(bucket, key);
        // Buckets appear on first write.
        for dir in [self.dir(bucket), self.stamp_dir(bucket)] {
            fs_err::create_dir_all(dir)?;
        }
        tmp.persist(&path)?;
        // The identity after the rename (a rename moves ctime on most file systems).
        let identity = trust::identity(&std::fs::symlink_metadata(&path)?);
        trust::write_stamp(
            self.temp_file("stamp")?,
            &self.record_stamp_path(bucket, key),
            identity,
            &RecordFacts {
                sha256: Digest::of(&bytes),
            },
        )
    }

    /// Stamp a record whose content its user has just checked in full.
    pub fn stamp_record(&self, bucket: Bucket, key: &Digest, rec: &RecordRead) -> io::Result<()> {
        let path = self.record_stamp_path(bucket, key);
        super::store::ensure_parent(&path)?;
        trust::write_stamp(
            self.temp_file("stamp")?,
            &path,
            rec.identity,
            &RecordFacts {
                sha256: Digest::of(&rec.bytes),
            },
        )
    }

    /// Remove a record found bad, and its stamp. With `checked`, the record file only while it
    /// is still the one that was read (a fresh one written meanwhile stays).
    pub fn remove_record(
        &self,
        bucket: Bucket,
        key: &Digest,
        checked: Option<&RecordRead>,
    ) -> io::Result<()> {
        let path = self.record_path(bucket, key);
        match checked {
            Some(r) => trust::remove_checked(&path, &r.identity)?,
            None => trust::remove_if_present(&path)?,
        }
        trust::remove_if_present(&self.record_stamp_path(bucket, key))
    }

    /// Remove a file in `bucket` that is not named like a record (`<64 hex>.json`).
    pub(crate) fn remove_stray(&self, bucket: Bucket, name: &str) -> io::Result<()> {
        trust::remove_if_present(&self.dir(bucket).join(name))
    }

    /// The file names in `bucket`, sorted (each should be `<64 hex>.json`).
    pub fn record_names(&self, bucket: Bucket) -> io::Result<Vec<String>> {
        super::store::list(&self.dir(bucket))
    }
}
