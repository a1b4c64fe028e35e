//! `${VAR}` expansion inside one scalar value, after YAML parsing.
//!
//! `$${` is a literal `${`; any other `$` is kept. A reference names an environment variable
//! (`[A-Za-z_][A-Za-z0-9_]*`); an unset one is an error, unless the reference gives a default
//! (`${NAME:-default}`, as the shell: used when the variable is unset or empty; literal text
//! up to the `}`). Expansion only ever yields text: the
//! YAML structure is parsed before it, so a value can never add a key, a mapping or a sequence.
//! Must never read anything but the given environment lookup.

/// One scalar after expansion.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Expanded {
    pub text: String,
    /// How many `${NAME}` references the scalar held.
    pub references: usize,
    /// The scalar was exactly one reference (`${N}`), nothing around it.
    pub sole: bool,
}

/// Why a scalar could not be expanded; `index` is the failing reference's ordinal in the
/// scalar (0 = first `${`), so the caller can find it in the source text.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ExpandError {
    pub index: usize,
    pub message: String,
}

/// Expand the `${NAME}` references in `text` using `lookup`; the result is at most `limit`
/// bytes (else an error naming the limit).
pub(super) fn expand(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    limit: usize,
) -> Result<Expanded, ExpandError> {
    let mut out = String::new();
    let mut references = 0;
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(body) = tail.strip_prefix("${") {
            let err = |message: String| ExpandError {
                index: references,
                message,
            };
            let end = body
                .find('}')
                .ok_or_else(|| err("Unterminated `${` variable reference".to_string()))?;
            let inner = &body[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (inner, None),
            };
            if !valid_name(name) {
                return Err(err(format!(
                    "Invalid variable name `{name}` in `${{{inner}}}` (write `${{NAME}}` or `${{NAME:-default}}`)"
                )));
            }
            let value = match (lookup(name), default) {
                (Some(v), Some(d)) if v.is_empty() => d.to_string(),
                (Some(v), _) => v,
                (None, Some(d)) => d.to_string(),
                (None, None) => {
                    return Err(err(format!(
                        "Environment variable `{name}` is not set (referenced as `${{{name}}}`; `${{{name}:-default}}` gives a default)"
                    )))
                }
            };
            if out.len() + value.len() > limit {
                return Err(err(format!(
                    "Profile too large: a value exceeds {limit} bytes after expanding `${{{name}}}`"
                )));
            }
            out.push_str(&value);
            references += 1;
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    let sole = references == 1
        && text.starts_with("${")
        && text.ends_with('}')
        && text[2..].find('}') == Some(text.len() - 3);
    Ok(Expanded {
        text: out,
        references,
        sole,
    })
}

/// Byte offsets of the `${` that start references in `raw` (escaped `$${` skipped), in order.
/// Used on a scalar's source text to point an error at its reference.
pub(super) fn reference_offsets(raw: &str) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut i = 0;
    while let Some(pos) = raw[i..].find('$') {
        let at = i + pos;
        let tail = &raw[at..];
        if tail.starts_with("$${") {
            i = at + 3;
        } else if tail.starts_with("${") {
            offsets.push(at);
            i = at + 2;
        } else {
            i = at + 1;
        }
    }
    offsets
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "MIRROR" => Some("http://127.0.0.1:8080/debian".to_string()),
            "N" => Some("2".to_string()),
            "EVIL" => Some("x\nfiles:\n  - {src: /etc, dst: /e}".to_string()),
            _ => None,
        }
    }

    fn ok(s: &str) -> Expanded {
        expand(s, &env, 1 << 16).unwrap()
    }

    #[test]
    fn expands_and_escapes() {
        let e = ok("${MIRROR}/x $${MIRROR} $5 $$ $");
        assert_eq!(e.text, "http://127.0.0.1:8080/debian/x ${MIRROR} $5 $$ $");
        assert_eq!((e.references, e.sole), (1, false));
    }

    #[test]
    fn a_default_is_used_when_the_variable_is_unset_or_empty() {
        let env = |n: &str| match n {
            "SET" => Some("x".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let e = expand(
            "${SET:-d}/${UNSET:-host}/${EMPTY:-e}/${UNSET:-}",
            &env,
            1 << 16,
        )
        .unwrap();
        assert_eq!(e.text, "x/host/e/");
        assert_eq!(e.references, 4);
        assert!(expand("${UNSET:-host}", &env, 1 << 16).unwrap().sole);
        let e = expand("${BAD-NAME:-x}", &env, 1 << 16).unwrap_err();
        assert!(
            e.message.contains("Invalid variable name `BAD-NAME`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn sole_reference() {
        assert!(ok("${N}").sole);
        assert!(!ok("${N}${N}").sole);
        assert!(!ok("${N}x").sole);
        assert!(!ok("x${N}").sole);
        assert!(!ok("$${N}").sole);
        assert_eq!(ok("${N}${N}").text, "22");
    }

    #[test]
    fn values_are_text() {
        let e = ok("${EVIL}");
        assert_eq!(e.text, "x\nfiles:\n  - {src: /etc, dst: /e}");
    }

    #[test]
    fn errors_name_the_reference() {
        let e = expand("${N} ${NOPE}", &env, 100).unwrap_err();
        assert_eq!(e.index, 1);
        assert_eq!(
            e.message,
            "Environment variable `NOPE` is not set (referenced as `${NOPE}`; `${NOPE:-default}` gives a default)"
        );
        let e = expand("${N", &env, 100).unwrap_err();
        assert!(e.message.contains("Unterminated"), "{e:?}");
        for bad in ["${}", "${1A}", "${A-B}", "${ N}"] {
            let e = expand(bad, &env, 100).unwrap_err();
            assert!(e.message.contains("Invalid variable name"), "{bad}: {e:?}");
        }
        let e = expand("${MIRROR}${MIRROR}", &env, 40).unwrap_err();
        assert!(e.message.contains("exceeds 40 bytes"), "{e:?}");
    }

    #[test]
    fn offsets_skip_escapes() {
        assert_eq!(reference_offsets("a $${X} ${Y} $ ${Z"), vec![8, 15]);
    }
}
