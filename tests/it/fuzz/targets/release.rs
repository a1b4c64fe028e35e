//! Target `release`: a repository's `InRelease` / `Release` + `Release.gpg` and the keyring
//! that checks them, as `gpuimg_apt` reads them: OpenPGP key and signature parsing (rpgp),
//! cleartext-signature stripping for `trusted` repositories, and the `Release` fields.
//!
//! An input has three parts (see `mutate::SEP`): an armored key (empty: the seed key), the
//! release text, and a detached signature (empty: the text is an `InRelease`). Seeds are a
//! real gpg-signed release (tests/fuzz/corpus/release/). Properties: whatever verifies is the
//! text the seed key signed; a parsed release only lists files its text names, with sizes
//! written in it.

use std::path::PathBuf;
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Result, Unstructured};
use gpuimg_apt::parsers::{parse_release, strip_clearsign, KeySource, Keyring};
use gpuimg_apt::AptError;

use crate::fuzz::harness::{files, Target, Verdict};
use crate::fuzz::mutate::{self, havoc, join, parts};

pub static TARGET: Target = Target {
    name: "release",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 2_500,
};

/// A file of tests/fuzz/corpus/release/, read once.
fn corpus(name: &str) -> &'static [u8] {
    static FILES: OnceLock<Vec<(PathBuf, Vec<u8>)>> = OnceLock::new();
    FILES
        .get_or_init(|| files("corpus", "release"))
        .iter()
        .find(|(p, _)| p.file_name().is_some_and(|f| f == name))
        .map(|(_, b)| &b[..])
        .unwrap_or_else(|| panic!("tests/fuzz/corpus/release/{name} is missing"))
}

fn seeds() -> Vec<Vec<u8>> {
    let (key, inrelease, release, sig) = (
        corpus("key.asc"),
        corpus("InRelease"),
        corpus("Release"),
        corpus("Release.gpg"),
    );
    vec![
        join(&[key, inrelease, b""]),
        join(&[b"", inrelease, b""]),
        join(&[key, release, sig]),
        join(&[b"", release, b""]),
    ]
}

const DICT: &[&[u8]] = &[
    b"-----BEGIN PGP SIGNED MESSAGE-----\n",
    b"-----BEGIN PGP SIGNATURE-----\n",
    b"-----END PGP SIGNATURE-----\n",
    b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n",
    b"Hash: SHA512\n",
    b"Hash: MD5\n",
    b"\n\n",
    b"- ",
    b"- -",
    b"\r\n",
    b"=",
    b"==\n",
    b"SHA256:\n",
    b"Acquire-By-Hash: yes\n",
    b" main/binary-amd64/Packages.xz\n",
    b" ../../../etc/passwd\n",
    b"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    b" 18446744073709551616 ",
    b" -1 ",
    b"\n ",
    b"MD5Sum:\n",
    b"Suite: ",
    b"#",
];

#[derive(Debug, Arbitrary)]
enum Part {
    Key,
    Text,
    Signature,
}

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let seed = mutate::pick_seed(u, seeds)?;
    let mut ps: Vec<Vec<u8>> = parts(seed).into_iter().map(<[u8]>::to_vec).collect();
    ps.resize(3, Vec::new());
    // Splices take whole parts of the seeds, never the separator.
    let pieces: Vec<Vec<u8>> = seeds
        .iter()
        .flat_map(|s| parts(s))
        .map(<[u8]>::to_vec)
        .collect();
    for _ in 0..u.int_in_range(1..=3)? {
        let i = match u.arbitrary()? {
            Part::Key => 0,
            Part::Text => 1,
            Part::Signature => 2,
        };
        if i != 1 && ps[i].is_empty() {
            continue;
        }
        havoc(u, &mut ps[i], 6, DICT, &pieces)?;
    }
    Ok(join(&[&ps[0], &ps[1], &ps[2]]))
}

fn lines_trimmed(s: &str) -> Vec<&str> {
    s.lines()
        .map(|l| l.trim_end_matches([' ', '\t', '\r']))
        .collect()
}

/// Parse a release text; `Ok(true)` when it parsed.
fn check_release(text: &str) -> std::result::Result<bool, String> {
    match parse_release(text, "fuzz/") {
        Ok(rel) => {
            for (name, (_, size)) in &rel.files {
                if name.is_empty() || !text.contains(name.as_str()) {
                    return Err(format!("listed `{name}`, which the text does not name"));
                }
                if !text.contains(&size.to_string()) {
                    return Err(format!("size {size} of `{name}` is not in the text"));
                }
            }
            Ok(true)
        }
        Err(AptError::InvalidRelease { url, message }) if url == "fuzz/" && !message.is_empty() => {
            Ok(false)
        }
        Err(e) => Err(format!("unexpected error: {e}")),
    }
}

fn check(input: &[u8]) -> Verdict {
    let ps = parts(input);
    let (key, body, sig) = match ps.as_slice() {
        [k, b, s] => (*k, *b, *s),
        _ => return Ok("not three parts"),
    };
    let key = if key.is_empty() {
        corpus("key.asc")
    } else {
        key
    };
    let signed = corpus("Release");
    let text = String::from_utf8_lossy(body);
    // The `trusted: true` path reads the text unverified; it must still parse safely.
    let parsed = check_release(&strip_clearsign(&text))? | check_release(&text)?;
    let with = |verdict: &'static str| match (verdict, parsed) {
        ("keyring refused", true) => "keyring refused, text parsed",
        ("keyring refused", false) => "keyring refused, text refused",
        ("signature refused", true) => "signature refused, text parsed",
        ("signature refused", false) => "signature refused, text refused",
        _ => verdict,
    };
    let keyring =
        match Keyring::load(&[KeySource::Inline(String::from_utf8_lossy(key).into_owned())]) {
            Ok(k) => k,
            Err(AptError::InvalidKeyring { .. }) => return Ok(with("keyring refused")),
            Err(e) => return Err(format!("unexpected keyring error: {e}")),
        };
    if sig.is_empty() {
        let Ok(text) = std::str::from_utf8(body) else {
            return Ok(with("signature refused"));
        };
        match keyring.verify_inline(text, "fuzz/InRelease") {
            Ok(verified) => {
                let want = String::from_utf8_lossy(signed);
                if lines_trimmed(&verified) != lines_trimmed(&want) {
                    return Err(format!("verified a text the key never signed:\n{verified}"));
                }
                check_release(&verified)?;
                Ok("inline signature verified")
            }
            Err(AptError::BadSignature { .. }) => Ok(with("signature refused")),
            Err(e) => Err(format!("unexpected verify error: {e}")),
        }
    } else {
        match keyring.verify_detached(body, sig, "fuzz/Release") {
            Ok(()) if body != signed => {
                Err("a detached signature verified bytes the key never signed".into())
            }
            Ok(()) => Ok("detached signature verified"),
            Err(AptError::BadSignature { .. }) => Ok(with("signature refused")),
            Err(e) => Err(format!("unexpected verify error: {e}")),
        }
    }
}
