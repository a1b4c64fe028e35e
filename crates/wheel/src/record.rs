//! A wheel's `RECORD` (the wheel spec; PEP 376's CSV): one row per file, `path,algo=hash,size`,
//! with the hash in URL-safe base64 without padding. Read strictly (every row three fields,
//! only sha256 or stronger), written the way pip writes it (sorted rows, CSV quoting where a
//! field needs it, `RECORD` itself last without hash or size).
//! Never trusts a row it has not checked against the bytes: `extract` does that.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest as _, Sha256, Sha384, Sha512};

/// The hash algorithms RECORD rows may use (the wheel spec forbids md5 and sha1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashAlgo {
    Sha256,
    Sha384,
    Sha512,
}

impl HashAlgo {
    fn parse(s: &str) -> Option<HashAlgo> {
        match s {
            "sha256" => Some(HashAlgo::Sha256),
            "sha384" => Some(HashAlgo::Sha384),
            "sha512" => Some(HashAlgo::Sha512),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            HashAlgo::Sha256 => "sha256",
            HashAlgo::Sha384 => "sha384",
            HashAlgo::Sha512 => "sha512",
        }
    }
}

/// One file's hash as RECORD writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHash {
    pub algo: HashAlgo,
    pub value: Vec<u8>,
}

impl FileHash {
    /// A sha256 computed elsewhere (32 bytes).
    pub fn sha256_value(value: Vec<u8>) -> FileHash {
        FileHash {
            algo: HashAlgo::Sha256,
            value,
        }
    }

    /// The sha256 of `bytes`.
    pub fn sha256_of(bytes: &[u8]) -> FileHash {
        FileHash {
            algo: HashAlgo::Sha256,
            value: Sha256::digest(bytes).to_vec(),
        }
    }
}

impl std::fmt::Display for FileHash {
    /// `sha256=<url-safe base64, no padding>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={}",
            self.algo.name(),
            URL_SAFE_NO_PAD.encode(&self.value)
        )
    }
}

/// A running hash in one of the RECORD algorithms.
pub enum Hasher {
    Sha256(Sha256),
    Sha384(Sha384),
    Sha512(Sha512),
}

impl Hasher {
    pub fn new(algo: HashAlgo) -> Hasher {
        match algo {
            HashAlgo::Sha256 => Hasher::Sha256(Sha256::new()),
            HashAlgo::Sha384 => Hasher::Sha384(Sha384::new()),
            HashAlgo::Sha512 => Hasher::Sha512(Sha512::new()),
        }
    }

    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha384(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    pub fn finish(self) -> FileHash {
        let (algo, value) = match self {
            Hasher::Sha256(h) => (HashAlgo::Sha256, h.finalize().to_vec()),
            Hasher::Sha384(h) => (HashAlgo::Sha384, h.finalize().to_vec()),
            Hasher::Sha512(h) => (HashAlgo::Sha512, h.finalize().to_vec()),
        };
        FileHash { algo, value }
    }
}

/// One row of a RECORD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub path: String,
    pub hash: Option<FileHash>,
    pub size: Option<u64>,
}

/// Parse a RECORD; `Err` says which line is wrong and why.
pub fn parse(text: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (n, fields) in csv_rows(text)?.into_iter().enumerate() {
        let line = n + 1;
        if fields.len() == 1 && fields[0].is_empty() {
            continue;
        }
        let [path, hash, size]: [String; 3] = fields.try_into().map_err(|f: Vec<String>| {
            format!("row {line} has {} fields; RECORD rows have 3", f.len())
        })?;
        if path.is_empty() {
            return Err(format!("row {line} has an empty path"));
        }
        let hash = if hash.is_empty() {
            None
        } else {
            let (algo, value) = hash
                .split_once('=')
                .ok_or_else(|| format!("row {line}: hash `{hash}` is not `algorithm=value`"))?;
            let algo = HashAlgo::parse(algo).ok_or_else(|| {
                format!("row {line}: hash algorithm `{algo}` is not sha256, sha384 or sha512")
            })?;
            let value = URL_SAFE_NO_PAD
                .decode(value.trim_end_matches('='))
                .map_err(|_| format!("row {line}: hash `{hash}` is not URL-safe base64"))?;
            Some(FileHash { algo, value })
        };
        let size = if size.is_empty() {
            None
        } else {
            Some(
                size.parse::<u64>()
                    .map_err(|_| format!("row {line}: size `{size}` is not a number"))?,
            )
        };
        rows.push(Row { path, hash, size });
    }
    Ok(rows)
}

/// Write `rows` as RECORD text: one CSV row each, `\n`-terminated, fields quoted when needed.
pub fn write(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows {
        out.push_str(&quote(&r.path));
        out.push(',');
        if let Some(h) = &r.hash {
            out.push_str(&h.to_string());
        }
        out.push(',');
        if let Some(s) = r.size {
            out.push_str(&s.to_string());
        }
        out.push('\n');
    }
    out
}

fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// RFC 4180 rows: `,` between fields, `"` quotes (`""` inside), `\n` or `\r\n` between rows.
fn csv_rows(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() && !was_quoted => {
                quoted = true;
                was_quoted = true;
            }
            '"' => {
                return Err(format!(
                    "row {}: a quote inside an unquoted field",
                    rows.len() + 1
                ))
            }
            ',' => {
                row.push(std::mem::take(&mut field));
                was_quoted = false;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
                was_quoted = false;
            }
            _ if was_quoted => {
                return Err(format!(
                    "row {}: text after a closing quote",
                    rows.len() + 1
                ))
            }
            _ => field.push(c),
        }
    }
    if quoted {
        return Err(format!("row {}: an unterminated quote", rows.len() + 1));
    }
    if !field.is_empty() || !row.is_empty() || was_quoted {
        row.push(field);
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_parse_with_quotes_and_empty_fields() {
        let text = "pkg/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\r\n\
                    \"pkg/a,b.py\",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n\
                    \"pkg/q\"\"uote.py\",,\n\
                    pkg-1.0.dist-info/RECORD,,";
        let rows = parse(text).unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0].path, "pkg/__init__.py");
        assert_eq!(
            rows[0].hash.as_ref().unwrap().value,
            Sha256::digest(b"").to_vec()
        );
        assert_eq!(rows[0].size, Some(0));
        assert_eq!(rows[1].path, "pkg/a,b.py");
        assert_eq!(rows[2].path, "pkg/q\"uote.py");
        assert_eq!((rows[2].hash.as_ref(), rows[2].size), (None, None));
        assert_eq!(rows[3].path, "pkg-1.0.dist-info/RECORD");
    }

    #[test]
    fn writing_then_parsing_gives_the_rows_back() {
        let rows = vec![
            Row {
                path: "a,\"b\".py".into(),
                hash: Some(FileHash::sha256_of(b"x")),
                size: Some(1),
            },
            Row {
                path: "../../../bin/tool".into(),
                hash: Some(FileHash::sha256_of(b"#!/usr/bin/python3.11\n")),
                size: Some(22),
            },
            Row {
                path: "pkg-1.0.dist-info/RECORD".into(),
                hash: None,
                size: None,
            },
        ];
        let text = write(&rows);
        assert!(text.ends_with("pkg-1.0.dist-info/RECORD,,\n"), "{text}");
        assert!(text.starts_with("\"a,\"\"b\"\".py\",sha256="), "{text}");
        assert_eq!(parse(&text).unwrap(), rows);
    }

    #[test]
    fn bad_rows_are_refused_naming_the_row() {
        for (text, why) in [
            ("a,b\n", "row 1 has 2 fields"),
            ("a,,\nb,md5=xx,1\n", "row 2: hash algorithm `md5`"),
            ("a,sha256=!!,1\n", "not URL-safe base64"),
            ("a,sha256,1\n", "is not `algorithm=value`"),
            ("a,,x\n", "size `x`"),
            ("\"a,,\n", "unterminated quote"),
            ("a\"b,,\n", "quote inside"),
            (",,\n", "empty path"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn hashes_display_as_record_writes_them() {
        assert_eq!(
            FileHash::sha256_of(b"").to_string(),
            "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
        );
        let mut h = Hasher::new(HashAlgo::Sha512);
        h.update(b"abc");
        assert_eq!(h.finish().value, Sha512::digest(b"abc").to_vec());
    }
}
