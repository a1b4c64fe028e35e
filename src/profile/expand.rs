//! `${VAR}` expansion over the profile text, before YAML parsing.
//!
//! `$${` is a literal `${`. An unset variable is an error carrying its line and column.
//! Comments (`# ...` outside quotes) are left alone.
//! Must never read anything but the given environment lookup.

use super::ProfileError;

/// Expand `${NAME}` references in `text` using `lookup`.
pub fn expand_vars(
    text: &str,
    file: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ProfileError> {
    let mut out = String::with_capacity(text.len());
    for (lineno, full_line) in text.split_inclusive('\n').enumerate() {
        // A YAML comment is copied as it is: `${...}` in it is not a reference.
        let (line, comment) = full_line.split_at(comment_start(full_line));
        let mut rest = line;
        let mut col = 1usize;
        while let Some(pos) = rest.find('$') {
            out.push_str(&rest[..pos]);
            col += rest[..pos].chars().count();
            let tail = &rest[pos..];
            if let Some(after) = tail.strip_prefix("$${") {
                out.push_str("${");
                rest = after;
                col += 3;
            } else if let Some(body) = tail.strip_prefix("${") {
                let end = body.find('}').ok_or_else(|| ProfileError::Syntax {
                    file: file.to_string(),
                    line: lineno + 1,
                    column: col,
                    message: "Unterminated `${` variable reference".to_string(),
                })?;
                let name = &body[..end];
                let valid = !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !name.starts_with(|c: char| c.is_ascii_digit());
                if !valid {
                    return Err(ProfileError::Syntax {
                        file: file.to_string(),
                        line: lineno + 1,
                        column: col,
                        message: format!("Invalid variable name `{name}` in `${{{name}}}`"),
                    });
                }
                let value = lookup(name).ok_or_else(|| ProfileError::UnsetVariable {
                    file: file.to_string(),
                    line: lineno + 1,
                    column: col,
                    name: name.to_string(),
                })?;
                out.push_str(&value);
                rest = &body[end + 1..];
                col += name.chars().count() + 3;
            } else {
                out.push('$');
                rest = &tail[1..];
                col += 1;
            }
        }
        out.push_str(rest);
        out.push_str(comment);
    }
    Ok(out)
}

/// Byte index where a `#` comment starts on `line` (outside quotes, at the start or after
/// whitespace), or the line's length.
fn comment_start(line: &str) -> usize {
    let (mut single, mut double, mut prev_space) = (false, false, true);
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev_space => return i,
            _ => {}
        }
        prev_space = c.is_whitespace();
    }
    line.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "MIRROR").then(|| "http://127.0.0.1:8080/debian".to_string())
    }

    #[test]
    fn expands_and_escapes() {
        let s = expand_vars("a: ${MIRROR}/x\nb: $${MIRROR} $5\n", "p.yaml", &env).unwrap();
        assert_eq!(s, "a: http://127.0.0.1:8080/debian/x\nb: ${MIRROR} $5\n");
    }

    #[test]
    fn comments_are_not_expanded() {
        let s = expand_vars("a: '#${MIRROR}' # see ${NOPE}\n# ${NOPE}\n", "p.yaml", &env).unwrap();
        assert_eq!(
            s,
            "a: '#http://127.0.0.1:8080/debian' # see ${NOPE}\n# ${NOPE}\n"
        );
    }

    #[test]
    fn unset_names_position() {
        let e = expand_vars("name: x\n  y: ${NOPE}\n", "p.yaml", &env).unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.yaml:2:6: Environment variable `NOPE` is not set (referenced as `${NOPE}`)"
        );
    }
}
