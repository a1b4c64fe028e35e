//! OpenPGP checks of `InRelease` (cleartext-signed) and `Release` + `Release.gpg` (detached),
//! with rpgp against a keyring (binary `.gpg` or armored `.asc`, or an inline key block).
//!
//! Must never accept a release that no key in the given keyring signed.

use std::io::Cursor;

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};

use crate::hostconf::KeySource;
use crate::AptError;

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
    ///
    /// The cleartext framework is taken apart here, in one pass (rpgp's reader rescans what it
    /// read at every line: 40 ms for a distribution's `InRelease`), into exactly the text
    /// rpgp's `CleartextSignedMessage` would verify; the signatures are rpgp's, checked over
    /// that text, and that text is what is returned.
    pub fn verify_inline(&self, text: &str, url: &str) -> Result<String, AptError> {
        let bad = || AptError::BadSignature {
            url: url.to_string(),
            keyring: self.label.clone(),
        };
        let (body, armor) = cleartext_parts(text).ok_or_else(bad)?;
        let signed = signed_text(body);
        let (sigs, _) = DetachedSignature::from_string_many(armor).map_err(|_| bad())?;
        let sigs: Vec<DetachedSignature> = sigs.collect::<Result<_, _>>().map_err(|_| bad())?;
        for sig in &sigs {
            for key in &self.keys {
                if sig.verify(&key.primary_key, signed.as_bytes()).is_ok()
                    || key
                        .public_subkeys
                        .iter()
                        .any(|s| sig.verify(&s.key, signed.as_bytes()).is_ok())
                {
                    return Ok(signed.replace("\r\n", "\n"));
                }
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

const SIGNED_HEADER: &str = "-----BEGIN PGP SIGNED MESSAGE-----";

/// A cleartext-signed message's dash-escaped body and its armored signature block, as RFC 9580
/// frames them: the header line first (nothing before it), `Hash:` header lines, a blank
/// line, the body up to the first line that starts with `-----` (without the line break
/// before it), then the signature block, with nothing but white space after its end line.
fn cleartext_parts(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix(SIGNED_HEADER)?;
    let mut rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))?;
    loop {
        let (line, after) = rest.split_once('\n')?;
        rest = after;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let (name, _) = line.split_once(": ")?;
        if name != "Hash" {
            return None;
        }
    }
    let (body, armor) = if rest.starts_with("-----") {
        ("", rest)
    } else {
        let at = rest.find("\n-----")?;
        let body = &rest[..at];
        (body.strip_suffix('\r').unwrap_or(body), &rest[at + 1..])
    };
    let end = "-----END PGP SIGNATURE-----";
    let tail = armor.find(end)? + end.len();
    armor[tail..]
        .bytes()
        .all(|b| b.is_ascii_whitespace())
        .then_some((body, &armor[..tail]))
}

/// The text a cleartext signature covers: dash escapes removed, spaces and tabs trimmed from
/// each line's end, every line break (`\r\n`, `\r` or `\n`) made `\r\n`.
fn signed_text(body: &str) -> String {
    let mut unescaped = String::with_capacity(body.len() + body.len() / 32);
    for line in body.split_inclusive('\n') {
        let end = if line.ends_with("\r\n") {
            2
        } else if line.ends_with('\n') {
            1
        } else {
            0
        };
        let (content, brk) = line.split_at(line.len() - end);
        let content = content.strip_prefix("- ").unwrap_or(content);
        unescaped.push_str(content.trim_end_matches([' ', '\t']));
        unescaped.push_str(brk);
    }
    let mut out = String::with_capacity(unescaped.len() + unescaped.len() / 32);
    let mut chars = unescaped.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push_str("\r\n");
            }
            '\n' => out.push_str("\r\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pgp::composed::CleartextSignedMessage;

    /// rpgp's own reading of a cleartext message: the text its signatures cover.
    fn rpgp(text: &str) -> Option<String> {
        let (msg, _) = CleartextSignedMessage::from_string(text).ok()?;
        Some(msg.signed_text())
    }

    fn ours(text: &str) -> Option<String> {
        let (body, armor) = cleartext_parts(text)?;
        let (sigs, _) = DetachedSignature::from_string_many(armor).ok()?;
        sigs.collect::<Result<Vec<_>, _>>().ok()?;
        Some(signed_text(body))
    }

    #[test]
    fn the_signed_text_is_the_one_rpgp_verifies() {
        let real = include_str!("../../../tests/fuzz/corpus/release/InRelease");
        let sig = &real[real.find("-----BEGIN PGP SIGNATURE-----").unwrap()..];
        for body in [
            "Origin: Debian\nLabel: Debian",
            "- -----not a boundary\nline with trailing space   \ttab\t\nlast",
            "crlf\r\nlines\r\n- - dashed\r\nend",
            "lone\rcarriage return",
            "",
            "\n\nblank lines around\n\n",
        ] {
            let text = format!("{SIGNED_HEADER}\nHash: SHA512\n\n{body}\n{sig}");
            assert!(ours(&text).is_some(), "{body:?}");
            assert_eq!(ours(&text), rpgp(&text), "{body:?}");
        }
    }

    #[test]
    fn a_real_inrelease_frames_as_rpgp_frames_it() {
        let text = include_str!("../../../tests/fuzz/corpus/release/InRelease");
        assert_eq!(ours(text), rpgp(text));
        assert!(ours(text).is_some());
        let crlf = text.replace('\n', "\r\n");
        assert_eq!(ours(&crlf), rpgp(&crlf));
    }

    #[test]
    fn framing_that_rpgp_refuses_is_refused() {
        let text = include_str!("../../../tests/fuzz/corpus/release/InRelease");
        for bad in [
            format!("leading\n{text}"),
            text.replacen("Hash: ", "Comment: ", 1),
            format!("{text}trailing\n"),
            text.replacen(
                "-----BEGIN PGP SIGNATURE-----",
                "-----BEGIN PGP SIGNATURE",
                1,
            ),
        ] {
            assert_eq!(ours(&bad), None, "{bad}");
            assert_eq!(rpgp(&bad), None, "{bad}");
        }
    }
}
