//! The signature appended to a module (`scripts/sign-file`): the module's bytes, a PKCS#7
//! (CMS) `SignedData` in DER, a 12-byte `struct module_signature { u8 algo, hash, id_type,
//! signer_len, key_id_len, __pad[3]; __be32 sig_len; }`, then `~Module signature appended~\n`.
//! [`split`] cuts it off (the ELF file is what lies before it) and reads from the PKCS#7 what
//! `modinfo` shows: the signer (its issuer's common name), the key id (its serial number, or its
//! subject key identifier) and the digest algorithm.
//!
//! Checks the trailer as the kernel's `mod_check_sig` does (PKCS#7 only; `algo`, `hash`,
//! `signer_len`, `key_id_len` and the padding zero; the signature inside the file) and refuses a
//! PKCS#7 that does not parse. Never verifies the signature: which keys a machine trusts is its
//! firmware's and kernel's business, not the builder's.

use cms::cert::x509::der::Decode;
use cms::content_info::ContentInfo;
use cms::signed_data::{SignedData, SignerIdentifier};

use crate::module::Malformed;

const MAGIC: &[u8] = b"~Module signature appended~\n";
/// Bytes of `struct module_signature`.
const INFO: usize = 12;
/// `id_type` of a PKCS#7 signature, the only kind the kernel accepts.
const PKEY_ID_PKCS7: u8 = 2;
const ID_SIGNED_DATA: &str = "1.2.840.113549.1.7.2";
/// The common name attribute of an X.500 name.
const ID_CN: &str = "2.5.4.3";

/// How the signer is named in the signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureId {
    /// The issuer's name and the certificate's serial number (what `sign-file` writes).
    IssuerAndSerial,
    /// The certificate's subject key identifier.
    SubjectKeyId,
}

/// What an appended signature says of its signer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The issuer's common name (`modinfo`'s `signer`); `None` when named by key id alone.
    pub signer: Option<String>,
    /// The serial number or subject key identifier, lower-case hex.
    pub key_id: String,
    /// The digest algorithm's name (`sha256`…), or its OID where not one of the SHA family.
    pub hash: String,
    pub id: SignatureId,
    /// Bytes of the PKCS#7 message.
    pub length: usize,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02x}")).collect()
}

fn hash_name(oid: &str) -> String {
    match oid {
        "1.3.14.3.2.26" => "sha1",
        "2.16.840.1.101.3.4.2.4" => "sha224",
        "2.16.840.1.101.3.4.2.1" => "sha256",
        "2.16.840.1.101.3.4.2.2" => "sha384",
        "2.16.840.1.101.3.4.2.3" => "sha512",
        "2.16.840.1.101.3.4.2.8" => "sha3-256",
        "2.16.840.1.101.3.4.2.9" => "sha3-384",
        "2.16.840.1.101.3.4.2.10" => "sha3-512",
        other => other,
    }
    .to_string()
}

/// The module's ELF bytes and its appended signature, if it has one.
pub(crate) fn split(bytes: &[u8]) -> Result<(&[u8], Option<Signature>), Malformed> {
    let Some(rest) = bytes.strip_suffix(MAGIC) else {
        return Ok((bytes, None));
    };
    let bad = |why: &str| Malformed::Signature(why.to_string());
    let info_at = rest
        .len()
        .checked_sub(INFO)
        .ok_or_else(|| bad("the trailer is cut short"))?;
    let info = &rest[info_at..];
    let sig_len = u32::from_be_bytes([info[8], info[9], info[10], info[11]]) as usize;
    if info[2] != PKEY_ID_PKCS7 {
        return Err(bad(&format!(
            "id_type {} where the kernel accepts PKCS#7 (2) only",
            info[2]
        )));
    }
    if info[..2] != [0, 0] || info[3..8] != [0; 5] {
        return Err(bad(
            "a PKCS#7 signature with non-zero algo, hash, signer or key id fields",
        ));
    }
    let sig_at = info_at
        .checked_sub(sig_len)
        .ok_or_else(|| bad("sig_len runs past the start of the file"))?;
    let signature = read_pkcs7(&rest[sig_at..info_at])?;
    Ok((&rest[..sig_at], Some(signature)))
}

fn read_pkcs7(der: &[u8]) -> Result<Signature, Malformed> {
    let bad = |why: String| Malformed::Signature(format!("the PKCS#7 message: {why}"));
    let info = ContentInfo::from_der(der).map_err(|e| bad(e.to_string()))?;
    if info.content_type.to_string() != ID_SIGNED_DATA {
        return Err(bad(format!(
            "content type {}, not signedData",
            info.content_type
        )));
    }
    let data: SignedData = info.content.decode_as().map_err(|e| bad(e.to_string()))?;
    let mut signers = data.signer_infos.0.iter();
    let (Some(signer), None) = (signers.next(), signers.next()) else {
        return Err(bad("not exactly one signer".into()));
    };
    let hash = hash_name(&signer.digest_alg.oid.to_string());
    let (name, key_id, id) = match &signer.sid {
        SignerIdentifier::IssuerAndSerialNumber(ias) => {
            let cn = ias
                .issuer
                .0
                .iter()
                .flat_map(|rdn| rdn.0.iter())
                .find(|atv| atv.oid.to_string() == ID_CN)
                .map(|atv| String::from_utf8_lossy(atv.value.value()).into_owned());
            (
                cn,
                hex(ias.serial_number.as_bytes()),
                SignatureId::IssuerAndSerial,
            )
        }
        SignerIdentifier::SubjectKeyIdentifier(ski) => {
            (None, hex(ski.0.as_bytes()), SignatureId::SubjectKeyId)
        }
    };
    Ok(Signature {
        signer: name,
        key_id,
        hash,
        id,
        length: der.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `body`, a "signature" of `sig`, and a trailer with the given fields.
    fn signed(body: &[u8], sig: &[u8], fields: [u8; 8], sig_len: u32) -> Vec<u8> {
        let mut b = body.to_vec();
        b.extend_from_slice(sig);
        b.extend_from_slice(&fields);
        b.extend_from_slice(&sig_len.to_be_bytes());
        b.extend_from_slice(MAGIC);
        b
    }

    #[test]
    fn an_unsigned_module_is_all_elf() {
        let (elf, sig) = split(b"\x7fELF and the rest").unwrap();
        assert_eq!((elf, sig), (&b"\x7fELF and the rest"[..], None));
    }

    #[test]
    fn a_trailer_the_kernel_would_refuse_is_malformed() {
        let pkcs7 = [0, 0, PKEY_ID_PKCS7, 0, 0, 0, 0, 0];
        for (b, why) in [
            (MAGIC[1..].to_vec(), None),
            ([&[0u8; 4][..], MAGIC].concat(), Some("cut short")),
            (
                signed(b"elf", b"sig", [0, 0, 1, 0, 0, 0, 0, 0], 3),
                Some("id_type 1"),
            ),
            (
                signed(b"elf", b"sig", [1, 0, 2, 0, 0, 0, 0, 0], 3),
                Some("non-zero"),
            ),
            (
                signed(b"elf", b"sig", [0, 0, 2, 0, 0, 0, 0, 1], 3),
                Some("non-zero"),
            ),
            (signed(b"elf", b"sig", pkcs7, 7), Some("past the start")),
            (signed(b"elf", b"sig", pkcs7, 3), Some("the PKCS#7 message")),
            (
                signed(b"", b"\x30\x03\x06\x01\x00", pkcs7, 5),
                Some("the PKCS#7 message"),
            ),
        ] {
            match (split(&b), why) {
                (Ok((elf, None)), None) => assert_eq!(elf, &b[..]),
                (Err(e), Some(why)) => assert!(e.to_string().contains(why), "{why}: {e}"),
                (r, why) => panic!("{why:?}: {r:?}"),
            }
        }
    }
}
