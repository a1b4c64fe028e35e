//! A project's page on a simple index, parsed: PEP 691 JSON, or PEP 503 HTML (the anchors'
//! `href` with its `#sha256=` fragment, `data-requires-python`, `data-yanked`,
//! `data-dist-info-metadata`/`data-core-metadata` of PEP 658/714). Links resolve against the
//! page's own URL (after redirects); an HTTP(S) page's links must be `http:`/`https:` (other
//! hosts allowed), a `file:` page's `file:`, `http:` or `https:` — any other link is skipped.
//! Must never trust a page for more than what it lists: hashes it gives are checked on every
//! download, and a malformed entry is skipped, not guessed at; never let a remote page name a
//! file of the build host.

use std::str::FromStr;

use pep440_rs::VersionSpecifiers;
use serde::Deserialize;

use gpuimg_store::digest::Digest;

/// The most files one page may list (a 64 MiB page of real entries holds ~150,000): what a
/// page costs in memory is linear in what it lists, and an endless list is refused.
pub const MAX_FILES: usize = 200_000;

/// The JSON media type of PEP 691.
pub const JSON: &str = "application/vnd.pypi.simple.v1+json";
/// What is asked for: JSON, else HTML.
pub const ACCEPT: &str =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01";

/// One file a page lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistFile {
    pub filename: String,
    /// Absolute; never with a user part.
    pub url: String,
    pub sha256: Option<Digest>,
    pub requires_python: Option<VersionSpecifiers>,
    /// `Some(reason)` when yanked (the reason may be empty).
    pub yanked: Option<String>,
    /// A PEP 658 metadata file exists (`url + ".metadata"`), with its sha256 when given.
    pub metadata: Option<Option<Digest>>,
    /// PEP 700's size, when the page gives it.
    pub size: Option<u64>,
}

/// Whether a page at `base` may link to `link`: the web links only to the web; a local
/// index also to local files.
pub fn may_link(base: &url::Url, link: &url::Url) -> bool {
    let web = |u: &url::Url| matches!(u.scheme(), "http" | "https");
    match base.scheme() {
        "http" | "https" => web(link),
        "file" => web(link) || link.scheme() == "file",
        _ => false,
    }
}

/// Parse a page by its media type (`None`: HTML).
pub fn parse(
    body: &[u8],
    content_type: Option<&str>,
    base: &url::Url,
) -> Result<Vec<DistFile>, String> {
    if content_type == Some(JSON) {
        json(body, base)
    } else {
        let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8: {e}"))?;
        html(text, base)
    }
}

fn too_many() -> String {
    format!("it lists more than {MAX_FILES} files")
}

#[derive(Deserialize)]
struct JsonPage {
    #[serde(deserialize_with = "capped_files")]
    files: Vec<JsonFile>,
}

/// The `files` list, refused past [`MAX_FILES`] entries (before they are all held).
fn capped_files<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<JsonFile>, D::Error> {
    struct Files;
    impl<'de> serde::de::Visitor<'de> for Files {
        type Value = Vec<JsonFile>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "a list of at most {MAX_FILES} files")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(f) = seq.next_element()? {
                if out.len() == MAX_FILES {
                    return Err(serde::de::Error::custom(too_many()));
                }
                out.push(f);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Files)
}

#[derive(Deserialize)]
struct JsonFile {
    filename: String,
    url: String,
    #[serde(default)]
    hashes: std::collections::BTreeMap<String, String>,
    #[serde(default, rename = "requires-python")]
    requires_python: Option<String>,
    #[serde(default)]
    yanked: Option<serde_json::Value>,
    #[serde(default, rename = "core-metadata")]
    core_metadata: Option<serde_json::Value>,
    #[serde(default, rename = "dist-info-metadata")]
    dist_info_metadata: Option<serde_json::Value>,
    #[serde(default)]
    size: Option<u64>,
}

/// `true`, or a hashes object, means present.
fn metadata_flag(v: Option<&serde_json::Value>) -> Option<Option<Digest>> {
    match v? {
        serde_json::Value::Bool(true) => Some(None),
        serde_json::Value::Object(m) => Some(
            m.get("sha256")
                .and_then(|s| s.as_str())
                .and_then(|h| Digest::from_hex(h).ok()),
        ),
        _ => None,
    }
}

fn json(body: &[u8], base: &url::Url) -> Result<Vec<DistFile>, String> {
    let page: JsonPage = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    Ok(page
        .files
        .into_iter()
        .filter_map(|f| {
            let url = base.join(&f.url).ok().filter(|u| may_link(base, u))?;
            Some(DistFile {
                sha256: f
                    .hashes
                    .get("sha256")
                    .and_then(|h| Digest::from_hex(h).ok()),
                requires_python: specifiers(f.requires_python.as_deref()),
                yanked: match f.yanked {
                    Some(serde_json::Value::Bool(true)) => Some(String::new()),
                    Some(serde_json::Value::String(r)) => Some(r),
                    _ => None,
                },
                metadata: metadata_flag(f.core_metadata.as_ref())
                    .or_else(|| metadata_flag(f.dist_info_metadata.as_ref())),
                size: f.size,
                url: without_fragment(url),
                filename: f.filename,
            })
        })
        .collect())
}

fn specifiers(s: Option<&str>) -> Option<VersionSpecifiers> {
    let s = s?.trim();
    // Never handed to the parser unless ASCII (pep508_rs/pep440_rs index bytes).
    if s.is_empty() || !s.is_ascii() {
        return None;
    }
    VersionSpecifiers::from_str(s).ok()
}

fn without_fragment(mut u: url::Url) -> String {
    u.set_fragment(None);
    u.to_string()
}

/// The anchors of a PEP 503 page.
fn html(text: &str, base: &url::Url) -> Result<Vec<DistFile>, String> {
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    let mut at = 0;
    while let Some(i) = lower[at..].find("<a") {
        let start = at + i + 2;
        at = start;
        if !lower[start..].starts_with(|c: char| c.is_ascii_whitespace()) {
            continue;
        }
        let Some(end) = tag_end(&text[start..]) else {
            break;
        };
        let attrs = attributes(&text[start..start + end]);
        at = start + end;
        let get = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let Some(href) = get("href") else { continue };
        let Some(url) = base.join(href).ok().filter(|u| may_link(base, u)) else {
            continue;
        };
        let sha256 = url
            .fragment()
            .and_then(|f| f.strip_prefix("sha256="))
            .and_then(|h| Digest::from_hex(h).ok());
        let Some(filename) = url
            .path_segments()
            .and_then(|mut s| s.next_back())
            .map(percent_decoded)
            .filter(|f| !f.is_empty())
        else {
            continue;
        };
        let metadata = get("data-core-metadata")
            .or_else(|| get("data-dist-info-metadata"))
            .map(|v| {
                v.strip_prefix("sha256=")
                    .and_then(|h| Digest::from_hex(h).ok())
            });
        if out.len() == MAX_FILES {
            return Err(too_many());
        }
        out.push(DistFile {
            filename,
            sha256,
            requires_python: specifiers(get("data-requires-python")),
            yanked: get("data-yanked").map(str::to_string),
            metadata,
            size: None,
            url: without_fragment(url),
        });
    }
    Ok(out)
}

/// The offset of the `>` closing a tag, quotes respected.
fn tag_end(s: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    None
}

/// `name="value"` pairs (names lower-cased, values with entities decoded); a bare name has
/// an empty value.
fn attributes(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
            i += 1;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' {
            i += 1;
        }
        if start == i {
            i += 1;
            continue;
        }
        let name = s[start..i].to_ascii_lowercase();
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'=' {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            let value = if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let q = b[i];
                let vs = i + 1;
                let ve = s[vs..].find(q as char).map_or(s.len(), |e| vs + e);
                i = ve + 1;
                &s[vs..ve]
            } else {
                let vs = i;
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                &s[vs..i]
            };
            out.push((name, entities(value)));
        } else {
            out.push((name, String::new()));
        }
    }
    out
}

/// HTML character references: the named five and numeric ones.
fn entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';').filter(|&e| e <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let name = &rest[1..end];
        let c = match name {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16)
                .ok()
                .and_then(char::from_u32),
            n if n.starts_with('#') => n[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let hex = |c: u8| (c as char).to_digit(16);
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_anchors_with_pep_658_and_yanked() {
        let base = url::Url::parse("http://idx.invalid/simple/demo/").unwrap();
        let h = "ab".repeat(32);
        let page = format!(
            "<html><body>\n<a href=\"../../files/demo-1.0-py3-none-any.whl#sha256={h}\" data-requires-python=\"&gt;=3.8\" data-core-metadata=\"sha256={h}\">demo-1.0-py3-none-any.whl</a><br/>\n<A HREF='demo-0.9.tar.gz' data-yanked>demo-0.9.tar.gz</A>\n<a href=\"https://cdn.invalid/demo%2B1-2.0-py3-none-any.whl\" data-yanked=\"broken &amp; bad\">x</a>\n<abbr>not a link</abbr></body></html>"
        );
        let files = parse(page.as_bytes(), Some("text/html"), &base).unwrap();
        assert_eq!(files.len(), 3, "{files:#?}");
        assert_eq!(
            files[0].url,
            "http://idx.invalid/files/demo-1.0-py3-none-any.whl"
        );
        assert_eq!(files[0].sha256.map(|d| d.hex()), Some(h.clone()));
        assert_eq!(
            files[0].requires_python.as_ref().map(|r| r.to_string()),
            Some(">=3.8".into())
        );
        assert!(matches!(files[0].metadata, Some(Some(_))));
        assert_eq!(files[0].yanked, None);
        assert_eq!(files[1].filename, "demo-0.9.tar.gz");
        assert_eq!(files[1].yanked.as_deref(), Some(""));
        assert_eq!(files[2].filename, "demo+1-2.0-py3-none-any.whl");
        assert_eq!(files[2].yanked.as_deref(), Some("broken & bad"));
    }

    #[test]
    fn a_web_page_links_only_to_the_web() {
        let base = url::Url::parse("http://idx.invalid/simple/demo/").unwrap();
        let html = "<a href=\"file:///etc/demo-1.0-py3-none-any.whl\">x</a><a href=\"ftp://h/demo-2.0-py3-none-any.whl\">y</a><a href=\"https://cdn.invalid/demo-3.0-py3-none-any.whl\">z</a>";
        let files = parse(html.as_bytes(), None, &base).unwrap();
        assert_eq!(files.len(), 1, "{files:#?}");
        assert!(files[0].url.starts_with("https://cdn.invalid/"));
        let json = r#"{"files":[{"filename":"demo-1.0-py3-none-any.whl","url":"file:///etc/demo-1.0-py3-none-any.whl"},{"filename":"demo-3.0-py3-none-any.whl","url":"/f/demo-3.0-py3-none-any.whl"}]}"#;
        let files = parse(json.as_bytes(), Some(JSON), &base).unwrap();
        assert_eq!(files.len(), 1, "{files:#?}");
        assert_eq!(
            files[0].url,
            "http://idx.invalid/f/demo-3.0-py3-none-any.whl"
        );
        // A local index may name local files.
        let local = url::Url::parse("file:///srv/simple/demo/").unwrap();
        let files = parse(html.as_bytes(), None, &local).unwrap();
        assert_eq!(files.len(), 2, "{files:#?}");
    }

    #[test]
    fn json_files() {
        let base = url::Url::parse("http://idx.invalid/simple/demo/").unwrap();
        let h = "cd".repeat(32);
        let body = format!(
            "{{\"meta\":{{\"api-version\":\"1.1\"}},\"name\":\"demo\",\"files\":[{{\"filename\":\"demo-1.0-py3-none-any.whl\",\"url\":\"/f/demo-1.0-py3-none-any.whl\",\"hashes\":{{\"sha256\":\"{h}\"}},\"requires-python\":\">=3.9\",\"core-metadata\":{{\"sha256\":\"{h}\"}},\"size\":123,\"yanked\":false}},{{\"filename\":\"demo-0.1-py3-none-any.whl\",\"url\":\"demo-0.1-py3-none-any.whl\",\"hashes\":{{}},\"yanked\":\"bad\",\"dist-info-metadata\":true}}]}}"
        );
        let files = parse(body.as_bytes(), Some(JSON), &base).unwrap();
        assert_eq!(
            files[0].url,
            "http://idx.invalid/f/demo-1.0-py3-none-any.whl"
        );
        assert_eq!(files[0].size, Some(123));
        assert_eq!(files[0].yanked, None);
        assert_eq!(files[1].yanked.as_deref(), Some("bad"));
        assert_eq!(files[1].metadata, Some(None));
        assert!(parse(b"{", Some(JSON), &base).is_err());
    }
}
