//! The X.509 certificate a node's modules are signed with (`host.signing.certificate`), read as
//! data: PEM or DER, as the kernel's `scripts/sign-file` takes it. It answers what a signature
//! names its signer by (the issuer's common name and the serial number, or the subject key
//! identifier), so that a signed module can be held to the certificate the user gave
//! ([`Certificate::signed`]), and the DER bytes a node enrolls (`mokutil --import`).
//! Never verifies a signature cryptographically (see `signature.rs`).

use base64::Engine as _;
use cms::cert::x509::der::{Decode, Encode};
use cms::cert::x509::Certificate as X509;

use crate::signature::{Signature, SignatureId};

/// The subject key identifier extension.
const ID_SKID: &str = "2.5.29.14";
const ID_CN: &str = "2.5.4.3";
const PEM_BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const PEM_END: &str = "-----END CERTIFICATE-----";

/// A certificate's names and its DER bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    /// The issuer's common name (what a signature by issuer and serial shows as `signer`).
    pub issuer: Option<String>,
    /// The subject's common name.
    pub subject: Option<String>,
    /// The serial number, lower-case hex as its DER integer holds it.
    pub serial: String,
    /// The subject key identifier, lower-case hex, if the certificate has one.
    pub subject_key_id: Option<String>,
    pub der: Vec<u8>,
}

/// Why a certificate is unreadable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an X.509 certificate in PEM or DER: {0}")]
pub struct CertificateError(String);

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02x}")).collect()
}

fn common_name(name: &cms::cert::x509::name::Name) -> Option<String> {
    name.0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .find(|atv| atv.oid.to_string() == ID_CN)
        .map(|atv| String::from_utf8_lossy(atv.value.value()).into_owned())
}

impl Certificate {
    /// Read a certificate from PEM (the first `CERTIFICATE` block) or DER bytes.
    pub fn parse(bytes: &[u8]) -> Result<Certificate, CertificateError> {
        let bad = |why: String| CertificateError(why);
        let der = match std::str::from_utf8(bytes) {
            Ok(text) if text.contains(PEM_BEGIN) => {
                let body = text
                    .split_once(PEM_BEGIN)
                    .and_then(|(_, rest)| rest.split_once(PEM_END))
                    .map(|(body, _)| body)
                    .ok_or_else(|| bad("a PEM block without its end line".into()))?;
                let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| bad(format!("its PEM body: {e}")))?
            }
            _ => bytes.to_vec(),
        };
        let cert = X509::from_der(&der).map_err(|e| bad(e.to_string()))?;
        let tbs = &cert.tbs_certificate;
        let mut subject_key_id = None;
        for ext in tbs.extensions.iter().flatten() {
            if ext.extn_id.to_string() == ID_SKID {
                let inner =
                    cms::cert::x509::der::asn1::OctetString::from_der(ext.extn_value.as_bytes())
                        .map_err(|e| bad(format!("its subject key identifier: {e}")))?;
                subject_key_id = Some(hex(inner.as_bytes()));
            }
        }
        // The DER as parsed, so that trailing bytes never reach the image.
        let der = cert.to_der().map_err(|e| bad(e.to_string()))?;
        Ok(Certificate {
            issuer: common_name(&tbs.issuer),
            subject: common_name(&tbs.subject),
            serial: hex(tbs.serial_number.as_bytes()),
            subject_key_id,
            der,
        })
    }

    /// Whether `sig` names this certificate as its signer (by issuer and serial, or by
    /// subject key identifier).
    pub fn signed(&self, sig: &Signature) -> bool {
        match sig.id {
            SignatureId::IssuerAndSerial => sig.key_id == self.serial && sig.signer == self.issuer,
            SignatureId::SubjectKeyId => self.subject_key_id.as_deref() == Some(&sig.key_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl req -x509 -subj "/CN=gpuimg test signing key/" -addext subjectKeyIdentifier=hash`.
    const PEM: &[u8] = include_bytes!("testdata/signing-cert.pem");

    #[test]
    fn a_certificate_reads_the_same_from_pem_and_der() {
        let pem = Certificate::parse(PEM).unwrap();
        assert_eq!(pem.issuer.as_deref(), Some("gpuimg test signing key"));
        assert_eq!(pem.subject, pem.issuer);
        assert_eq!(pem.serial, "73f1b7de24b0d700fe815ceba53cef967f866c94");
        assert_eq!(
            pem.subject_key_id.as_deref(),
            Some("16087ad840ddb39bb58c79a1e820bfde78fe2016")
        );
        let der = Certificate::parse(&pem.der).unwrap();
        assert_eq!(der, pem);
        let by = |id, signer: Option<&str>, key_id: &str| Signature {
            signer: signer.map(str::to_string),
            key_id: key_id.into(),
            hash: "sha256".into(),
            id,
            length: 1,
        };
        let serial = "73f1b7de24b0d700fe815ceba53cef967f866c94";
        assert!(pem.signed(&by(
            SignatureId::IssuerAndSerial,
            Some("gpuimg test signing key"),
            serial
        )));
        assert!(!pem.signed(&by(
            SignatureId::IssuerAndSerial,
            Some("someone else"),
            serial
        )));
        assert!(!pem.signed(&by(
            SignatureId::IssuerAndSerial,
            Some("gpuimg test signing key"),
            "01"
        )));
        assert!(pem.signed(&by(
            SignatureId::SubjectKeyId,
            None,
            "16087ad840ddb39bb58c79a1e820bfde78fe2016"
        )));
    }

    #[test]
    fn what_is_not_a_certificate_is_refused() {
        for bytes in [
            &b""[..],
            b"not der",
            b"-----BEGIN CERTIFICATE-----\nAAAA\n",
            b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
            b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n",
        ] {
            assert!(Certificate::parse(bytes).is_err(), "{bytes:?}");
        }
    }
}
