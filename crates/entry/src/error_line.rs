//! One-line rendering of an error and its causes (`outer: cause: cause`), shared by both
//! binaries' error reporting. Causes whose text the outer message already holds are skipped.
//! [`bounded`] is the last step before a message reaches the terminal: what it quotes of the
//! input (a value in backticks) is cut at [`MAX_QUOTED`] bytes and control characters are
//! escaped, so no input can flood a log, break the one-line contract or drive a terminal.

use std::error::Error;

pub fn chain(e: &dyn Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// The most bytes of one quoted value (a span in backticks) a message shows.
pub const MAX_QUOTED: usize = 200;

/// `message` made safe to print: control characters escaped (`\u{1b}`; a line break only
/// inside a quoted value: a resolver's derivation is several lines by design), and each span in
/// backticks longer than [`MAX_QUOTED`] bytes cut at a character boundary and marked with
/// `…(N bytes)`; an unclosed backtick's span runs to the end.
pub fn bounded(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4096));
    let mut inside = false;
    let mut first = true;
    for part in message.split('`') {
        if !first {
            out.push('`');
        }
        first = false;
        let mut shown = String::new();
        escape_into(&mut shown, part, inside);
        if inside && shown.len() > MAX_QUOTED {
            let mut cut = MAX_QUOTED;
            while !shown.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push_str(&shown[..cut]);
            out.push_str(&format!("…({} bytes)", part.len()));
        } else {
            out.push_str(&shown);
        }
        inside = !inside;
    }
    out
}

fn escape_into(out: &mut String, text: &str, quoted: bool) {
    for c in text.chars() {
        if c.is_control() && (quoted || c != '\n') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
}

/// One line for a panic in binary `who`: the message and where, never a stack trace.
pub fn panic_line(who: &str, info: &std::panic::PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string());
    let msg = msg.replace('\n', " ");
    match info.location() {
        Some(l) => format!(
            "error: internal error in {who} (please report it): {msg} (at {}:{})",
            l.file(),
            l.line()
        ),
        None => format!("error: internal error in {who} (please report it): {msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_quoted_values_are_cut_and_control_characters_escaped() {
        let long = "A=1\0B=2 ".repeat(100);
        let m = bounded(&format!(
            "`{long}` is not a PEP 508 requirement\u{1b}[31m `a\nb`"
        ));
        assert!(m.len() < 320, "{m}");
        assert!(m.contains(&format!("…({} bytes)`", long.len())), "{m}");
        assert!(!m.chars().any(char::is_control), "{m}");
        assert!(m.ends_with("requirement\\u{1b}[31m `a\\nb`"), "{m}");
        assert_eq!(bounded("no:\n  - a\n  - b"), "no:\n  - a\n  - b");
    }

    #[test]
    fn short_messages_are_unchanged_and_cuts_keep_characters_whole() {
        assert_eq!(
            bounded("Failed to read `a/b`: x"),
            "Failed to read `a/b`: x"
        );
        let m = bounded(&format!("`{}`", "é".repeat(150)));
        assert!(
            m.starts_with(&format!("`{}…(300 bytes)`", "é".repeat(100))),
            "{m}"
        );
        let m = bounded(&format!("open `{}", "x".repeat(500)));
        assert!(m.ends_with("…(500 bytes)"), "{m}");
    }
}
