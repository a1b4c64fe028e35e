//! OpenPGP checks of `InRelease` (cleartext-signed) and `Release` + `Release.gpg` (detached),
//! with rpgp against a keyring (binary `.gpg` or armored `.asc`, or an inline key block).
//!
//! Must never accept a release that no key in the given keyring signed.

use std::io::Cursor;

use pgp::composed::{CleartextSignedMessage, Deserializable, DetachedSignature, SignedPublicKey};

use super::hostconf::KeySource;
use super::AptError;

/// Public keys (primary keys and their subkeys) that may sign a repository.
pub struct Keyring {
    keys: Vec<SignedPublicKey>,
    pub label: String,
}

impl Keyring {
    pub fn load(sources: &[KeySource]) -> Result<Self, AptError> {
        let mut keys = Vec::new();
        let mut labels = Vec::new();
        for src in sources {
            let (bytes, path) = match src {
                KeySource::File(p) => (fs_err::read(p).map_err(AptError::io(p))?, p.clone()),
                KeySource::Inline(t) => (t.clone().into_bytes(), "inline Signed-By".into()),
            };
            labels.push(format!("`{}`", path.display()));
            let bad = |message: String| AptError::InvalidKeyring {
                path: path.clone(),
                message,
            };
            let (iter, _) = SignedPublicKey::from_reader_many(Cursor::new(bytes))
                .map_err(|e| bad(e.to_string()))?;
            let before = keys.len();
            for key in iter {
                keys.push(key.map_err(|e| bad(e.to_string()))?);
            }
            if keys.len() == before {
                return Err(bad("no public keys found".into()));
            }
        }
        Ok(Keyring {
            keys,
            label: labels.join(", "),
        })
    }

    /// Verify an `InRelease` text; on success return the signed text (the Release contents).
    pub fn verify_inline(&self, text: &str, url: &str) -> Result<String, AptError> {
        let bad = || AptError::BadSignature {
            url: url.to_string(),
            keyring: self.label.clone(),
        };
        let (msg, _) = CleartextSignedMessage::from_string(text).map_err(|_| bad())?;
        for key in &self.keys {
            if msg.verify(&key.primary_key).is_ok()
                || key
                    .public_subkeys
                    .iter()
                    .any(|s| msg.verify(&s.key).is_ok())
            {
                return Ok(msg.signed_text().replace("\r\n", "\n"));
            }
        }
        Err(bad())
    }

    /// Verify a detached `Release.gpg` over `data`.
    pub fn verify_detached(&self, data: &[u8], sig: &[u8], url: &str) -> Result<(), AptError> {
        let bad = || AptError::BadSignature {
            url: url.to_string(),
            keyring: self.label.clone(),
        };
        let (sigs, _) = DetachedSignature::from_reader_many(Cursor::new(sig)).map_err(|_| bad())?;
        for sig in sigs.flatten() {
            for key in &self.keys {
                if sig.verify(&key.primary_key, data).is_ok()
                    || key
                        .public_subkeys
                        .iter()
                        .any(|s| sig.verify(&s.key, data).is_ok())
                {
                    return Ok(());
                }
            }
        }
        Err(bad())
    }
}
