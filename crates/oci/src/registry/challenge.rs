//! `WWW-Authenticate` challenges of a registry's 401 answers (RFC 7235 syntax): the scheme
//! (`Basic` or `Bearer`) and its parameters (`realm`, `service`, `scope`, `error`).

use std::collections::BTreeMap;

/// One challenge: its scheme, lower-cased, and its parameters (names lower-cased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    pub params: BTreeMap<String, String>,
}

impl Challenge {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }
}

/// Parse a header value that may hold several challenges; the first `Bearer` one wins, else
/// the first. `None` when nothing in it parses.
pub fn parse(header: &str) -> Option<Challenge> {
    let all = parse_all(header);
    let bearer = all.iter().position(|c| c.scheme == "bearer");
    match bearer {
        Some(i) => all.into_iter().nth(i),
        None => all.into_iter().next(),
    }
}

fn parse_all(header: &str) -> Vec<Challenge> {
    let mut out: Vec<Challenge> = Vec::new();
    let mut s = header.trim();
    while !s.is_empty() {
        // A token: a scheme when followed by a space or the end, a parameter name when by `=`.
        let end = s.find([' ', '=', ',']).unwrap_or(s.len());
        let token = &s[..end];
        let rest = s[end..].trim_start();
        if let Some(after_eq) = rest.strip_prefix('=') {
            let after_eq = after_eq.trim_start();
            let (value, tail) = match after_eq.strip_prefix('"') {
                Some(q) => quoted(q),
                None => {
                    let e = after_eq.find(',').unwrap_or(after_eq.len());
                    (after_eq[..e].trim().to_string(), &after_eq[e..])
                }
            };
            if let Some(c) = out.last_mut() {
                c.params.insert(token.to_ascii_lowercase(), value);
            }
            s = tail.trim_start().trim_start_matches(',').trim_start();
        } else {
            if !token.is_empty() {
                out.push(Challenge {
                    scheme: token.to_ascii_lowercase(),
                    params: BTreeMap::new(),
                });
            }
            s = rest.trim_start_matches(',').trim_start();
            if token.is_empty() && end == 0 {
                // A stray separator: skip one character.
                s = s.get(1..).unwrap_or("");
            }
        }
    }
    out
}

/// The rest of a quoted string (after its opening quote): its value and what follows the
/// closing quote.
fn quoted(s: &str) -> (String, &str) {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (value, &s[i + 1..]),
            '\\' => {
                if let Some((_, n)) = chars.next() {
                    value.push(n);
                }
            }
            c => value.push(c),
        }
    }
    (value, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_with_quoted_parameters() {
        let c = parse(r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#).unwrap();
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.param("realm"), Some("https://auth.example/token"));
        assert_eq!(c.param("service"), Some("registry.example"));
        assert_eq!(c.param("scope"), Some("repository:a/b:pull,push"));
    }

    #[test]
    fn basic_and_several_challenges() {
        let c = parse(r#"Basic realm="Registry Realm""#).unwrap();
        assert_eq!(c.scheme, "basic");
        assert_eq!(c.param("realm"), Some("Registry Realm"));
        let c = parse(r#"Basic realm="x", Bearer realm="https://t/", error="insufficient_scope""#)
            .unwrap();
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.param("error"), Some("insufficient_scope"));
        let c = parse(r#"Bearer realm="a\"b",service=plain"#).unwrap();
        assert_eq!(c.param("realm"), Some("a\"b"));
        assert_eq!(c.param("service"), Some("plain"));
        assert_eq!(parse(""), None);
        assert_eq!(parse(",,,"), None);
    }

    proptest::proptest! {
        /// A registry's header is untrusted: any text parses to something or nothing, without
        /// a panic or a loop that does not end, and every value comes from the text.
        #[test]
        fn any_header_parses_or_not(header in "[ -~\u{80}-\u{10ffff}]{0,80}") {
            for c in parse_all(&header) {
                proptest::prop_assert!(header.to_ascii_lowercase().contains(&c.scheme));
            }
        }

        #[test]
        fn headers_of_its_own_alphabet_parse_or_not(header in "[ =,\"\\aBb]{0,40}") {
            let _ = parse(&header);
        }
    }
}
