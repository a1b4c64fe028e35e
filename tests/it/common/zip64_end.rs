//! The zip64 end records (record, locator, and a saturated classic end record) that claim
//! `count` entries in `size` directory bytes at `offset`: shared by the test wheels of
//! millions of entries (`wheel_zip`) and the fuzz targets' directory edits (`zip_edit`).

/// Append the zip64 end records for a directory of `count` entries, `size` bytes, at `offset`.
pub fn push_zip64_end(out: &mut Vec<u8>, count: u64, size: u64, offset: u64) {
    let rec_at = out.len() as u64;
    out.extend_from_slice(b"PK\x06\x06");
    out.extend_from_slice(&44u64.to_le_bytes());
    out.extend_from_slice(&[45, 3, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    for v in [count, count, size, offset] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(b"PK\x06\x07\0\0\0\0");
    out.extend_from_slice(&rec_at.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
    out.extend_from_slice(&[0xff; 12]);
    out.extend_from_slice(&[0, 0]);
}
