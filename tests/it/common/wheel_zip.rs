//! Wheels written byte by byte, for the installer's checks of what no zip library writes: two
//! entries of one name, a directory of millions of entries, and a `.dist-info` or `METADATA`
//! whose version is not the file name's. Members are stored; `RECORD` hashes every one.

use crate::common::pyindex::zip;
use crate::common::wheel::record_hash;

/// A `METADATA` naming `name` `version`, with `extra` header lines.
pub fn metadata(name: &str, version: &str, extra: &[&str]) -> String {
    let mut m = format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n");
    for l in extra {
        m.push_str(l);
        m.push('\n');
    }
    m
}

/// A stored zip of `files`, then `{dist_info}/METADATA` (`metadata`), `WHEEL` and a `RECORD`
/// hashing all of them (a name given twice is listed once, with its last bytes).
pub fn wheel(dist_info: &str, metadata: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
    let wheel = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec();
    let mut all: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(n, d)| (n.to_string(), d.to_vec()))
        .collect();
    all.push((
        format!("{dist_info}/METADATA"),
        metadata.as_bytes().to_vec(),
    ));
    all.push((format!("{dist_info}/WHEEL"), wheel));
    let mut rows = std::collections::BTreeMap::new();
    for (n, d) in &all {
        rows.insert(n.clone(), format!("{n},{},{}\n", record_hash(d), d.len()));
    }
    let mut record: String = rows.into_values().collect();
    record.push_str(&format!("{dist_info}/RECORD,,\n"));
    all.push((format!("{dist_info}/RECORD"), record.into_bytes()));
    let refs: Vec<(&str, &[u8])> = all.iter().map(|(n, d)| (n.as_str(), &d[..])).collect();
    zip(&refs)
}

/// `z` (a zip whose end record, without a comment, ends it) with `n` more entries after its
/// directory's (empty files named by their number, each pointing at the first local header)
/// and zip64 end records counting them all: what a directory of millions of entries costs a
/// reader that loads it before counting.
pub fn with_more_entries(z: &[u8], n: u32) -> Vec<u8> {
    let end = z.len() - 22;
    assert_eq!(
        &z[end..end + 4],
        b"PK\x05\x06",
        "an end record without a comment"
    );
    let field = |at: usize, len: usize| {
        let mut b = [0u8; 8];
        b[..len].copy_from_slice(&z[end + at..end + at + len]);
        u64::from_le_bytes(b)
    };
    let (count, size, offset) = (field(10, 2), field(12, 4), field(16, 4));
    let mut out = Vec::with_capacity(end + n as usize * 53 + 98);
    out.extend_from_slice(&z[..end]);
    for i in 0..n {
        out.extend_from_slice(b"PK\x01\x02\x14\x00\x14\x00");
        out.extend_from_slice(&[0u8; 20]);
        out.extend_from_slice(&7u16.to_le_bytes());
        out.extend_from_slice(&[0u8; 16]);
        out.extend_from_slice(format!("{i:07}").as_bytes());
    }
    let total = count + u64::from(n);
    crate::common::zip64_end::push_zip64_end(&mut out, total, size + u64::from(n) * 53, offset);
    out
}
