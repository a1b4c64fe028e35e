//! Content digests (`sha256:<hex>`): parsing at the edge, hashing writers.
//!
//! Owns the one `Digest` type every stage uses for blobs, layers and artifacts.
//! Must never accept a digest string without validating algorithm and length.

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// A sha256 content digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

#[derive(Debug, thiserror::Error)]
#[error("Invalid digest `{0}`: expected `sha256:` followed by 64 lowercase hex digits")]
pub struct DigestParseError(pub String);

impl Digest {
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Digest(bytes)
    }

    /// The 32 bytes of the sha256.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Hash a byte slice in one go.
    pub fn of(data: &[u8]) -> Self {
        Digest(Sha256::digest(data).into())
    }

    /// The 64 hex digits, without the algorithm prefix.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parse a bare 64-digit hex string.
    pub fn from_hex(s: &str) -> Result<Self, DigestParseError> {
        if s.len() != 64 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(DigestParseError(s.to_string()));
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).map_err(|_| DigestParseError(s.to_string()))?;
        Ok(Digest(out))
    }
}

impl FromStr for Digest {
    type Err = DigestParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s
            .strip_prefix("sha256:")
            .ok_or_else(|| DigestParseError(s.to_string()))?;
        Digest::from_hex(hex).map_err(|_| DigestParseError(s.to_string()))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A writer that hashes and counts everything passing through to `inner`.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    count: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Bytes written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// Return the inner writer, the digest and the byte count.
    pub fn finish(self) -> (W, Digest, u64) {
        (
            self.inner,
            Digest(self.hasher.finalize().into()),
            self.count,
        )
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Hash a whole reader, returning digest and size.
pub fn hash_reader<R: io::Read>(mut r: R) -> io::Result<(Digest, u64)> {
    let mut w = HashingWriter::new(io::sink());
    io::copy(&mut r, &mut w)?;
    let (_, d, n) = w.finish();
    Ok((d, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let d = Digest::of(b"");
        assert_eq!(
            d.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(d.to_string().parse::<Digest>().unwrap(), d);
        assert!("sha256:E3B0".parse::<Digest>().is_err());
        assert!(
            "md5:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                .parse::<Digest>()
                .is_err()
        );
    }
}
